"""The leaderboard as the site reads it: only the public files, a missing file meaning empty."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evaluator.errors import LeaderboardError
from evaluator.leaderboard import (
    ATTEMPTS_FILE,
    HISTORY_FILE,
    KING_FILE,
    MANIFEST_FILE,
    RESULTS_DIR,
)
from evaluator.site.markup import parse_time

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class MinerSummary:
    """One miner's public record: their attempts and results, newest first."""

    name: str
    attempts: list[dict[str, Any]]
    results: list[dict[str, Any]]
    crowns: int

    @property
    def best_composite(self) -> float | None:
        scores = [r["composite"] for r in self.results if _is_number(r.get("composite"))]
        return max(scores) if scores else None

    @property
    def last_activity(self) -> str | None:
        times = [r.get("evaluated_at") for r in self.results] + [a.get("at") for a in self.attempts]
        return max((t for t in times if parse_time(t)), key=_sort_time, default=None)


@dataclass(frozen=True)
class LeaderboardState:
    """Everything public about the competition; each part empty when its file is absent."""

    king: dict[str, Any] | None = None
    kings: list[dict[str, Any]] = field(default_factory=list)
    results: list[dict[str, Any]] = field(default_factory=list)
    attempts: list[dict[str, Any]] = field(default_factory=list)
    manifest: dict[str, Any] | None = None

    @property
    def benchmarks(self) -> dict[str, Any]:
        return dict((self.manifest or {}).get("benchmarks") or {})

    def miners(self) -> list[MinerSummary]:
        names = {str(r.get("miner")) for r in self.results}
        names |= {str(a.get("miner")) for a in self.attempts}
        names |= {str(k.get("miner")) for k in self.kings}
        return [MinerSummary(
            name=name,
            attempts=[a for a in reversed(self.attempts) if str(a.get("miner")) == name],
            results=[r for r in self.results if str(r.get("miner")) == name],
            crowns=sum(1 for k in self.kings if str(k.get("miner")) == name),
        ) for name in sorted(names, key=str.lower)]


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _sort_time(value: Any) -> float:
    moment = parse_time(value)
    return moment.timestamp() if moment else float("-inf")


def _read_json(path: Path, kind: type) -> Any:
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise LeaderboardError(f"{path} is not valid JSON ({exc}); restore it from git") from exc
    if not isinstance(data, kind):
        raise LeaderboardError(f"{path} should hold a JSON {kind.__name__}; restore it from git")
    return data


def _read_attempts(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    attempts = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except json.JSONDecodeError as exc:
            raise LeaderboardError(f"{path}:{number} is not valid JSON ({exc})") from exc
        if not isinstance(entry, dict):
            raise LeaderboardError(f"{path}:{number} should be a JSON object")
        attempts.append(entry)
    return attempts


def _read_results(folder: Path) -> list[dict[str, Any]]:
    results = []
    for path in sorted(folder.glob("*/*.json")) if folder.is_dir() else []:
        record = _read_json(path, dict)
        record.setdefault("miner", path.parent.name)
        results.append(record)
    results.sort(key=lambda r: (_sort_time(r.get("evaluated_at")), str(r.get("miner")),
                                str(r.get("generation"))), reverse=True)
    return results


def load_state(leaderboard_dir: str | Path) -> LeaderboardState:
    """Read `leaderboard_dir`; a missing folder or file is the empty state, a corrupt one an error."""
    folder = Path(leaderboard_dir)
    if not folder.is_dir():
        log.info("no leaderboard at %s: building the empty site", folder)
    king_file = _read_json(folder / KING_FILE, dict) or {}
    history = _read_json(folder / HISTORY_FILE, dict) or {}
    kings = [k for k in history.get("kings") or [] if isinstance(k, dict)]
    king = king_file.get("king")
    return LeaderboardState(
        king=king if isinstance(king, dict) else None,
        kings=kings,
        results=_read_results(folder / RESULTS_DIR),
        attempts=_read_attempts(folder / ATTEMPTS_FILE),
        manifest=_read_json(folder / MANIFEST_FILE, dict),
    )
