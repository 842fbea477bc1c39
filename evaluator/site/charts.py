"""The site's charts, as static SVG: the king over time, and the fairness figures."""

from __future__ import annotations

import io
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

import matplotlib
from matplotlib.dates import AutoDateLocator, ConciseDateFormatter
from matplotlib.figure import Figure

from evaluator.files import try_parse_time
from evaluator.records import Crowning

COLORS = ("#3f51b5", "#e91e63", "#009688", "#ff9800", "#795548", "#607d8b")
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
    locator = AutoDateLocator()
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(ConciseDateFormatter(locator))


def history_svg(kings: Sequence[Crowning], benchmarks: Sequence[str],
                until: str | None = None, win_margin: float | None = None) -> str | None:
    """The chart as SVG text, or None when no king has a readable crowning time.

    The step line holds each king's composite until the next coronation (or `until`);
    the dashed line is the composite a challenger needs today.
    """
    reign = _reign(kings)
    if not reign:
        return None
    first, last = reign[0][0], reign[-1][0]
    end = max(last, try_parse_time(until) or last)
    end = end if end > first else first + timedelta(days=1)
    with matplotlib.rc_context(STYLE):
        fig = Figure(figsize=(9, 6.2), layout="constrained")
        top, bottom = fig.subplots(2, 1, sharex=True, height_ratios=(3, 2))
        _composite_panel(top, reign, end, win_margin)
        _benchmark_panel(bottom, reign, end, benchmarks)
        buffer = io.StringIO()
        fig.savefig(buffer, format="svg", metadata={"Date": None}, facecolor="white")
    return buffer.getvalue()


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
        buffer = io.StringIO()
        fig.savefig(buffer, format="svg", metadata={"Date": None}, facecolor="white")
    return buffer.getvalue()
