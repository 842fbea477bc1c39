"""One evaluation with fake collaborators: the measurements, the transitions, the records."""

import dataclasses
from datetime import UTC, datetime

import pytest
from evaluation_fakes import ALWAYS_0, ALWAYS_2, RULES, SMART, contender, make_sets

from evaluator.evaluate import evaluate
from evaluator.leaderboard import check_result
from evaluator.records import LOST, PUBLIC_FIELDS
from evaluator.scoring import bench_score, efficiency

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
KING_NOVELTY = {"math500": 0.4, "mmlu": 0.2, "livecodebench": 0.6}


def run(challenger, king, sets, router, pool, rules=RULES, novelty=KING_NOVELTY):
    return evaluate(challenger, king, novelty, sets, router, pool, rules, now=NOW,
                    manifest_hash="f" * 64)


def test_first_passing_head_is_crowned_with_the_full_breakdown(sets, router, pool):
    result = run(contender(ALWAYS_0), None, sets, router, pool)
    public = result.public()
    assert public["outcome"] == "king"
    assert public["king_composite"] is None and public["delta"] is None
    assert public["paired"] is None
    math = public["per_benchmark"]["math500"]
    # always model 0: right on category c0 only, i.e. half; two live turns each
    assert (math["cached_acc"], math["audit_acc"], math["live_acc"]) == (0.5, 0.5, 0.5)
    assert math["avg_turns"] == 2.0
    assert math["novelty"] == RULES.novelty_without_king
    eff = efficiency(2.0, 0.5, RULES)
    assert math["efficiency"] == pytest.approx(eff)
    assert math["score"] == pytest.approx(bench_score(0.5, 0.5, eff, 0.5, 1.0, RULES))
    assert public["live_cost_usd"] == pytest.approx(3 * 6 * 2 * 0.001)
    assert public["evaluated_at"] == "2026-11-29T12:00:00Z"
    check_result(public, RULES)


def test_better_challenger_dethrones_and_the_king_is_rescored_on_the_same_items(
        sets, router, pool):
    result = run(contender(SMART), contender(ALWAYS_0, miner="bob", pr=3), sets, router, pool)
    public, private = result.public(), result.private()
    assert public["outcome"] == "king"
    # the king played the same live questions in this run
    assert sorted(pool.calls) == sorted([(b, 6) for b in RULES.benchmarks] * 2)
    king = private["king"]["per_benchmark"]
    assert {b: king[b]["novelty"] for b in king} == KING_NOVELTY
    assert public["king_composite"] == pytest.approx(private["king"]["composite"])
    assert public["delta"] == pytest.approx(public["composite"] - public["king_composite"])
    # smart is right everywhere, the king on half: +0.5 cached accuracy, clearly above 0
    low, high = public["paired"]["ci95"]
    assert public["paired"]["delta_cached"] == 0.5
    assert 0 < low < 0.5 < high < 1
    # smart agrees with the king on c0 (model 0, same role) and differs on c1
    assert public["per_benchmark"]["mmlu"]["novelty"] == pytest.approx(0.5)
    check_result(public, RULES)


def test_weaker_challenger_loses_and_its_public_record_hides_the_components(
        sets, router, pool):
    result = run(contender(ALWAYS_0), contender(SMART, miner="bob"), sets, router, pool)
    assert result.outcome == "lost"
    assert tuple(sorted(result.public())) == tuple(sorted(PUBLIC_FIELDS[LOST]))
    assert result.public()["delta"] < 0
    check_result(result.public(), RULES)
    # the private record keeps everything, for both heads, per item
    private = result.private()
    assert private["challenger"]["per_benchmark"]["math500"]["cached_acc"] == 0.5
    items = private["challenger"]["items"]["math500"]
    assert len(items["eval"]) == 20 and len(items["audit"]) == 10 and len(items["live"]) == 6
    assert items["eval"][0] == {"id": "math500-eval-0", "model": RULES.pool_names[0],
                                "role": "Worker", "correct": True}
    assert private["king"]["per_benchmark"]["math500"]["cached_acc"] == 1.0


@pytest.mark.parametrize(("margin", "outcome"), [
    # the same two heads decided by the margin alone
    (0.0, "king"),
    (0.99, "lost"),
])
def test_the_margin_decides(sets, router, pool, margin, outcome):
    rules = dataclasses.replace(RULES, win_margin=margin)
    result = run(contender(SMART), contender(ALWAYS_0, miner="bob"), sets, router, pool, rules)
    assert result.outcome == outcome


def test_exactly_the_margin_crowns(sets, router, pool):
    first = run(contender(SMART), contender(ALWAYS_0, miner="bob"), sets, router, pool)
    gap = first.public()["composite"] - first.public()["king_composite"]
    rules = dataclasses.replace(RULES, win_margin=round(gap, 12))
    assert run(contender(SMART), contender(ALWAYS_0, miner="bob"), sets, router, pool,
               rules).outcome == "king"


def test_overfit_is_a_rejection_without_live_calls(router, pool):
    sets = make_sets(broken_audit=("mmlu",))
    result = run(contender(ALWAYS_0), contender(SMART, miner="bob"), sets, router, pool)
    assert result.outcome == "rejected"
    assert result.public()["reason"].startswith("gate 5 (overfit): on mmlu")
    assert result.public()["composite"] is None
    assert pool.calls == []
    check_result(result.public(), RULES)


def test_a_head_that_is_never_right_still_gets_a_valid_record(sets, router, pool):
    result = run(contender(ALWAYS_2), None, sets, router, pool)
    math = result.public()["per_benchmark"]["math500"]
    assert (math["cached_acc"], math["live_acc"], math["efficiency"]) == (0.0, 0.0, 0.0)
    check_result(result.public(), RULES)


def test_the_router_is_shared_and_batched(sets, router, pool):
    run(contender(SMART), contender(ALWAYS_0, miner="bob"), sets, router, pool)
    # one cached batch and one live batch per benchmark per head
    assert router.calls == 2 * 2 * len(RULES.benchmarks)


def test_results_are_deterministic(sets, router, pool):
    first = run(contender(SMART), contender(ALWAYS_0, miner="bob"), sets, router, pool)
    again = run(contender(SMART), contender(ALWAYS_0, miner="bob"), sets, router, pool)
    assert first.private() == again.private()
