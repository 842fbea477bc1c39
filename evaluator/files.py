"""The one way the product writes JSON and timestamps: deterministic text, replaced atomically."""

from __future__ import annotations

import json
import math
import os
import re
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

# A UTC time as every state file writes it: 2026-11-28T10:00:00Z (fractions of a second allowed).
UTC_TIME_RE = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,6})?Z", re.ASCII)


def dumps(obj: Any) -> str:
    """Sorted keys, two-space indent, final newline: diffs of state files read well.

    NaN and infinities are refused (ValueError): they are not JSON, and one would break every
    reader of the file."""
    return json.dumps(obj, indent=2, sort_keys=True, allow_nan=False) + "\n"


def dumps_line(obj: Any) -> str:
    """One sorted JSON line (no newline) for a JSONL log; NaN and infinities refused."""
    return json.dumps(obj, sort_keys=True, allow_nan=False)


def canonical_json(obj: Any) -> str:
    """Compact, sorted, UTF-8 JSON: the text that hashes and commitments are taken over."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False)


def write_atomic(path: str | Path, text: str | bytes) -> None:
    """Write through a temp file and rename, so a reader never sees half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with (os.fdopen(fd, "wb") if isinstance(text, bytes)
              else os.fdopen(fd, "w", encoding="utf-8")) as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json(path: str | Path, data: Any) -> None:
    write_atomic(path, dumps(data))


def append_line(path: str | Path, line: str) -> None:
    """Append one line with a single write and an fsync, so a crash loses at most that line."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(line if line.endswith("\n") else line + "\n")
        handle.flush()
        os.fsync(handle.fileno())


# ---------------------------------------------------------------- timestamps

def parse_time(text: str) -> datetime:
    """A UTC ISO 8601 time (`Z` or an offset) as an aware datetime; ValueError otherwise."""
    if not isinstance(text, str):
        raise ValueError(f"{text!r} is not a time")
    value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if value.tzinfo is None:
        raise ValueError(f"{text!r} has no time zone; use UTC with a trailing Z")
    return value.astimezone(UTC)


def try_parse_time(value: Any) -> datetime | None:
    """`parse_time`, or None for anything unreadable (display code shows a dash instead)."""
    try:
        return parse_time(value)
    except ValueError:
        return None


def is_utc_time(value: Any) -> bool:
    """Exactly the form the state files write: a valid date and time ending in Z."""
    return (isinstance(value, str) and UTC_TIME_RE.fullmatch(value) is not None
            and try_parse_time(value) is not None)


def format_time(value: datetime, micro: bool = False) -> str:
    """UTC with a trailing Z, to the second (or the microsecond, for ledger entries)."""
    value = value.astimezone(UTC)
    return value.strftime("%Y-%m-%dT%H:%M:%S.%fZ") if micro else \
        value.replace(microsecond=0).strftime("%Y-%m-%dT%H:%M:%SZ")


_CLOCKS: list[Callable[[], datetime]] = []


def utc_now() -> datetime:
    """Now in UTC: the wall clock, or inside a `clock` block the clock it set."""
    return _CLOCKS[-1]() if _CLOCKS else datetime.now(UTC)


@dataclass
class SteppedClock:
    """A clock for `clock` that a run moves on event by event: it starts `span` before `end`
    and each `step()` moves it on by `step`, never past `end` (the demo's: what it records is
    dated in the order it played it, and before it ran)."""

    end: datetime
    span: timedelta
    by: timedelta
    now: datetime = field(init=False)

    def __post_init__(self) -> None:
        self.now = self.end - self.span

    def __call__(self) -> datetime:
        return self.now

    def step(self) -> datetime:
        self.now = min(self.now + self.by, self.end)
        return self.now


@contextmanager
def clock(read: Callable[[], datetime]) -> Iterator[None]:
    """Every `utc_now` in this process reads `read` inside the block: one clock for a run that
    plays hours of a competition in a minute (the demo), so what it records is dated in the
    order it happened."""
    _CLOCKS.append(read)
    try:
        yield
    finally:
        _CLOCKS.pop()


# ---------------------------------------------------------------- untrusted JSON

def _no_constant(name: str) -> Any:
    raise ValueError(f"{name}, which is not valid JSON")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text}, which is out of range for a number")
    return value


def loads_finite(text: str) -> Any:
    """JSON whose numbers are all finite: NaN, Infinity and overflowing literals such as
    1e400 raise ValueError instead of becoming numbers no arithmetic or writer can use."""
    return json.loads(text, parse_constant=_no_constant, parse_float=_finite_float)


def loads_strict(raw: bytes | str, what: str) -> Any:
    """JSON from a stranger: UTF-8, no repeated keys, no NaN/Infinity, bounded nesting.

    Raises ValueError with a message naming `what`, for the caller to re-raise as its own error.
    """
    def no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        keys = [k for k, _ in pairs]
        dupes = sorted({k for k in keys if keys.count(k) > 1})
        if dupes:
            raise ValueError(f"{what} repeats the key(s) {', '.join(map(repr, dupes))}")
        return dict(pairs)

    try:
        text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
        return json.loads(text, object_pairs_hook=no_duplicates, parse_constant=_no_constant,
                          parse_float=_finite_float)
    except UnicodeDecodeError as exc:
        raise ValueError(f"{what} is not UTF-8 text") from exc
    except json.JSONDecodeError as exc:
        raise ValueError(f"{what} is not valid JSON ({exc.msg} at line {exc.lineno})") from exc
    except RecursionError as exc:
        raise ValueError(f"{what} is nested too deeply") from exc
    except ValueError as exc:  # a number no arithmetic can use
        raise ValueError(f"{what} contains {exc}") from exc
