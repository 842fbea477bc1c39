"""A head scored the way the evaluator would, on public rows a miner has: `tinyrouter score`.

The rows are the miner's collected training data: for a training run, the share it kept out
of training (`holdout.json`), with the rows it fitted for the fit gap; for a submission folder
or a weights file, the rows named by `--data` (it may have seen them). Each head's turn-1
decision picks a model whose graded answer is the row's, as cached accuracy does in an
evaluation; the components and the comparison with the king are `evaluator.verdict`'s, the
evaluator's own. Live accuracy and efficiency are measured only on request, with real
(metered) calls.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from evaluator.advisories import routing_advisories, weight_advisories
from evaluator.baselines import gap_closed, simplest_routers
from evaluator.heads import Head
from evaluator.loop import LiveOutcome, LiveRunner, coordinator_transcript
from evaluator.records import KING
from evaluator.rules import Competition
from evaluator.scoring import BOOTSTRAP_SEED, Measured, composite, interval, novelty, overfit
from evaluator.types import AnsweredItem, Decision
from evaluator.verdict import components, judge, measured, published_crowns

log = logging.getLogger(__name__)


@dataclass
class Played:
    """One head on one benchmark's rows: its decisions, their grades, and any live play."""

    decisions: list[Decision]
    correct: np.ndarray
    fit_correct: np.ndarray | None = None  # on the rows it was trained on (a run only)
    live: list[LiveOutcome] = field(default_factory=list)

    def measured(self, rules: Competition) -> Measured:
        # the held-out rows are the eval half; no audit half: the fit gap is reported apart
        return measured(self.correct, [], self.live, rules)


def by_benchmark(rows: Sequence[AnsweredItem], rules: Competition) -> dict[str, list[AnsweredItem]]:
    grouped: dict[str, list[AnsweredItem]] = {}
    for row in rows:
        grouped.setdefault(row.item.benchmark, []).append(row)
    return {b: grouped[b] for b in rules.benchmarks if b in grouped}


def play_rows(router: Any, head: Head, rows: Sequence[AnsweredItem]) -> tuple[list[Decision],
                                                                           np.ndarray]:
    transcripts = [coordinator_transcript(row.item.prompt, []) for row in rows]
    decisions = router.decide(transcripts, head.theta, reuse=True)
    correct = np.array([row.answers[d.model].correct for row, d in zip(rows, decisions,
                                                                       strict=True)], dtype=float)
    return decisions, correct


def bootstrap_mean(values: np.ndarray, rules: Competition, seed: int = BOOTSTRAP_SEED
                   ) -> tuple[float, float]:
    picks = np.random.default_rng(seed).integers(0, len(values),
                                                 (rules.bootstrap_resamples, len(values)))
    return interval(values[picks].mean(axis=1))


def measure(router: Any, head: Head, held: dict[str, list[AnsweredItem]],
            fitted: dict[str, list[AnsweredItem]] | None) -> dict[str, Played]:
    played = {}
    for bench, rows in held.items():
        decisions, correct = play_rows(router, head, rows)
        fit = None
        if fitted and fitted.get(bench):
            fit = play_rows(router, head, fitted[bench])[1]
        played[bench] = Played(decisions, correct, fit)
    return played


def benchmark_report(mine: Played, theirs: Played | None, rules: Competition) -> dict[str, Any]:
    cached = float(mine.correct.mean())
    nov = novelty(mine.decisions, None if theirs is None else theirs.decisions, rules)
    report: dict[str, Any] = {"rows": len(mine.correct), "cached_acc": cached,
                              "cached_ci95": list(bootstrap_mean(mine.correct, rules)),
                              "novelty": nov}
    if mine.fit_correct is not None:
        fit = float(mine.fit_correct.mean())
        verdict = overfit(fit, cached, rules)
        report["fit"] = {"rows": len(mine.fit_correct), "cached_acc": fit, "gap": verdict.gap,
                         "over_penalty_line": verdict.penalty < 1.0,
                         "over_reject_line": verdict.rejected}
    cached_part = rules.weight_cached * cached + rules.weight_novelty * nov
    report["cached_part"] = cached_part
    if mine.live:
        parts = components(mine.measured(rules), nov, rules)
        report.update(live={"questions": len(mine.live), "live_acc": parts.live_acc,
                            "avg_turns": parts.avg_turns, "efficiency": parts.efficiency,
                            "cost_usd": float(sum(o.cost_usd for o in mine.live))},
                      score=parts.score)
    return report


def score_report(head: Head, held: dict[str, list[AnsweredItem]],
                 fitted: dict[str, list[AnsweredItem]] | None, router: Any, rules: Competition,
                 king: Head | None = None, run_live: LiveRunner | None = None,
                 live_questions: int = 0,
                 unseen: dict[str, list[AnsweredItem]] | None = None) -> dict[str, Any]:
    """Everything `tinyrouter score` prints: per benchmark, the composite, and with a king the
    paired comparison and whether the crown rule would hold. `unseen`: the rows of `held`
    the king never trained on either (its receipt says which), on every benchmark; the
    comparison is then made on them alone, with nothing leaning either way."""
    benches = [b for b in rules.benchmarks if b in held]
    rows = sum(len(held[b]) for b in benches) + sum(len(v) for v in (fitted or {}).values())
    log.info("encoding %d rows for %s (the first pass through the encoder is the slow part)",
             rows, head.label)
    mine = measure(router, head, held, fitted)
    paired = held if king is None or not unseen else {b: unseen[b] for b in benches}
    mine_paired = mine if paired is held else measure(router, head, paired, None)
    if king is not None:
        log.info("scoring %s on the same rows", king.label)
    theirs = measure(router, king, paired, None) if king is not None else None
    if run_live is not None and live_questions > 0:
        for bench in benches:
            items = [row.item for row in paired[bench][:live_questions]]
            for h, played in ((head, mine_paired), (king, theirs)):
                if played is not None:
                    played[bench].live = run_live(bench, items, router.bind(h.theta))
            mine[bench].live = mine_paired[bench].live
    per_bench = {b: benchmark_report(mine[b], theirs[b] if theirs else None, rules)
                 for b in benches}
    for bench in benches:
        if fitted and fitted.get(bench):
            per_bench[bench]["simplest"] = simplest(per_bench[bench]["cached_acc"],
                                                    fitted[bench], held[bench], rules)
    measured_live = all("live" in per_bench[b] for b in benches)
    report: dict[str, Any] = {
        "head": head.label, "weights_sha256": head.weights_sha256, "benchmarks": benches,
        "per_benchmark": per_bench, "live_measured": measured_live,
        "cached_part": float(np.mean([per_bench[b]["cached_part"] for b in benches])),
        "composite": (composite({b: per_bench[b]["score"] for b in benches},
                                _over(rules, benches)) if measured_live else None)}
    if theirs is not None:
        report["king"] = compare(mine_paired, theirs, king, benches, rules,
                                 unseen=paired is not held)
    found = weight_advisories(head.head, head.scales, rules) + routing_advisories(
        {b: [d.model for d in mine[b].decisions] for b in benches})
    report["advisories"] = [a.to_dict() for a in found]
    return report


def simplest(cached: float, fitted: Sequence[AnsweredItem], held: Sequence[AnsweredItem],
             rules: Competition) -> dict[str, Any]:
    """The simplest routers learnt on the rows the run fitted, scored on the held-out rows,
    and the share of the best-single → oracle gap each closes beside the head's."""
    found = simplest_routers(fitted, held, rules.pool_names)
    best, oracle = found["best_single"]["accuracy"], found["oracle"]
    return {**found, "captured": {"head": gap_closed(cached, best, oracle),
                                  "lookup": gap_closed(found["lookup"], best, oracle)}}


def _over(rules: Competition, benches: Sequence[str]) -> Competition:
    import dataclasses

    return dataclasses.replace(rules, benchmarks=tuple(benches))


def compare(mine: dict[str, Played], theirs: dict[str, Played], king: Head,
            benches: Sequence[str], rules: Competition, unseen: bool = False) -> dict[str, Any]:
    """The paired comparison with the king on the same rows, decided by the evaluator's
    verdict function with the crown test's last-stage rule (a preview has no second stage).
    `unseen`: neither head trained on these rows, so nothing leans toward the king."""
    scope = _over(rules, benches)
    nov = {b: novelty(mine[b].decisions, theirs[b].decisions, rules) for b in benches}
    decided = judge({b: mine[b].measured(rules) for b in benches},
                    {b: theirs[b].measured(rules) for b in benches}, nov, scope,
                    stage=len(rules.live_stages))
    ev = decided.evidence
    assert ev is not None and decided.ci95 is not None  # a king was given
    agreement = float(np.mean([a.model == b.model for bench in benches
                               for a, b in zip(mine[bench].decisions, theirs[bench].decisions,
                                               strict=True)]))
    bias = 0.0 if unseen else king_bias(mine, benches, rules)
    final = len(rules.live_stages)
    unbiased = None if bias is None else published_crowns(
        {"stage": final, "difference": ev.difference + bias,
         "z": (ev.weighted + bias) / ev.se if ev.se > 0 else ev.z}, scope)
    return {"head": king.label, "delta": ev.difference, "ci95": list(decided.ci95),
            "z": ev.z, "would_crown": decided.outcome == KING, "verdict": decided.reason,
            "king_bias": bias, "would_crown_unbiased": unbiased,
            "unseen_rows": {b: len(mine[b].correct) for b in benches} if unseen else None,
            "agreement": agreement,
            "live_included": all(mine[b].live for b in benches)}


def king_bias(mine: dict[str, Played], benches: Sequence[str], rules: Competition
              ) -> float | None:
    """How far the paired delta likely leans toward the king, in composite points.

    The rows are unseen by this head (its held-out share), but the king, trained on the same
    public train split, most likely fitted about (1 − the default holdout) of them, where a
    head scores higher than on rows it never saw. This head's own fit gap (fitted minus
    held-out accuracy, same recipe, same rows) stands in for the king's; the cached weight
    turns it into composite points. None for a head without fitted rows (not a run).
    """
    if not all(mine[b].fit_correct is not None and len(mine[b].fit_correct) for b in benches):
        return None
    gaps = [float(mine[b].fit_correct.mean() - mine[b].correct.mean()) for b in benches]
    return max(0.0, (1 - rules.train_holdout) * rules.weight_cached * float(np.mean(gaps)))
