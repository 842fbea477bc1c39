"""The site's charts, as static SVG: the king over time, a king's routing mix, cost against
accuracy, and the fairness figures. Text from records is drawn with `parse_math=False`, so a
name with `$` stays plain text.

Every chart is drawn twice, for the width it is shown at (a `Frame`): WIDE for a desktop,
NARROW for a phone, so its text is never smaller than about 10 CSS px on either. Text stays
text in the SVG (the browser draws it), and the background is transparent: the site's dark
mode inverts the chart's colours.
"""

from __future__ import annotations

import io
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import matplotlib
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import FixedLocator, Formatter, MaxNLocator, NullFormatter

from evaluator.files import try_parse_time
from evaluator.records import Crowning
from evaluator.site.cards import MIN_SHARE_ITEMS

COLORS = ("#3f51b5", "#e91e63", "#009688", "#ff9800", "#795548", "#607d8b")
INK = "#444444"  # annotations: dark on light, light once dark mode inverts the chart
MIN_SPAN = timedelta(hours=1)  # the shortest stretch of time a history axis shows
TICK_STEPS = (*(timedelta(minutes=m) for m in (1, 5, 15, 30)),
              *(timedelta(hours=h) for h in (1, 2, 3, 6, 12)),
              *(timedelta(days=d) for d in (1, 2, 3, 7, 14, 28, 56, 91, 182, 364)))
NAME_CHARS = 14  # a miner's name on a chart is cut to this many characters


@dataclass(frozen=True)
class Frame:
    """The width a chart is drawn for. 1 pt of the SVG is about 1.33 CSS px at that width."""

    name: str
    width: float  # inches
    font: float  # points: the smallest text on the chart
    ticks: int  # the most labelled ticks on a time axis

    def style(self) -> dict[str, Any]:
        return {"svg.hashsalt": "tinyrouter", "svg.fonttype": "none", "font.size": self.font,
                "axes.titlesize": self.font + 1, "axes.labelsize": self.font,
                "xtick.labelsize": self.font, "ytick.labelsize": self.font,
                "legend.fontsize": self.font, "axes.spines.top": False,
                "axes.spines.right": False, "savefig.transparent": True}


WIDE = Frame("wide", 7.5, 9.0, 6)  # shown 640 to 920 px wide on a desktop
NARROW = Frame("narrow", 3.6, 8.0, 4)  # shown about 345 px wide on a phone
FRAMES = (WIDE, NARROW)


def _short(name: Any) -> str:
    text = str(name)
    return text if len(text) <= NAME_CHARS else text[:NAME_CHARS - 1] + "…"


def distinct_short(names: Sequence[Any]) -> list[str]:
    """Each name cut as `_short` cuts it, but never so short that it reads as another of
    `names`: `high_school_chemistry` and `high_school_computer_science` stay two labels."""
    texts = [str(name) for name in names]
    out = []
    for text in texts:
        keep = NAME_CHARS - 1
        while keep < len(text) and any(other != text and other[:keep] == text[:keep]
                                       for other in texts):
            keep += 1
        out.append(text if len(text) <= max(keep, NAME_CHARS) else text[:keep] + "…")
    return out


def _reign(kings: Sequence[Crowning]) -> list[tuple[datetime, Crowning]]:
    """Each dated king with its crowning time, oldest first."""
    dated = [(try_parse_time(k.crowned_at), k) for k in kings]
    return sorted(((t, k) for t, k in dated if t is not None), key=lambda pair: pair[0])


def _composite_panel(ax: Any, reign: list[tuple[datetime, Crowning]], end: datetime,
                     frame: Frame) -> None:
    times = [t for t, _ in reign]
    composite = [k.composite or 0.0 for _, k in reign]
    ax.step([*times, end], [*composite, composite[-1]], where="post", color=COLORS[0],
            linewidth=2, label="king's composite")
    ax.plot(times, composite, "o", color=COLORS[0])
    for moment, king, value in zip(times, (k for _, k in reign), composite, strict=True):
        # parse_math=False: a miner name with "$" must stay plain text
        ax.annotate(_short(king.miner), (moment, value), xytext=(3, 5),
                    textcoords="offset points", fontsize=frame.font, color=INK,
                    parse_math=False)
    ax.set_ylabel("composite")
    ax.set_title("The king's composite, when crowned", loc="left")
    ax.margins(y=0.25)
    ax.yaxis.set_major_locator(MaxNLocator(4 if frame is NARROW else 6))
    ax.grid(axis="y", alpha=0.3)


def _benchmark_panel(ax: Any, reign: list[tuple[datetime, Crowning]], end: datetime,
                     benchmarks: Sequence[str]) -> None:
    for index, bench in enumerate(benchmarks):
        points = [(t, float(k.scores[bench])) for t, k in reign if bench in k.scores]
        if not points:
            continue
        xs, ys = [t for t, _ in points], [v for _, v in points]
        color = COLORS[(index + 2) % len(COLORS)]
        ax.step([*xs, end], [*ys, ys[-1]], where="post", color=color, label=bench)
        ax.plot(xs, ys, "o", color=color, markersize=3)
    ax.set_ylabel("benchmark score")
    ax.set_title("Per benchmark", loc="left")
    ax.yaxis.set_major_locator(MaxNLocator(4))
    ax.grid(axis="y", alpha=0.3)


def date_ticks(start: datetime, end: datetime, most: int) -> tuple[list[datetime], list[str]]:
    """At most `most` ticks on whole minutes or hours (within a day) or whole days, no label
    repeated: a time of day carries its date on the first tick."""
    origin = start.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    days = end - start > timedelta(days=1)  # then whole days only: no time repeats
    for step in (s for s in TICK_STEPS if s >= timedelta(days=1) or not days):
        ticks = [origin + step * math.ceil((start - origin) / step)]
        while ticks[-1] + step <= end:
            ticks.append(ticks[-1] + step)
        if len(ticks) <= most:
            break
    if step >= timedelta(days=1):
        return ticks, [t.strftime("%Y-%m-%d") for t in ticks]
    labels, day = [], None
    for tick in ticks:
        labels.append(tick.strftime("%H:%M") if tick.date() == day
                      else tick.strftime("%Y-%m-%d\n%H:%M"))
        day = tick.date()
    return ticks, labels


def _date_axis(ax: Any, start: datetime, end: datetime, frame: Frame) -> None:
    """Dates on the x axis, padded a little on both sides."""
    ticks, labels = date_ticks(start, end, frame.ticks)
    ax.xaxis.set_major_locator(FixedLocator(matplotlib.dates.date2num(ticks)))
    ax.set_xticks(ticks, labels)
    ax.set_xlim(start - (end - start) * 0.02, end + (end - start) * 0.02)
    ax.set_xlabel("date (UTC)")


def _svg(fig: Figure) -> str:
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg", metadata={"Date": None})
    return buffer.getvalue()


def history_figure(kings: Sequence[Crowning], benchmarks: Sequence[str],
                   until: datetime | None = None, frame: Frame = WIDE) -> Figure | None:
    """The history chart, or None when no king has a readable crowning time.

    The step line holds each king's composite until the next coronation, and the last one
    until `until` (the build's "now"), where the axis ends. It spans at least MIN_SPAN,
    reaching further back when the reigns are shorter.
    """
    reign = _reign(kings)
    if not reign:
        return None
    first, last = reign[0][0], reign[-1][0]
    end = max(last, until or last)  # where the lines stop, and the axis: never past now
    axis_start = min(first, end - MIN_SPAN)
    with matplotlib.rc_context(frame.style()):
        height = 6.2 if frame is WIDE else 5.6
        fig = Figure(figsize=(frame.width, height), layout="constrained")
        top, bottom = fig.subplots(2, 1, sharex=True, height_ratios=(3, 2))
        _composite_panel(top, reign, end, frame)
        _benchmark_panel(bottom, reign, end, benchmarks)
        _date_axis(bottom, axis_start, end, frame)
        if until is not None and until >= last:
            for ax in (top, bottom):
                ax.axvline(until, color="#999999", linestyle=":", linewidth=1)
            top.annotate("now", (until, 0), xycoords=("data", "axes fraction"), xytext=(-3, 3),
                         textcoords="offset points", ha="right", va="bottom",
                         fontsize=frame.font, color=INK)
        handles, labels = [], []
        for ax in (top, bottom):
            more = ax.get_legend_handles_labels()
            handles, labels = handles + more[0], labels + more[1]
        fig.legend(handles, labels, loc="outside upper left", frameon=False,
                   ncols=len(labels) if frame is WIDE else 2)
    return fig


def history_svg(kings: Sequence[Crowning], benchmarks: Sequence[str],
                until: datetime | None = None, frame: Frame = WIDE) -> str | None:
    """`history_figure` as SVG text."""
    with matplotlib.rc_context(frame.style()):
        fig = history_figure(kings, benchmarks, until, frame)
        return None if fig is None else _svg(fig)


def mix_svg(panels: Sequence[tuple[str, Sequence[tuple[str, dict[str, float], int]]]],
            models: Sequence[str], frame: Frame = WIDE) -> str | None:
    """A king's turn-1 model mix: one stacked bar per category (labelled with its number of
    items), a panel per benchmark."""
    panels = [(bench, rows) for bench, rows in panels if rows]
    if not panels:
        return None
    bars = sum(len(rows) for _, rows in panels)
    row = frame.font / 30  # inches per bar: room for one line of its label
    with matplotlib.rc_context(frame.style()):
        fig = Figure(figsize=(frame.width, 1.1 + row * bars + 0.6 * len(panels)),
                     layout="constrained")
        axes = fig.subplots(len(panels), 1, squeeze=False, sharex=True,
                            height_ratios=[len(rows) + 1 for _, rows in panels])[:, 0]
        for ax, (bench, rows) in zip(axes, panels, strict=True):
            _mix_panel(ax, bench, rows, models, frame)
        handles, labels = axes[0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="outside upper left", frameon=False,
                   ncols=len(models) if frame is WIDE else 1)
        return _svg(fig)


def _mix_panel(ax: Any, bench: str, rows: Sequence[tuple[str, dict[str, float], int]],
               models: Sequence[str], frame: Frame) -> None:
    ys = list(range(len(rows)))
    left = [0.0] * len(rows)
    shown = 0.12 if frame is WIDE else 0.2  # the narrowest bar that still holds its share
    for index, model in enumerate(models):
        widths = [shares.get(model, 0.0) for _, shares, _ in rows]
        bars = ax.barh(ys, widths, left=left, height=0.7, color=COLORS[index % len(COLORS)],
                       label=model)
        for bar, width, (_, _, items) in zip(bars, widths, rows, strict=True):
            if width >= shown:  # a share of a handful of items reads as noise: its count
                text = f"{width:.0%}" if items >= MIN_SHARE_ITEMS else f"{round(width * items)}"
                ax.text(bar.get_x() + width / 2, bar.get_y() + bar.get_height() / 2,
                        text, ha="center", va="center", fontsize=frame.font,
                        color="white", parse_math=False)
        left = [a + b for a, b in zip(left, widths, strict=True)]
    names = distinct_short([name for name, _, _ in rows])
    ax.set_yticks(ys, [f"{name} ({items})" for name, (_, _, items) in zip(names, rows,
                                                                         strict=True)])
    for label in ax.get_yticklabels():
        label.set_parse_math(False)
    ax.invert_yaxis()
    ax.set_xlim(0, 1)
    ax.xaxis.set_major_locator(FixedLocator([0, 0.25, 0.5, 0.75, 1]))
    ax.xaxis.set_major_formatter(lambda value, _: f"{value:.0%}")
    ax.set_title(bench, loc="left", parse_math=False)


def _place_labels(fig: Figure, ax: Any, points: Sequence[Any], frame: Frame) -> None:
    """Each labelled point's name beside it where it covers no other name; a name that fits
    nowhere is left off (every point is in cost.csv)."""
    renderer = FigureCanvasAgg(fig).get_renderer()
    placed: list[Any] = []
    offsets = ((4, 4, "left", "bottom"), (4, -4, "left", "top"),
               (-4, 4, "right", "bottom"), (-4, -4, "right", "top"))
    for point in points:
        for dx, dy, ha, va in offsets:
            text = ax.annotate(point.label, (point.cost_per_1k_usd, point.accuracy),
                               xytext=(dx, dy), textcoords="offset points", ha=ha, va=va,
                               fontsize=frame.font, color=INK, parse_math=False)
            box = text.get_window_extent(renderer)
            inside = ax.get_window_extent(renderer).contains(box.x0, box.y0) and \
                ax.get_window_extent(renderer).contains(box.x1, box.y1)
            if inside and not any(box.overlaps(other) for other in placed):
                placed.append(box)
                break
            text.remove()


def cost_svg(points: Sequence[Any], oracle: float | None, frame: Frame = WIDE) -> str | None:
    """`cost_figure` as SVG text."""
    with matplotlib.rc_context(frame.style()):
        fig = cost_figure(points, oracle, frame)
        return None if fig is None else _svg(fig)


def cost_figure(points: Sequence[Any], oracle: float | None,
                frame: Frame = WIDE) -> Figure | None:
    """Accuracy against USD per 1,000 questions, like with like: each pool model, random
    routing and the category lookup answering once (cached accuracy, single-answer cost), and
    each head's live sessions (live accuracy, cost of every turn), with the frontier no
    cheaper point beats. The current king is named; earlier kings are the lighter points, and
    heads that lost (shown once their season is replayed) the hollow ones. Each kind of point
    is one scatter, drawn in `points`' order."""
    if not points:
        return None
    costs = [p.cost_per_1k_usd for p in points]
    kings = [p for p in points if p.kind == "king"]
    with matplotlib.rc_context(frame.style()):
        fig = Figure(figsize=(frame.width, 4.6 if frame is WIDE else 4.4), layout="constrained")
        ax = fig.subplots()
        _draw_points(ax, points, kings)
        ax.margins(x=0.15, y=0.2)
        front = frontier(points)
        if len(front) > 1:
            ax.plot([p.cost_per_1k_usd for p in front], [p.accuracy for p in front], "--",
                    color=COLORS[1], linewidth=1, label="frontier", zorder=2)
        if oracle is not None:
            ax.axhline(oracle, color="#666666", linestyle=":", linewidth=1,
                       label="oracle ceiling (cached)")
        _usd_axis(ax, costs, frame)
        ax.set_xlabel("USD per 1,000 questions")
        ax.set_ylabel("accuracy (mean over benchmarks)" if frame is WIDE else "mean accuracy")
        ax.set_title("Accuracy against cost", loc="left")
        fig.legend(loc="outside lower left", ncols=3 if frame is WIDE else 1, frameon=False)
        ax.grid(alpha=0.3)
        _place_labels(fig, ax, [p for p in points if p.kind not in ("king", "head")]
                      + kings[-1:], frame)
    return fig


def _draw_points(ax: Any, points: Sequence[Any], kings: Sequence[Any]) -> None:
    """`cost_figure`'s points: one scatter per kind, the latest king on top."""
    styles = {"model": ("s", COLORS[5], "pool model, one answer"),
              "random": ("X", COLORS[4], "random routing, one answer"),
              "lookup": ("D", COLORS[3], "category lookup, one answer")}
    for kind, (marker, color, label) in styles.items():
        mine = [p for p in points if p.kind == kind]
        if mine:
            ax.scatter([p.cost_per_1k_usd for p in mine], [p.accuracy for p in mine],
                       marker=marker, color=color, s=46, label=label, zorder=3)
    heads = [p for p in points if p.kind == "head"]
    if heads:
        ax.scatter([p.cost_per_1k_usd for p in heads], [p.accuracy for p in heads],
                   marker="o", facecolors="none", edgecolors=COLORS[2], s=30, zorder=3,
                   label="head that lost, live sessions")
    if kings[:-1]:
        ax.scatter([p.cost_per_1k_usd for p in kings[:-1]], [p.accuracy for p in kings[:-1]],
                   marker="o", color=COLORS[0], alpha=0.35, s=36, zorder=3,
                   label="earlier king, live sessions")
    if kings:
        ax.scatter([kings[-1].cost_per_1k_usd], [kings[-1].accuracy], marker="o",
                   color=COLORS[0], s=60, zorder=4, label="latest king, live sessions")


def _usd_axis(ax: Any, costs: Sequence[float], frame: Frame) -> None:
    """`cost_figure`'s cost axis: logarithmic where the costs span more than ×20."""
    positive = [c for c in costs if c > 0]
    if positive and max(positive) / min(positive) > 20:
        ax.set_xscale("log")
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.xaxis.set_major_formatter(lambda value, _: usd_tick(value, [value]))
    else:
        ax.xaxis.set_major_locator(MaxNLocator(4 if frame is NARROW else 7, steps=NICE_STEPS))
        ax.xaxis.set_major_formatter(UsdTicks())


NICE_STEPS = (1, 2, 2.5, 5, 10)  # tick steps a reader counts in


def usd_tick(value: float, ticks: Sequence[float]) -> str:
    """`value` with as few decimals as show every one of `ticks` exactly (at most 6)."""
    step = min((abs(b - a) for a, b in itertools.pairwise(ticks)), default=abs(value)) or 1.0
    decimals = next((d for d in range(7) if all(abs(round(t, d) - t) <= step * 1e-6
                                                  for t in ticks)), 6)
    return f"{value:,.{decimals}f}"


class UsdTicks(Formatter):
    """Dollar ticks on a linear axis, all with the decimals the finest of them needs."""

    ticks: Sequence[float] = ()

    def set_locs(self, locs: Sequence[float]) -> None:
        self.ticks = list(locs)

    def __call__(self, value: float, pos: int | None = None) -> str:
        return usd_tick(value, self.ticks or [value])


def frontier(points: Sequence[Any]) -> list[Any]:
    """The points no cheaper (or equally cheap) point matches in accuracy, cheapest first."""
    best, kept = -math.inf, []
    for point in sorted(points, key=lambda p: (p.cost_per_1k_usd, -p.accuracy)):
        if point.accuracy > best:
            kept.append(point)
            best = point.accuracy
    return kept


def _power_panel(ax: Any, rows: Sequence[dict[str, Any]]) -> None:
    levels = sorted({row["disagreement"] for row in rows})
    for index, level in enumerate(levels):
        mine = sorted((r for r in rows if r["disagreement"] == level and r["crowned"] is not None),
                      key=lambda r: r["advantage"])
        if not mine:
            continue
        color = COLORS[index % len(COLORS)]
        xs = [r["advantage"] for r in mine]
        ax.errorbar(xs, [r["crowned"] for r in mine], yerr=[r["crowned_se"] for r in mine],
                    fmt="o-", color=color, capsize=2, label=f"differ on {level:.0%} besides")
        ax.plot(xs, [r["shared"] for r in mine], ":", color=color, linewidth=1)
    ax.plot([], [], ":", color="#666666", linewidth=1, label="dotted: shared live play")
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("true advantage (composite)")
    ax.set_ylabel("P(crowned)")
    ax.set_title("A better head is crowned", loc="left")
    ax.grid(alpha=0.3)


def _campaign_panel(ax: Any, data: dict[str, Any]) -> None:
    for index, (key, label) in enumerate((("independent_rows", "independent live re-runs"),
                                          ("shared_rows", "shared live play"))):
        rows = data[key]
        ax.errorbar([r["submissions"] for r in rows], [r["any"] for r in rows],
                    yerr=[r["se"] for r in rows], fmt="o-" if index == 0 else "o:",
                    color=COLORS[index], capsize=2, label=label)
    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(lambda value, _: f"{value:,g}")
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("near-equal submissions")
    ax.set_ylabel("P(at least one false crown)")
    ax.set_title("Chance over a campaign", loc="left")
    ax.grid(alpha=0.3)


def _climb_panel(ax: Any, climb: dict[str, Any]) -> None:
    for rows, style, label in ((climb["rows"], "o-", "a loss publishes its composite and delta"),
                               (climb["without"], "o--", "a loss also publishes its crown test")):
        ax.plot([r["submissions"] for r in rows], [r["crowned"] for r in rows], style,
                color=COLORS[0] if style == "o-" else COLORS[1], label=label)
    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(lambda value, _: f"{value:,g}")  # no smaller exponents
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("submissions")
    ax.set_ylabel("P(crowned at least once)")
    ax.set_title("A climber on what is published", loc="left")
    ax.grid(alpha=0.3)


def fairness_svg(data: dict[str, Any], frame: Frame = WIDE) -> str:
    """P(crowned) against the true advantage, the chance of a false crown over a campaign, and
    a climber's chance of a crown, as SVG text: two panels above one on a desktop, one above
    the other on a phone, each legend below its panel."""
    with matplotlib.rc_context(frame.style()):
        wide = frame is WIDE
        fig = Figure(figsize=(frame.width, 8.8 if wide else 12.6), layout="constrained")
        axes = fig.subplot_mosaic([["power", "campaign"], ["climb", "climb"]] if wide
                                  else [["power"], ["campaign"], ["climb"]])
        _power_panel(axes["power"], data["power"])
        _campaign_panel(axes["campaign"], data["campaign"])
        _climb_panel(axes["climb"], data["climber"])
        for ax in axes.values():
            ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.22 if wide else -0.2),
                      frameon=False, ncols=1)
        return _svg(fig)
