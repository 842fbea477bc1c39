"""The match, once: from measured outcomes to a verdict, for evaluation, `score` and `fairness`.

`measured` turns a head's graded items and live outcomes into the numbers every component is
computed from; `judge` is the verdict: each side's composite, the overfit gate, the crown
test's evidence (`evidence`, read by `crowns`, the one crown rule) and the outcome with its
reason. It is pure, so the table in tests/test_verdict.py pins it; the Scoring page explains
the crown test.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from evaluator.loop import FAILED, LiveOutcome
from evaluator.records import KING, LOST, REJECTED
from evaluator.rules import Competition
from evaluator.scoring import (
    TOLERANCE,
    BenchmarkScore,
    Measured,
    accuracy,
    composite,
    judge_gap,
    overfit_gap,
    score_benchmark,
)

MORE = "more"  # not an outcome: the evidence is not yet decisive, play the next live stage
Z_CAP = 99.0  # z is finite in every record: a difference with no spread reads as this
OVERFIT_GATE = "gate 5 (overfit)"


# ---------------------------------------------------------------- measured components


def live_turns(outcome: LiveOutcome, rules: Competition) -> int:
    """The turns a live question counts for: a failed session counts the whole budget, so a
    failure never makes a head look efficient."""
    return rules.max_turns if outcome.status == FAILED else outcome.n_turns


def session_calls(outcome: LiveOutcome) -> str:
    """What one live session called, turn by turn (its item, and each decision's model and
    role): two heads' sessions with the same calls made the same decisions on the same
    question. A failed session, or one whose decisions were not kept, reads as empty: never
    alike."""
    if outcome.status == FAILED or not outcome.decisions:
        return ""
    return json.dumps([outcome.item_id, *([d.model, d.role] for d in outcome.decisions)])


def measured(eval_correct: Sequence[bool], audit_correct: Sequence[bool],
             live: Sequence[LiveOutcome], rules: Competition, eval_best: Sequence[bool] = (),
             audit_best: Sequence[bool] = (), rest_correct: Sequence[bool] = (),
             rest_best: Sequence[bool] = ()) -> Measured:
    """One head's numbers on one benchmark: its cached grades (and the best single model's on
    the same items), and its live outcomes, each live question's grade, counted turns
    (`live_turns`), calls (`session_calls`) and whether each was replayed whole."""
    return Measured.of(eval_correct, audit_correct, [o.correct for o in live],
                       [live_turns(o, rules) for o in live], eval_best, audit_best, rest_correct,
                       [session_calls(o) for o in live], rest_best,
                       [o.replayed for o in live])


def components(m: Measured, nov: float, rules: Competition) -> BenchmarkScore:
    """Every published component of one benchmark from what was measured (SPEC §8). With no
    audit items (a miner's preview) there is no overfit gap: the audit accuracy is the
    cached one."""
    avg_turns = float(m.live_turns.mean()) if m.live_turns.size else float(rules.max_turns)
    cached = accuracy(m.eval_correct)
    audit = accuracy(m.audit_correct) if m.audit_correct.size else cached
    return score_benchmark(cached_acc=cached, audit_acc=audit, live_acc=accuracy(m.live_correct),
                           avg_turns=avg_turns, nov=nov, rules=rules,
                           gap=float(overfit_gap(m, rules)) if m.audit_correct.size else 0.0)


# ---------------------------------------------------------------- the evidence


@dataclass(frozen=True)
class Evidence:
    """The crown test after a stage: the difference the margin reads, the weighted difference
    the test reads (its live part weighed by `crown_live_weight`), that one's standard error,
    z, and the live questions per benchmark it has seen. `difference_se`: the standard error
    of the difference itself, for its published interval."""

    stage: int
    difference: float
    weighted: float
    se: float
    z: float
    live_items: int
    difference_se: float = 0.0

    def to_dict(self) -> dict[str, float | int]:
        return {"stage": self.stage, "difference": self.difference, "weighted": self.weighted,
                "se": self.se, "z": self.z, "live_items": self.live_items}


def _mean_and_variance(values: np.ndarray) -> tuple[float, float]:
    return float(values.mean()), float(values.var(ddof=1)) / values.size if values.size > 1 else 0.0


def _cached_evidence(mine: Measured, theirs: Measured,
                     rules: Competition) -> tuple[float, float]:
    """(difference, its variance) of the cached accuracy, paired over the audit items.

    The pool comes from the public dataset, so a challenger may have collected its answers and
    set its lead there at will; the audit items were never published. Whatever a rule did with
    the pool's lead, a memoriser could choose that lead to suit it, so no rule reading the pool
    crowns an honest head more often than the audit alone without crowning some memoriser more
    often than the bar allows (the Scoring page): the crown reads the audit. Without audit
    items (a miner's preview), the pool's items are all there is.
    """
    def paired(part: str) -> np.ndarray:
        return rules.weight_cached * (getattr(mine, part) - getattr(theirs, part))

    private = paired("audit_correct")
    if private.size:
        return _mean_and_variance(private)
    return _mean_and_variance(np.concatenate([paired("eval_correct"), paired("rest_correct")]))


@dataclass(frozen=True)
class _Part:
    """One benchmark's share of the evidence: the cached and the live part of the difference,
    each with its variance."""

    cached: float
    cached_var: float
    live: float = 0.0
    live_var: float = 0.0


def _alike(mine: Measured, theirs: Measured) -> np.ndarray:
    """Per live question, whether the tie is certain: the two heads' sessions made the same
    calls, and every call of the king's (`theirs`) was a replay from the response cache, so
    it saw what the challenger's session saw."""
    n = mine.live_correct.size
    if not len(mine.live_calls) == len(theirs.live_calls) == len(theirs.live_replayed) == n:
        return np.zeros(n, dtype=bool)
    return np.array([bool(a) and a == b and replayed for a, b, replayed in zip(
        mine.live_calls, theirs.live_calls, theirs.live_replayed, strict=True)], dtype=bool)


def _live_pair(mine: Measured, theirs: Measured
               ) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """Each head's live grades and turns as the crown test reads them: on a question where
    the tie is certain (`_alike`), both heads take the mean of the two outcomes. The sessions
    were the same, call for call and reply for reply, so any difference there is the grader's
    chance (a solution's timing), not routing; the level both share is kept."""
    same = _alike(mine, theirs)
    grade = (mine.live_correct + theirs.live_correct) / 2
    turns = (mine.live_turns + theirs.live_turns) / 2

    def read(m: Measured) -> tuple[np.ndarray, np.ndarray]:
        return np.where(same, grade, m.live_correct), np.where(same, turns, m.live_turns)

    return read(mine), read(theirs)


def _benchmark_evidence(mine: Measured, theirs: Measured, rules: Competition) -> _Part:
    """One benchmark's score difference without the overfit factor, in its cached and live
    parts."""
    diff, var = _cached_evidence(mine, theirs, rules)
    if not mine.live_correct.size:
        return _Part(diff, var)
    span = rules.max_turns - 1
    parts, units = [], []
    for live, turns in _live_pair(mine, theirs):
        spare = (rules.max_turns - turns.mean()) / span
        value = (rules.weight_live + rules.weight_efficiency * spare) * live.mean()
        # each item's first-order effect on value (the delta method)
        influence = ((rules.weight_live + rules.weight_efficiency * spare)
                     * (live - live.mean())
                     - rules.weight_efficiency * live.mean() * (turns - turns.mean()) / span)
        parts.append((value, influence))
        units.append(rules.weight_live + rules.weight_efficiency * spare)
    (mine_value, mine_infl), (their_value, their_infl) = parts
    paired, n = mine_infl - their_infl, mine_infl.size
    # plus one question won by each side: with few live questions on which the heads' grades
    # differ, the spread they show alone understates the next draw's
    unit = float(np.mean(units))
    live_var = (float(np.sum(paired ** 2)) + 2 * unit ** 2) / (n * max(1, n - 1))
    return _Part(diff, var, mine_value - their_value, live_var)


def evidence(challenger: Mapping[str, Measured], king: Mapping[str, Measured],
             rules: Competition, stage: int = 1) -> Evidence:
    """The crown test's difference, weighted difference, standard error and z over the rules'
    benchmarks."""
    parts = [_benchmark_evidence(challenger[b], king[b], rules) for b in rules.benchmarks]
    n, weight = len(rules.benchmarks), rules.crown_live_weight
    difference = sum(p.cached + p.live for p in parts) / n
    weighted = sum(p.cached + weight * p.live for p in parts) / n
    se = math.sqrt(sum(p.cached_var + weight ** 2 * p.live_var for p in parts)) / n
    if se > 0:
        z = max(-Z_CAP, min(Z_CAP, weighted / se))
    else:
        z = Z_CAP if weighted > TOLERANCE else -Z_CAP if weighted < -TOLERANCE else 0.0
    return Evidence(stage, float(difference), float(weighted), se, float(z),
                    min(challenger[b].live_correct.size for b in rules.benchmarks),
                    math.sqrt(sum(p.cached_var + p.live_var for p in parts)) / n)


def reaches_margin(difference: float, rules: Competition) -> bool:
    """Whether the crown test's difference reaches `win_margin`."""
    return difference >= rules.win_margin - TOLERANCE


def crowns(stage: int, difference: float, z: float, rules: Competition) -> bool:
    """The crown rule: the difference reaches the margin and z exceeds the stage's bar."""
    return reaches_margin(difference, rules) and z > rules.crown_bar(stage)


def evidence_outcome(ev: Evidence, rules: Competition) -> str:
    """KING, LOST or MORE for the evidence after its stage."""
    if crowns(ev.stage, ev.difference, ev.z, rules):
        return KING
    if ev.stage >= len(rules.live_stages) or ev.z <= rules.lose_z_first:
        return LOST
    return MORE


def published_crowns(test: Mapping[str, float], rules: Competition) -> bool:
    """Whether a published crown test (`Evidence.to_dict`) crowns."""
    return crowns(int(test["stage"]), test["difference"], test["z"], rules)


# ---------------------------------------------------------------- the verdict


@dataclass(frozen=True)
class Verdict:
    """What one match decided: the outcome (KING, LOST, REJECTED, or MORE before the last
    stage), its reason, each side's components and composite, the published difference of the
    composites and the crown test's evidence (None without a king or when rejected)."""

    outcome: str
    reason: str
    scores: dict[str, BenchmarkScore]
    composite: float
    king_scores: dict[str, BenchmarkScore] | None = None
    king_composite: float | None = None
    evidence: Evidence | None = None

    @property
    def delta(self) -> float | None:
        return None if self.king_composite is None else self.composite - self.king_composite

    @property
    def ci95(self) -> tuple[float, float] | None:
        """The normal 95% interval of the crown test's difference (not what z tests: that is
        the weighted difference, over its own standard error)."""
        if self.evidence is None:
            return None
        half = 1.959964 * self.evidence.difference_se
        return self.evidence.difference - half, self.evidence.difference + half


def overfit_reason(challenger: Mapping[str, Measured], rules: Competition) -> str | None:
    """The reason a miner reads when the eval/audit gap on some benchmark is too wide.

    It names the benchmark and the limit, never the gap: its digits would give away how the
    head does on the hidden audit half.
    """
    for bench in rules.benchmarks:
        m = challenger[bench]
        if m.audit_correct.size and judge_gap(overfit_gap(m, rules), rules).rejected:
            return (f"{OVERFIT_GATE}: on {bench} the head leads the best single model on this "
                    f"evaluation's eval items (drawn from the public dataset) by more than on "
                    f"the audit items (never published), beyond the limit of "
                    f"{rules.overfit_reject_gap}; it fits known questions, not the task")
    return None


def _composite(side: Mapping[str, Measured], novelties: Mapping[str, float],
               rules: Competition) -> tuple[dict[str, BenchmarkScore], float]:
    scores = {b: components(side[b], novelties[b], rules) for b in rules.benchmarks}
    return scores, composite({b: s.score for b, s in scores.items()}, rules)


def evidence_reason(ev: Evidence, rules: Competition) -> str:
    """Why the evidence decides what `evidence_outcome` says, with the figures it read."""
    outcome = evidence_outcome(ev, rules)
    where = f"after live stage {ev.stage} of {len(rules.live_stages)}"
    bar, lose, z = rules.crown_bar(ev.stage), rules.lose_z_first, f"{ev.z:.2f}"
    margin = f"the difference {ev.difference:+.4f}"
    if outcome == KING:
        return (f"crowned {where}: {margin} reaches the margin of {rules.win_margin} and its z "
                f"of {z} exceeds {bar}")
    short = not reaches_margin(ev.difference, rules)
    if outcome == MORE:
        why = (f"{margin} is short of the margin of {rules.win_margin}, and z of {z} is above "
               f"{lose}" if short else f"z of {z} is above {lose} but not above {bar}")
        return f"undecided {where}: {why}; the rest of the live split is played"
    if ev.stage < len(rules.live_stages):
        return f"lost {where}: z of {z} is not above {lose}; the rest of the live split is not played"
    why = (f"{margin} is short of the margin of {rules.win_margin}" if short
           else f"z of {z} does not exceed {bar}")
    return f"lost {where}: {why}"


def judge(challenger: Mapping[str, Measured], king: Mapping[str, Measured] | None,
          novelties: Mapping[str, float], rules: Competition, stage: int = 1) -> Verdict:
    """The verdict on a challenger, measured on the same items as the king (None: no king).

    `stage` is the live stage the measurements end with (1 until the rest of the live split
    is played); before the last stage the outcome may be MORE. Novelty is the same number for
    both heads and cancels.
    """
    scores, mine = _composite(challenger, novelties, rules)
    reason = overfit_reason(challenger, rules)
    if reason is not None:
        return Verdict(REJECTED, reason, scores, mine)
    if king is None:
        return Verdict(KING, "crowned: the first head that passes the gates", scores, mine)
    king_scores, theirs = _composite(king, novelties, rules)
    ev = evidence(challenger, king, rules, stage)
    return Verdict(evidence_outcome(ev, rules), evidence_reason(ev, rules), scores, mine,
                   king_scores, theirs, ev)


# ---------------------------------------------------------------- a worked match


def _graded(right: int, won: int, lost: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(challenger, king) grades on n items: the king right on the first `right`; the
    challenger wrong on the first `lost` of them and right on the `won` after them."""
    king = np.zeros(n)
    king[:right] = 1
    mine = king.copy()
    mine[:lost] = 0
    mine[right:right + won] = 1
    return mine, king


def worked_match(cached: tuple[int, int], first: tuple[int, int], rest: tuple[int, int],
                 rules: Competition, turns: float = 2.0
                 ) -> tuple[dict[str, Measured], dict[str, Measured]]:
    """(challenger, king) on every benchmark for the Scoring page's walk-through and the
    verdict's test table: the king right on 60 % of each set; the challenger right on
    `cached` = (won, lost) more and fewer questions than the king in every `eval_size` cached
    questions (the eval half, the pool's rest, and the audit in proportion to its size: the
    same lead on each set, so the audit confirms the pool's), and likewise on the first live
    stage (`first`) and the rest of the live split (`rest`); both take `turns` turns on every
    live question."""
    def scaled(count: int, n: int) -> int:
        return round(count * n / rules.eval_size)

    sets = {part: _graded(round(0.6 * n), *(scaled(c, n) for c in cached), n) for part, n in (
        ("eval", rules.eval_size), ("audit", rules.audit_size),
        ("rest", rules.pool_size - rules.eval_size))}
    first_n = rules.live_stages[0]
    stages = [_graded(first_n // 2, *first, first_n)]
    if rules.live_size > first_n:
        later = rules.live_size - first_n
        stages.append(_graded(later // 2, *rest, later))
    live_turns = np.full(rules.live_size, turns)
    heads = tuple(
        Measured(sets["eval"][side], sets["audit"][side],
                 np.concatenate([stage[side] for stage in stages]), live_turns,
                 rest_correct=sets["rest"][side])
        for side in (0, 1))
    return dict.fromkeys(rules.benchmarks, heads[0]), dict.fromkeys(rules.benchmarks, heads[1])


def through_stage(heads: Mapping[str, Measured], stage: int, rules: Competition
                  ) -> dict[str, Measured]:
    """The heads' measurements up to the end of live stage `stage`."""
    n = sum(rules.live_stages[:stage])
    return {b: dataclasses.replace(m, live_correct=m.live_correct[:n], live_turns=m.live_turns[:n],
                                   live_calls=m.live_calls[:n],
                                   live_replayed=m.live_replayed[:n])
            for b, m in heads.items()}


def walk_through(rules: Competition, cached: tuple[int, int] = (5, 3),
                 first: tuple[int, int] = (1, 0),
                 later: Sequence[tuple[int, int]] = ((6, 0), (0, 0))) -> dict[str, object]:
    """The Scoring page's worked decision, decided by `judge`: the evidence after stage 1, and
    after stage 2 for each outcome of the rest of the live split in `later`."""
    novelties = dict.fromkeys(rules.benchmarks, rules.novelty_without_king)

    def step(heads: tuple[dict[str, Measured], dict[str, Measured]], stage: int
             ) -> dict[str, object]:
        mine, king = (through_stage(h, stage, rules) for h in heads)
        decided = judge(mine, king, novelties, rules, stage=stage)
        ev = decided.evidence
        assert ev is not None  # a king was given
        return {"outcome": str(decided.outcome), **ev.to_dict(), "bar": rules.crown_bar(stage),
                "reaches_margin": reaches_margin(ev.difference, rules)}

    return {"cached": cached, "first": first,
            "stage1": step(worked_match(cached, first, (0, 0), rules), 1),
            "stage2": [{"later": rest, **step(worked_match(cached, first, rest, rules), 2)}
                       for rest in later]}
