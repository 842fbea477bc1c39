"""King of the hill on the leaderboard: record a result, seed the first king, check it all.

Writes go through `store.Store`; each is atomic and idempotent: a result is keyed by miner,
generation, PR and head SHA, and applying the same one twice changes nothing.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evaluator.errors import LeaderboardError
from evaluator.files import parse_time
from evaluator.records import KING, LOST, Crowning, King, Result
from evaluator.rules import WEIGHTS_FILE, Competition
from evaluator.scoring import TOLERANCE, crowns
from evaluator.store import (
    ATTEMPTS_FILE,
    FAIRNESS_FILE,
    HISTORY_FILE,
    KING_FILE,
    LEADERBOARD_DIR,
    MANIFEST_FILE,
    Store,
    read_json,
    validate,
)

log = logging.getLogger(__name__)


def check_result(data: dict[str, Any], rules: Competition, where: str = "result") -> Result:
    """Schema plus the rules: the benchmarks, the composite and the outcome all add up."""
    validate("result", data, where)
    result = Result.from_dict(data)
    if result.outcome == LOST:
        # a loss is published rounded: refuse only what is a crown even after rounding
        slack = rules.disclosure_precision / 2
        if crowns(result.delta - slack, 0.0, result.ci95[0] - slack, rules):
            raise LeaderboardError(f"{where}: the delta and its interval crown the head but it "
                                   "says lost")
    if result.outcome != KING:
        return result
    king, composite = result.king_composite, result.composite
    if king is not None and abs(result.delta - (composite - king)) > TOLERANCE:
        raise LeaderboardError(f"{where}: delta is not composite − king_composite")
    if not crowns(composite, king, None if result.ci95 is None else result.ci95[0], rules):
        raise LeaderboardError(f"{where}: crowned without beating the king by the margin of "
                               f"{rules.win_margin} with an interval above zero")
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
    """What `apply_result` changed (paths relative to the repo); empty when nothing did."""

    changed: list[str] = field(default_factory=list)
    crowned: bool = False


def apply_result(repo: Path, data: dict[str, Any], rules: Competition) -> Applied:
    """Record one evaluation: its result file, and for a new king king.json and history.json.

    Steps run king → history → result file, each idempotent, so a re-run after a crash
    finishes the job and a re-run after success changes nothing.
    """
    result = check_result(data, rules)
    store, applied = Store(Path(repo)), Applied()
    path = store.result_path(result.miner, result.generation, result.outcome,
                             result.evaluated_at)
    if path.is_file():
        existing = store.result(path)
        if existing.key != result.key:
            raise LeaderboardError(
                f"{store.relative(path)} already records PR {existing.pr} at "
                f"{existing.head_sha}; a result for another PR or commit cannot replace it")
        log.info("result for %s generation %s is already recorded; nothing to do",
                 result.miner, result.generation)
        return applied
    if result.outcome == KING:
        _crown(store, data, result, applied)
    applied.changed.append(store.relative(store.write_result(data)))
    return applied


def _crown(store: Store, data: dict[str, Any], result: Result, applied: Applied) -> None:
    current = store.king()
    if current is None or current.key != result.key:
        _check_reigning(current, result)
        store.write_king(King.crowned(data, current))
        applied.changed.append(f"{LEADERBOARD_DIR}/{KING_FILE}")
    history = store.history()
    if not any(entry.key == result.key for entry in history):
        store.write_history([*history, Crowning.of(data)])
        applied.changed.append(f"{LEADERBOARD_DIR}/{HISTORY_FILE}")
    applied.crowned = True


def check_private(public: dict[str, Any], private: dict[str, Any], rules: Competition) -> None:
    """The private record behind a public one: the same evaluation, the partition it committed."""
    record = Result.from_dict(private)
    if private.get("public") != public or Result.from_dict(public).key != record.key:
        raise LeaderboardError("the private record is of another evaluation than the result")
    if record.partition_commitment is None:
        return  # rejected before a partition was drawn
    if record.partition is None or record.partition.commitment != public.get(
            "partition_commitment"):
        raise LeaderboardError("the private record's partition seed does not match the "
                               "result's partition_commitment; refusing the result")


def _check_reigning(current: King | None, result: Result) -> None:
    """A result must have been scored against the king that reigns now."""
    if current is None and result.king_composite is not None:
        raise LeaderboardError("the result was compared with a king but the leaderboard has "
                               "none; re-run the evaluation")
    if current is not None and result.king_composite is None:
        raise LeaderboardError(f"the result was scored without a king but {current.miner} "
                               f"reigns now; re-run the evaluation against the current king")
    if current is not None and parse_time(result.evaluated_at) < parse_time(current.crowned_at):
        raise LeaderboardError(f"the result was scored before {current.miner} was crowned; "
                               "re-run the evaluation against the current king")


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


def validate_state(repo: Path, rules: Competition) -> int:
    """Check every leaderboard file against its schema and the others; return files checked."""
    store, checked = Store(Path(repo)), 0
    for kind, name in (("king", KING_FILE), ("history", HISTORY_FILE),
                       ("manifest", MANIFEST_FILE), ("fairness", FAIRNESS_FILE)):
        data = read_json(store.file(name))
        if data is not None:
            validate(kind, data, f"{LEADERBOARD_DIR}/{name}")
            checked += 1
    store.attempts()
    checked += store.file(ATTEMPTS_FILE).exists()
    for path in store.result_files():
        where = store.relative(path)
        result = check_result(read_json(path), rules, where)
        if path != store.result_path(result.miner, result.generation, result.outcome,
                                     result.evaluated_at):
            raise LeaderboardError(f"{where} holds the result of {result.miner} generation "
                                   f"{result.generation}; move it to match")
        checked += 1
    _check_king_history(store)
    return checked


def _check_king_history(store: Store) -> None:
    king, history = store.king(), store.history()
    if king is None and history:
        raise LeaderboardError("history.json lists kings but king.json has none")
    if king is not None and (not history or history[-1].key != king.key):
        raise LeaderboardError("king.json's king is not the last entry of history.json")
