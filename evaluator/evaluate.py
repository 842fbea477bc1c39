"""One submission → one result: score the challenger and the reigning king on the same items.

The collaborators enter as parameters (the hidden sets, a `Router` that decides for
transcripts and θ, a `LiveRunner` that plays live questions through the pool), so the
orchestration is tested offline with fakes; `pool_live_runner` and `coordinator_router`
are the real ones.

Disclosure: this module logs progress and timings only, never a question, an answer or
a component; the public record is cut down by `public_record` per SPEC §8.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from evaluator.attempts import format_time
from evaluator.errors import BenchmarkError, LeaderboardError
from evaluator.leaderboard import State
from evaluator.rules import FORMAT_VERSION, OFFICIAL, WEIGHTS_FILE, Competition
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
from evaluator.session import Policy, coordinator_transcript
from evaluator.types import AnsweredItem, Decision, Item

log = logging.getLogger(__name__)
CACHED_SPLITS = ("eval", "audit")
LIVE_SPLIT = "live"
OVERFIT_GATE = "gate 5 (overfit)"
SUBMISSIONS_DIR = "submissions"


class Router(Protocol):
    """Decisions for many transcripts under one θ (argmax of each group).

    `reuse` says the same transcripts will be decided again under another θ (the cached
    questions, for challenger and king), so a router may keep their frozen prefix.
    """

    def decide(self, transcripts: list[str], theta: np.ndarray,
               reuse: bool = False) -> list[Decision]: ...


@dataclass(frozen=True)
class LiveOutcome:
    """One live question played through the loop, graded; no question or answer text."""

    item_id: str
    correct: bool
    n_turns: int
    cost_usd: float
    decisions: tuple[Decision, ...] = ()


LiveRunner = Callable[[str, Sequence[Item], Policy], list[LiveOutcome]]
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


@dataclass(frozen=True)
class Evaluation:
    """The verdict: the public record (disclosure applied) and the private one (everything)."""

    public: dict
    private: dict

    @property
    def outcome(self) -> str:
        return self.public["outcome"]


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
        rows = {split: answered_rows(sets, bench, split) for split in CACHED_SPLITS}
        transcripts = [coordinator_transcript(r.item.prompt, []) for s in CACHED_SPLITS
                       for r in rows[s]]
        decisions = router.decide(transcripts, theta, reuse=True)
        run.ids[bench] = {split: [r.item.id for r in rows[split]] for split in CACHED_SPLITS}
        run.decisions[bench], run.correct[bench], start = {}, {}, 0
        for split in CACHED_SPLITS:
            mine = decisions[start:start + len(rows[split])]
            start += len(rows[split])
            run.decisions[bench][split] = list(mine)
            run.correct[bench][split] = [row.answers[d.model].correct
                                         for row, d in zip(rows[split], mine, strict=True)]
        log.info("%s: %d cached decisions", bench, len(transcripts))


def measure_live(run: HeadRun, router: Router, theta: np.ndarray, sets: Sets,
                 run_live: LiveRunner, rules: Competition) -> None:
    def policy(transcripts: list[str]) -> list[Decision]:
        return router.decide(transcripts, theta)

    for bench in rules.benchmarks:
        items, started = live_items(sets, bench), time.monotonic()
        run.live[bench] = run_live(bench, items, policy)
        log.info("%s: %d live questions in %.1f s", bench, len(items),
                 time.monotonic() - started)


def first_overfit(run: HeadRun, rules: Competition) -> str | None:
    """The reason a miner reads when the eval/audit gap on some benchmark is too wide."""
    for bench in rules.benchmarks:
        cached, audit = (accuracy(run.correct[bench][s]) for s in CACHED_SPLITS)
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


def evaluate(challenger: Contender, king: Contender | None, king_novelty: Mapping[str, float],
             sets: Sets, router: Router, run_live: LiveRunner, rules: Competition = OFFICIAL,
             now: datetime | None = None, manifest_hash: str | None = None) -> Evaluation:
    """Score the challenger and (in the same run, on the same items) the king; decide."""
    stamp = Stamp(challenger, now or datetime.now(timezone.utc), manifest_hash)
    mine = HeadRun()
    measure_cached(mine, router, challenger.theta, sets, rules)
    reason = first_overfit(mine, rules)
    if reason is not None:
        log.info("overfit gate: rejected")
        return rejection(stamp, reason, mine)
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


@dataclass(frozen=True)
class Stamp:
    """Who was evaluated, when, and against which sealed benchmark."""

    contender: Contender
    now: datetime
    manifest_hash: str | None

    def identity(self) -> dict:
        c = self.contender
        return {"format": FORMAT_VERSION, "miner": c.miner, "generation": c.generation,
                "pr": c.pr, "head_sha": c.head_sha, "evaluated_at": format_time(self.now),
                "benchmark_manifest": self.manifest_hash}


def rejection(stamp: Stamp, reason: str, run: HeadRun | None = None) -> Evaluation:
    public = {**stamp.identity(), "outcome": "rejected", "reason": reason,
              "composite": None, "king_composite": None, "delta": None}
    return Evaluation(public=public, private={
        "format": FORMAT_VERSION, "public": public, "outcome": "rejected", "reason": reason,
        "challenger": None if run is None else head_record(stamp.contender, run),
        "king": None, "paired": None})


def verdict(stamp: Stamp, mine: HeadRun, theirs: HeadRun | None, king: Contender | None,
            rules: Competition) -> Evaluation:
    king_composite = None if theirs is None else theirs.composite
    outcome = "king" if crowns(mine.composite, king_composite, rules) else "lost"
    paired = None
    if theirs is not None:
        delta, (low, high) = paired_bootstrap(
            {b: mine.correct[b]["eval"] for b in rules.benchmarks},
            {b: theirs.correct[b]["eval"] for b in rules.benchmarks}, rules)
        paired = {"delta_cached": delta, "ci95": [low, high]}
    cost = mine.live_cost_usd + (0.0 if theirs is None else theirs.live_cost_usd)
    full = {**stamp.identity(), "outcome": outcome, "composite": mine.composite,
            "king_composite": king_composite,
            "delta": None if king_composite is None else mine.composite - king_composite,
            "reason": None, "per_benchmark": {b: s.to_dict() for b, s in mine.scores.items()},
            "paired": paired, "live_cost_usd": cost}
    log.info("verdict: %s", outcome)
    private = {"format": FORMAT_VERSION, "public": public_record(full), "outcome": outcome,
               "reason": None, "composite": mine.composite, "king_composite": king_composite,
               "challenger": head_record(stamp.contender, mine),
               "king": None if king is None else head_record(king, theirs),
               "paired": paired, "live_cost_usd": cost}
    return Evaluation(public=private["public"], private=private)


LOST_FIELDS = ("format", "miner", "generation", "pr", "head_sha", "evaluated_at", "outcome",
               "composite", "king_composite", "delta", "benchmark_manifest")


def public_record(full: dict) -> dict:
    """The disclosure rule: a king shows everything, a loss only its composite and delta."""
    if full["outcome"] == "lost":
        return {key: full[key] for key in LOST_FIELDS}
    return dict(full)


def head_record(contender: Contender, run: HeadRun) -> dict:
    """Everything measured for one head, per item (item ids only, never text)."""
    items = {}
    for bench, splits in run.decisions.items():
        items[bench] = {split: [{"id": i, "model": d.model, "role": d.role, "correct": ok}
                                for i, d, ok in zip(run.ids[bench][split], decisions,
                                                    run.correct[bench][split], strict=True)]
                        for split, decisions in splits.items()}
        items[bench][LIVE_SPLIT] = [
            {"id": o.item_id, "correct": o.correct, "n_turns": o.n_turns, "cost_usd": o.cost_usd,
             "decisions": [[d.model, d.role] for d in o.decisions]}
            for o in run.live.get(bench, [])]
    return {"miner": contender.miner, "generation": contender.generation, "pr": contender.pr,
            "head_sha": contender.head_sha, "composite": run.composite,
            "per_benchmark": {b: s.to_dict() for b, s in run.scores.items()},
            "live_cost_usd": run.live_cost_usd, "items": items}


# ---------------------------------------------------------------- from a repository


RECHECKED_GATES = (2, 3, 4)


def recheck_gates(repo: Path, relpath: str, pr: int | None, rules: Competition) -> str | None:
    """Gates 2–4 again, in the evaluator's own checkout (defence in depth); the failure or None."""
    from evaluator.gates import GATES, Submission, context_for, run_gates

    sub = Submission(Path(repo), relpath, rules)
    ctx = context_for(repo, author=sub.login, pr=pr, rules=rules)
    report = run_gates(sub, ctx, tuple(g for g in GATES if g.number in RECHECKED_GATES))
    failed = report.failed
    return None if failed is None else f"gate {failed.number} ({failed.name}): {failed.reason}"


def load_contender(folder: Path, rules: Competition, pr: int | None = None,
                   head_sha: str | None = None) -> Contender:
    from evaluator.submission import read_weights, theta_from_tensors

    head, scales = read_weights(Path(folder) / WEIGHTS_FILE, rules)
    return Contender(miner=folder.parent.name, generation=int(folder.name),
                     theta=theta_from_tensors(head, scales), pr=pr, head_sha=head_sha)


def evaluate_submission(repo: Path, relpath: str, open_sets: Callable[[], Sets], router: Router,
                        run_live: LiveRunner, rules: Competition = OFFICIAL,
                        pr: int | None = None, head_sha: str | None = None,
                        now: datetime | None = None) -> Evaluation:
    """Re-check the gates, find the king in `leaderboard/`, open the hidden sets, evaluate."""
    repo, folder = Path(repo), Path(repo) / relpath
    state = State(repo)
    stamp = Stamp(Contender(folder.parent.name, int(folder.name), np.empty(0), pr, head_sha),
                  now or datetime.now(timezone.utc), state.manifest_hash())
    reason = recheck_gates(repo, relpath, pr, rules)
    if reason is not None:
        log.info("gate re-check failed: %s", reason)
        return rejection(stamp, reason)
    challenger = load_contender(folder, rules, pr, head_sha)
    reigning, king, novelties = state.king(), None, {}
    if reigning is not None:
        if (reigning["miner"].lower(), reigning["generation"]) == (
                challenger.miner.lower(), challenger.generation):
            raise LeaderboardError(f"{relpath} is the reigning king already")
        king_folder = repo / SUBMISSIONS_DIR / reigning["miner"] / str(reigning["generation"])
        king = load_contender(king_folder, rules, reigning["pr"], reigning["head_sha"])
        novelties = reigning["novelty"]
    return evaluate(challenger, king, novelties, open_sets(), router, run_live, rules,
                    stamp.now, stamp.manifest_hash)


# ---------------------------------------------------------------- the real collaborators


def pool_live_runner(pool_url: str | None = None, rules: Competition = OFFICIAL) -> LiveRunner:
    """Live questions through the pool client and the session loop, graded by the benchmark."""
    from evaluator.benchmarks import get_benchmark
    from evaluator.pool.client import OpenRouterClient
    from evaluator.session import run_sessions

    def run(bench: str, items: Sequence[Item], policy: Policy) -> list[LiveOutcome]:
        benchmark = get_benchmark(bench)

        async def play() -> list:
            async with OpenRouterClient(base_url=pool_url, rules=rules) as client:
                return await run_sessions(list(items), benchmark, policy, client, rules)

        trajectories = asyncio.run(play())
        answered = [t for t in trajectories if t.answer is not None]
        grades = benchmark.grade_many([(t.answer, t.item.reference) for t in answered])
        correct = {id(t): g.correct for t, g in zip(answered, grades, strict=True)}
        return [LiveOutcome(item_id=t.item.id, correct=correct.get(id(t), False),
                            n_turns=t.n_turns, cost_usd=t.cost_usd,
                            decisions=tuple(Decision(x.model, x.role) for x in t.turns))
                for t in trajectories]

    return run


class CoordinatorRouter:
    """The real router: one encoder, built once for challenger and king.

    Transcripts decided with `reuse` keep their frozen prefix (layers below the SVF
    layer), so the second head recomputes only the last layers; the others run whole.
    """

    def __init__(self, encoder: Any, rules: Competition = OFFICIAL):
        self.encoder, self.rules = encoder, rules
        self._prefixes: dict[tuple[str, ...], Any] = {}

    def decide(self, transcripts: list[str], theta: np.ndarray,
               reuse: bool = False) -> list[Decision]:
        from evaluator.coordinator import features
        from evaluator.coordinator import head as routing
        from evaluator.submission import tensors_from_theta

        head, scales = tensors_from_theta(np.asarray(theta, dtype=np.float32), self.rules)
        if reuse:
            key = tuple(transcripts)
            if key not in self._prefixes:
                self._prefixes[key] = self.encoder.prefix(list(transcripts))
            h = features(self._prefixes[key], scales)
        else:
            h = self.encoder.features(list(transcripts), scales)
        return routing.decide(routing.logits(h, head, self.rules), self.rules)


def coordinator_router(encoder_id: str, rules: Competition = OFFICIAL) -> CoordinatorRouter:
    from evaluator.coordinator import load_encoder

    return CoordinatorRouter(load_encoder(encoder_id, rules=rules), rules)


def render_report(template: str, result: dict, rules: Competition = OFFICIAL) -> str:
    """A public record as Markdown: `summary` (job summary) or `comment` (the PR comment)."""
    from evaluator.templating import render

    return render(f"evaluation/{template}.md.j2", result=result, rules=rules.as_dict(),
                  benchmarks=list(rules.benchmarks))
