"""The cost ledger: one hash-chained JSON line per paid call, so a receipt's cost can be checked.

Each entry carries `prev` (the previous entry's hash, `GENESIS` first) and `hash`, the SHA-256
of the canonical JSON of the entry without `hash`. Editing, deleting, inserting or reordering
a line breaks the chain at that line; dropping the last lines is caught by comparing the head
with the one a receipt records.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evaluator import finite
from evaluator.errors import LedgerError
from evaluator.files import canonical_json, format_time, utc_now

try:  # other processes appending to the same ledger; absent on Windows
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None

GENESIS = "0" * 64
FIELDS = ("at", "model", "prompt_tokens", "completion_tokens", "cost_usd", "request_id",
          "prev", "hash")
_TAIL_CHUNK = 4096


def entry_hash(entry: dict[str, Any]) -> str:
    """SHA-256 hex of the canonical JSON of the entry without its `hash` field."""
    body = {key: value for key, value in entry.items() if key != "hash"}
    return hashlib.sha256(canonical_json(body).encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class LedgerSummary:
    entries: int
    total_cost_usd: float
    head: str


class Ledger:
    """Appends entries to a JSONL ledger; safe across threads, tasks and processes."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._lock = threading.Lock()

    def append(self, model: str, prompt_tokens: int, completion_tokens: int, cost_usd: float,
               request_id: str, at: str | None = None) -> dict[str, Any]:
        """Chain one entry onto the ledger with a single write and fsync; returns the entry.

        Counts and the cost must be finite and non-negative (LedgerError otherwise): one bad
        number would make every later total meaningless."""
        try:
            prompt_tokens = finite.count(prompt_tokens, "prompt_tokens")
            completion_tokens = finite.count(completion_tokens, "completion_tokens")
            cost_usd = finite.amount(cost_usd, "cost_usd")
        except ValueError as exc:
            raise LedgerError(f"not ledgered: {exc}") from exc
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._lock:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
            try:
                if fcntl is not None:
                    fcntl.flock(fd, fcntl.LOCK_EX)
                entry = {"at": at or format_time(utc_now(), micro=True), "model": model,
                         "prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                         "cost_usd": cost_usd, "request_id": str(request_id),
                         "prev": _last_hash(fd)}
                entry["hash"] = entry_hash(entry)
                os.write(fd, (canonical_json(entry) + "\n").encode("utf-8"))
                os.fsync(fd)
            finally:
                os.close(fd)  # closing releases the flock
        return entry

    @property
    def head(self) -> str:
        """The hash of the last entry (GENESIS for a missing or empty ledger)."""
        if not self.path.exists():
            return GENESIS
        fd = os.open(self.path, os.O_RDONLY)
        try:
            return _last_hash(fd)
        finally:
            os.close(fd)


def _last_hash(fd: int) -> str:
    """The `hash` of the file's last line, reading backwards from its end."""
    end = os.lseek(fd, 0, os.SEEK_END)
    data = b""
    pos = end
    while pos > 0:
        step = min(_TAIL_CHUNK, pos)
        pos -= step
        data = os.pread(fd, step, pos) + data
        if data.rstrip(b"\n").count(b"\n") >= 1:
            break
    lines = data.rstrip(b"\n").split(b"\n")
    if not lines or not lines[-1]:
        return GENESIS
    try:
        last = json.loads(lines[-1])
        return str(last["hash"])
    except (ValueError, KeyError, TypeError) as exc:
        raise LedgerError("the ledger's last line is not a ledger entry; "
                          "run `tinyrouter ledger verify` on it") from exc


def verify_ledger(path: str | Path, expected_head: str | None = None) -> LedgerSummary:
    """Check every line and the chain; raises LedgerError naming the first bad line."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise LedgerError(f"cannot read ledger {path}: {exc.strerror or exc}") from exc
    prev, total, count = GENESIS, 0.0, 0
    for number, line in enumerate(raw.decode("utf-8", errors="replace").splitlines(), start=1):
        entry = _parse_line(line, number)
        if entry["hash"] != entry_hash(entry):
            raise LedgerError(f"line {number}: hash does not match the entry (the line was edited)")
        if entry["prev"] != prev:
            raise LedgerError(f"line {number}: prev does not match the hash of the entry before "
                              "it (a line was deleted, inserted or reordered)")
        prev, total, count = entry["hash"], total + entry["cost_usd"], count + 1
    if expected_head is not None and prev != expected_head:
        raise LedgerError(f"the ledger ends at {prev}, not at the expected head {expected_head} "
                          "(entries were removed from its end, or it is another ledger)")
    return LedgerSummary(entries=count, total_cost_usd=total, head=prev)


def _parse_line(line: str, number: int) -> dict[str, Any]:
    try:
        entry = json.loads(line)
    except ValueError as exc:
        raise LedgerError(f"line {number}: not valid JSON") from exc
    if not isinstance(entry, dict) or sorted(entry) != sorted(FIELDS):
        raise LedgerError(f"line {number}: not a ledger entry (expected the fields "
                          f"{', '.join(FIELDS)})")
    for name in ("prompt_tokens", "completion_tokens"):
        value = entry[name]
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise LedgerError(f"line {number}: {name} must be a non-negative integer")
    cost = entry["cost_usd"]
    if (not isinstance(cost, (int, float)) or isinstance(cost, bool) or not math.isfinite(cost)
            or cost < 0):
        raise LedgerError(f"line {number}: cost_usd must be a non-negative number")
    if not all(isinstance(entry[name], str) for name in ("at", "model", "request_id", "prev",
                                                          "hash")):
        raise LedgerError(f"line {number}: at, model, request_id, prev and hash must be strings")
    return entry
