"""The scoring formulas of SPEC §8: overfit gate, efficiency, novelty, composite, the crown.

Pure functions of numbers and decisions, so the tables in tests/test_scoring.py pin them.
Every threshold and weight is read from the `Competition` passed in. The formulas accept
numpy arrays as well as numbers, so the paired bootstrap scores thousands of resamples
with exactly the arithmetic of the point estimate.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from statistics import NormalDist
from typing import ClassVar

import numpy as np

from evaluator.codec import Record
from evaluator.rules import Competition
from evaluator.types import Decision

# Accuracies are small fractions; a gap or margin equal to a rule in decimal must count as equal.
TOLERANCE = 1e-9
BOOTSTRAP_SEED = 0
CI_LEVEL = 0.95


@dataclass(frozen=True)
class BenchmarkScore(Record):
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


BenchmarkScore.FIELDS = tuple(f.name for f in fields(BenchmarkScore))


@dataclass(frozen=True)
class Overfit:
    """The overfit gate's verdict on one benchmark: the gap, the score factor, a hard reject."""

    gap: float
    penalty: float
    rejected: bool


def accuracy(correct: Sequence[bool]) -> float:
    return float(np.mean(np.asarray(correct, dtype=float))) if len(correct) else 0.0


def penalty(gap, rules: Competition):
    """The overfit factor for a gap: the penalty factor above the penalty gap."""
    return np.where(np.asarray(gap) > rules.overfit_penalty_gap + TOLERANCE,
                    rules.overfit_penalty_factor, 1.0)


def judge_gap(gap: float, rules: Competition) -> Overfit:
    """gap > reject gap rejects; gap > penalty gap multiplies the score by the penalty factor."""
    return Overfit(gap=gap, penalty=float(penalty(gap, rules)),
                   rejected=gap > rules.overfit_reject_gap + TOLERANCE)


def overfit(cached_acc: float, audit_acc: float, rules: Competition) -> Overfit:
    """The gate on the plain gap cached − audit (see `overfit_gap` for the evaluation's)."""
    return judge_gap(cached_acc - audit_acc, rules)


def efficiency(avg_turns, live_acc, rules: Competition):
    """max(0, (max_turns − avg_turns) / (max_turns − 1)) × live_acc."""
    spare = (rules.max_turns - np.asarray(avg_turns)) / (rules.max_turns - 1)
    return np.maximum(0.0, spare) * live_acc


def novelty(decisions: Sequence[Decision], king_decisions: Sequence[Decision] | None,
            rules: Competition) -> float:
    """Share of the first novelty_questions turn-1 decisions on which two heads differ.

    Symmetric: the challenger and the re-scored king carry the same value, so it cancels
    in their difference. Without a king, the rules' fixed value.
    """
    if king_decisions is None:
        return rules.novelty_without_king
    n = min(rules.novelty_questions, len(decisions), len(king_decisions))
    if n == 0:
        return rules.novelty_without_king
    differ = sum(1 for a, b in zip(decisions[:n], king_decisions[:n], strict=True) if a != b)
    return differ / n


def bench_score(cached_acc, live_acc, eff, nov, factor, rules: Competition):
    raw = (rules.weight_cached * cached_acc + rules.weight_live * live_acc
           + rules.weight_efficiency * eff + rules.weight_novelty * nov)
    return raw * factor


def score_benchmark(cached_acc: float, audit_acc: float, live_acc: float, avg_turns: float,
                    nov: float, rules: Competition, gap: float | None = None) -> BenchmarkScore:
    """All components of one benchmark from the measured accuracies, turns and novelty;
    `gap`: the overfit gap (`overfit_gap`), by default cached − audit."""
    eff = float(efficiency(avg_turns, live_acc, rules))
    factor = float(penalty(cached_acc - audit_acc if gap is None else gap, rules))
    return BenchmarkScore(cached_acc=cached_acc, audit_acc=audit_acc, live_acc=live_acc,
                          avg_turns=avg_turns, efficiency=eff, novelty=nov,
                          overfit_penalty=factor,
                          score=float(bench_score(cached_acc, live_acc, eff, nov, factor, rules)))


def composite(scores: Mapping[str, float], rules: Competition) -> float:
    """Mean bench_score over the competition's benchmarks (all must be present)."""
    missing = [b for b in rules.benchmarks if b not in scores]
    if missing:
        raise ValueError(f"no score for benchmark(s) {', '.join(missing)}")
    return float(sum(scores[b] for b in rules.benchmarks) / len(rules.benchmarks))


# ---------------------------------------------------------------- the paired bootstrap

_EMPTY = np.zeros(0)


@dataclass(frozen=True)
class Measured:
    """One head's per-item outcomes on one benchmark: what every component is computed from.

    `eval_best`/`audit_best`/`rest_best`: on the same items, whether the benchmark's best single
    model's cached answer is right (empty: the gap is taken on plain accuracies).
    `rest_correct`: the pool's unscored half, which the overfit gate reads with the eval half
    (empty in a miner's preview). `live_calls`: per live question, what its session called
    (`verdict.session_calls`; empty where unknown), and `live_replayed`: whether every call of
    that session was a replay from the evaluation's response cache (empty: none was), so the
    crown test can tell a certain tie."""

    eval_correct: np.ndarray
    audit_correct: np.ndarray
    live_correct: np.ndarray
    live_turns: np.ndarray
    eval_best: np.ndarray = field(default_factory=lambda: _EMPTY)
    audit_best: np.ndarray = field(default_factory=lambda: _EMPTY)
    rest_correct: np.ndarray = field(default_factory=lambda: _EMPTY)
    live_calls: tuple[str, ...] = ()
    rest_best: np.ndarray = field(default_factory=lambda: _EMPTY)
    live_replayed: tuple[bool, ...] = ()

    @classmethod
    def of(cls, eval_correct: Sequence[bool], audit_correct: Sequence[bool],
           live_correct: Sequence[bool], live_turns: Sequence[float],
           eval_best: Sequence[bool] = (), audit_best: Sequence[bool] = (),
           rest_correct: Sequence[bool] = (), live_calls: Sequence[str] = (),
           rest_best: Sequence[bool] = (), live_replayed: Sequence[bool] = ()) -> Measured:
        return cls(*(np.asarray(v, dtype=float) for v in (eval_correct, audit_correct,
                                                          live_correct, live_turns,
                                                          eval_best, audit_best, rest_correct)),
                   live_calls=tuple(live_calls), rest_best=np.asarray(rest_best, dtype=float),
                   live_replayed=tuple(bool(r) for r in live_replayed))

    def _lead(self, part: str) -> np.ndarray:
        """Per item: the head's correctness minus the best single model's (when given)."""
        mine, best = getattr(self, f"{part}_correct"), getattr(self, f"{part}_best")
        return mine - best if best.size else mine

    def public_lead(self) -> np.ndarray:
        """Per public-dataset item graded (the eval half, then the pool's unscored rest): the
        head's lead over the best single model, what a memoriser could raise."""
        return np.concatenate([self._lead("eval"), self._lead("rest")])

    def gap_margin(self, rules: Competition) -> float:
        """What sampling noise alone makes of the gap at `rules.overfit_confidence`: z times
        the standard error of the difference of the two sets' mean leads."""
        z = NormalDist().inv_cdf(rules.overfit_confidence)
        var = sum(float(np.var(lead, ddof=1)) / lead.size
                  for lead in (self.public_lead(), self._lead("audit")) if lead.size > 1)
        return z * math.sqrt(var)


def overfit_gap(m: Measured, rules: Competition,
                picks: Mapping[str, np.ndarray | None] | None = None):
    """The overfit gate's gap: how much more the head leads the best single model on the pool's
    items (every public-dataset item it is graded on: the eval half and the unscored rest, any
    of which a miner could have memorised) than on the audit items (never published), less
    what noise alone explains (`Measured.gap_margin`), so it is charged only as far as the
    evidence shows it. Relative to the same model on each set, a difference in difficulty
    between the sets punishes nobody. `picks`: bootstrap resamples of the eval and audit
    items (the rest is read whole)."""
    picks = picks or {"eval": None, "audit": None}
    rest = m._lead("rest")
    scored = _means(m._lead("eval"), picks["eval"], 0.0)
    public = (scored * m.eval_correct.size + rest.sum()) / max(1, m.eval_correct.size + rest.size)
    return public - _means(m._lead("audit"), picks["audit"], 0.0) - m.gap_margin(rules)


def _means(values: np.ndarray, picks: np.ndarray | None, empty: float) -> np.ndarray | float:
    if values.size == 0:
        return empty
    return values[picks].mean(axis=-1) if picks is not None else values.mean()


def _score(m: Measured, nov: float, picks: dict[str, np.ndarray | None], rules: Competition):
    cached = _means(m.eval_correct, picks["eval"], 0.0)
    live = _means(m.live_correct, picks["live"], 0.0)
    turns = _means(m.live_turns, picks["live"], float(rules.max_turns))
    return bench_score(cached, live, efficiency(turns, live, rules), nov,
                       penalty(overfit_gap(m, rules, picks), rules), rules)


def paired_resamples(challenger: Mapping[str, Measured], king: Mapping[str, Measured],
                     novelties: Mapping[str, float], rules: Competition,
                     seed: int = BOOTSTRAP_SEED) -> tuple[float, np.ndarray]:
    """(challenger − king) composite, and that difference in each seeded paired resample.

    Within each benchmark the eval, audit and live items are resampled with replacement,
    the same draws for both heads (paired), and every component is recomputed from them
    (the overfit factor included), so the resamples cover all that the composite scores.
    Novelty is the same number for both heads and cancels.
    """
    rng = np.random.default_rng(seed)
    resamples = rules.bootstrap_resamples
    delta, diffs = 0.0, np.zeros(resamples)
    for bench in rules.benchmarks:
        mine, theirs, nov = challenger[bench], king[bench], novelties[bench]
        sizes = {"eval": mine.eval_correct.size, "audit": mine.audit_correct.size,
                 "live": mine.live_correct.size}
        if sizes["eval"] == 0:
            raise ValueError(f"no paired items for {bench}")
        none = dict.fromkeys(sizes)
        delta += float(_score(mine, nov, none, rules) - _score(theirs, nov, none, rules))
        picks = {part: rng.integers(0, n, (resamples, n)) if n else None
                 for part, n in sizes.items()}
        diffs += _score(mine, nov, picks, rules) - _score(theirs, nov, picks, rules)
    n = len(rules.benchmarks)
    return delta / n, diffs / n


def interval(values: np.ndarray) -> tuple[float, float]:
    """The central CI_LEVEL percentile interval of bootstrap values."""
    tail = (1.0 - CI_LEVEL) / 2 * 100
    low, high = np.percentile(values, [tail, 100 - tail])
    return float(low), float(high)


def paired_interval(challenger: Mapping[str, Measured], king: Mapping[str, Measured],
                    novelties: Mapping[str, float], rules: Competition,
                    seed: int = BOOTSTRAP_SEED) -> tuple[float, tuple[float, float]]:
    """(challenger − king) composite with its seeded, paired 95% bootstrap interval
    (see `paired_resamples`)."""
    delta, diffs = paired_resamples(challenger, king, novelties, rules, seed)
    return delta, interval(diffs)
