"""One submission → one result: score the challenger and the reigning king on the same items.

The collaborators enter as parameters (the hidden sets, a router that decides for
transcripts and θ, a live runner that plays live questions through the pool), so the match
is tested offline with fakes; `coordinator.router.Router` and `pool.runner.pool_runner` are
the real ones.

Disclosure: this module logs progress and timings only, never a question, an answer or a
component; `records.Result.public` cuts the record down per SPEC §8.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from evaluator.errors import BenchmarkError, LeaderboardError
from evaluator.files import format_time, utc_now
from evaluator.gates import recheck
from evaluator.loop import Decide, LiveOutcome, coordinator_transcript
from evaluator.records import KING, LOST, REJECTED, HeadRecord, Paired, Result
from evaluator.rules import ANSWERED_SPLITS, LIVE_SPLIT, Competition
from evaluator.scoring import (
    BenchmarkScore,
    accuracy,
    composite,
    crowns,
    novelty,
    overfit,
    paired_bootstrap,
    score_benchmark,
)
from evaluator.store import Store, submission_path
from evaluator.submission import Submission
from evaluator.types import AnsweredItem, Decision, Item

log = logging.getLogger(__name__)
OVERFIT_GATE = "gate 5 (overfit)"


class Router(Protocol):
    """Decisions for many transcripts under one θ (see coordinator.router.Router)."""

    def decide(self, transcripts: list[str], theta: np.ndarray,
               reuse: bool = False) -> list[Decision]: ...


LiveRunner = Callable[[str, Sequence[Item], Decide], list[LiveOutcome]]  # as pool.runner's
Sets = Mapping[str, Mapping[str, Sequence[Any]]]


@dataclass(frozen=True)
class Contender:
    """A head in the ring: who, which generation, which commit, and its θ."""

    miner: str
    generation: int
    theta: np.ndarray
    pr: int | None = None
    head_sha: str | None = None


@dataclass
class HeadRun:
    """Everything measured for one head in this run (the private record's raw material)."""

    ids: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    decisions: dict[str, dict[str, list[Decision]]] = field(default_factory=dict)
    correct: dict[str, dict[str, list[bool]]] = field(default_factory=dict)
    live: dict[str, list[LiveOutcome]] = field(default_factory=dict)
    scores: dict[str, BenchmarkScore] = field(default_factory=dict)
    composite: float | None = None

    @property
    def live_cost_usd(self) -> float:
        return float(sum(o.cost_usd for runs in self.live.values() for o in runs))

    def record(self, contender: Contender) -> HeadRecord:
        """Everything measured, per item (item ids only, never text)."""
        items = {}
        for bench, splits in self.decisions.items():
            items[bench] = {split: [{"id": i, "model": d.model, "role": d.role, "correct": ok}
                                    for i, d, ok in zip(self.ids[bench][split], decisions,
                                                        self.correct[bench][split], strict=True)]
                            for split, decisions in splits.items()}
            items[bench][LIVE_SPLIT] = [
                {"id": o.item_id, "correct": o.correct, "n_turns": o.n_turns,
                 "cost_usd": o.cost_usd, "decisions": [[d.model, d.role] for d in o.decisions]}
                for o in self.live.get(bench, [])]
        return HeadRecord(miner=contender.miner, generation=contender.generation,
                          pr=contender.pr, head_sha=contender.head_sha, composite=self.composite,
                          per_benchmark=dict(self.scores), live_cost_usd=self.live_cost_usd,
                          items=items)


# ---------------------------------------------------------------- measuring


def answered_rows(sets: Sets, bench: str, split: str) -> list[AnsweredItem]:
    try:
        rows = sets[bench][split]
    except KeyError as exc:
        raise BenchmarkError(f"the sealed benchmark has no {bench} {split} split") from exc
    return [r if isinstance(r, AnsweredItem) else AnsweredItem.from_dict(r) for r in rows]


def live_items(sets: Sets, bench: str) -> list[Item]:
    rows = sets.get(bench, {}).get(LIVE_SPLIT)
    if rows is None:
        raise BenchmarkError(f"the sealed benchmark has no {bench} {LIVE_SPLIT} split")
    return [r if isinstance(r, Item) else Item.from_dict(r) for r in rows]


def measure_cached(run: HeadRun, router: Router, theta: np.ndarray, sets: Sets,
                   rules: Competition) -> None:
    """Turn-1 decisions on eval and audit; each picks that model's cached, graded answer."""
    for bench in rules.benchmarks:
        rows = {split: answered_rows(sets, bench, split) for split in ANSWERED_SPLITS}
        transcripts = [coordinator_transcript(r.item.prompt, []) for s in ANSWERED_SPLITS
                       for r in rows[s]]
        decisions = router.decide(transcripts, theta, reuse=True)
        run.ids[bench] = {split: [r.item.id for r in rows[split]] for split in ANSWERED_SPLITS}
        run.decisions[bench], run.correct[bench], start = {}, {}, 0
        for split in ANSWERED_SPLITS:
            mine = decisions[start:start + len(rows[split])]
            start += len(rows[split])
            run.decisions[bench][split] = list(mine)
            run.correct[bench][split] = [row.answers[d.model].correct
                                         for row, d in zip(rows[split], mine, strict=True)]
        log.info("%s: %d cached decisions", bench, len(transcripts))


def measure_live(run: HeadRun, router: Router, theta: np.ndarray, sets: Sets,
                 run_live: LiveRunner, rules: Competition) -> None:
    def decide(transcripts: list[str]) -> list[Decision]:
        return router.decide(transcripts, theta)

    for bench in rules.benchmarks:
        items, started = live_items(sets, bench), time.monotonic()
        run.live[bench] = run_live(bench, items, decide)
        log.info("%s: %d live questions in %.1f s", bench, len(items),
                 time.monotonic() - started)


def first_overfit(run: HeadRun, rules: Competition) -> str | None:
    """The reason a miner reads when the eval/audit gap on some benchmark is too wide."""
    for bench in rules.benchmarks:
        cached, audit = (accuracy(run.correct[bench][s]) for s in ANSWERED_SPLITS)
        verdict = overfit(cached, audit, rules)
        if verdict.rejected:
            return (f"{OVERFIT_GATE}: on {bench} the accuracy on the hidden eval questions "
                    f"exceeds the audit questions by {verdict.gap:.3f} (the limit is "
                    f"{rules.overfit_reject_gap}); the head fits the eval split, not the task")
    return None


def score_run(run: HeadRun, novelties: Mapping[str, float], rules: Competition) -> None:
    for bench in rules.benchmarks:
        live = run.live[bench]
        run.scores[bench] = score_benchmark(
            cached_acc=accuracy(run.correct[bench]["eval"]),
            audit_acc=accuracy(run.correct[bench]["audit"]),
            live_acc=accuracy([o.correct for o in live]),
            avg_turns=float(np.mean([o.n_turns for o in live])) if live else float(rules.max_turns),
            nov=novelties[bench], rules=rules)
    run.composite = composite({b: s.score for b, s in run.scores.items()}, rules)


# ---------------------------------------------------------------- the match


@dataclass(frozen=True)
class Stamp:
    """Who was evaluated, when, and against which sealed benchmark."""

    contender: Contender
    now: datetime
    manifest_hash: str | None

    def result(self, outcome: str, **fields: Any) -> Result:
        c = self.contender
        return Result(miner=c.miner, generation=c.generation, pr=c.pr, head_sha=c.head_sha,
                      evaluated_at=format_time(self.now), outcome=outcome,
                      benchmark_manifest=self.manifest_hash, **fields)


def evaluate(challenger: Contender, king: Contender | None, king_novelty: Mapping[str, float],
             sets: Sets, router: Router, run_live: LiveRunner, rules: Competition,
             now: datetime | None = None, manifest_hash: str | None = None) -> Result:
    """Score the challenger and (in the same run, on the same items) the king; decide."""
    stamp = Stamp(challenger, now or utc_now(), manifest_hash)
    mine = HeadRun()
    measure_cached(mine, router, challenger.theta, sets, rules)
    reason = first_overfit(mine, rules)
    if reason is not None:
        log.info("overfit gate: rejected")
        return stamp.result(REJECTED, reason=reason, challenger_run=mine.record(challenger))
    theirs = None
    if king is not None:
        theirs = HeadRun()
        measure_cached(theirs, router, king.theta, sets, rules)
        measure_live(theirs, router, king.theta, sets, run_live, rules)
        score_run(theirs, {b: king_novelty.get(b, rules.novelty_without_king)
                           for b in rules.benchmarks}, rules)
    measure_live(mine, router, challenger.theta, sets, run_live, rules)
    score_run(mine, {b: novelty(mine.decisions[b]["eval"],
                                None if theirs is None else theirs.decisions[b]["eval"], rules)
                     for b in rules.benchmarks}, rules)
    return verdict(stamp, mine, theirs, king, rules)


def verdict(stamp: Stamp, mine: HeadRun, theirs: HeadRun | None, king: Contender | None,
            rules: Competition) -> Result:
    king_composite = None if theirs is None else theirs.composite
    outcome = KING if crowns(mine.composite, king_composite, rules) else LOST
    paired = None
    if theirs is not None:
        delta, interval = paired_bootstrap(
            {b: mine.correct[b]["eval"] for b in rules.benchmarks},
            {b: theirs.correct[b]["eval"] for b in rules.benchmarks}, rules)
        paired = Paired(delta, interval)
    log.info("verdict: %s", outcome)
    return stamp.result(
        outcome, composite=mine.composite, king_composite=king_composite,
        per_benchmark=dict(mine.scores), paired=paired,
        live_cost_usd=mine.live_cost_usd + (0.0 if theirs is None else theirs.live_cost_usd),
        challenger_run=mine.record(stamp.contender),
        king_run=None if king is None or theirs is None else theirs.record(king))


# ---------------------------------------------------------------- from a repository


def load_contender(repo: Path, relpath: str, rules: Competition, pr: int | None = None,
                   head_sha: str | None = None) -> Contender:
    sub = Submission(Path(repo), relpath, rules)
    return Contender(miner=sub.login, generation=sub.generation, theta=sub.theta, pr=pr,
                     head_sha=head_sha)


def evaluate_submission(repo: Path, relpath: str, open_sets: Callable[[], Sets], router: Router,
                        run_live: LiveRunner, rules: Competition, pr: int | None = None,
                        head_sha: str | None = None, now: datetime | None = None) -> Result:
    """Re-check the gates, find the king in `leaderboard/`, open the hidden sets, evaluate."""
    repo, store = Path(repo), Store(Path(repo))
    sub = Submission(repo, relpath, rules)
    stamp = Stamp(Contender(sub.login, sub.generation, np.empty(0), pr, head_sha),
                  now or utc_now(), store.manifest_hash())
    reason = recheck(repo, relpath, pr, rules)
    if reason is not None:
        log.info("gate re-check failed: %s", reason)
        return stamp.result(REJECTED, reason=reason)
    challenger = load_contender(repo, relpath, rules, pr, head_sha)
    reigning, king = store.king(), None
    if reigning is not None:
        if (reigning.miner.lower(), reigning.generation) == (
                challenger.miner.lower(), challenger.generation):
            raise LeaderboardError(f"{relpath} is the reigning king already")
        king = load_contender(repo, submission_path(reigning.miner, reigning.generation), rules,
                              reigning.pr, reigning.head_sha)
    return evaluate(challenger, king, reigning.novelty if reigning else {}, open_sets(),
                    router, run_live, rules, stamp.now, stamp.manifest_hash)
