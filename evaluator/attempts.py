"""The attempts log `leaderboard/attempts.jsonl`: what the rate limit counts."""

from __future__ import annotations

import json
import logging
import os
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

from evaluator.errors import TinyRouterError

ATTEMPTS_PATH = Path("leaderboard") / "attempts.jsonl"
log = logging.getLogger(__name__)


def parse_time(text: str) -> datetime:
    """A UTC ISO 8601 time (`Z` or an offset) as an aware datetime."""
    value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if value.tzinfo is None:
        raise ValueError(f"{text!r} has no time zone; use UTC with a trailing Z")
    return value.astimezone(UTC)


def format_time(value: datetime) -> str:
    return value.astimezone(UTC).replace(microsecond=0).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class Attempt:
    miner: str
    generation: int
    pr: int | None
    head_sha: str | None
    at: str

    @property
    def time(self) -> datetime:
        return parse_time(self.at)


def read_attempts(repo: str | Path) -> list[Attempt]:
    """Every well-formed attempt; a malformed line is logged and skipped, never trusted."""
    path = Path(repo) / ATTEMPTS_PATH
    if not path.is_file():
        return []
    attempts = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
            attempt = Attempt(miner=str(data["miner"]), generation=int(data["generation"]),
                              pr=data.get("pr"), head_sha=data.get("head_sha"), at=data["at"])
            attempt.time  # noqa: B018 - validates the timestamp
        except (ValueError, KeyError, TypeError):
            log.warning("attempts.jsonl line %d is malformed and was skipped", number)
            continue
        attempts.append(attempt)
    return attempts


def record_attempt(repo: str | Path, attempt: Attempt) -> bool:
    """Append the attempt unless this PR already has one; returns whether a line was added."""
    if attempt.pr is not None and any(a.pr == attempt.pr for a in read_attempts(repo)):
        return False
    path = Path(repo) / ATTEMPTS_PATH
    path.parent.mkdir(parents=True, exist_ok=True)
    line = json.dumps(asdict(attempt), sort_keys=True) + "\n"
    try:
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(line)
            handle.flush()
            os.fsync(handle.fileno())
    except OSError as exc:
        raise TinyRouterError(f"cannot record the attempt in {ATTEMPTS_PATH}: {exc}") from exc
    return True
