"""The attempts index: what gate 3 needs from a season's attempts log, in one binary file.

Beside `leaderboard/attempts.jsonl` the bot keeps `attempts.index`, one fixed-width row per log
line (its offset, PR, miner, whether it is an original for gate 3, and its `p16:` projection),
so the gates read it with one `frombuffer` and parse only the lines they need. It is derived,
never trusted on its own: its header names the feature basis and its trailer the log's size
and SHA-256 and its own; the gates use it only when all match the board, else read the log in
full. Layout, little-endian: a 56-byte header, the rows, an 80-byte trailer.
"""

from __future__ import annotations

import hashlib
import logging
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from evaluator import fingerprints
from evaluator.basis import FeatureBasis
from evaluator.errors import LeaderboardError
from evaluator.files import loads_finite, write_atomic
from evaluator.records import Attempt
from evaluator.rules import Competition
from evaluator.store import ATTEMPTS_FILE

log = logging.getLogger(__name__)

INDEX_FILE = "attempts.index"
MAGIC, FORMAT = b"TRATTIDX", 1
HEADER = struct.Struct("<8sI40sI")  # magic, format, basis digest, values per projection
TRAILER = struct.Struct("<QQ32s32s")  # log bytes, rows, SHA-256 of the log, of the index
ORIGINAL = 1  # a row's flag: gate 3 compares new heads with this one
NO_PR = -1


def _key(login: str) -> bytes:
    """A login as the rows hold it, to look up (a login the rows cannot hold matches none)."""
    return login.lower().encode("ascii", "replace")


def _row(values: int) -> np.dtype:
    return np.dtype([("offset", "<u8"), ("pr", "<i8"), ("flags", "u1"), ("miner", "S39"),
                     ("projection", "<f2", (values,))])


def _values(rules: Competition, basis: FeatureBasis) -> int:
    return (rules.n_models - 1) * len(basis.directions)


@dataclass(frozen=True)
class AttemptsIndex:
    """A season's attempts log and its index, checked to match each other and the board."""

    log: bytes
    rows: np.ndarray
    hashes: tuple[Any, Any]  # SHA-256 states: of the log, of header and rows (to extend)

    def attempt(self, row: int) -> Attempt:
        """The log's line of this row, parsed."""
        start = int(self.rows["offset"][row])
        end = self.log.find(b"\n", start)
        return Attempt.from_dict(loads_finite(
            self.log[start:None if end < 0 else end].decode("utf-8")))

    def of(self, login: str, pr: int | None) -> list[Attempt]:
        """The lines of this miner (any case) and of this PR (of no PR when None), in the
        log's order: all that the gates but gate 3 read, and what the record step checks a
        new line against. ValueError when a row does not point at its line."""
        picked = self.rows["miner"] == _key(login)
        picked |= self.rows["pr"] == (NO_PR if pr is None else pr)
        found = []
        for row in np.flatnonzero(picked).tolist():
            attempt = self.attempt(row)
            if (_key(attempt.miner) != self.rows["miner"][row]
                    or (NO_PR if attempt.pr is None else attempt.pr) != self.rows["pr"][row]):
                raise ValueError(f"{INDEX_FILE} row {row + 1} does not point at its line")
            found.append(attempt)
        return found

    def originals(self, login: str, pr: int | None) -> tuple[np.ndarray, np.ndarray]:
        """(rows, float32 projections) of the earlier originals gate 3 compares a head of
        `login` in `pr` with: other miners', other PRs'."""
        keep = (self.rows["flags"] & ORIGINAL).astype(bool)
        keep &= self.rows["miner"] != _key(login)
        if pr is not None:
            keep &= self.rows["pr"] != pr
        rows = np.flatnonzero(keep)
        return rows, self.rows["projection"][rows].astype(np.float32)


def read(folder: Path, rules: Competition, basis: FeatureBasis | None) -> AttemptsIndex | None:
    """The index of the log in `folder` (the leaderboard folder) when it matches the log and
    the board's basis; None otherwise (the reason logged), and the gates read the log."""
    path = folder / INDEX_FILE
    if basis is None or not path.is_file():
        return None
    found = _parse(path.read_bytes(), rules, basis)
    if isinstance(found, str):
        why = found
    else:
        log_bytes = _log(folder)
        log_hash = hashlib.sha256(log_bytes)
        if found[1] == (len(log_bytes), log_hash.digest()):
            return AttemptsIndex(log_bytes, found[0], (log_hash, found[2]))
        why = "it was written for another state of attempts.jsonl"
    log.warning("%s is not used (%s); reading attempts.jsonl in full", INDEX_FILE, why)
    return None


def for_gates(folder: Path, rules: Competition, basis: FeatureBasis | None, login: str,
              pr: int | None) -> tuple[AttemptsIndex | None, list[Attempt]]:
    """The index the gates use and the lines of `login` and `pr` it points at; (None, [])
    when there is none to use (the reason logged), and the gates read the log in full."""
    index = None if pr is not None and pr < 1 else read(folder, rules, basis)
    try:
        return (index, index.of(login, pr)) if index is not None else (None, [])
    except (ValueError, LeaderboardError) as exc:  # it names the log, but not its lines
        log.warning("%s is not used (%s); reading attempts.jsonl in full", INDEX_FILE, exc)
        return None, []


def _log(folder: Path) -> bytes:
    path = folder / ATTEMPTS_FILE
    return path.read_bytes() if path.is_file() else b""


def _parse(data: bytes, rules: Competition,
           basis: FeatureBasis) -> tuple[np.ndarray, tuple[int, bytes], Any] | str:
    """(rows, (log size, log digest), SHA-256 state of header and rows) of an index's bytes,
    or why they are not one for this board."""
    if len(data) < HEADER.size + TRAILER.size:
        return "it is cut short"
    magic, version, digest, values = HEADER.unpack_from(data)
    if magic != MAGIC or version != FORMAT:
        return "it is not an attempts index of this format"
    if digest.rstrip(b"\0") != basis.digest.encode("ascii") or values != _values(rules, basis):
        return "it was written for another feature basis"
    row = _row(values)
    log_size, count, log_digest, own = TRAILER.unpack_from(data, len(data) - TRAILER.size)
    body = data[:len(data) - TRAILER.size]
    body_hash = hashlib.sha256(body)
    if len(body) != HEADER.size + count * row.itemsize or body_hash.digest() != own:
        return "it is damaged"
    return np.frombuffer(body, row, count, HEADER.size), (log_size, log_digest), body_hash


def update(folder: Path, rules: Competition, basis: FeatureBasis | None,
           known: AttemptsIndex | None = None) -> bool:
    """Bring the index in `folder` up to date with the log: rows for the lines added since it
    was written when the rest still matches, else rebuilt from every line; removed when the
    board has no basis or the log holds a line it cannot describe. Whether an index is there.
    `known`: the index as this process read it, checked (spares reading and hashing it again).
    """
    path = folder / INDEX_FILE
    if basis is None:
        path.unlink(missing_ok=True)
        return False
    log_bytes = _log(folder)
    start, rows, hashes = 0, np.empty(0, _row(_values(rules, basis))), None
    if known is not None and log_bytes.startswith(known.log):
        start, rows, hashes = len(known.log), known.rows, known.hashes
    elif path.is_file() and not isinstance(old := _parse(path.read_bytes(), rules, basis), str):
        size, digest = old[1]
        if size <= len(log_bytes) and hashlib.sha256(log_bytes[:size]).digest() == digest:
            start, rows, hashes = size, old[0], (hashlib.sha256(log_bytes[:size]), old[2])
    added = rows_of(log_bytes, start, rules, basis)
    if added is None:
        path.unlink(missing_ok=True)
        return False
    if hashes is None:
        write_atomic(path, encode(added, log_bytes, rules, basis))
        return True
    log_hash, body_hash = hashes[0].copy(), hashes[1].copy()
    log_hash.update(log_bytes[start:])
    body_hash.update(added.tobytes())
    write_atomic(path, b"".join((_header(rules, basis), rows.tobytes(), added.tobytes(),
                                 _trailer(len(log_bytes), len(rows) + len(added), log_hash,
                                          body_hash))))
    return True


def _header(rules: Competition, basis: FeatureBasis) -> bytes:
    return HEADER.pack(MAGIC, FORMAT, basis.digest.encode("ascii"), _values(rules, basis))


def _trailer(log_size: int, count: int, log_hash: Any, body_hash: Any) -> bytes:
    return TRAILER.pack(log_size, count, log_hash.digest(), body_hash.digest())


def encode(rows: np.ndarray, log_bytes: bytes, rules: Competition, basis: FeatureBasis) -> bytes:
    """An index's bytes: header, rows, trailer."""
    body = _header(rules, basis) + rows.tobytes()
    return body + _trailer(len(log_bytes), len(rows), hashlib.sha256(log_bytes),
                           hashlib.sha256(body))


def rows_of(log_bytes: bytes, start: int, rules: Competition,
            basis: FeatureBasis) -> np.ndarray | None:
    """The rows of the log's lines from byte `start` on (a line's start), or None when one
    cannot be described (see the module's docstring)."""
    rows = np.zeros(log_bytes.count(b"\n", start) + 1, _row(_values(rules, basis)))
    count, at = 0, start
    while at < len(log_bytes):
        end = log_bytes.find(b"\n", at)
        end = len(log_bytes) if end < 0 else end
        line = log_bytes[at:end]
        if line.strip():
            try:
                attempt = Attempt.from_dict(loads_finite(line.decode("utf-8")))
                row = rows[count]
                row["offset"], row["pr"] = at, NO_PR if attempt.pr is None else attempt.pr
                row["miner"] = attempt.miner.lower().encode("ascii")  # a login is ASCII
                if attempt.is_original and not _nothing_on(attempt, rules, basis):
                    if attempt.seen is None or attempt.seen.basis != basis.digest:
                        return None
                    row["flags"] = ORIGINAL
                    row["projection"] = fingerprints.projection_of(attempt.fingerprint or "",
                                                                   rules, basis.directions)
            except (ValueError, TypeError, KeyError, AttributeError, OverflowError):
                return None  # the gates read the log in full and name the line
            if len(row["miner"]) != len(attempt.miner):
                return None  # a login longer than GitHub allows
            count += 1
        at = end + 1
    return rows[:count]


def _nothing_on(attempt: Attempt, rules: Competition, basis: FeatureBasis) -> bool:
    """Whether gate 3 finds a cosine of 0 with this attempt's head, whatever the new one: its
    stored fingerprint has nothing on the basis (a head whose model rows are all alike, kept
    whole because there was no projection to keep). ValueError when it cannot be read."""
    if attempt.seen is not None or not rules.duplicate_cosine > 0:
        return False
    return fingerprints.energy_on(attempt.fingerprint or "", rules, basis.directions) == 0.0


def mismatch(folder: Path, rules: Competition, basis: FeatureBasis | None) -> str | None:
    """Why the index in `folder`, written for this very log and basis, does not describe it
    (its rows against ones rebuilt from the log), or None. An index written for another
    state of the log is no error: the gates do not use it, and the next record rebuilds it."""
    index = read(folder, rules, basis)
    if index is None or basis is None:
        return None
    rebuilt = rows_of(index.log, 0, rules, basis)
    if rebuilt is None:
        return f"{INDEX_FILE} describes a log it cannot describe"
    if len(rebuilt) != len(index.rows):
        return f"{INDEX_FILE} has {len(index.rows)} rows for the log's {len(rebuilt)} lines"
    differs = np.flatnonzero(rebuilt != index.rows)
    if len(differs):
        return f"{INDEX_FILE} row {int(differs[0]) + 1} does not describe the log's line"
    return None
