"""The SPEC §8 formulas against hand-computed values, boundaries included."""

import dataclasses

import pytest

from evaluator.rules import OFFICIAL
from evaluator.scoring import (
    bench_score,
    composite,
    crowns,
    efficiency,
    novelty,
    overfit,
    paired_bootstrap,
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


@pytest.mark.parametrize(("challenger", "king", "crowned"), [
    # no king: any passing head takes the crown
    (0.1, None, True),
    # exactly the margin crowns, even where float subtraction falls short of it
    (0.71, 0.69, True),
    (0.12, 0.10, True),
    (0.3, 0.28, True),
    # a hair under the margin, a tie, a loss
    (0.70999, 0.69, False),
    (0.69, 0.69, False),
    (0.5, 0.69, False),
])
def test_margin(challenger, king, crowned):
    assert crowns(challenger, king, OFFICIAL) is crowned


def test_margin_reads_the_rule():
    assert crowns(0.75, 0.69, dataclasses.replace(OFFICIAL, win_margin=0.05))
    assert not crowns(0.73, 0.69, dataclasses.replace(OFFICIAL, win_margin=0.05))


def test_paired_bootstrap_hand_values_and_determinism():
    mine = {"a": [1, 1, 0, 0], "b": [1, 1, 1, 1]}
    king = {"a": [1, 0, 0, 0], "b": [1, 1, 1, 0]}
    delta, (low, high) = paired_bootstrap(mine, king, TWO)
    assert delta == pytest.approx((0.25 + 0.25) / 2)
    assert low <= delta <= high
    assert low >= 0.0 and high <= 0.5  # each item's difference is 0 or +1
    assert paired_bootstrap(mine, king, TWO) == (delta, (low, high))


@pytest.mark.parametrize(("mine", "king", "expected"), [
    # identical heads: no difference, no spread
    ([1, 0, 1], [1, 0, 1], (0.0, (0.0, 0.0))),
    # the challenger always right where the king is always wrong
    ([1, 1, 1], [0, 0, 0], (1.0, (1.0, 1.0))),
    ([0, 0], [1, 1], (-1.0, (-1.0, -1.0))),
])
def test_paired_bootstrap_degenerate(mine, king, expected):
    assert paired_bootstrap({"a": mine, "b": mine}, {"a": king, "b": king}, TWO) == expected
