"""King of the hill on the leaderboard: record a result, seed the first king, check it all.

Writes go through `store.Store`; each is atomic and idempotent: a result is keyed by miner,
generation, PR and head SHA, and applying the same one twice changes nothing. A crown or a
loss scored against a king that has since been replaced is recorded as stale (and evaluated
again by the workflow), never applied against the wrong king.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evaluator import attempts_index
from evaluator.basis import BASIS_FILE, BasisError, read_basis
from evaluator.errors import LeaderboardError
from evaluator.files import parse_time
from evaluator.lifecycle import LIFTED, UNFINISHED, marks, one_line, refund_spent
from evaluator.records import DATED, KING, LOST, STALE, UNSCORED, VOID, Crowning, King, Result
from evaluator.rules import WEIGHTS_FILE, Competition
from evaluator.scoring import TOLERANCE
from evaluator.store import (
    ATTEMPTS_FILE,
    DIGESTS_FILE,
    FAIRNESS_FILE,
    HISTORY_FILE,
    KING_FILE,
    LEADERBOARD_DIR,
    MANIFEST_FILE,
    QUEUE_FILE,
    Store,
    read_json,
    validate,
)
from evaluator.verdict import published_crowns

log = logging.getLogger(__name__)
# `against`: the King a result was scored against, None for no king, or UNKNOWN
UNKNOWN = object()


def check_result(data: dict[str, Any], rules: Competition, where: str = "result") -> Result:
    """Schema plus the rules: the benchmarks, the composite and the outcome all add up."""
    validate("result", data, where)
    result = Result.from_dict(data, strict=True, where=where)
    if result.outcome != KING:
        return result
    king, composite = result.king_composite, result.composite
    if king is not None and abs(result.delta - (composite - king)) > TOLERANCE:
        raise LeaderboardError(f"{where}: delta is not composite − king_composite")
    if king is not None and (result.crown_test is None
                             or not published_crowns(result.crown_test, rules)):
        raise LeaderboardError(f"{where}: crowned without its crown test reaching the margin of "
                               f"{rules.win_margin} with enough evidence")
    per = result.per_benchmark or {}
    if sorted(per) != sorted(rules.benchmarks):
        raise LeaderboardError(f"{where}: per_benchmark must cover exactly "
                               f"{', '.join(rules.benchmarks)}")
    mean = sum(per[b].score for b in rules.benchmarks) / len(rules.benchmarks)
    if abs(mean - composite) > TOLERANCE:
        raise LeaderboardError(f"{where}: composite is not the mean of the benchmark scores")
    return result


# ---------------------------------------------------------------- apply


@dataclass
class Applied:
    """What `apply_result` changed (paths relative to the repo); empty when nothing did.
    `record` is the public record the board holds for this evaluation now."""

    changed: list[str] = field(default_factory=list)
    crowned: bool = False
    record: dict[str, Any] = field(default_factory=dict)

    @property
    def outcome(self) -> str:
        return str(self.record.get("outcome"))


def unscored(data: dict[str, Any], outcome: str, reason: str, rules: Competition) -> dict[str, Any]:
    """The public record of an evaluation turned void or stale: who and what, a reason, no score."""
    if outcome not in UNSCORED:
        raise ValueError(f"{outcome!r} is not an unscored outcome")
    record = Result.from_dict({**data, "outcome": outcome, "reason": reason})
    return record.public(rules.disclosure_precision)


def mark_unfinished(store: Store, pr: int, head_sha: str, state: str, reason: str,
                    at: str) -> dict[str, Any] | None:
    """Record that the evaluation of this gated head ended without a result (declined,
    expired, failed: lifecycle.UNFINISHED), with the reason the Queue page shows. The event, or
    None when the head had already ended the same way (a re-run). A head that ended otherwise
    (a result, another mark) is refused: a decisive result is never overwritten."""
    if state not in UNFINISHED:
        raise LeaderboardError(f"{state!r} is not one of {', '.join(UNFINISHED)}")
    line = one_line(reason)
    if not line:
        raise LeaderboardError("the reason is empty: say why the evaluation ended (the Queue "
                               "page shows it)")
    ended = store.ended(pr, head_sha)
    if ended is not None and ended[0] == state:
        return None
    if ended is not None:
        raise LeaderboardError(f"PR {pr} at {head_sha[:12]} is already {ended[0]}"
                               f"{f' ({ended[1]})' if ended[1] else ''}; it is not marked "
                               f"{state} (a recorded end is never overwritten)")
    attempt = store.require_gates_pass(pr, head_sha)
    event = {"event": state, "miner": attempt.miner, "generation": attempt.generation,
             "pr": pr, "head_sha": head_sha, "at": at, "reason": line}
    store.record_queue_event(event)
    return event


def _mark_of(store: Store, pr: int | None, head_sha: str | None) -> dict[str, Any] | None:
    return next((e for e in marks(store.queue_events())
                 if (e.get("pr"), e.get("head_sha")) == (pr, head_sha)), None)


def lift_mark(store: Store, pr: int, head_sha: str, reason: str, at: str,
              rules: Competition) -> dict[str, Any]:
    """Take back this head's declined, expired or failed mark (a `lifted` queue event): its
    slot counts again from its gated time, and the record job records its next result.
    Refused when no such mark is in force, or when the refund was spent (another attempt of
    the miner passed the rate limit on it: lifting would count two submissions in one slot)."""
    line = one_line(reason)
    if not line:
        raise LeaderboardError("the reason is empty: say why the mark is lifted (the Queue page "
                               "shows it)")
    mark = _mark_of(store, pr, head_sha)
    if mark is None:
        raise LeaderboardError(f"PR {pr} at {head_sha[:12]} has no declined, expired or failed "
                               "mark in force; there is nothing to lift")
    attempt = store.require_gates_pass(pr, head_sha)
    spent = refund_spent(attempt, store.attempts(), store.refunded_heads(attempt.miner), rules)
    if spent is not None:
        raise LeaderboardError(
            f"PR {pr} at {head_sha[:12]} stays {mark['event']}: its refund was spent by PR "
            f"#{spent.pr}'s attempt at {spent.at}, which passed the rate limit on it; lifting "
            "the mark would count two submissions in one slot")
    event = {"event": LIFTED, "miner": attempt.miner, "generation": attempt.generation,
             "pr": pr, "head_sha": head_sha, "at": at, "reason": line}
    store.record_queue_event(event)
    return event


def refusal(store: Store, result: Result, rules: Competition) -> str | None:
    """Why the record job must not record this result, or None: one life per head. It must be
    the PR's gated attempt (that miner and generation), and not a head whose slot was given
    back: marked declined, expired or failed (unless a maintainer lifted the mark), or void
    with its refund spent by a later attempt."""
    pr, sha = result.pr, result.head_sha
    attempt = store.gates_pass(pr, sha)
    if attempt is None:
        return (f"{LEADERBOARD_DIR}/{ATTEMPTS_FILE} records no gates pass for PR {pr} at {sha}")
    if (attempt.miner.lower(), attempt.generation) != (result.miner.lower(), result.generation):
        return (f"the result is for {result.miner} generation {result.generation}, but the "
                f"attempt gated on PR #{pr} at {str(sha)[:12]} is {attempt.miner} generation "
                f"{attempt.generation}")
    mark = _mark_of(store, pr, sha)
    if mark is not None:
        return (f"PR #{pr} at {str(sha)[:12]} is marked {mark['event']} ({mark.get('reason')}) "
                "and its slot was refunded; a maintainer who means this result to count lifts "
                "the mark first (`tinyrouter leaderboard lift`)")
    ended = store.ended(pr, sha)
    if ended is not None and ended[0] == VOID:
        spent = refund_spent(attempt, store.attempts(), store.refunded_heads(attempt.miner),
                             rules)
        if spent is not None:
            return (f"PR #{pr} at {str(sha)[:12]} was void and its refund is spent: PR "
                    f"#{spent.pr}'s attempt at {spent.at} passed the rate limit on it")
    return None


def recorded(store: Store, result: Result) -> dict[str, Any] | None:
    """The record the board already holds for this evaluation, if any: its decisive result
    (which a later evaluation of the same head never replaces), or this evaluation's void or
    stale record."""
    decisive = store.result_path(result.miner, result.generation)
    if decisive.is_file():
        existing = store.result(decisive)
        if existing.key == result.key:
            return read_json(decisive)
        if result.outcome not in DATED:
            raise LeaderboardError(
                f"{store.relative(decisive)} already records PR {existing.pr} at "
                f"{existing.head_sha}; a result for another PR or commit cannot replace it")
    for outcome in DATED:
        path = store.result_path(result.miner, result.generation, outcome, result.evaluated_at)
        if path.is_file() and store.result(path).key == result.key:
            return read_json(path)
    return None


def decide(store: Store, data: dict[str, Any], rules: Competition,
           against: object = UNKNOWN) -> tuple[dict[str, Any], bool]:
    """(the record applying `data` would leave on the board, whether it is there already).

    `against` is the king the evaluation was scored against (None: no king), read from the
    commit it ran on; a crown or a loss against another king than the reigning one is stale.
    """
    result = check_result(data, rules)
    existing = recorded(store, result)
    if existing is not None:
        return existing, True
    reason = stale_reason(store.king(), result, against)
    if reason is not None:
        return unscored(data, STALE, reason, rules), False
    return data, False


def apply_result(repo: Path, data: dict[str, Any], rules: Competition,
                 against: object = UNKNOWN) -> Applied:
    """Record one evaluation: its result file, and for a new king king.json and history.json.

    Steps run king → history → result file, each idempotent, so a re-run after a crash
    finishes the job and a re-run after success changes nothing.
    """
    store = Store(Path(repo))
    record, already = decide(store, data, rules, against)
    applied = Applied(record=record)
    if already:
        log.info("the evaluation of %s generation %s at %s is already recorded (%s); nothing "
                 "to do", record.get("miner"), record.get("generation"),
                 str(record.get("head_sha"))[:12], record.get("outcome"))
        return applied
    result = Result.from_dict(record)
    if result.outcome == KING:
        _crown(store, record, result, applied)
    applied.changed.append(store.relative(store.write_result(record)))
    return applied


def _crown(store: Store, data: dict[str, Any], result: Result, applied: Applied) -> None:
    current = store.king()
    if current is None or current.key != result.key:
        store.write_king(King.crowned(data, current))
        applied.changed.append(f"{LEADERBOARD_DIR}/{KING_FILE}")
    history = store.history()
    if not any(entry.key == result.key for entry in history):
        store.write_history([*history, Crowning.of(data)])
        applied.changed.append(f"{LEADERBOARD_DIR}/{HISTORY_FILE}")
    applied.crowned = True


def check_private(public: dict[str, Any], private: dict[str, Any], rules: Competition) -> None:
    """The private record behind a public one: the same evaluation, whose public view the
    disclosure rule computes from the private figures exactly, and the partition it committed:
    whenever the public record carries a commitment, the private one must hold its seed."""
    record = Result.from_dict(private)
    if private.get("public") != public or Result.from_dict(public).key != record.key:
        raise LeaderboardError("the private record is of another evaluation than the result")
    recomputed = record.public(rules.disclosure_precision)
    differ = sorted(k for k in set(recomputed) | set(public) if recomputed.get(k) != public.get(k))
    if differ:
        raise LeaderboardError(f"the result's {', '.join(differ)} do not follow from the private "
                               "record's figures; refusing the result")
    commitment = public.get("partition_commitment")
    if commitment is None:
        return  # rejected before a partition was drawn
    if record.partition is None:
        raise LeaderboardError("the result carries a partition commitment but the private record "
                               "holds no partition seed; refusing the result")
    if record.partition.commitment != commitment:
        raise LeaderboardError("the private record's partition seed does not match the "
                               "result's partition_commitment; refusing the result")


def require_king_folder(store: Store, record: dict[str, Any]) -> None:
    """A crown is applied only where the king's folder is: on the published branch's checkout."""
    if record.get("outcome") != KING:
        return
    folder = store.submission(str(record.get("miner")), str(record.get("generation")))
    if not (folder / WEIGHTS_FILE).is_file():
        raise LeaderboardError(f"the result crowns {store.relative(folder)} but that folder is not "
                               "in this checkout of the published branch; merge its pull request "
                               "into it first")


def _who(king: King | None) -> str:
    return "no king" if king is None else f"{king.miner} generation {king.generation}"


def stale_reason(current: King | None, result: Result,
                 against: object = UNKNOWN) -> str | None:
    """Why a crown or a loss no longer holds because the king changed, or None.

    With `against` known, the king it was scored against must be the one reigning. Without
    it (a maintainer's `leaderboard apply`), only a crown is checked, from what its record
    says: a king compared with, and its evaluation starting after the reigning king's.
    """
    if result.outcome not in (KING, LOST) or (current is not None and current.key == result.key):
        return None
    if against is not UNKNOWN:
        before = against.key if isinstance(against, King) else None
        if before == (None if current is None else current.key):
            return None
        if current is None:
            raise LeaderboardError(f"the result was scored against {_who(against)} but the "
                                   "leaderboard has no king; restore leaderboard/ from git")
        return (f"it was scored against {_who(against)}, but {_who(current)} was crowned "
                "while it ran.")
    if result.outcome != KING:
        return None
    if current is None and result.king_composite is not None:
        raise LeaderboardError("the result was compared with a king but the leaderboard has "
                               "none; re-run the evaluation")
    if current is not None and result.king_composite is None:
        return f"it was scored without a king, but {_who(current)} reigns now."
    if current is not None and parse_time(result.evaluated_at) < parse_time(current.crowned_at):
        return f"it was scored before {_who(current)} was crowned."
    return None


def seed_king(repo: Path, submission_dir: Path, data: dict[str, Any],
              rules: Competition) -> Applied:
    """Install the first king from a maintainer's evaluation of a committed submission."""
    store = Store(Path(repo))
    result = check_result(data, rules)
    current = store.king()
    if current is not None and current.key != result.key:
        raise LeaderboardError(f"{current.miner} generation {current.generation} already "
                               "reigns; seed-king only installs the first king")
    if not (Path(submission_dir) / WEIGHTS_FILE).is_file():
        raise LeaderboardError(f"{submission_dir} has no {WEIGHTS_FILE}; commit the submission "
                               "folder before seeding")
    parts = Path(submission_dir).resolve().parts[-2:]
    if parts != (result.miner, str(result.generation)):
        raise LeaderboardError(f"the result is for {result.miner}/{result.generation}, "
                               f"not for {'/'.join(parts)}")
    if result.outcome != KING:
        raise LeaderboardError(f"the result's outcome is {result.outcome!r}; only a "
                               "crowned result can seed the king")
    return apply_result(repo, data, rules)


# ---------------------------------------------------------------- validate


@dataclass(frozen=True)
class Checked:
    """What `validate_state` read: state files (king, history, manifest, …) and results."""

    files: int
    results: int


def validate_state(repo: Path, rules: Competition) -> Checked:
    """Check every leaderboard file against its schema and the others."""
    store, checked, results = Store(Path(repo)), 0, 0
    for kind, name in (("king", KING_FILE), ("history", HISTORY_FILE),
                       ("manifest", MANIFEST_FILE), ("fairness", FAIRNESS_FILE)):
        data = read_json(store.file(name))
        if data is not None:
            validate(kind, data, f"{LEADERBOARD_DIR}/{name}")
            checked += 1
    store.attempts()
    _check_attempts_index(store, rules)
    store.queue_events()
    checked += store.file(ATTEMPTS_FILE).exists() + store.file(QUEUE_FILE).exists()
    digests = store.digests()
    for path in store.result_files():
        where = store.relative(path)
        result = check_result(read_json(path), rules, where)
        if path != store.result_path(result.miner, result.generation, result.outcome,
                                     result.evaluated_at):
            raise LeaderboardError(f"{where} holds the result of {result.miner} generation "
                                   f"{result.generation}; move it to match")
        _check_digest(store, path, digests.pop(path.relative_to(store.root).as_posix(), None))
        results += 1
    if digests:
        raise LeaderboardError(f"{LEADERBOARD_DIR}/{DIGESTS_FILE} names {next(iter(digests))}, "
                               "which is not on the board; restore it from git")
    _check_king_history(store)
    return Checked(checked, results)


def _check_digest(store: Store, path: Path, recorded: str | None) -> None:
    """A result file is the one its digest line names: the file the record job attested."""
    where = store.relative(path)
    if recorded is None:
        raise LeaderboardError(f"{where} has no digest in {LEADERBOARD_DIR}/{DIGESTS_FILE}: a "
                               "result file is written only by `leaderboard apply`; restore "
                               "both from git")
    found = hashlib.sha256(path.read_bytes()).hexdigest()
    if found != recorded:
        raise LeaderboardError(f"{where} changed after it was recorded: its SHA-256 is "
                               f"{found[:12]}…, {DIGESTS_FILE} names {recorded[:12]}… (the "
                               "digest the record job attested); restore it from git")


def _check_attempts_index(store: Store, rules: Competition) -> None:
    """The gates' index of the attempts log, where they would use it, describes the log row
    for row (see evaluator/attempts_index.py)."""
    try:
        basis = read_basis(store.file(BASIS_FILE), store.manifest(), rules)
    except BasisError:
        return  # gate 3 fails closed on such a board and reads no index
    problem = attempts_index.mismatch(store.root, rules, basis)
    if problem is not None:
        raise LeaderboardError(f"{LEADERBOARD_DIR}/{problem}; delete it (the next recorded "
                               "attempt writes it again from the log)")


def check_king_folder(repo: Path) -> None:
    """The reigning king's submission folder is in this checkout (its weights are what
    challengers are compared with, and what `score --king` and `train --init king` read)."""
    store = Store(Path(repo))
    king = store.king()
    if king is None:
        return
    folder = store.submission(king.miner, king.generation)
    if not (folder / WEIGHTS_FILE).is_file():
        raise LeaderboardError(f"king.json crowns {king.miner} generation {king.generation}, "
                               f"but {store.relative(folder)}/{WEIGHTS_FILE} is not in this "
                               "checkout: merge the king's pull request (or restore the folder) "
                               "before recording its result")


def _check_king_history(store: Store) -> None:
    king, history = store.king(), store.history()
    if king is None and history:
        raise LeaderboardError("history.json lists kings but king.json has none")
    if king is not None and (not history or history[-1].key != king.key):
        raise LeaderboardError("king.json's king is not the last entry of history.json")
