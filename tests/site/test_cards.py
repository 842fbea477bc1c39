"""Router cards and cost: the figures each king's page and the cost chart are drawn from."""

from __future__ import annotations

import itertools
import json
import re
import warnings
from datetime import UTC, datetime, timedelta

import matplotlib.dates
import pytest
from conftest import CATEGORIES, COST_PER_1K

from evaluator.records import Crowning
from evaluator.rules import OFFICIAL
from evaluator.site.cards import (
    CHART_CATEGORIES,
    MIN_SHARE_ITEMS,
    CostPoint,
    best_single_cost,
    chart_rows,
    cost_points,
    gains,
    mix,
    reigns,
)
from evaluator.site.charts import FRAMES, frontier, history_figure
from evaluator.site.pages import _baselines, _pool_models
from evaluator.site.state import load_state
from evaluator.store import Store, validate


def test_the_fixture_boards_keep_the_public_file_contracts(make_state):
    board = make_state("busy")
    Store(board.parent, board=board).manifest()  # strict: against the manifest schema
    kings = [json.loads(p.read_text()) for p in board.glob("results/*/*.json")]
    kings = [record for record in kings if record["outcome"] == "king"]
    assert len(kings) == 6 and sum(k["router_card"] is not None for k in kings) == 5
    for record in kings:  # router cards included
        validate("result", record, "a king's record")


@pytest.fixture
def busy_state(make_state):
    return load_state(make_state("busy"))


def test_each_reign_has_its_record_and_its_neighbours(busy_state):
    line = reigns(busy_state)
    assert [r.number for r in line] == list(range(1, 7))
    assert all(r.result is not None and r.result.key == r.king.key for r in line)
    assert line[0].previous is None and line[0].card == {}  # recorded before router cards
    assert all(r.card for r in line[1:])
    assert [r.successor for r in line[:-1]] == [r.king for r in line[1:]]
    assert line[-1].successor is None
    assert line[3].previous == line[2].king and line[3].previous_result == line[2].result
    assert line[-1].uri == f"kings/@{line[-1].king.miner}/{line[-1].king.generation}.md"


def test_the_mix_weights_each_category_by_its_items(busy_state):
    card = reigns(busy_state)[-1].card
    for bench in OFFICIAL.benchmarks:
        entry = mix(card, bench)
        groups = card["public_items"][bench]["by_category"]
        assert entry["items"] == sum(g["items"] for g in groups.values())
        assert sum(entry["models"].values()) == pytest.approx(1)
        assert sum(entry["roles"].values()) == pytest.approx(1)
        model = OFFICIAL.pool_names[0]
        assert entry["models"][model] == pytest.approx(
            sum(g["items"] * g["models"][model] for g in groups.values()) / entry["items"])
        sizes = [g["items"] for _, g in entry["categories"]]
        assert sizes == sorted(sizes, reverse=True)
    assert mix({}, "math500") == {"items": None, "models": {}, "roles": {}, "categories": []}


def test_a_mix_chart_pools_the_smaller_categories(busy_state):
    card = reigns(busy_state)[-1].card
    rows = chart_rows(card, "mmlu")
    extra = len(CATEGORIES["mmlu"]) - CHART_CATEGORIES
    assert rows[0][0] == "all items" and len(rows) == CHART_CATEGORIES + 2
    assert rows[-1][0] == f"{extra} other categories"
    assert sum(rows[-1][1].values()) == pytest.approx(1)
    # each bar carries its number of public items: the whole benchmark is every category's
    groups = card["public_items"]["mmlu"]["by_category"]
    assert rows[0][2] == sum(g["items"] for g in groups.values())
    assert sum(r[2] for r in rows[1:]) == rows[0][2]
    assert len(chart_rows(card, "math500")) == len(CATEGORIES["math500"]) + 1
    assert chart_rows({}, "mmlu") == []


def test_gains_set_each_category_against_the_best_single_model_overall(busy_state):
    line, baselines = reigns(busy_state), _baselines(busy_state)
    card = line[-1].card
    rows = gains(card, "math500", baselines["math500"])
    overall = baselines["math500"]["best_single"]["model"]
    assert [r["category"] for r in rows] == sorted(CATEGORIES["math500"])
    for row in rows:
        base = baselines["math500"]["by_category"][row["category"]]
        group = card["public_items"]["math500"]["by_category"][row["category"]]
        # public figures only: its choices on the public items, at the seal's per-model accuracy
        assert row["items"] == group["items"]
        assert row["cached"] == pytest.approx(sum(share * base["per_model"][m]
                                                  for m, share in group["models"].items()))
        assert row["best_model"] == overall and row["best"] == base["per_model"][overall]
        assert row["oracle"] == base["oracle"]
        assert row["gain"] == pytest.approx(row["cached"] - row["best"])
        if row["items"] >= MIN_SHARE_ITEMS:
            assert row["captured"] == pytest.approx(
                (row["cached"] - row["best"]) / (row["oracle"] - row["best"]))
        else:  # no share of a gap measured on a handful of items
            assert row["captured"] is None
    assert gains(line[-1].card, "math500", {})[0]["best"] is None  # a manifest before categories


def test_cost_points_for_models_random_routing_and_kings(busy_state):
    line, baselines = reigns(busy_state), _baselines(busy_state)
    points = cost_points(line, baselines, OFFICIAL, _pool_models(busy_state, OFFICIAL), {})
    kinds = [p.kind for p in points]
    assert kinds.count("model") == 3 and kinds.count("random") == 1 and kinds.count("king") == 5
    cheapest = min(COST_PER_1K, key=COST_PER_1K.get)
    model = next(p for p in points if p.label == cheapest)
    factors = [1 + 0.2 * i for i in range(len(OFFICIAL.benchmarks))]  # the fixture's per bench
    assert model.cost_per_1k_usd == pytest.approx(COST_PER_1K[cheapest] * sum(factors) / 3, 1e-3)
    king = next(p for p in points if p.kind == "king" and p.generation == line[-1].king.generation
                and p.miner == line[-1].king.miner)
    assert king.cost_per_1k_usd == line[-1].card["cost_per_1k_usd"]
    # like with like: a king's live sessions give both its accuracy and its cost
    assert king.accuracy == pytest.approx(
        sum(s.live_acc for s in line[-1].result.per_benchmark.values()) / 3)
    assert "live" in king.basis and "one Worker answer" in model.basis
    best = [baselines[b]["cost_per_1k_usd"][baselines[b]["best_single"]["model"]]
            for b in OFFICIAL.benchmarks]
    assert best_single_cost(baselines, OFFICIAL.benchmarks) == pytest.approx(sum(best) / 3)
    assert best_single_cost({}, OFFICIAL.benchmarks) is None


@pytest.mark.parametrize(("points", "kept"), [
    # (cost, accuracy) → the labels on the frontier, cheapest first
    ([(1, 0.5), (2, 0.6), (3, 0.55)], ["a", "b"]),
    ([(1, 0.5), (1, 0.7), (2, 0.6)], ["b"]),
    ([(3, 0.9), (2, 0.8), (1, 0.7)], ["c", "b", "a"]),
])
def test_the_frontier_keeps_what_no_cheaper_point_beats(points, kept):
    marked = [CostPoint("model", label, acc, cost)
              for label, (cost, acc) in zip("abc", points, strict=True)]
    assert [p.label for p in frontier(marked)] == kept


def _crowning(minutes: float) -> Crowning:
    moment = datetime(2026, 11, 1, 12, tzinfo=UTC) + timedelta(minutes=minutes)
    return Crowning(miner="alice", generation=1, pr=1, head_sha=None, composite=0.6,
                    crowned_at=moment.strftime("%Y-%m-%dT%H:%M:%SZ"), delta=None, ci95=None,
                    scores={"math500": 0.6})


@pytest.mark.parametrize("frame", FRAMES, ids=lambda f: f.name)
@pytest.mark.parametrize("span_minutes", [0, 3, 600, 60 * 24 * 2, 60 * 24 * 40, 60 * 24 * 900])
def test_the_history_axis_shows_dates_once_each_and_runs_to_now(span_minutes, frame):
    kings = [_crowning(0), _crowning(span_minutes / 2)]
    now = datetime(2026, 11, 1, 12, tzinfo=UTC) + timedelta(minutes=span_minutes)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no locator warning in the build log
        fig = history_figure(kings, ["math500"], until=now, frame=frame)
        top, bottom = fig.axes
        fig.canvas.draw()
    labels = [t.get_text() for t in bottom.get_xticklabels() if t.get_text()]
    assert 2 <= len(labels) <= frame.ticks, labels
    assert len(set(labels)) == len(labels) and re.match(r"20\d\d-\d\d-\d\d", labels[0]), labels
    assert bottom.xaxis.get_offset_text().get_text() == ""
    assert bottom.get_xlabel() == "date (UTC)"
    step = top.lines[0]
    assert step.get_xdata()[-1] == now  # the king's line reaches "now", not the axis' end
    left, right = (matplotlib.dates.num2date(x) for x in bottom.get_xlim())
    assert (right - now) / (right - left) < 0.03  # the axis ends at now, however short the reign


@pytest.mark.parametrize("frame", FRAMES, ids=lambda f: f.name)
@pytest.mark.parametrize("costs", [(0.03, 0.12), (0.031, 0.078), (1.2, 3.4), (12.0, 180.0),
                                   (0.001, 0.5)])
def test_each_cost_tick_says_the_value_it_marks(costs, frame):
    from evaluator.site.charts import cost_svg

    points = [CostPoint("model", name, 0.5 + 0.1 * i, cost)
              for i, (name, cost) in enumerate(zip("ab", costs, strict=True))]
    svg = cost_svg(points, None, frame)
    ticks = re.findall(r'<g id="xtick_\d+">.*?<text[^>]*>([^<]*)</text>', svg, re.S)
    labels = [t for t in ticks if t[:1].isdigit()]  # a tick without text reads the next one
    assert len(labels) >= 2 and len(set(labels)) == len(labels), labels
    values = [float(t.replace(",", "")) for t in labels]
    steps = {round(b - a, 9) for a, b in itertools.pairwise(values)}
    assert len(steps) == 1 or costs[1] / costs[0] > 20, labels  # evenly spaced, evenly labelled


def test_category_labels_are_cut_but_never_alike():
    from evaluator.site.charts import distinct_short

    names = ["high_school_chemistry", "high_school_computer_science", "high_school_mathematics",
             "high_school_macroeconomics", "algebra"]
    short = distinct_short(names)
    assert len(set(short)) == len(names) and short[-1] == "algebra"
    for name, cut in zip(names, short, strict=True):
        assert name.startswith(cut.rstrip("…")) and len(cut) < len(name) + 1


def test_a_mix_bar_of_a_handful_of_items_holds_counts_not_shares():
    from evaluator.site.charts import mix_svg

    svg = mix_svg([("math500", [("all items", {"a": 0.5, "b": 0.5}, 40),
                                ("Geometry", {"a": 0.25, "b": 0.75}, 8)])], ["a", "b"])
    in_bars = re.findall(r'fill: #ffffff[^>]*>([^<]*)<', svg)  # the white text on the bars
    assert in_bars == ["50%", "2", "50%", "6"]  # row by row, model by model
    assert "all items (40)" in svg and "Geometry (8)" in svg
