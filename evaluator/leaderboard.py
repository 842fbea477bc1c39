"""Leaderboard state in `<repo>/leaderboard/`: schemas, validation, king-of-the-hill and attempts.

Every file has a JSON Schema in `evaluator/schemas/`. Writes are atomic (temp file +
rename) and idempotent: a result is keyed by miner, generation, PR and head SHA, and
applying the same one twice changes nothing.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import referencing

from evaluator.attempts import parse_time
from evaluator.errors import LeaderboardError
from evaluator.files import dumps, write_atomic
from evaluator.rules import FORMAT_VERSION, OFFICIAL, WEIGHTS_FILE, Competition
from evaluator.scoring import TOLERANCE, crowns

log = logging.getLogger(__name__)

SCHEMA_FILES = {"result": "result.schema.json", "king": "king.schema.json",
                "history": "history.schema.json", "attempt": "attempt.schema.json",
                "manifest": "manifest.schema.json"}
LEADERBOARD_DIR = "leaderboard"
KING_FILE, HISTORY_FILE = "king.json", "history.json"
ATTEMPTS_FILE, MANIFEST_FILE, RESULTS_DIR = "attempts.jsonl", "manifest.json", "results"


# ---------------------------------------------------------------- files


def read_json(path: Path, default: Any = None) -> Any:
    if not path.exists():
        return default
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise LeaderboardError(f"{path} is not valid JSON ({exc}); restore it from git") from exc


@dataclass(frozen=True)
class State:
    """Where the leaderboard files of one repository live."""

    repo: Path

    @property
    def root(self) -> Path:
        return Path(self.repo) / LEADERBOARD_DIR

    def file(self, name: str) -> Path:
        return self.root / name

    def result_path(self, miner: str, generation: int) -> Path:
        return self.root / RESULTS_DIR / miner / f"{generation}.json"

    def king(self) -> dict | None:
        data = read_json(self.file(KING_FILE), {"format": FORMAT_VERSION, "king": None})
        validate("king", data, f"{LEADERBOARD_DIR}/{KING_FILE}")
        return data["king"]

    def history(self) -> list[dict]:
        return read_json(self.file(HISTORY_FILE), {"kings": []})["kings"]

    def manifest_hash(self) -> str | None:
        manifest = read_json(self.file(MANIFEST_FILE))
        return manifest.get("manifest_hash") if manifest else None

    def attempts(self) -> list[dict]:
        path = self.file(ATTEMPTS_FILE)
        if not path.exists():
            return []
        lines = path.read_text(encoding="utf-8").splitlines()
        try:
            return [json.loads(line) for line in lines if line.strip()]
        except ValueError as exc:
            raise LeaderboardError(f"{path} has a line that is not JSON ({exc})") from exc


# ---------------------------------------------------------------- schemas


@cache
def _registry() -> referencing.Registry:
    folder = resources.files("evaluator") / "schemas"
    schemas = [json.loads((folder / name).read_text(encoding="utf-8"))
               for name in SCHEMA_FILES.values()]
    return referencing.Registry().with_resources(
        (s["$id"], referencing.Resource.from_contents(s)) for s in schemas)


def schema(kind: str) -> dict:
    uri = f"https://tinyrouter.invalid/schemas/{SCHEMA_FILES[kind]}"
    return _registry().contents(uri)


def validate(kind: str, data: Any, where: str = "") -> None:
    """Raise LeaderboardError naming the first field that breaks the `kind` schema."""
    validator = jsonschema.Draft202012Validator(schema(kind), registry=_registry())
    error = jsonschema.exceptions.best_match(validator.iter_errors(data))
    if error is not None:
        at = "/".join(str(p) for p in error.absolute_path) or "(top level)"
        raise LeaderboardError(f"{where or kind} breaks the {kind} schema at {at}: "
                               f"{error.message[:300]}")


def check_result(result: dict, rules: Competition = OFFICIAL, where: str = "result") -> None:
    """Schema plus the rules: the benchmarks, the composite and the outcome all add up."""
    validate("result", result, where)
    if result["outcome"] == "rejected":
        return
    king, composite = result["king_composite"], result["composite"]
    if king is not None and abs(result["delta"] - (composite - king)) > 1e-6:
        raise LeaderboardError(f"{where}: delta is not composite − king_composite")
    if result["outcome"] == "lost" and crowns(composite, king, rules):
        raise LeaderboardError(f"{where}: composite beats the king by the margin but says lost")
    if result["outcome"] == "king":
        if not crowns(composite, king, rules):
            raise LeaderboardError(f"{where}: crowned without beating the king by the margin of "
                                   f"{rules.win_margin}")
        per = result["per_benchmark"]
        if sorted(per) != sorted(rules.benchmarks):
            raise LeaderboardError(f"{where}: per_benchmark must cover exactly "
                                   f"{', '.join(rules.benchmarks)}")
        mean = sum(per[b]["score"] for b in rules.benchmarks) / len(rules.benchmarks)
        if abs(mean - composite) > 1e-6 + TOLERANCE:
            raise LeaderboardError(f"{where}: composite is not the mean of the benchmark scores")


def _key(record: dict) -> tuple:
    return (record["miner"].lower(), record["generation"], record["pr"], record["head_sha"])


# ---------------------------------------------------------------- apply


@dataclass
class Applied:
    """What `apply_result` changed (paths relative to the repo); empty when nothing did."""

    changed: list[str] = field(default_factory=list)
    crowned: bool = False


def apply_result(repo: Path, result: dict, rules: Competition = OFFICIAL) -> Applied:
    """Record one evaluation: its result file, and for a new king king.json and history.json.

    Steps run king → history → result file, each idempotent, so a re-run after a crash
    finishes the job and a re-run after success changes nothing.
    """
    check_result(result, rules)
    state, applied = State(Path(repo)), Applied()
    path = state.result_path(result["miner"], result["generation"])
    existing = read_json(path)
    if existing is not None:
        if _key(existing) != _key(result):
            raise LeaderboardError(
                f"{path.relative_to(state.repo)} already records PR {existing['pr']} at "
                f"{existing['head_sha']}; a result for another PR or commit cannot replace it")
        log.info("result for %s generation %s is already recorded; nothing to do",
                 result["miner"], result["generation"])
        return applied
    if result["outcome"] == "king":
        _crown(state, result, applied)
    write_atomic(path, dumps(result))
    applied.changed.append(str(path.relative_to(state.repo)))
    return applied


def _crown(state: State, result: dict, applied: Applied) -> None:
    current = state.king()
    if current is None or _key(current) != _key(result):
        _check_reigning(current, result)
        write_atomic(state.file(KING_FILE), dumps({"format": FORMAT_VERSION,
                                                   "king": king_entry(result, current)}))
        applied.changed.append(f"{LEADERBOARD_DIR}/{KING_FILE}")
    history = state.history()
    if not any(_key(entry) == _key(result) for entry in history):
        history.append(history_entry(result))
        write_atomic(state.file(HISTORY_FILE), dumps({"format": FORMAT_VERSION, "kings": history}))
        applied.changed.append(f"{LEADERBOARD_DIR}/{HISTORY_FILE}")
    applied.crowned = True


def _check_reigning(current: dict | None, result: dict) -> None:
    """A result must have been scored against the king that reigns now."""
    if current is None and result["king_composite"] is not None:
        raise LeaderboardError("the result was compared with a king but the leaderboard has "
                               "none; re-run the evaluation")
    if current is not None and result["king_composite"] is None:
        raise LeaderboardError(f"the result was scored without a king but {current['miner']} "
                               f"reigns now; re-run the evaluation against the current king")
    if current is not None and (parse_time(result["evaluated_at"])
                                < parse_time(current["crowned_at"])):
        raise LeaderboardError(f"the result was scored before {current['miner']} was crowned; "
                               "re-run the evaluation against the current king")


def king_entry(result: dict, previous: dict | None) -> dict:
    per = result["per_benchmark"]
    return {"miner": result["miner"], "generation": result["generation"], "pr": result["pr"],
            "head_sha": result["head_sha"], "composite": result["composite"],
            "per_benchmark": per, "crowned_at": result["evaluated_at"],
            "novelty": {bench: comp["novelty"] for bench, comp in per.items()},
            "paired": result["paired"],
            "previous": None if previous is None else {
                "miner": previous["miner"], "generation": previous["generation"],
                "composite": result["king_composite"]}}


def history_entry(result: dict) -> dict:
    paired = result["paired"]
    return {"miner": result["miner"], "generation": result["generation"], "pr": result["pr"],
            "head_sha": result["head_sha"], "composite": result["composite"],
            "crowned_at": result["evaluated_at"], "delta": result["delta"],
            "ci95": None if paired is None else list(paired["ci95"]),
            "scores": {b: c["score"] for b, c in result["per_benchmark"].items()}}


def seed_king(repo: Path, submission_dir: Path, result: dict,
              rules: Competition = OFFICIAL) -> Applied:
    """Install the first king from a maintainer's evaluation of a committed submission."""
    state = State(Path(repo))
    current = state.king()
    if current is not None and _key(current) != _key(result):
        raise LeaderboardError(f"{current['miner']} generation {current['generation']} already "
                               "reigns; seed-king only installs the first king")
    if not (Path(submission_dir) / WEIGHTS_FILE).is_file():
        raise LeaderboardError(f"{submission_dir} has no {WEIGHTS_FILE}; commit the submission "
                               "folder before seeding")
    parts = Path(submission_dir).resolve().parts[-2:]
    if parts != (result["miner"], str(result["generation"])):
        raise LeaderboardError(f"the result is for {result['miner']}/{result['generation']}, "
                               f"not for {'/'.join(parts)}")
    if result["outcome"] != "king":
        raise LeaderboardError(f"the result's outcome is {result['outcome']!r}; only a "
                               "crowned result can seed the king")
    return apply_result(repo, result, rules)


# ---------------------------------------------------------------- validate


def validate_state(repo: Path, rules: Competition = OFFICIAL) -> int:
    """Check every leaderboard file against its schema and the others; return files checked."""
    state, checked = State(Path(repo)), 0
    for kind, name in (("king", KING_FILE), ("history", HISTORY_FILE),
                       ("manifest", MANIFEST_FILE)):
        data = read_json(state.file(name))
        if data is not None:
            validate(kind, data, f"{LEADERBOARD_DIR}/{name}")
            checked += 1
    for number, attempt in enumerate(state.attempts(), start=1):
        validate("attempt", attempt, f"{LEADERBOARD_DIR}/{ATTEMPTS_FILE} line {number}")
    checked += state.file(ATTEMPTS_FILE).exists()
    for path in sorted((state.root / RESULTS_DIR).glob("*/*.json")):
        where = str(path.relative_to(state.repo))
        result = read_json(path)
        check_result(result, rules, where)
        if path != state.result_path(result["miner"], result["generation"]):
            raise LeaderboardError(f"{where} holds the result of {result['miner']} generation "
                                   f"{result['generation']}; move it to match")
        checked += 1
    _check_king_history(state)
    return checked


def _check_king_history(state: State) -> None:
    king, history = state.king(), state.history()
    if king is None and history:
        raise LeaderboardError("history.json lists kings but king.json has none")
    if king is not None and (not history or _key(history[-1]) != _key(king)):
        raise LeaderboardError("king.json's king is not the last entry of history.json")
