"""One evaluation with fake collaborators: the measurements, the transitions, the records."""

import dataclasses
import itertools
import re
from datetime import UTC, datetime

import pytest
from evaluation_fakes import (
    ALWAYS_0,
    ALWAYS_2,
    DRAWN,
    RULES,
    SMART,
    STRICT,
    FakePool,
    LinearRouter,
    contender,
    make_sets,
)

from evaluator.evaluate import evaluate, partition
from evaluator.leaderboard import check_result
from evaluator.records import LOST, PUBLIC_FIELDS, Partition
from evaluator.scoring import bench_score, efficiency

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
PRECISION = RULES.disclosure_precision
ALWAYS_1 = {None: 1}  # right on category c1 only: as good as ALWAYS_0, on the other half


def run(challenger, king, sets, router, pool, rules=RULES, drawn=DRAWN):
    return evaluate(challenger, king, sets, router, pool, rules, now=NOW,
                    manifest_hash="f" * 64, drawn=drawn)


def test_first_passing_head_is_crowned_with_the_full_breakdown(sets, router, pool):
    result = run(contender(ALWAYS_0), None, sets, router, pool)
    public = result.public(PRECISION)
    assert public["outcome"] == "king"
    assert public["king_composite"] is None and public["delta"] is None
    assert public["ci95"] is None
    math = public["per_benchmark"]["math500"]
    # always model 0: right on category c0 only, i.e. about half; two live turns each
    assert math["live_acc"] == 0.5 and math["avg_turns"] == 2.0
    assert math["novelty"] == RULES.novelty_without_king
    eff = efficiency(2.0, 0.5, RULES)
    assert math["efficiency"] == pytest.approx(eff)
    assert math["score"] == pytest.approx(bench_score(math["cached_acc"], 0.5, eff, 0.5, 1.0,
                                                      RULES))
    assert public["live_cost_usd"] == pytest.approx(3 * 6 * 2 * 0.001)
    assert public["evaluated_at"] == "2026-11-29T12:00:00Z"
    assert public["partition_commitment"] == DRAWN.commitment
    check_result(public, RULES)


def test_better_challenger_dethrones_and_the_king_is_rescored_on_the_same_items(
        sets, router, pool):
    result = run(contender(SMART), contender(ALWAYS_0, miner="bob", pr=3), sets, router, pool)
    public, private = result.public(PRECISION), result.private(PRECISION)
    assert public["outcome"] == "king"
    # the king played the same live questions in this run, on the same partition
    assert sorted(pool.calls) == sorted([(b, 6) for b in RULES.benchmarks] * 2)
    for bench in RULES.benchmarks:
        # the pool's unscored rest too: graded for the crown test
        for half in ("eval", "audit", "rest"):
            assert ([i["id"] for i in private["king"]["items"][bench][half]]
                    == [i["id"] for i in private["challenger"]["items"][bench][half]])
    assert public["king_composite"] == pytest.approx(private["king"]["composite"])
    assert public["delta"] == pytest.approx(public["composite"] - public["king_composite"])
    # smart is right everywhere, the king on half: the interval lies well above zero
    low, high = public["ci95"]
    assert 0 < low <= public["delta"] <= high
    check_result(public, RULES)


def test_the_log_says_whose_numbers_each_line_gives(sets, router, pool, caplog):
    caplog.set_level("INFO", logger="evaluator.evaluate")
    run(contender(SMART), contender(ALWAYS_0, miner="bob", pr=3), sets, router, pool)
    lines = [r.getMessage() for r in caplog.records if "cached decisions" in r.getMessage()
             or "live questions" in r.getMessage()]
    for who in ("challenger", "king"):
        for bench in RULES.benchmarks:
            assert any(line.startswith(f"{who} {bench}: ") and "cached" in line
                       for line in lines)
            assert any(line.startswith(f"{who} {bench}: ") and "live" in line for line in lines)
    assert len(lines) == 4 * len(RULES.benchmarks)


def test_novelty_is_symmetric_and_cancels(sets, router, pool):
    result = run(contender(SMART), contender(ALWAYS_0, miner="bob"), sets, router, pool)
    private = result.private(PRECISION)
    for bench in RULES.benchmarks:
        mine = private["challenger"]["per_benchmark"][bench]["novelty"]
        theirs = private["king"]["per_benchmark"][bench]["novelty"]
        # smart agrees with the king on c0 (model 0, same role) and differs on c1
        assert mine == theirs == pytest.approx(0.5, abs=0.2)


def test_weaker_challenger_loses_and_its_public_record_hides_the_components(
        sets, router, pool):
    result = run(contender(ALWAYS_0), contender(SMART, miner="bob"), sets, router, pool)
    public = result.public(PRECISION)
    assert result.outcome == "lost"
    assert tuple(sorted(public)) == tuple(sorted(PUBLIC_FIELDS[LOST]))
    assert public["delta"] < 0
    for value in (public["composite"], public["delta"]):
        assert value == round(value, 2)
    # nothing read on the never-published audit: no interval, no test figure
    assert public["ci95"] is None and set(public["crown_test"]) == {"stage", "live_items",
                                                                    "live_sessions"}
    check_result(public, RULES)
    # the private record keeps everything, for both heads, per item, exactly
    private = result.private(PRECISION)
    assert private["delta"] == result.delta and private["partition"] == DRAWN.to_dict()
    items = private["challenger"]["items"]["math500"]
    assert len(items["eval"]) == 20 and len(items["audit"]) == 10 and len(items["live"]) == 6
    assert private["king"]["per_benchmark"]["math500"]["cached_acc"] == 1.0


def test_an_equal_challenger_is_not_crowned_even_without_a_margin(sets, router, pool):
    rules = dataclasses.replace(RULES, win_margin=0.0)
    result = run(contender(ALWAYS_1), contender(ALWAYS_0, miner="bob"), sets, router, pool,
                 rules)
    # the heads differ on every item, yet neither is better: the interval straddles zero
    low, high = result.ci95
    assert low < 0 < high and result.outcome == "lost"


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
    # the margin applies to the crown test's difference (no overfit factor, every item)
    rules = dataclasses.replace(RULES, win_margin=round(first.crown_test["difference"], 12))
    assert run(contender(SMART), contender(ALWAYS_0, miner="bob"), sets, router, pool,
               rules).outcome == "king"


def test_an_undecided_first_stage_plays_the_rest_of_the_live_split(sets, router, pool):
    # stages of 2 and 4 live questions; a first stage that can neither crown nor lose
    rules = dataclasses.replace(RULES, live_first_stage=2, crown_z_first=99.0, lose_z_first=-99.0)
    result = run(contender(SMART), contender(ALWAYS_0, miner="bob"), sets, router, pool, rules)
    assert sorted(pool.calls) == sorted([(b, n) for b in RULES.benchmarks for n in (2, 4)] * 2)
    test = result.public(PRECISION)["crown_test"]
    assert (result.outcome, test["stage"], test["live_items"]) == ("king", 2, 6)
    assert test["live_sessions"] == 2 * len(RULES.benchmarks) * RULES.live_size
    # the private record holds every live question of both stages, once
    live = result.private(PRECISION)["challenger"]["items"]["math500"]["live"]
    assert sorted(q["id"] for q in live) == sorted(i.id for i in sets["math500"]["live"])
    check_result(result.public(PRECISION), rules)


def test_a_decided_first_stage_plays_no_more(sets, router, pool):
    rules = dataclasses.replace(RULES, live_first_stage=2)
    result = run(contender(ALWAYS_1), contender(ALWAYS_0, miner="bob"), sets, router, pool, rules)
    assert result.outcome == "lost" and result.public(PRECISION)["crown_test"]["stage"] == 1
    assert sorted(pool.calls) == sorted([(b, 2) for b in RULES.benchmarks] * 2)
    # which questions make the first stage is drawn from the evaluation's secret seed
    other = Partition(seed="9" * 64, salt="fe" * 16)
    first = {c["id"] for c in result.private(PRECISION)["challenger"]["items"]["mmlu"]["live"]}
    again = run(contender(ALWAYS_1), contender(ALWAYS_0, miner="bob"), sets, router, FakePool(),
                rules, drawn=other)
    assert first != {c["id"] for c in again.private(PRECISION)["challenger"]["items"]["mmlu"]["live"]}


def test_overfit_is_a_rejection_without_live_calls_and_without_the_gap(router, pool):
    sets = make_sets(broken_audit=("mmlu",))
    result = run(contender(SMART), contender(ALWAYS_0, miner="bob"), sets, router, pool, STRICT)
    public = result.public(PRECISION)
    assert result.outcome == "rejected"
    assert public["reason"].startswith("gate 5 (overfit): on mmlu")
    assert f"limit of {STRICT.overfit_reject_gap}" in public["reason"]
    # the gap's digits would tell the audit accuracy: only the rule's number appears
    assert re.findall(r"\d+\.\d+", public["reason"]) == [str(STRICT.overfit_reject_gap)]
    assert public["composite"] is None and pool.calls == []
    check_result(public, RULES)


def test_every_evaluation_draws_a_fresh_partition(sets):
    pool_rows = sets["mmlu"]["pool"]
    first = partition(pool_rows, DRAWN.seed, "mmlu", RULES)
    assert first == partition(pool_rows, DRAWN.seed, "mmlu", RULES)
    other = partition(pool_rows, Partition.draw().seed, "mmlu", RULES)
    assert {r.item.id for r in other["eval"]} != {r.item.id for r in first["eval"]}
    assert sorted(r.item.id for r in other["eval"] + other["rest"]) == sorted(
        r.item.id for r in pool_rows)
    result = evaluate(contender(ALWAYS_0), None, sets, LinearRouter(), FakePool(), RULES, now=NOW)
    assert result.partition is not None and result.partition.seed != DRAWN.seed
    assert result.public(PRECISION)["partition_commitment"] == result.partition.commitment


def test_a_head_that_is_never_right_still_gets_a_valid_record(sets, router, pool):
    result = run(contender(ALWAYS_2), None, sets, router, pool)
    math = result.public(PRECISION)["per_benchmark"]["math500"]
    assert (math["cached_acc"], math["live_acc"], math["efficiency"]) == (0.0, 0.0, 0.0)
    check_result(result.public(PRECISION), RULES)


def test_the_router_is_shared_and_batched(sets, router, pool):
    run(contender(SMART), contender(ALWAYS_0, miner="bob"), sets, router, pool)
    # one cached batch and one live batch per benchmark per head
    assert router.calls == 2 * 2 * len(RULES.benchmarks)


def test_results_are_deterministic(sets, router, pool):
    first = run(contender(SMART), contender(ALWAYS_0, miner="bob"), sets, router, pool)
    again = run(contender(SMART), contender(ALWAYS_0, miner="bob"), sets, router, pool)
    assert first.private(PRECISION) == again.private(PRECISION)


def test_a_new_king_gets_a_router_card_from_public_items_and_its_eval_half(sets, router, pool):
    from evaluation_fakes import train_items

    from evaluator.contenders import public_routing

    challenger, king = contender(SMART), contender(ALWAYS_0, miner="bob", pr=3)
    items = [it for bench in RULES.benchmarks for it in train_items(bench, 10)]
    public = public_routing(challenger, king, router, items)
    result = evaluate(challenger, king, sets, router, pool, RULES, now=NOW,
                      manifest_hash="f" * 64, drawn=DRAWN, public=public)
    card = result.public(PRECISION)["router_card"]
    mix = card["public_items"]["math500"]
    assert mix["items"] == 10
    # the smart head sends category c0 to model 0 and c1 to model 1, as a Worker
    assert mix["by_category"]["c1"]["models"] == {RULES.pool_names[0]: 0.0,
                                                  RULES.pool_names[1]: 1.0,
                                                  RULES.pool_names[2]: 0.0}
    assert mix["by_category"]["c0"]["roles"]["Worker"] == 1.0
    assert "eval_by_category" not in card  # nothing per category of the hidden items
    assert card["live_questions"] == 18
    assert card["cost_per_1k_usd"] == pytest.approx(1000 * 2 * 0.001)
    assert card["agreement_with_previous"] == 0.5  # it picks the king's model on c0 only
    assert card["live_seconds"] == {"median": 3.0, "p95": 3.0}  # two turns of 1.5 s each
    check_result(result.public(PRECISION), RULES)
    # a loss carries no card
    lost = evaluate(king, challenger, sets, router, pool, RULES, now=NOW,
                    manifest_hash="f" * 64, drawn=DRAWN, public=public)
    assert lost.outcome == LOST and "router_card" not in lost.public(PRECISION)


def test_the_challenger_plays_each_live_stage_before_the_king(sets, router, pool):
    """The king's sessions come second, so that, through the evaluation's response cache,
    they replay the challenger's calls wherever the two decide alike: the only sessions whose
    tie is certain."""
    played = []

    class Watching:
        def decide(self, transcripts, theta, reuse=False):
            if not reuse:  # live play; cached items are decided with reuse
                played.append(theta.tobytes())
            return router.decide(transcripts, theta, reuse)

    challenger, king = contender(SMART), contender(ALWAYS_0, miner="bob")
    run(challenger, king, sets, Watching(), pool)
    firsts = [played[0]] + [b for a, b in itertools.pairwise(played) if a != b]
    assert firsts[0] == challenger.theta.tobytes() and king.theta.tobytes() in firsts
