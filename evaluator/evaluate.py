"""One submission → one result: score the challenger and the reigning king on the same items.

The collaborators enter as parameters (the hidden sets, a router, a live runner, the public
train items), so the match is tested offline with fakes. Each evaluation draws a secret
partition of every benchmark's scored pool into eval and audit halves. This module logs
progress and timings only, never a question, an answer or a component.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from evaluator.changes import Change
from evaluator.contenders import (
    Contender,
    Decider,
    PublicRouting,
    behaviour_reason,
    earlier_attempts,
    earlier_contenders,
    load_contender,
    public_routing,
)
from evaluator.errors import BenchmarkError, LeaderboardError, OutOfCreditError, PoolError
from evaluator.files import format_time, utc_now
from evaluator.loop import FAILED, LiveOutcome, LiveRunner, coordinator_transcript
from evaluator.recheck import recheck
from evaluator.records import (
    KING,
    LOST,
    REJECTED,
    VOID,
    HeadRecord,
    HeadRef,
    Partition,
    Result,
)
from evaluator.rules import (
    AUDIT_SPLIT,
    CACHED_SETS,
    LIVE_SPLIT,
    PARTITION,
    POOL_SPLIT,
    REST,
    WEIGHTS_FILE,
    Competition,
)
from evaluator.scoring import (
    BenchmarkScore,
    Measured,
    novelty,
)
from evaluator.store import Store, submission_path
from evaluator.submission import Submission, sha256_file
from evaluator.types import AnsweredItem, Decision, Item
from evaluator.verdict import MORE, Verdict, judge, measured, overfit_reason

log = logging.getLogger(__name__)
CHALLENGER_LABEL, KING_LABEL = "challenger", "king"  # whose numbers a log line gives


Sets = Mapping[str, Mapping[str, Sequence[Any]]]


@dataclass
class HeadRun:
    """Everything measured for one head in this run (the private record's raw material)."""

    ids: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    decisions: dict[str, dict[str, list[Decision]]] = field(default_factory=dict)
    correct: dict[str, dict[str, list[bool]]] = field(default_factory=dict)
    live: dict[str, list[LiveOutcome]] = field(default_factory=dict)
    best: dict[str, dict[str, list[bool]]] = field(default_factory=dict)  # the best single model
    scores: dict[str, BenchmarkScore] = field(default_factory=dict)
    composite: float | None = None

    @property
    def live_cost_usd(self) -> float:
        return float(sum(o.cost_usd for runs in self.live.values() for o in runs))

    def measured(self, bench: str, rules: Competition) -> Measured:
        best = self.best.get(bench, {})
        return measured(self.correct[bench]["eval"], self.correct[bench]["audit"],
                        self.live.get(bench, []), rules,
                        *(best.get(s, ()) for s in PARTITION),
                        rest_correct=self.correct[bench].get(REST, ()),
                        rest_best=best.get(REST, ()))

    def all_measured(self, rules: Competition) -> dict[str, Measured]:
        return {bench: self.measured(bench, rules) for bench in rules.benchmarks}

    def failed_live(self) -> tuple[int, int]:
        """(live questions whose session failed for infrastructure reasons, live questions)."""
        outcomes = [o for runs in self.live.values() for o in runs]
        return sum(o.status == FAILED for o in outcomes), len(outcomes)

    def record(self, contender: Contender) -> HeadRecord:
        """Everything measured, per item (item ids only, never text); `of_record` reads it
        back."""
        items = {}
        for bench, splits in self.decisions.items():
            items[bench] = {split: [{"id": i, "model": d.model, "role": d.role, "correct": ok}
                                    for i, d, ok in zip(self.ids[bench][split], decisions,
                                                        self.correct[bench][split], strict=True)]
                            for split, decisions in splits.items()}
            items[bench][LIVE_SPLIT] = [
                {"id": o.item_id, "correct": o.correct, "n_turns": o.n_turns,
                 "cost_usd": o.cost_usd, "decisions": [[d.model, d.role] for d in o.decisions],
                 "status": o.status, "replayed": o.replayed}
                for o in self.live.get(bench, [])]
        return HeadRecord(miner=contender.miner, generation=contender.generation,
                          pr=contender.pr, head_sha=contender.head_sha, composite=self.composite,
                          per_benchmark=dict(self.scores), live_cost_usd=self.live_cost_usd,
                          items=items)

    @classmethod
    def of_record(cls, items: Mapping[str, Any], best: Mapping[str, dict[str, list[bool]]],
                  rules: Competition) -> HeadRun:
        """The run `record` kept, read back (what the verdict needs again, after its season:
        see evaluator/replay.py), in the rules' order of benchmarks as it was measured (its
        cost is a sum of floats); `best`: each benchmark's best single model's grades on the
        same items, which the record does not keep (the revealed pool holds them)."""
        run = cls(best={bench: dict(best[bench]) for bench in rules.benchmarks})
        for bench in rules.benchmarks:
            splits = items[bench]
            cached = [split for split in CACHED_SETS if split in splits]
            run.ids[bench] = {split: [row["id"] for row in splits[split]] for split in cached}
            run.decisions[bench] = {split: [Decision(row["model"], row["role"])
                                            for row in splits[split]] for split in cached}
            run.correct[bench] = {split: [row["correct"] for row in splits[split]]
                                  for split in cached}
            run.live[bench] = [
                LiveOutcome(item_id=row["id"], correct=row["correct"], n_turns=row["n_turns"],
                            cost_usd=row["cost_usd"], status=row["status"],
                            decisions=tuple(Decision(*pair) for pair in row["decisions"]))
                for row in splits.get(LIVE_SPLIT, [])]
        return run


# ---------------------------------------------------------------- the partition


def partition(rows: Sequence[AnsweredItem], seed: str, bench: str,
              rules: Competition) -> dict[str, list[AnsweredItem]]:
    """This evaluation's eval half of one benchmark's pool, and the rest, by the secret seed.

    An item's place is the HMAC of its id under the seed, so the halves depend on nothing
    a miner sees, and the same seed gives the same halves.
    """
    if len(rows) != rules.pool_size:
        raise BenchmarkError(f"the sealed {bench} pool holds {len(rows)} items; the rules "
                             f"partition {rules.pool_size}")
    key = hmac.new(seed.encode(), bench.encode(), hashlib.sha256).digest()
    order = sorted(rows, key=lambda r: hmac.new(key, r.item.id.encode(), hashlib.sha256).digest())
    return {"eval": order[:rules.eval_size], REST: order[rules.eval_size:]}


def scored_items(sets: Sets, seed: str, rules: Competition
                 ) -> dict[str, dict[str, list[AnsweredItem]]]:
    """Per benchmark, what the cached decisions are graded on: this evaluation's eval half of
    the pool (public-dataset items), the whole audit (items never published), and the pool's
    other half, which is not scored but counts in the crown test's evidence."""
    return {bench: {**partition(pool_rows(sets, bench), seed, bench, rules),
                    "audit": pool_rows(sets, bench, AUDIT_SPLIT)}
            for bench in rules.benchmarks}


def best_model(rows: Sequence[AnsweredItem], rules: Competition) -> str:
    """The single model whose cached answers are right most often on `rows` (pool order breaks
    ties): the yardstick the overfit gap measures each set's accuracy against."""
    hits = [sum(r.answers[m].correct for r in rows) for m in rules.pool_names]
    return rules.pool_names[hits.index(max(hits))]


# ---------------------------------------------------------------- measuring


def pool_rows(sets: Sets, bench: str, split: str = POOL_SPLIT) -> list[AnsweredItem]:
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


def measure_cached(run: HeadRun, router: Decider, theta: np.ndarray,
                   halves: Mapping[str, Mapping[str, list[AnsweredItem]]],
                   rules: Competition, who: str = CHALLENGER_LABEL,
                   best: Mapping[str, str] | None = None) -> None:
    """Turn-1 decisions on eval, audit and the pool's rest; each picks that model's cached,
    graded answer.
    `who` (challenger or king) labels the log lines; `best`: each benchmark's best single
    model, whose answers on the same items the overfit gap compares with."""
    for bench in rules.benchmarks:
        rows = halves[bench]
        sets = [s for s in CACHED_SETS if s in rows]
        if best is not None:
            run.best[bench] = {split: [r.answers[best[bench]].correct for r in rows[split]]
                               for split in sets}
        transcripts = [coordinator_transcript(r.item.prompt, []) for s in sets for r in rows[s]]
        decisions = router.decide(transcripts, theta, reuse=True)
        run.ids[bench] = {split: [r.item.id for r in rows[split]] for split in sets}
        run.decisions[bench], run.correct[bench], start = {}, {}, 0
        for split in sets:
            mine = decisions[start:start + len(rows[split])]
            start += len(rows[split])
            run.decisions[bench][split] = list(mine)
            run.correct[bench][split] = [row.answers[d.model].correct
                                         for row, d in zip(rows[split], mine, strict=True)]
        log.info("%s %s: %d cached decisions", who, bench, len(transcripts))


def live_stages(sets: Sets, seed: str, rules: Competition) -> list[dict[str, list[Item]]]:
    """This evaluation's live questions of each benchmark, stage by stage (`rules.live_stages`),
    in an order drawn from the secret seed, so no stage's questions are known beforehand."""
    stages: list[dict[str, list[Item]]] = [{} for _ in rules.live_stages]
    for bench in rules.benchmarks:
        items = live_items(sets, bench)
        if len(items) < rules.live_size:
            raise BenchmarkError(f"the sealed {bench} {LIVE_SPLIT} split holds {len(items)} "
                                 f"questions; the rules play {rules.live_size}")
        key = hmac.new(seed.encode(), f"{LIVE_SPLIT} {bench}".encode(), hashlib.sha256).digest()
        order = sorted(items, key=lambda i: hmac.new(key, i.id.encode(), hashlib.sha256).digest())
        start = 0
        for stage, size in zip(stages, rules.live_stages, strict=True):
            stage[bench], start = order[start:start + size], start + size
    return stages


def measure_live(run: HeadRun, router: Decider, theta: np.ndarray,
                 stage: Mapping[str, Sequence[Item]], run_live: LiveRunner, rules: Competition,
                 who: str = CHALLENGER_LABEL) -> None:
    """Play one stage's live questions; the outcomes join the head's earlier stages'."""
    def decide(transcripts: list[str]) -> list[Decision]:
        return router.decide(transcripts, theta)

    for bench in rules.benchmarks:
        items, started = stage[bench], time.monotonic()
        run.live.setdefault(bench, []).extend(run_live(bench, items, decide))
        log.info("%s %s: %d live questions in %.1f s", who, bench, len(items),
                 time.monotonic() - started)


# ---------------------------------------------------------------- the match


@dataclass(frozen=True)
class Stamp:
    """Who was evaluated, when, against which sealed benchmark and on which partition."""

    contender: Contender
    now: datetime
    manifest_hash: str | None
    partition: Partition | None = None

    def result(self, outcome: str, **fields: Any) -> Result:
        c = self.contender
        return Result(miner=c.miner, generation=c.generation, pr=c.pr, head_sha=c.head_sha,
                      evaluated_at=format_time(self.now), outcome=outcome,
                      benchmark_manifest=self.manifest_hash, partition=self.partition,
                      partition_commitment=self.partition and self.partition.commitment,
                      **fields)


def evaluate(challenger: Contender, king: Contender | None, sets: Sets, router: Decider,
             run_live: LiveRunner, rules: Competition, now: datetime | None = None,
             manifest_hash: str | None = None, drawn: Partition | None = None,
             public: PublicRouting | None = None) -> Result:
    """Score the challenger and (in the same run, on the same items) the king; decide.

    `public`: the challenger's routing on the public train items, for a new king's card."""
    stamp = Stamp(challenger, now or utc_now(), manifest_hash, drawn or Partition.draw())
    halves = scored_items(sets, stamp.partition.seed, rules)
    best = {bench: best_model(pool_rows(sets, bench), rules) for bench in rules.benchmarks}
    mine = HeadRun()
    measure_cached(mine, router, challenger.theta, halves, rules, best=best)
    rejected = overfit_rejection(stamp, mine, rules)  # before any paid call
    if rejected is not None:
        log.info("overfit gate: rejected")
        return rejected
    theirs = None
    if king is not None:
        theirs = HeadRun()
        measure_cached(theirs, router, king.theta, halves, rules, who=KING_LABEL, best=best)
    # the challenger plays first: the king's sessions replay its calls where they decide alike
    runs = [(mine, challenger)] + ([(theirs, king)] if theirs is not None else [])
    for number, stage in enumerate(live_stages(sets, stamp.partition.seed, rules), start=1):
        for run, contender in runs:
            try:
                measure_live(run, router, contender.theta, stage, run_live, rules,
                             who=KING_LABEL if contender is king else CHALLENGER_LABEL)
            except PoolError as exc:
                log.warning("live play stopped: %s", type(exc).__name__)
                return void(stamp, mine, theirs, king, pool_reason(exc))
            reason = failure_reason(run, contender is king, rules)
            if reason is not None:
                return void(stamp, mine, theirs, king, reason)
        decided = decide(mine, theirs, rules, number)
        log.info("crown test, live stage %d: %s", number, decided.outcome)
        if decided.outcome != MORE:
            break
    result = verdict(stamp, mine, theirs, king, decided, rules)
    if result.outcome == KING:
        result = dataclasses.replace(result, router_card=router_card(mine, public, rules))
    return result


def overfit_rejection(stamp: Stamp, mine: HeadRun, rules: Competition) -> Result | None:
    """The record of a head the overfit gate stops on its cached items, else None."""
    reason = overfit_reason(mine.all_measured(rules), rules)
    if reason is None:
        return None
    return stamp.result(REJECTED, reason=reason, challenger_run=mine.record(stamp.contender))


def decide(mine: HeadRun, theirs: HeadRun | None, rules: Competition, stage: int) -> Verdict:
    """`judge` on what both heads measured up to the end of live stage `stage`. Novelty, the
    same number for both heads, is read from their first eval decisions."""
    novelties = {b: novelty(mine.decisions[b]["eval"],
                            None if theirs is None else theirs.decisions[b]["eval"], rules)
                 for b in rules.benchmarks}
    return judge(mine.all_measured(rules), None if theirs is None else theirs.all_measured(rules),
                 novelties, rules, stage=stage)


VOID_NOTE = "no score is given and your attempt is refunded; a maintainer re-runs the evaluation"


def pool_reason(exc: PoolError) -> str:
    """The public reason of an evaluation the pool stopped: what the maintainers must fix."""
    if isinstance(exc, OutOfCreditError):
        return f"void: the pool's API key ran out of credit ({exc}); {VOID_NOTE}"
    return (f"void: the pool refused the evaluator's calls ({type(exc).__name__}; maintainers: "
            f"check the key and the model slugs); {VOID_NOTE}")


def failure_reason(run: HeadRun, is_king: bool, rules: Competition) -> str | None:
    """Why the evaluation is void when too many of a head's live sessions failed, else None."""
    failed, total = run.failed_live()
    if total == 0 or failed / total <= rules.void_failure_share:
        return None
    whose = "the king's" if is_king else "your head's"
    return (f"void: the pool failed on {failed} of {total} of {whose} live questions after "
            f"retries (the limit is {rules.void_failure_share:.0%}); {VOID_NOTE}")


def void(stamp: Stamp, mine: HeadRun, theirs: HeadRun | None, king: Contender | None,
         reason: str) -> Result:
    """A void result: its reason, and privately what was measured before the pool failed."""
    log.info("verdict: void")
    return stamp.result(VOID, reason=reason,
                        live_cost_usd=mine.live_cost_usd + (theirs.live_cost_usd if theirs else 0.0),
                        challenger_run=mine.record(stamp.contender),
                        king_run=None if king is None or theirs is None else theirs.record(king))


def verdict(stamp: Stamp, mine: HeadRun, theirs: HeadRun | None, king: Contender | None,
            decided: Verdict, rules: Competition) -> Result:
    """The record of a decided match (`decided` is `verdict.judge`'s, after the last stage
    played)."""
    mine.scores, mine.composite = dict(decided.scores), decided.composite
    if theirs is not None and decided.king_scores is not None:
        theirs.scores, theirs.composite = dict(decided.king_scores), decided.king_composite
    log.info("verdict: %s", decided.outcome)
    sessions = sum(len(runs) for run in (mine, theirs) if run is not None
                   for runs in run.live.values())
    test = None if decided.evidence is None else {**decided.evidence.to_dict(),
                                                   "live_sessions": sessions}
    return stamp.result(
        decided.outcome, reason=decided.reason if decided.outcome == LOST else None,
        composite=decided.composite, king_composite=decided.king_composite, delta=decided.delta,
        ci95=decided.ci95, crown_test=test, per_benchmark=dict(decided.scores),
        against=None if king is None else HeadRef(king.miner, king.generation, king.pr,
                                                  king.head_sha),
        live_cost_usd=mine.live_cost_usd + (0.0 if theirs is None else theirs.live_cost_usd),
        challenger_run=mine.record(stamp.contender),
        king_run=None if king is None or theirs is None else theirs.record(king))


def router_card(run: HeadRun, public: PublicRouting | None, rules: Competition) -> dict[str, Any]:
    """What the site's router card shows of a new king: its routing mix on the public items,
    its live cost per 1,000 questions, how long a live question took (median and 95th
    percentile of its sessions' model calls) and its agreement with the king before. Nothing
    per category of the hidden items: over many kings that would reveal the pool's mix."""
    questions = sum(len(v) for v in run.live.values())
    seconds = [o.seconds for runs in run.live.values() for o in runs]
    return {"public_items": public.mix(rules) if public else {},
            "live_questions": questions,
            "cost_per_1k_usd": 1000 * run.live_cost_usd / questions if questions else None,
            "agreement_with_previous": public.agreement if public else None,
            "live_seconds": {"median": round(float(np.median(seconds)), 3),
                             "p95": round(float(np.percentile(seconds, 95)), 3)}
            if seconds else None}


# ---------------------------------------------------------------- from a repository


def evaluate_submission(repo: Path, relpath: str, open_sets: Callable[[], Sets], router: Decider,
                        run_live: LiveRunner, rules: Competition,
                        public_items: Callable[[], Sequence[Item]] = list,
                        pr: int | None = None, head_sha: str | None = None,
                        now: datetime | None = None, drawn: Partition | None = None,
                        author: str | None = None, changes: list[Change] | None = None,
                        require_gates_pass: bool = False,
                        earlier_dir: Path | None = None) -> Result:
    """Re-check every gate (scope included, on this checkout of the base branch), find the
    king, compare behaviours on public items with the king's and every earlier attempt's
    (their weights read from the head cache `earlier_dir`, default the repository's folders;
    a head not there is not compared, and the result lists its PR), then open the hidden sets
    and evaluate.

    With `require_gates_pass`, the attempts log must record a gates pass for `pr` at
    `head_sha`, the exact head scored (a workflow's evaluation), or nothing is evaluated.
    """
    repo, store = Path(repo), Store(Path(repo))
    if require_gates_pass:
        store.require_gates_pass(pr, head_sha)
    sub = Submission(repo, relpath, rules)
    stamp = Stamp(Contender(sub.login, sub.generation, np.empty(0), pr, head_sha),
                  now or utc_now(), store.manifest_hash())
    reason = recheck(repo, relpath, pr, rules, head_sha=head_sha, author=author, changes=changes)
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
    earlier, missing = earlier_contenders(earlier_attempts(
        store, challenger.miner, pr, head_sha, reigning, sha256_file(sub.folder / WEIGHTS_FILE)),
        rules, earlier_dir, repo)
    not_compared = tuple(sorted({a.pr for _, a in missing if a.pr is not None})) or None
    public = public_routing(challenger, king, router, public_items(), earlier)
    reason = behaviour_reason(public, rules)
    if reason is not None:
        return stamp.result(REJECTED, reason=reason, not_compared=not_compared)
    return dataclasses.replace(evaluate(challenger, king, open_sets(), router, run_live, rules,
                                        stamp.now, stamp.manifest_hash, drawn, public),
                               not_compared=not_compared)
