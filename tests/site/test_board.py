"""The Leaderboard page's table and chart (evaluator/site/board.py): ranks from the paired
comparisons alone, the baselines as rows, and every number the same as the downloads'."""

from __future__ import annotations

import dataclasses
import json

import pytest
from browsing import cost_points_of
from conftest import NOW, busy

from evaluator.records import HeadRef, Result
from evaluator.rules import OFFICIAL
from evaluator.site.board import baseline_rows, head_rows
from evaluator.site.cards import category_lookup, cost_points, oracle_accuracy, reigns
from evaluator.site.charts import FRAMES, cost_svg
from evaluator.site.pages import COST_CHART_URI, _baselines, _pool_models, generate, narrow_uri
from evaluator.site.state import LeaderboardState, load_state

BAR = OFFICIAL.crown_z_final


def head(name: str, day: int, outcome: str = "lost", against: str | None = None,
         z: float | None = None, composite: float = 0.6) -> Result:
    """A decided head: `against` the head it was compared with, `z` the crown test's."""
    return Result(miner=name, generation=1, pr=day, head_sha=f"{day:040x}",
                  evaluated_at=f"2026-11-{day:02d}T12:00:00Z", outcome=outcome,
                  composite=composite, delta=None if against is None else 0.0,
                  against=None if against is None else HeadRef(against, 1, ORDER[against],
                                                               f"{ORDER[against]:040x}"),
                  crown_test=None if z is None else {"stage": 1, "z": z})


ORDER = {"k1": 1, "k2": 2, "a": 3, "b": 4, "c": 5}


@pytest.mark.parametrize(("heads", "ranks"), [
    # a crown is significant by the crown's own bar: the new king above the old
    ([head("k1", 1, "king"), head("k2", 2, "king", "k1", BAR + 1)],
     {"k2": (1, 1), "k1": (2, 2)}),
    # a loss the test could not tell from the king's level: either place
    ([head("k1", 1, "king"), head("a", 3, "lost", "k1", -1.0)],
     {"k1": (1, 2), "a": (1, 2)}),
    # a loss far behind: below its king, and through the crown, below the next king too
    ([head("k1", 1, "king"), head("k2", 2, "king", "k1", BAR + 1),
      head("a", 3, "lost", "k1", -BAR - 1)],
     {"k2": (1, 1), "k1": (2, 2), "a": (3, 3)}),
    # a loss inseparable from the reigning king is not thereby above the king it dethroned:
    # no comparison tells it from either
    ([head("k1", 1, "king"), head("k2", 2, "king", "k1", BAR + 1),
      head("b", 4, "lost", "k2", -0.5)],
     {"k2": (1, 2), "b": (1, 3), "k1": (2, 3)}),
    # not crowned yet significantly better (short of the margin): above the king all the same
    ([head("k1", 1, "king"), head("c", 5, "lost", "k1", BAR + 0.5)],
     {"c": (1, 1), "k1": (2, 2)}),
    # nothing paired: every place is possible, whatever the composites say
    ([head("k1", 1, "king", composite=0.9), head("a", 3, "lost", composite=0.1)],
     {"k1": (1, 2), "a": (1, 2)}),
])
def test_ranks_come_from_paired_comparisons_only(heads, ranks):
    rows = head_rows(LeaderboardState(results=heads), OFFICIAL)
    assert {row.miner: (row.rank_best, row.rank_worst) for row in rows} == ranks
    assert [row.rank_best for row in rows] == sorted(row.rank_best for row in rows)


def test_a_rank_reads_as_one_place_or_the_places_allowed():
    rows = head_rows(LeaderboardState(results=[head("k1", 1, "king"),
                                               head("a", 3, "lost", "k1", -1.0)]), OFFICIAL)
    assert {row.rank for row in rows} == {"1–2"}
    assert dataclasses.replace(rows[0], rank_worst=1).rank == "1"


@pytest.fixture(scope="module")
def busy_site(tmp_path_factory):
    root = tmp_path_factory.mktemp("board")
    state = load_state(busy(root / "leaderboard"))
    return state, generate(state, OFFICIAL, now=NOW)


@pytest.mark.slow  # the busy board's pages and charts, generated
def test_every_head_with_a_composite_is_ranked_beside_the_baselines(busy_site):
    state, content = busy_site
    board = json.loads(content.assets["downloads/leaderboard.json"])["board"]
    heads = [row for row in board if row["kind"] == "head"]
    decided = [r for r in state.results if r.outcome in ("king", "lost")]
    assert len(heads) == len(decided) and len(heads) > 40
    assert [row["label"] for row in board if row["kind"] == "baseline"] == [
        "best single model", "category lookup", "random routing", "oracle (a ceiling)"]
    reigning = next(row for row in heads if row["reigning"])
    assert (reigning["miner"], reigning["generation"]) == (state.king.miner,
                                                           state.king.generation)
    # every king was crowned over the one before: the latest outranks every earlier king
    kings = [row for row in heads if row["outcome"] == "king"]
    assert reigning["rank_best"] == 1 and all(row["rank_best"] > 1 for row in kings
                                              if row is not reigning)
    # the season has not retired: a loser shows its published composite, rounded, and no
    # interval (a loss publishes none of its crown test's figures)
    losers = [row for row in heads if row["outcome"] == "lost"]
    assert all(row["figures"] == "hidden" and row["cached_acc"] is None for row in losers)
    assert all(row["places"] == 2 and row["composite_low"] is None is row["composite_high"]
               for row in losers)


@pytest.mark.slow  # the busy board's pages and charts, generated
def test_the_category_lookup_weighs_each_categorys_best_model_by_its_items(busy_site):
    state, _ = busy_site
    baselines = _baselines(state)
    accuracy, cost = category_lookup(baselines, OFFICIAL.benchmarks)
    expected = []
    for bench in OFFICIAL.benchmarks:
        groups = baselines[bench]["by_category"].values()
        expected.append(sum(g["best_single"]["accuracy"] * g["items"] for g in groups)
                        / sum(g["items"] for g in groups))
    assert accuracy == pytest.approx(sum(expected) / len(expected))
    assert 0 < cost < max(baselines["mmlu"]["cost_per_1k_usd"].values()) * 1.5
    rows = baseline_rows(baselines, OFFICIAL, _pool_models(state, OFFICIAL))
    assert rows[1].cached_acc == accuracy and rows[1].avg_turns == 1.0
    assert rows[-1].cost_per_1k_usd is None  # the oracle is a ceiling, not a router
    points = cost_points(reigns(state), baselines, OFFICIAL, _pool_models(state, OFFICIAL), {})
    [lookup] = [p for p in points if p.kind == "lookup"]
    assert (lookup.accuracy, lookup.cost_per_1k_usd) == (accuracy, cost)


@pytest.mark.slow  # the busy board's pages and charts, generated
def test_the_chart_drawn_from_cost_csv_is_the_chart_on_the_site(busy_site):
    """Every point of the cost–accuracy chart is a row of the download: the chart redrawn from
    cost.csv alone is the site's, byte for byte, at both widths."""
    state, content = busy_site
    points = cost_points_of(content.assets["downloads/cost.csv"])
    assert {p.kind for p in points} >= {"king", "model", "random", "lookup"}
    oracle = oracle_accuracy(_baselines(state), OFFICIAL.benchmarks)
    for frame in FRAMES:
        uri = COST_CHART_URI if frame.name == "wide" else narrow_uri(COST_CHART_URI)
        assert cost_svg(points, oracle, frame) == content.assets[uri]
