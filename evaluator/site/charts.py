"""The site's charts, as static SVG: the king over time, a king's routing mix, cost against
accuracy, and the fairness figures. Text from records is drawn with `parse_math=False`, so a
name with `$` stays plain text."""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

import matplotlib
from matplotlib.dates import AutoDateLocator, DateFormatter, DayLocator
from matplotlib.figure import Figure

from evaluator.files import try_parse_time
from evaluator.records import Crowning

COLORS = ("#3f51b5", "#e91e63", "#009688", "#ff9800", "#795548", "#607d8b")
DAYS_WITH_TIME = 3  # a history shorter than this shows times of day on its axis
STYLE = {"svg.hashsalt": "tinyrouter", "svg.fonttype": "path", "font.size": 10,
         "axes.spines.top": False, "axes.spines.right": False}


def _reign(kings: Sequence[Crowning]) -> list[tuple[datetime, Crowning]]:
    """Each dated king with its crowning time, oldest first."""
    dated = [(try_parse_time(k.crowned_at), k) for k in kings]
    return sorted(((t, k) for t, k in dated if t is not None), key=lambda pair: pair[0])


def _composite_panel(ax: Any, reign: list[tuple[datetime, Crowning]], end: datetime,
                     win_margin: float | None) -> None:
    times = [t for t, _ in reign]
    composite = [k.composite or 0.0 for _, k in reign]
    ax.step([*times, end], [*composite, composite[-1]], where="post", color=COLORS[0],
            linewidth=2, label="king's composite")
    ax.plot(times, composite, "o", color=COLORS[0])
    for moment, king, value in zip(times, (k for _, k in reign), composite, strict=True):
        # parse_math=False: a miner name with "$" must stay plain text
        ax.annotate(king.miner, (moment, value), xytext=(4, 6),
                    textcoords="offset points", fontsize=8, color="#444444", parse_math=False)
    if win_margin is not None:
        ax.axhline(composite[-1] + win_margin, color=COLORS[1], linestyle="--", linewidth=1,
                   label="needed to take the crown")
    ax.set_ylabel("composite")
    ax.set_title("The king's composite over time", loc="left", fontsize=11)
    ax.legend(loc="lower right", frameon=False)
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
    ax.set_title("Per benchmark", loc="left", fontsize=11)
    if ax.lines:
        ax.legend(loc="lower right", frameon=False, ncols=len(benchmarks))
    ax.grid(axis="y", alpha=0.3)


def _date_axis(ax: Any, start: datetime, end: datetime) -> None:
    """Dates on the x axis (with times only for a span under DAYS_WITH_TIME days)."""
    days = (end - start).total_seconds() / 86400
    if days >= DAYS_WITH_TIME:
        ax.xaxis.set_major_locator(DayLocator(interval=max(1, math.ceil(days / 6))))
        ax.xaxis.set_major_formatter(DateFormatter("%Y-%m-%d"))
    else:
        ax.xaxis.set_major_locator(AutoDateLocator(minticks=3, maxticks=6))
        ax.xaxis.set_major_formatter(DateFormatter("%Y-%m-%d\n%H:%M"))
    ax.set_xlim(start - (end - start) * 0.02, end + (end - start) * 0.02)
    ax.set_xlabel("date (UTC)")


def _svg(fig: Figure) -> str:
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg", metadata={"Date": None}, facecolor="white")
    return buffer.getvalue()


def history_figure(kings: Sequence[Crowning], benchmarks: Sequence[str],
                   until: datetime | None = None, win_margin: float | None = None) -> Figure | None:
    """The history chart, or None when no king has a readable crowning time.

    The step line holds each king's composite until the next coronation, and the last one
    until `until` (the build's "now"); the dashed line is the composite a challenger needs.
    """
    reign = _reign(kings)
    if not reign:
        return None
    first, last = reign[0][0], reign[-1][0]
    end = max(last, until or last)
    end = end if end > first else first + timedelta(days=1)
    with matplotlib.rc_context(STYLE):
        fig = Figure(figsize=(9, 6.2), layout="constrained")
        top, bottom = fig.subplots(2, 1, sharex=True, height_ratios=(3, 2))
        _composite_panel(top, reign, end, win_margin)
        _benchmark_panel(bottom, reign, end, benchmarks)
        _date_axis(bottom, first, end)
        if until is not None and until >= last:
            for ax in (top, bottom):
                ax.axvline(end, color="#999999", linestyle=":", linewidth=1)
            top.annotate("now", (end, 1), xycoords=("data", "axes fraction"), xytext=(-4, -2),
                         textcoords="offset points", ha="right", va="top", fontsize=8,
                         color="#666666")
    return fig


def history_svg(kings: Sequence[Crowning], benchmarks: Sequence[str],
                until: datetime | None = None, win_margin: float | None = None) -> str | None:
    """`history_figure` as SVG text."""
    with matplotlib.rc_context(STYLE):
        fig = history_figure(kings, benchmarks, until, win_margin)
        return None if fig is None else _svg(fig)


def mix_svg(panels: Sequence[tuple[str, Sequence[tuple[str, dict[str, float]]]]],
            models: Sequence[str]) -> str | None:
    """A king's turn-1 model mix: one stacked bar per category, a panel per benchmark."""
    panels = [(bench, rows) for bench, rows in panels if rows]
    if not panels:
        return None
    bars = sum(len(rows) for _, rows in panels)
    with matplotlib.rc_context(STYLE):
        fig = Figure(figsize=(9, 0.9 + 0.27 * bars + 0.55 * len(panels)), layout="constrained")
        axes = fig.subplots(len(panels), 1, squeeze=False, sharex=True,
                            height_ratios=[len(rows) + 1 for _, rows in panels])[:, 0]
        for ax, (bench, rows) in zip(axes, panels, strict=True):
            _mix_panel(ax, bench, rows, models)
        handles, labels = axes[0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="outside upper left", ncols=len(models), frameon=False)
        return _svg(fig)


def _mix_panel(ax: Any, bench: str, rows: Sequence[tuple[str, dict[str, float]]],
               models: Sequence[str]) -> None:
    ys = list(range(len(rows)))
    left = [0.0] * len(rows)
    for index, model in enumerate(models):
        widths = [shares.get(model, 0.0) for _, shares in rows]
        bars = ax.barh(ys, widths, left=left, height=0.7, color=COLORS[index % len(COLORS)],
                       label=model)
        for bar, width in zip(bars, widths, strict=True):
            if width >= 0.12:
                ax.text(bar.get_x() + width / 2, bar.get_y() + bar.get_height() / 2,
                        f"{width:.0%}", ha="center", va="center", fontsize=7, color="white",
                        parse_math=False)
        left = [a + b for a, b in zip(left, widths, strict=True)]
    ax.set_yticks(ys, [name for name, _ in rows])
    for label in ax.get_yticklabels():
        label.set_parse_math(False)
    ax.invert_yaxis()
    ax.set_xlim(0, 1)
    ax.xaxis.set_major_formatter(lambda value, _: f"{value:.0%}")
    ax.set_title(bench, loc="left", fontsize=10, parse_math=False)
    ax.tick_params(axis="y", labelsize=8)


def cost_svg(points: Sequence[Any], oracle: float | None) -> str | None:
    """Mean cached accuracy against USD per 1,000 questions: pool models, random routing and
    kings, with the frontier of what no cheaper point beats."""
    if not points:
        return None
    costs = [p.cost_per_1k_usd for p in points]
    with matplotlib.rc_context(STYLE):
        fig = Figure(figsize=(9, 4.6), layout="constrained")
        ax = fig.subplots()
        styles = {"model": ("s", COLORS[5], "pool model (always asked)"),
                  "random": ("X", COLORS[4], "random routing"),
                  "king": ("o", COLORS[0], "king")}
        for kind, (marker, color, label) in styles.items():
            mine = [p for p in points if p.kind == kind]
            if mine:
                ax.scatter([p.cost_per_1k_usd for p in mine], [p.accuracy for p in mine],
                           marker=marker, color=color, s=46, label=label, zorder=3)
        baselines = sorted((p for p in points if p.kind != "king"), key=lambda p: p.cost_per_1k_usd)
        below = {id(p): index % 2 == 0 for index, p in enumerate(baselines)}  # neighbours alternate
        for point in points:
            up = not below.get(id(point), False)
            ax.annotate(point.label, (point.cost_per_1k_usd, point.accuracy),
                        xytext=(5, 5 if up else -6), textcoords="offset points",
                        va="bottom" if up else "top", fontsize=8, color="#444444",
                        parse_math=False)
        ax.margins(x=0.12, y=0.15)
        front = frontier(points)
        if len(front) > 1:
            ax.plot([p.cost_per_1k_usd for p in front], [p.accuracy for p in front], "--",
                    color=COLORS[1], linewidth=1, label="frontier", zorder=2)
        if oracle is not None:
            ax.axhline(oracle, color="#666666", linestyle=":", linewidth=1,
                       label="oracle ceiling")
        positive = [c for c in costs if c > 0]
        if positive and max(positive) / min(positive) > 20:
            ax.set_xscale("log")
        ax.set_xlabel("USD per 1,000 questions")
        ax.set_ylabel("cached accuracy (mean over benchmarks)")
        ax.set_title("Accuracy against cost", loc="left", fontsize=11)
        fig.legend(loc="outside lower center", ncols=5, frameon=False, fontsize=8)
        ax.grid(alpha=0.3)
        return _svg(fig)


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
        ax.plot(xs, [r["crowned"] for r in mine], "o-", color=color,
                label=f"differ on {level:.0%} besides")
        ax.plot(xs, [r["margin_only"] for r in mine], ":", color=color, linewidth=1)
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("true advantage (composite)")
    ax.set_ylabel("P(crowned)")
    ax.set_title("A better head is crowned (dotted: margin alone)", loc="left", fontsize=11)
    ax.legend(loc="upper left", frameon=False, fontsize=8)
    ax.grid(alpha=0.3)


def _climb_panel(ax: Any, rows: Sequence[dict[str, Any]], win_margin: float) -> None:
    xs = [r["submissions"] for r in rows]
    ax.plot(xs, [r["gain"] for r in rows], "o-", color=COLORS[0],
            label="fresh partition, rounded deltas")
    ax.plot(xs, [r["without"] for r in rows], "o--", color=COLORS[1],
            label="fixed split, exact deltas")
    ax.axhline(win_margin, color="#666666", linestyle=":", linewidth=1, label="win margin")
    ax.set_xscale("log")
    ax.set_xlabel("submissions")
    ax.set_ylabel("gain on the board (composite)")
    ax.set_title("Probing the hidden set", loc="left", fontsize=11)
    ax.legend(loc="upper left", frameon=False, fontsize=8)
    ax.grid(alpha=0.3)


def fairness_svg(data: dict[str, Any], win_margin: float) -> str:
    """P(crowned) against the true advantage, and a hill-climber's gain, as SVG text."""
    with matplotlib.rc_context(STYLE):
        fig = Figure(figsize=(9, 3.8), layout="constrained")
        left, right = fig.subplots(1, 2)
        _power_panel(left, data["power"])
        _climb_panel(right, data["hill_climb"], win_margin)
        return _svg(fig)
