"""The SPEC §8 formulas against hand-computed values, boundaries included."""

import dataclasses

import numpy as np
import pytest

from evaluator.rules import OFFICIAL
from evaluator.scoring import (
    Measured,
    bench_score,
    composite,
    efficiency,
    judge_gap,
    novelty,
    overfit,
    overfit_gap,
    paired_interval,
    score_benchmark,
)
from evaluator.types import Decision

TWO = dataclasses.replace(OFFICIAL, benchmarks=("a", "b"))


@pytest.mark.parametrize(("avg_turns", "live_acc", "expected"), [
    # one turn is the most efficient
    (1.0, 1.0, 1.0),
    (1.0, 0.5, 0.5),
    # all five turns earn nothing, however accurate
    (5.0, 1.0, 0.0),
    # in between
    (3.0, 0.5, 0.25),
    (2.4, 0.75, 0.4875),
    # no live accuracy, no efficiency
    (1.0, 0.0, 0.0),
    (2.0, 0.0, 0.0),
])
def test_efficiency(avg_turns, live_acc, expected):
    assert efficiency(avg_turns, live_acc, OFFICIAL) == pytest.approx(expected)


def test_efficiency_reads_max_turns_from_rules():
    assert efficiency(3.0, 1.0, dataclasses.replace(OFFICIAL, max_turns=3)) == 0.0


@pytest.mark.parametrize(("cached", "audit", "penalty", "rejected"), [
    # no gap or a negative one
    (0.80, 0.80, 1.0, False),
    (0.70, 0.90, 1.0, False),
    # the penalty boundary: exactly 0.08 is allowed (0.88 − 0.80 is 0.0800000…07 in floats)
    (0.88, 0.80, 1.0, False),
    (0.8801, 0.80, 0.85, False),
    # the reject boundary: exactly 0.15 is penalised, above it is rejected
    (0.95, 0.80, 0.85, False),
    (0.9501, 0.80, 0.85, True),
    (1.0, 0.5, 0.85, True),
])
def test_overfit_gate(cached, audit, penalty, rejected):
    verdict = overfit(cached, audit, OFFICIAL)
    assert (verdict.penalty, verdict.rejected) == (penalty, rejected)


def items(n_right: int, n: int = 100) -> list[int]:
    return [1] * n_right + [0] * (n - n_right)


@pytest.mark.parametrize(("head", "best", "charged", "penalty", "rejected"), [
    # (eval, audit) items right out of 100, for the head and for the best single model
    # a harder audit costs the head nothing when it leads the best model there as much
    ((90, 60), (70, 40), False, 1.0, False),
    # a head that fits the public items: far ahead on them, level on the unseen audit
    ((100, 60), (60, 60), True, 0.85, True),
    # a lead lost on the audit, yet within what the audit's noise explains: not charged
    ((78, 75), (60, 60), False, 1.0, False),
])
def test_the_overfit_gap_is_relative_and_charged_beyond_the_noise(head, best, charged, penalty,
                                                                   rejected):
    m = Measured.of(items(head[0]), items(head[1]), [], [], items(best[0]), items(best[1]))
    gap = overfit_gap(m, OFFICIAL)
    plain = (head[0] - best[0] - head[1] + best[1]) / 100
    assert gap == pytest.approx(plain - m.gap_margin(OFFICIAL)) and m.gap_margin(OFFICIAL) > 0
    assert bool(gap > 0) is charged
    verdict = judge_gap(gap, OFFICIAL)
    assert (verdict.penalty, verdict.rejected) == (penalty, rejected)


A, B = Decision("m1", "Worker"), Decision("m2", "Thinker")


@pytest.mark.parametrize(("mine", "king", "expected"), [
    # no king: the rule's fixed value
    ([A] * 10, None, 0.5),
    # same as the king, all different, one in five different
    ([A] * 10, [A] * 10, 0.0),
    ([A] * 10, [B] * 10, 1.0),
    ([A] * 8 + [B] * 2, [A] * 10, 0.2),
    # only the first 50 questions count
    ([A] * 50 + [B] * 10, [A] * 60, 0.0),
    ([B] * 25 + [A] * 35, [A] * 60, 0.5),
    # the role matters as much as the model
    ([Decision("m1", "Worker")], [Decision("m1", "Verifier")], 1.0),
])
def test_novelty(mine, king, expected):
    assert novelty(mine, king, OFFICIAL) == pytest.approx(expected)


def test_novelty_without_king_reads_the_rule():
    assert novelty([A], None, dataclasses.replace(OFFICIAL, novelty_without_king=0.3)) == 0.3


@pytest.mark.parametrize(("cached", "live", "eff", "nov", "penalty", "expected"), [
    # 0.7·0.81 + 0.15·0.75 + 0.10·0.4875 + 0.05·0.32
    (0.81, 0.75, 0.4875, 0.32, 1.0, 0.74425),
    (0.81, 0.75, 0.4875, 0.32, 0.85, 0.6326125),
    # perfect and empty
    (1.0, 1.0, 1.0, 1.0, 1.0, 1.0),
    (0.0, 0.0, 0.0, 0.5, 1.0, 0.025),
])
def test_bench_score(cached, live, eff, nov, penalty, expected):
    assert bench_score(cached, live, eff, nov, penalty, OFFICIAL) == pytest.approx(expected)


def test_score_benchmark_chains_the_formulas():
    score = score_benchmark(cached_acc=0.9, audit_acc=0.8, live_acc=0.5, avg_turns=3.0, nov=0.5,
                            rules=OFFICIAL)
    # gap 0.1 > 0.08: penalised; efficiency (5−3)/4·0.5 = 0.25
    expected = (0.7 * 0.9 + 0.15 * 0.5 + 0.1 * 0.25 + 0.05 * 0.5) * 0.85
    assert (score.efficiency, score.overfit_penalty) == (0.25, 0.85)
    assert score.score == pytest.approx(expected)


def test_composite_is_the_mean_over_the_benchmarks():
    assert composite({"a": 0.5, "b": 0.7}, TWO) == pytest.approx(0.6)
    with pytest.raises(ValueError, match="b"):
        composite({"a": 0.5}, TWO)


def measured(eval_correct, audit=None, live=None, turns=None):
    audit = eval_correct if audit is None else audit
    live = [] if live is None else live
    return Measured.of(eval_correct, audit, live, turns if turns is not None else [2] * len(live))


def composite_of(m, nov, rules):
    score = score_benchmark(float(np.mean(m.eval_correct)), float(np.mean(m.audit_correct)),
                            float(np.mean(m.live_correct)) if m.live_correct.size else 0.0,
                            float(np.mean(m.live_turns)) if m.live_turns.size else rules.max_turns,
                            nov, rules, gap=float(overfit_gap(m, rules)))
    return score.score


def test_the_interval_covers_every_component_and_its_delta_is_the_composites():
    rng = np.random.default_rng(3)
    mine = {b: measured(rng.integers(0, 2, 40), rng.integers(0, 2, 40), rng.integers(0, 2, 10),
                        rng.integers(1, 6, 10)) for b in ("a", "b")}
    king = {b: measured(rng.integers(0, 2, 40), rng.integers(0, 2, 40), rng.integers(0, 2, 10),
                        rng.integers(1, 6, 10)) for b in ("a", "b")}
    nov = {"a": 0.3, "b": 0.6}
    delta, (low, high) = paired_interval(mine, king, nov, TWO)
    expected = np.mean([composite_of(mine[b], nov[b], TWO) - composite_of(king[b], nov[b], TWO)
                        for b in ("a", "b")])
    assert delta == pytest.approx(expected)
    assert low <= delta <= high
    assert paired_interval(mine, king, nov, TWO) == (delta, (low, high))  # seeded


@pytest.mark.parametrize(("mine", "king", "expected"), [
    # identical heads: no difference, no spread
    ([1, 0, 1], [1, 0, 1], (0.0, (0.0, 0.0))),
    # the challenger always right where the king is always wrong: 0.7 of cached accuracy
    ([1, 1, 1], [0, 0, 0], (0.7, (0.7, 0.7))),
    ([0, 0], [1, 1], (-0.7, (-0.7, -0.7))),
])
def test_the_interval_of_degenerate_heads(mine, king, expected):
    delta, (low, high) = paired_interval({"a": measured(mine), "b": measured(mine)},
                                         {"a": measured(king), "b": measured(king)},
                                         {"a": 0.5, "b": 0.5}, TWO)
    assert (delta, low, high) == pytest.approx((expected[0], *expected[1]))


def test_the_audit_half_moves_the_interval():
    """The same cached answers; the king's audit half gives it the overfit penalty."""
    fair = {b: measured([1] * 30 + [0] * 10, [1] * 40) for b in ("a", "b")}
    penalised = {b: measured([1] * 30 + [0] * 10, [1] * 5 + [0] * 35) for b in ("a", "b")}
    delta, (low, _) = paired_interval(fair, penalised, {"a": 0.5, "b": 0.5}, TWO)
    assert delta > 0 and low > 0
