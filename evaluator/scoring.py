"""The scoring formulas of SPEC §8: overfit gate, efficiency, novelty, composite, margin, bootstrap.

Pure functions of numbers and decisions, so the tables in tests/test_scoring.py pin them.
Every threshold and weight is read from the `Competition` passed in.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from typing import ClassVar

import numpy as np

from evaluator.rules import Competition
from evaluator.types import Decision

# Accuracies are small fractions; a gap or margin equal to a rule in decimal must count as equal.
TOLERANCE = 1e-9
BOOTSTRAP_SEED = 0
CI_LEVEL = 0.95


@dataclass(frozen=True)
class BenchmarkScore:
    """One head's components on one benchmark, in the public record's field names."""

    cached_acc: float
    audit_acc: float
    live_acc: float
    avg_turns: float
    efficiency: float
    novelty: float
    overfit_penalty: float
    score: float
    FIELDS: ClassVar[tuple[str, ...]]

    def to_dict(self) -> dict[str, float]:
        return asdict(self)


BenchmarkScore.FIELDS = tuple(f.name for f in fields(BenchmarkScore))


@dataclass(frozen=True)
class Overfit:
    """The overfit gate's verdict on one benchmark: the gap, the score factor, a hard reject."""

    gap: float
    penalty: float
    rejected: bool


def accuracy(correct: Sequence[bool]) -> float:
    return float(np.mean(np.asarray(correct, dtype=float))) if len(correct) else 0.0


def overfit(cached_acc: float, audit_acc: float, rules: Competition) -> Overfit:
    """gap > reject gap rejects; gap > penalty gap multiplies the score by the penalty factor."""
    gap = cached_acc - audit_acc
    rejected = gap > rules.overfit_reject_gap + TOLERANCE
    penalised = gap > rules.overfit_penalty_gap + TOLERANCE
    return Overfit(gap=gap, penalty=rules.overfit_penalty_factor if penalised else 1.0,
                   rejected=rejected)


def efficiency(avg_turns: float, live_acc: float, rules: Competition) -> float:
    """max(0, (max_turns − avg_turns) / (max_turns − 1)) × live_acc."""
    spare = (rules.max_turns - avg_turns) / (rules.max_turns - 1)
    return max(0.0, spare) * live_acc


def novelty(decisions: Sequence[Decision], king_decisions: Sequence[Decision] | None,
            rules: Competition) -> float:
    """Share of the first novelty_questions turn-1 decisions that differ from the king's."""
    if king_decisions is None:
        return rules.novelty_without_king
    n = min(rules.novelty_questions, len(decisions), len(king_decisions))
    if n == 0:
        return rules.novelty_without_king
    differ = sum(1 for a, b in zip(decisions[:n], king_decisions[:n], strict=True) if a != b)
    return differ / n


def bench_score(cached_acc: float, live_acc: float, eff: float, nov: float, penalty: float,
                rules: Competition) -> float:
    raw = (rules.weight_cached * cached_acc + rules.weight_live * live_acc
           + rules.weight_efficiency * eff + rules.weight_novelty * nov)
    return raw * penalty


def score_benchmark(cached_acc: float, audit_acc: float, live_acc: float, avg_turns: float,
                    nov: float, rules: Competition) -> BenchmarkScore:
    """All components of one benchmark from the measured accuracies, turns and novelty."""
    eff = efficiency(avg_turns, live_acc, rules)
    penalty = overfit(cached_acc, audit_acc, rules).penalty
    return BenchmarkScore(cached_acc=cached_acc, audit_acc=audit_acc, live_acc=live_acc,
                          avg_turns=avg_turns, efficiency=eff, novelty=nov,
                          overfit_penalty=penalty,
                          score=bench_score(cached_acc, live_acc, eff, nov, penalty, rules))


def composite(scores: Mapping[str, float], rules: Competition) -> float:
    """Mean bench_score over the competition's benchmarks (all must be present)."""
    missing = [b for b in rules.benchmarks if b not in scores]
    if missing:
        raise ValueError(f"no score for benchmark(s) {', '.join(missing)}")
    return float(sum(scores[b] for b in rules.benchmarks) / len(rules.benchmarks))


def crowns(challenger: float, king: float | None, rules: Competition) -> bool:
    """composite ≥ king + win_margin takes the crown; with no king any passing head does."""
    if king is None:
        return True
    return challenger - king >= rules.win_margin - TOLERANCE


def paired_bootstrap(challenger: Mapping[str, Sequence[bool]], king: Mapping[str, Sequence[bool]],
                     rules: Competition,
                     seed: int = BOOTSTRAP_SEED) -> tuple[float, tuple[float, float]]:
    """Mean over benchmarks of (challenger − king) cached accuracy, with a 95% interval.

    Items are resampled with replacement within each benchmark (a stratified, paired
    bootstrap), so each benchmark keeps its equal weight as in the composite.
    """
    rng = np.random.default_rng(seed)
    deltas, samples = [], []
    for bench in rules.benchmarks:
        diff = (np.asarray(challenger[bench], dtype=float)
                - np.asarray(king[bench], dtype=float))
        if diff.shape == (0,):
            raise ValueError(f"no paired items for {bench}")
        deltas.append(diff.mean())
        picks = rng.integers(0, len(diff), size=(rules.bootstrap_resamples, len(diff)))
        samples.append(diff[picks].mean(axis=1))
    boot = np.mean(samples, axis=0)
    tail = (1.0 - CI_LEVEL) / 2 * 100
    low, high = np.percentile(boot, [tail, 100 - tail])
    return float(np.mean(deltas)), (float(low), float(high))
