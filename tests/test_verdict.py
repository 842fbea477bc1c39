"""The verdict function, the one match evaluation, `score` and `fairness` all decide by."""

import dataclasses

import numpy as np
import pytest

from evaluator import simulation
from evaluator.evaluate import HeadRun
from evaluator.explain import explain
from evaluator.loop import ANSWERED, FAILED, LiveOutcome
from evaluator.preview import Played, benchmark_report
from evaluator.records import KING, LOST, REJECTED
from evaluator.rules import OFFICIAL
from evaluator.scoring import Measured
from evaluator.types import Decision
from evaluator.verdict import (
    MORE,
    Z_CAP,
    Evidence,
    components,
    evidence,
    evidence_outcome,
    evidence_reason,
    judge,
    measured,
    overfit_reason,
    published_crowns,
    session_calls,
    through_stage,
    walk_through,
    worked_match,
)

NOVELTY = dict.fromkeys(OFFICIAL.benchmarks, 0.5)


def match(cached, first, rest=(0, 0)):
    return worked_match(cached, first, rest, OFFICIAL)


def first_stage(heads):
    return through_stage(heads, 1, OFFICIAL)


@pytest.mark.parametrize(("cached", "first", "rest", "after_first", "after_last", "reason"), [
    # clearly better: crowned on the first stage's evidence
    ((4, 1), (3, 0), (0, 0), KING, KING, "crowned after live stage 1 of 2"),
    # clearly not better: lost at stage 1, the rest of the live split is never played
    ((2, 3), (0, 1), (0, 0), LOST, LOST, "lost after live stage 1 of 2"),
    # undecided at stage 1; the next 40 questions show it better: crowned at stage 2
    ((5, 3), (1, 0), (6, 0), MORE, KING, "crowned after live stage 2 of 2"),
    # undecided at stage 1; the next 40 do not: lost at stage 2, short of the margin
    ((5, 3), (1, 0), (0, 0), MORE, LOST, "lost after live stage 2 of 2: the difference"),
    # at stage 2 z clears its bar but the difference is short of the margin: lost
    ((6, 3), (0, 0), (1, 0), MORE, LOST, "short of the margin of 0.02"),
])
def test_the_crown_test_stage_by_stage(cached, first, rest, after_first, after_last, reason):
    mine, king = match(cached, first, rest)
    early = judge(first_stage(mine), first_stage(king), NOVELTY, OFFICIAL, stage=1)
    assert early.outcome == after_first
    final = early if after_first != MORE else judge(mine, king, NOVELTY, OFFICIAL, stage=2)
    assert final.outcome == after_last
    assert reason in final.reason
    # what is published says the same (a loss is rounded)
    test = final.evidence.to_dict()
    assert published_crowns(test, OFFICIAL) is (after_last == KING)
    # the published delta is the composites' difference, penalty included
    assert final.delta == pytest.approx(final.composite - final.king_composite)


SPLIT = {"crown_z_first": 4.0, "crown_z_final": 2.5}  # a first bar above the final one


@pytest.mark.parametrize(("rules", "stage", "difference", "z", "outcome", "reason"), [
    # crowned: the difference reaches the margin and z exceeds the stage's bar
    ({}, 1, 0.05, 3.5, KING, "crowned after live stage 1 of 2: the difference +0.0500 reaches "
     "the margin of 0.02 and its z of 3.50 exceeds 3.29"),
    ({}, 2, 0.05, 3.5, KING, "crowned after live stage 2 of 2"),
    # exactly the margin crowns, even where float subtraction falls short of it
    ({}, 2, 0.71 - 0.69, 3.5, KING, "the difference +0.0200 reaches the margin of 0.02"),
    # short of the margin: lost after the last stage, whatever z says
    ({}, 2, 0.0199, 9.0, LOST, "lost after live stage 2 of 2: the difference +0.0199 is short of "
     "the margin of 0.02"),
    # z at the bar is not above it
    ({}, 2, 0.05, 3.29, LOST, "lost after live stage 2 of 2: z of 3.29 does not exceed 3.29"),
    # undecided after the first stage: z between the bars, or the margin short with z above
    # the losing bar; the rest of the live split is played
    ({}, 1, 0.05, 2.0, MORE, "undecided after live stage 1 of 2: z of 2.00 is above 1.0 but not "
     "above 3.29; the rest of the live split is played"),
    ({}, 1, 0.0199, 9.0, MORE, "undecided after live stage 1 of 2: the difference +0.0199 is "
     "short of the margin of 0.02, and z of 9.00 is above 1.0"),
    # lost after the first stage: z at or below the losing bar
    ({}, 1, 0.05, 1.0, LOST, "lost after live stage 1 of 2: z of 1.00 is not above 1.0; the "
     "rest of the live split is not played"),
    # each stage reads its own bar
    (SPLIT, 1, 0.05, 3.0, MORE, "z of 3.00 is above 1.0 but not above 4.0"),
    (SPLIT, 2, 0.05, 3.0, KING, "its z of 3.00 exceeds 2.5"),
])
def test_the_crown_rule(rules, stage, difference, z, outcome, reason):
    """One row per outcome and reason; what is published and explained says the same."""
    rules = dataclasses.replace(OFFICIAL, **rules)
    ev = Evidence(stage, difference, difference, abs(difference / z), z, 20)
    assert evidence_outcome(ev, rules) == outcome
    assert reason in evidence_reason(ev, rules)
    assert published_crowns(ev.to_dict(), rules) is (outcome == KING)
    if outcome == MORE:
        return  # never recorded: the next stage is played
    record = {"miner": "bob", "generation": 2, "pr": 7, "head_sha": "a" * 40,
              "evaluated_at": "2026-11-29T12:00:00Z", "outcome": str(outcome),
              "composite": 0.6 + difference, "king_composite": 0.6, "delta": difference,
              "ci95": [difference - 0.01, difference + 0.01],
              "crown_test": {**ev.to_dict(), "live_sessions": 120}}
    said = explain(record, rules).sentence
    where = f" after live stage {stage} of {len(rules.live_stages)}"
    assert said.startswith(("Crowned" if outcome == KING else "Not crowned") + where)
    if outcome == KING:
        assert f"its z of {z:.2f} clears {rules.crown_bar(stage)}" in said


def test_the_crown_bar_of_each_stage():
    rules = dataclasses.replace(OFFICIAL, **SPLIT)
    assert [rules.crown_bar(stage) for stage in (1, 2, 3)] == [4.0, 2.5, 2.5]


def test_the_scoring_pages_walk_through_is_the_tables_rows():
    """The worked decision the Scoring page prints is decided by the same function, and says
    what the table's rows say."""
    walk = walk_through(OFFICIAL)
    assert walk["stage1"]["outcome"] == MORE
    assert [step["outcome"] for step in walk["stage2"]] == [KING, LOST]
    crowned, lost = walk["stage2"]
    assert crowned["difference"] >= OFFICIAL.win_margin and crowned["z"] > OFFICIAL.crown_z_final
    assert lost["difference"] < OFFICIAL.win_margin


def test_rejected_and_kingless_verdicts():
    mine, king = match((3, 1), (3, 0))
    overfit = {b: dataclasses.replace(m, audit_correct=np.zeros(150)) for b, m in mine.items()}
    rejected = judge(overfit, king, NOVELTY, OFFICIAL)
    assert rejected.outcome == REJECTED and "gate 5 (overfit)" in rejected.reason
    assert rejected.evidence is None and rejected.delta is None
    first = judge(first_stage(mine), None, NOVELTY, OFFICIAL)
    assert first.outcome == KING and first.evidence is None and first.ci95 is None


def test_the_evidence_by_hand():
    rules = dataclasses.replace(OFFICIAL, benchmarks=("a",), overfit_reject_gap=1.0)
    mine = Measured.of([1, 0], [1, 1], [1, 1], [1, 3])
    king = Measured.of([1, 0], [1, 0], [1, 0], [1, 1])
    ev = evidence({"a": mine}, {"a": king}, rules)
    # cached: 0.7 × (1/2 won on the audit; the eval items, drawn from the public dataset, do
    # not count); live: (0.15 + 0.1 × 3/4) × 1 − (0.15 + 0.1 × 1) × 0.5
    assert ev.difference == pytest.approx(0.35 + 0.225 - 0.125)
    # cached variance 0.245 / 2; live, the paired first-order effects ±0.1 and one question
    # won by each side at the mean worth of a live question, (0.225 + 0.25) / 2
    live = (0.1 ** 2 * 2 + 2 * 0.2375 ** 2) / (2 * 1)
    # the test reads the live part weighed by crown_live_weight, in the value and its spread
    weight = rules.crown_live_weight
    assert ev.weighted == pytest.approx(0.35 + weight * (0.225 - 0.125))
    assert ev.se == pytest.approx((0.1225 + weight ** 2 * live) ** 0.5)
    assert ev.z == pytest.approx(ev.weighted / ev.se)
    same = evidence({"a": king}, {"a": king}, rules)
    assert (same.difference, same.weighted, same.z) == (0.0, 0.0, 0.0)


def _played(item, correct, turns, *models, status=ANSWERED, replayed=False):
    return LiveOutcome(item, correct, turns, 0.0, tuple(Decision(m, "Worker") for m in models),
                       status=status, replayed=replayed)


def test_a_session_is_named_by_its_question_and_its_calls():
    assert session_calls(_played("q1", True, 2, "a", "b")) == session_calls(
        _played("q1", False, 2, "a", "b"))  # the grade is not a call
    different = [_played("q2", True, 2, "a", "b"), _played("q1", True, 2, "b", "a"),
                 _played("q1", True, 1, "a")]
    assert session_calls(_played("q1", True, 2, "a", "b")) not in map(session_calls, different)
    # a failed session, or one whose decisions were not kept, is never alike another
    assert session_calls(_played("q1", False, 3, "a", "b", status=FAILED)) == ""
    assert session_calls(LiveOutcome("q1", True, 1, 0.0)) == ""


def test_alike_sessions_are_a_tie_whatever_their_grades():
    """Where both heads made the same calls on a live question, a different grade is the
    provider's or the grader's chance, not routing: the crown test counts a tie there, at the
    two outcomes' mean. Sessions that differ, or whose calls are unknown, count as graded."""
    rules = dataclasses.replace(OFFICIAL, benchmarks=("a",), overfit_reject_gap=1.0)
    cached = [1, 0, 1, 0]
    mine = [_played("q1", True, 1, "x"), _played("q2", True, 2, "x", "y"),
            _played("q3", True, 1, "y")]
    theirs = [_played("q1", False, 1, "x", replayed=True),
              _played("q2", False, 3, "x", "y", "y"), _played("q3", False, 1, "x")]
    ev = evidence({"a": measured(cached, cached, mine, rules)},
                  {"a": measured(cached, cached, theirs, rules)}, rules)
    # q1 is alike (both 1 turn, half right); q2 and q3 differ: won by the challenger
    live = (np.array([0.5, 1, 1]), np.array([1, 2, 1])), (np.array([0.5, 0, 0]),
                                                          np.array([1, 3, 1]))
    worth = [(rules.weight_live + rules.weight_efficiency * (rules.max_turns - t.mean())
              / (rules.max_turns - 1)) * g.mean() for g, t in live]
    assert ev.difference == pytest.approx(worth[0] - worth[1])
    unknown = [dataclasses.replace(o, decisions=()) for o in theirs]
    graded = evidence({"a": measured(cached, cached, mine, rules)},
                      {"a": measured(cached, cached, unknown, rules)}, rules)
    assert graded.difference > ev.difference
    # the same calls everywhere, each of the king's a replay: no difference at all
    again = [dataclasses.replace(o, correct=not o.correct, replayed=True) for o in mine]
    tie = evidence({"a": measured(cached, cached, mine, rules)},
                   {"a": measured(cached, cached, again, rules)}, rules)
    assert (tie.difference, tie.z) == (0.0, 0.0)
    # the same calls but a king's session that was not replayed (the cache had no answer:
    # a call that failed, a run without it): graded as played, never a tie
    fresh = [dataclasses.replace(o, replayed=False) for o in again]
    graded = evidence({"a": measured(cached, cached, mine, rules)},
                      {"a": measured(cached, cached, fresh, rules)}, rules)
    assert graded.difference > 0 and graded.z > 0
    # the stages cut the calls with the grades
    cut = through_stage({"a": measured(cached, cached, mine, rules)}, 1,
                        dataclasses.replace(rules, live_first_stage=2))
    assert len(cut["a"].live_calls) == cut["a"].live_correct.size == len(cut["a"].live_replayed) == 2


def _grades(won: int, n: int = 150, base: int = 90) -> list[int]:
    """A head right on `base` + `won` of n items (the king is right on the first `base`)."""
    return [1] * (base + won) + [0] * (n - base - won)


# (pool lead in items of 150, on the eval half and on the rest; audit lead in items of 150)
MEMORISERS = [
    # a memorised lead on the pool, nothing on the audit: every size of it
    (30, 30, 0), (8, 8, 0), (4, 4, 0), (2, 2, 0),
    # a lead set just where the old limit let the pooled error read it
    (5, 5, 3),
    # the lead memorised on the unscored half only
    (0, 40, 0),
    # an honest head: the same lead on every set
    (10, 10, 10),
]


@pytest.mark.parametrize(("eval_won", "rest_won", "audit_won"), MEMORISERS)
def test_a_lead_on_the_public_pool_decides_no_crown(eval_won, rest_won, audit_won):
    """The pool is drawn from the public dataset, so a memoriser sets its lead there at will;
    whatever that lead, the crown test reads what the never-published audit shows, with the
    audit's own variance: exactly what the same head with no pool lead would get."""
    rules = dataclasses.replace(OFFICIAL, benchmarks=("a",), audit_size=150,
                                overfit_reject_gap=1.0)
    king = {"a": Measured.of(_grades(0), _grades(0), [], [], rest_correct=_grades(0))}
    audit = _grades(audit_won)
    fitted = {"a": Measured.of(_grades(eval_won), audit, [], [], rest_correct=_grades(rest_won))}
    plain = {"a": Measured.of(_grades(audit_won), audit, [], [], rest_correct=_grades(audit_won))}
    memorised, honest = evidence(fitted, king, rules), evidence(plain, king, rules)
    assert (memorised.difference, memorised.se, memorised.z) == pytest.approx(
        (honest.difference, honest.se, honest.z))
    paired = rules.weight_cached * (np.array(audit) - np.array(_grades(0)))
    assert memorised.se == pytest.approx(np.std(paired, ddof=1) / np.sqrt(paired.size))


@pytest.mark.parametrize(("eval_won", "rest_won", "rejected"), [
    (0, 0, False),
    # a lead memorised on the unscored half alone is charged like one on the eval half
    (0, 60, True),
    (60, 0, True),
])
def test_the_overfit_gate_reads_every_public_item_the_head_is_graded_on(eval_won, rest_won,
                                                                         rejected):
    rules = dataclasses.replace(OFFICIAL, benchmarks=("a",))
    head = {"a": Measured.of(_grades(eval_won, base=60), _grades(0, base=60), [], [],
                             rest_correct=_grades(rest_won, base=60))}
    assert (overfit_reason(head, rules) is not None) is rejected


@pytest.mark.parametrize(("mine", "king", "difference", "z"), [
    # identical heads: no difference, no spread, z of 0
    ([1, 0, 1], [1, 0, 1], 0.0, 0.0),
    # the challenger right wherever the king is wrong: 0.7 of cached accuracy, no spread
    ([1, 1, 1], [0, 0, 0], 0.7, Z_CAP),
    ([0, 0], [1, 1], -0.7, -Z_CAP),
])
def test_the_evidence_of_degenerate_heads(mine, king, difference, z):
    rules = dataclasses.replace(OFFICIAL, benchmarks=("a", "b"))
    ev = evidence({b: Measured.of(mine, mine, [], []) for b in rules.benchmarks},
                  {b: Measured.of(king, king, [], []) for b in rules.benchmarks}, rules)
    assert (ev.difference, ev.z) == pytest.approx((difference, z))


def test_the_overfit_penalty_shapes_the_composite_but_does_not_decide_the_crown():
    """Right on the same audit items; the king's eval half happens to be kinder to it, a gap
    over the penalty line."""
    rules = dataclasses.replace(OFFICIAL, benchmarks=("a", "b"))
    fair = {b: Measured.of([1] * 300 + [0] * 100, [1] * 300 + [0] * 100, [1, 0], [2, 2])
            for b in rules.benchmarks}
    lucky = {b: Measured.of([1] * 345 + [0] * 55, [1] * 300 + [0] * 100, [1, 0], [2, 2])
             for b in rules.benchmarks}
    decided = judge(fair, lucky, dict.fromkeys(rules.benchmarks, 0.5), rules, stage=2)
    assert decided.king_scores["a"].overfit_penalty == rules.overfit_penalty_factor
    assert decided.delta > rules.win_margin  # the published composites differ by the penalty
    assert decided.outcome == LOST and decided.evidence.difference == pytest.approx(0.0)


def test_a_failed_session_gives_the_same_components_everywhere():
    """Evaluation, `tinyrouter score` and the fairness simulation count a failed live
    session the same way: graded wrong, and the whole turn budget."""
    rules = OFFICIAL
    outcomes = [LiveOutcome("q1", True, 2, 0.01, status=ANSWERED),
                LiveOutcome("q2", False, 1, 0.0, status=FAILED)]
    correct = [True, False, True, True]
    run = HeadRun(correct={"math500": {"eval": correct, "audit": correct}},
                  live={"math500": outcomes})
    evaluated = components(run.measured("math500", rules), 0.5, rules)
    assert (evaluated.live_acc, evaluated.avg_turns) == (0.5, 3.5)
    assert evaluated.efficiency == pytest.approx(0.1875)

    played = Played([Decision("m", "Worker")] * 4, np.array(correct, dtype=float), live=outcomes)
    scored = benchmark_report(played, None, rules)
    assert scored["live"]["avg_turns"] == evaluated.avg_turns
    assert scored["live"]["efficiency"] == evaluated.efficiency
    assert scored["score"] == pytest.approx(evaluated.score)

    m = measured(correct, correct, outcomes, rules)
    bench = dataclasses.replace(rules, benchmarks=("math500",), eval_size=4, audit_size=4,
                                live_size=2)
    hidden = simulation.Hidden(p_pool={}, p_live={},
                             pool={"math500": np.array([[c] for c in correct * 2], dtype=float)},
                             live={"math500": m.live_correct[:, None]},
                             rerun={"math500": m.live_correct[:, None]})
    head = simulation.Choices(pool={"math500": np.zeros(8, dtype=int)},
                         live={"math500": np.zeros(2, dtype=int)},
                         turns={"math500": m.live_turns})
    halves = {"math500": (np.arange(4), np.arange(4, 8), np.arange(8, 8))}
    simulated = simulation.score(hidden, head, halves, {"math500": 0.5}, bench)
    assert simulated.composite == pytest.approx(evaluated.score)
