"""The repository's state on disk: where every file lives, and the one reader of leaderboard/.

The layout (the names below; the Reference page lists them): submissions/<login>/<generation>/,
and under leaderboard/ the manifest, king, history, fairness figures, attempts log, queue
events, results (one decisive file per generation, one dated file per void, stale or withdrawn
evaluation), their digests and a retired season revealed. `Store` reads strictly (a file that
breaks its schema or the codec is a `LeaderboardError` naming it), or leniently for the site;
every write is atomic or one fsynced line, each record checked against its schema as written.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path, PurePosixPath
from typing import Any

import jsonschema
import referencing

from evaluator.errors import LeaderboardError
from evaluator.files import (
    append_line,
    dumps,
    dumps_line,
    loads_finite,
    parse_time,
    try_parse_time,
    write_atomic,
)
from evaluator.records import (
    DATED,
    DECISIVE,
    STALE,
    VOID,
    Attempt,
    Crowning,
    King,
    Result,
)
from evaluator.rules import FORMAT_VERSION, is_generation, is_name, is_sha256

log = logging.getLogger(__name__)

SUBMISSIONS_DIR = "submissions"
LEADERBOARD_DIR = "leaderboard"
MANIFEST_FILE, KING_FILE, HISTORY_FILE = "manifest.json", "king.json", "history.json"
ATTEMPTS_FILE, QUEUE_FILE, RESULTS_DIR = "attempts.jsonl", "queue.jsonl", "results"
REVEALED_DIR = "revealed"
DIGESTS_FILE = "results.sha256"
MANIFEST_PATH = PurePosixPath(LEADERBOARD_DIR, MANIFEST_FILE)
SCHEMA_FILES = {"result": "result.schema.json", "king": "king.schema.json",
                "history": "history.schema.json", "attempt": "attempt.schema.json",
                "manifest": "manifest.schema.json", "fairness": "fairness.schema.json",
                "queue": "queue.schema.json"}
FAIRNESS_FILE = "fairness.json"


def submission_path(login: str, generation: int | str) -> str:
    """`submissions/<login>/<generation>`, relative to the repository root."""
    return f"{SUBMISSIONS_DIR}/{login}/{generation}"


def parse_submission_path(path: str) -> tuple[str, int] | None:
    """(login, generation) of exactly `submissions/<login>/<generation>`, else None."""
    parts = PurePosixPath(path).parts if isinstance(path, str) else ()
    if (len(parts) == 3 and parts[0] == SUBMISSIONS_DIR and is_name(parts[1])
            and is_generation(parts[2]) and path == "/".join(parts)):
        return parts[1], int(parts[2])
    return None


# ---------------------------------------------------------------- schemas

@cache
def _registry() -> referencing.Registry:
    folder = resources.files("evaluator") / "schemas"
    schemas = [json.loads((folder / name).read_text(encoding="utf-8"))
               for name in SCHEMA_FILES.values()]
    return referencing.Registry().with_resources(
        (s["$id"], referencing.Resource.from_contents(s)) for s in schemas)


def schema(kind: str) -> dict:
    return _registry().contents(f"https://tinyrouter.invalid/schemas/{SCHEMA_FILES[kind]}")


@cache
def _validator(kind: str) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(schema(kind), registry=_registry())


def validate(kind: str, data: Any, where: str = "") -> None:
    """Raise LeaderboardError naming the first field that breaks the `kind` schema."""
    validator = _validator(kind)
    error = jsonschema.exceptions.best_match(validator.iter_errors(data))
    if error is not None:
        at = "/".join(str(p) for p in error.absolute_path) or "(top level)"
        raise LeaderboardError(f"{where or kind} breaks the {kind} schema at {at}: "
                               f"{error.message[:300]}")


# ---------------------------------------------------------------- raw files

def read_json(path: Path, kind: type = dict) -> Any:
    """A JSON file of the given top-level type, or None when the file is absent."""
    if not path.is_file():
        return None
    try:
        data = loads_finite(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise LeaderboardError(f"{path} is not valid JSON ({exc}); restore it from git") from exc
    if not isinstance(data, kind):
        raise LeaderboardError(f"{path} should hold a JSON {kind.__name__}; restore it from git")
    return data


def read_json_lines(path: Path) -> list[dict[str, Any]]:
    """The objects of a JSONL file, one per non-empty line (LF or CRLF: a string may hold any
    other line separator); a bad line is named."""
    if not path.is_file():
        return []
    rows = []
    for number, line in enumerate(path.read_text(encoding="utf-8").split("\n"), start=1):
        if not line.strip():
            continue
        try:
            row = loads_finite(line)
        except ValueError as exc:
            raise LeaderboardError(f"{path}:{number} is not valid JSON ({exc}); restore it "
                                   "from git") from exc
        if not isinstance(row, dict):
            raise LeaderboardError(f"{path}:{number} should be a JSON object")
        rows.append(row)
    return rows


# ---------------------------------------------------------------- the store

@dataclass(frozen=True)
class Store:
    """One repository's state. `board` reads leaderboard/ from elsewhere (the site's option)."""

    repo: Path
    board: Path | None = None
    lenient: bool = False

    @property
    def root(self) -> Path:
        return Path(self.board) if self.board is not None else Path(self.repo) / LEADERBOARD_DIR

    def file(self, name: str) -> Path:
        return self.root / name

    def relative(self, path: Path) -> str:
        try:
            return path.relative_to(self.repo).as_posix()
        except ValueError:
            return str(path)

    def result_path(self, miner: str, generation: int, outcome: str | None = None,
                    evaluated_at: str | None = None) -> Path:
        """Where a result lives. A void or stale evaluation gets a file of its own, named by
        its time, so the later decisive result does not replace it."""
        name = f"{generation}.json"
        if outcome in DATED:
            moment = parse_time(str(evaluated_at))
            name = f"{generation}.{outcome}.{moment.strftime('%Y%m%dT%H%M%SZ')}.json"
        return self.root / RESULTS_DIR / miner / name

    def submission(self, login: str, generation: int | str) -> Path:
        return Path(self.repo) / submission_path(login, generation)

    def _checked(self, kind: str, data: Any, path: Path) -> Any:
        if data is not None and not self.lenient:
            validate(kind, data, self.relative(path))
        return data

    # -------------------------------------------------------- readers

    def manifest(self) -> dict[str, Any] | None:
        path = self.file(MANIFEST_FILE)
        return self._checked("manifest", read_json(path), path)

    def fairness(self) -> dict[str, Any] | None:
        path = self.file(FAIRNESS_FILE)
        return self._checked("fairness", read_json(path), path)

    def manifest_hash(self) -> str | None:
        manifest = self.manifest()
        return manifest.get("manifest_hash") if manifest else None

    def king(self) -> King | None:
        path = self.file(KING_FILE)
        data = self._checked("king", read_json(path), path)
        king = (data or {}).get("king")
        return (King.from_dict(king, not self.lenient, f"{self.relative(path)}: king")
                if isinstance(king, dict) else None)

    def history(self) -> list[Crowning]:
        path = self.file(HISTORY_FILE)
        data = self._checked("history", read_json(path), path) or {}
        where = f"{self.relative(path)}: kings"
        return [Crowning.from_dict(k, not self.lenient, f"{where}[{i}]")
                for i, k in enumerate(data.get("kings") or []) if isinstance(k, dict)]

    def attempts(self) -> list[Attempt]:
        path = self.file(ATTEMPTS_FILE)
        rows = read_json_lines(path)
        if self.lenient:
            return [Attempt.from_dict(row, strict=False) for row in rows]
        where = [f"{self.relative(path)} line {number}" for number in range(1, len(rows) + 1)]
        for line, row in zip(where, rows, strict=True):
            self._checked("attempt", row, Path(line))
        return [Attempt.from_dict(row, True, line) for line, row in zip(where, rows, strict=True)]

    def gates_pass(self, pr: int | None, head_sha: str | None) -> Attempt | None:
        """The recorded attempt of this PR at this head if its gates passed: what an evaluation
        of that head requires (a label on the PR is only a display)."""
        if pr is None or head_sha is None:
            return None
        return next((a for a in self.attempts() if (a.pr, a.head_sha) == (pr, head_sha)
                     and a.gates_passed), None)

    def require_gates_pass(self, pr: int | None, head_sha: str | None) -> Attempt:
        """`gates_pass`, or a LeaderboardError saying what to do."""
        attempt = self.gates_pass(pr, head_sha)
        if attempt is None:
            raise LeaderboardError(f"{LEADERBOARD_DIR}/{ATTEMPTS_FILE} records no gates pass for "
                                   f"PR {pr} at {head_sha}; the gates must pass on this head "
                                   "before it is evaluated")
        return attempt

    def queue_events(self) -> list[dict[str, Any]]:
        """The queue events, oldest first, as the parsed lines of queue.jsonl. A kind of event
        this code does not know is kept as it is (the schema only names the common fields)."""
        path = self.file(QUEUE_FILE)
        rows = read_json_lines(path)
        for number, row in enumerate(rows, start=1):
            self._checked("queue", row, Path(f"{self.relative(path)} line {number}"))
        return rows

    def result_files(self) -> list[Path]:
        return sorted((self.root / RESULTS_DIR).glob("*/*.json"))

    def result(self, path: Path) -> Result:
        data = self._checked("result", read_json(path), path)
        record = Result.from_dict(data, not self.lenient, self.relative(path))
        if self.lenient and record.miner == "None":  # a file without a name: show its folder
            record = Result.from_dict({**data, "miner": path.parent.name}, strict=False)
        return record

    def results(self) -> list[Result]:
        """Every public result, newest first."""
        records = [self.result(path) for path in self.result_files()]
        return sorted(records, key=lambda r: (_sort_time(r.evaluated_at), r.miner,
                                              r.generation), reverse=True)

    def _miner_folders(self, miner: str) -> list[Path]:
        """results/<miner>/ in whatever letter case it was written (one listing of results/,
        not a glob into every miner's folder)."""
        folder = self.root / RESULTS_DIR
        try:
            names = os.listdir(folder)
        except OSError:
            return []
        return [folder / name for name in sorted(names) if name.lower() == miner.lower()]

    def refunded_heads(self, miner: str | None = None) -> frozenset[str]:
        """Heads whose slot is given back (see lifecycle.refunded): a void result or an
        evaluation that ended without one (a queue event), and no decisive result; of one
        miner's submissions when `miner` is given (what the gates need). Only the submissions
        with a void or unfinished evaluation are read, not the season's every result."""
        from evaluator.lifecycle import LIFTED, UNFINISHED, refunded

        events = [e for e in self.queue_events() if e.get("event") in (*UNFINISHED, LIFTED)
                  and (miner is None or str(e.get("miner")).lower() == miner.lower())]
        folders = (self._miner_folders(miner) if miner is not None
                   else sorted((self.root / RESULTS_DIR).glob("*")))
        paths = set()
        for folder in folders:
            for void in folder.glob(f"*.{VOID}.*.json"):
                generation = void.name.split(".")[0]
                paths.update(folder.glob(f"{generation}.*json"))
        for event in events:  # an unfinished head's decisive result, if one came after all
            generation = str(event.get("generation"))
            if is_generation(generation):
                for folder in self._miner_folders(str(event.get("miner"))):
                    paths.update(folder.glob(f"{generation}.*json"))
        return refunded((self.result(path) for path in sorted(paths)), events)

    def ended(self, pr: int | None, head_sha: str | None) -> tuple[str, str | None] | None:
        """(state, reason) after which this PR's head is never evaluated again, if any: a
        decisive, void or withdrawn result, or an evaluation that ended without one (see
        lifecycle.ENDS_HEAD)."""
        from evaluator.lifecycle import head_end

        return head_end(self.results(), self.queue_events(), pr, head_sha)

    def decided_generation(self, miner: str, generation: int) -> Result | None:
        """The decisive result of this miner's generation, whichever head it came from (only
        that generation's decisive file is read, the login compared in any case)."""
        for folder in self._miner_folders(miner):
            path = folder / f"{int(generation)}.json"
            if path.is_file():
                record = self.result(path)
                if record.outcome in DECISIVE:
                    return record
        return None

    def decided(self, pr: int | None, head_sha: str | None) -> Result | None:
        """The decisive result of this PR at this head (not void, not stale), if there is one."""
        return next((r for r in self.results() if r.outcome not in (VOID, STALE)
                     and pr is not None and (r.pr, r.head_sha) == (pr, head_sha)), None)

    def submission_folders(self) -> list[Path]:
        """Every `submissions/<login>/<generation>` folder (real folders, valid names only)."""
        root = Path(self.repo) / SUBMISSIONS_DIR
        if not root.is_dir():
            return []
        return sorted(p for p in root.glob("*/*") if p.is_dir() and not p.is_symlink()
                      and is_name(p.parent.name) and is_generation(p.name))

    def merged_generations(self, login: str, exclude: Path | None = None) -> list[int]:
        """Generations already in submissions/<login>/ (login compared case-insensitively)."""
        return [int(p.name) for p in self.submission_folders()
                if p.parent.name.lower() == login.lower() and p != exclude]

    def next_generation(self, login: str, attempts: list[Attempt] | None = None,
                        pr: int | None = None, exclude: Path | None = None) -> int:
        """1 + the highest merged or attempted generation; a re-run PR keeps its own."""
        attempts = self.attempts() if attempts is None else attempts
        mine = [a for a in attempts if a.miner.lower() == login.lower()]
        for attempt in mine:
            if pr is not None and attempt.pr == pr:
                return attempt.generation
        seen = self.merged_generations(login, exclude) + [a.generation for a in mine]
        return max(seen, default=0) + 1

    # -------------------------------------------------------- writers

    def record_attempt(self, attempt: Attempt, known: list[Attempt] | None = None) -> bool:
        """Append the attempt unless this head of this PR has one; whether a line was added.
        `known`: the log as this process just read it (saves reading a season's log twice).

        One attempt per head: re-running the same head is free, a new head on the same PR
        is a new attempt.
        """
        known = self.attempts() if known is None else known
        if any((a.pr, a.head_sha) == (attempt.pr, attempt.head_sha) for a in known):
            return False
        validate("attempt", attempt.to_dict(), f"the attempt of PR {attempt.pr}")
        try:
            append_line(self.file(ATTEMPTS_FILE), dumps_line(attempt.to_dict()))
        except OSError as exc:
            raise LeaderboardError(f"cannot record the attempt in {ATTEMPTS_FILE}: {exc}") from exc
        return True

    def record_queue_event(self, event: dict[str, Any]) -> None:
        """Append one queue event (see `queue_events`)."""
        validate("queue", event, f"the {event.get('event')!r} queue event")
        try:
            append_line(self.file(QUEUE_FILE), dumps_line(event))
        except OSError as exc:
            raise LeaderboardError(f"cannot record the event in {QUEUE_FILE}: {exc}") from exc

    def write_result(self, public: dict[str, Any]) -> Path:
        """Write a public result record (already cut down by the disclosure rule), and its
        digest line in results.sha256."""
        path = self.result_path(str(public["miner"]), int(public["generation"]),
                                public.get("outcome"), public.get("evaluated_at"))
        validate("result", public, self.relative(path))
        text = dumps(public)
        write_atomic(path, text)
        line = digest_line(path.relative_to(self.root).as_posix(), text.encode())
        if line not in self.digest_text():
            try:
                append_line(self.file(DIGESTS_FILE), line)
            except OSError as exc:
                raise LeaderboardError(f"cannot record the digest in {DIGESTS_FILE}: "
                                       f"{exc}") from exc
        return path

    def digest_text(self) -> str:
        path = self.file(DIGESTS_FILE)
        try:
            return path.read_text(encoding="utf-8") if path.is_file() else ""
        except (OSError, UnicodeDecodeError) as exc:
            raise LeaderboardError(f"cannot read {self.relative(path)} ({exc}); restore it "
                                   "from git") from exc

    def digests(self) -> dict[str, str]:
        """results.sha256 as {path under leaderboard/: SHA-256}; a line that is not one file's
        digest, or a file named twice, is a LeaderboardError naming it."""
        found: dict[str, str] = {}
        for number, line in enumerate(self.digest_text().splitlines(), start=1):
            digest, _, name = line.partition("  ")
            if not (is_sha256(digest) and name.startswith(f"{RESULTS_DIR}/")) or name in found:
                raise LeaderboardError(f"{LEADERBOARD_DIR}/{DIGESTS_FILE} line {number} is not "
                                       "a result file's digest named once; restore it from git")
            found[name] = digest
        return found

    def write_king(self, king: King | None) -> None:
        data = {"format": FORMAT_VERSION, "king": None if king is None else king.to_dict()}
        validate("king", data, f"{LEADERBOARD_DIR}/{KING_FILE}")
        write_atomic(self.file(KING_FILE), dumps(data))

    def write_history(self, kings: list[Crowning]) -> None:
        data = {"format": FORMAT_VERSION, "kings": [k.to_dict() for k in kings]}
        validate("history", data, f"{LEADERBOARD_DIR}/{HISTORY_FILE}")
        write_atomic(self.file(HISTORY_FILE), dumps(data))


def digest_line(name: str, data: bytes) -> str:
    """One line of results.sha256, as `sha256sum` writes it (text mode)."""
    return f"{hashlib.sha256(data).hexdigest()}  {name}\n"


def _sort_time(value: Any) -> float:
    moment = try_parse_time(value)
    return moment.timestamp() if moment else float("-inf")
