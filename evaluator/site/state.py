"""The leaderboard as the site shows it: the store read in its lenient mode, grouped by miner."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evaluator.errors import LeaderboardError
from evaluator.files import try_parse_time
from evaluator.records import Attempt, Crowning, King, Result
from evaluator.site.markup import miner_id
from evaluator.store import FAIRNESS_FILE, REVEALED_DIR, Store, validate

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class MinerSummary:
    """One miner's public record: their attempts and results, newest first.

    `id` is the login in lower case (GitHub logins ignore case, so `Alice` and `alice` are
    one miner); `name` is the case of their most recent record, as GitHub reported it then.
    """

    id: str
    name: str
    attempts: list[Attempt]
    results: list[Result]
    crowns: int

    @property
    def last_activity(self) -> str | None:
        times = [r.evaluated_at for r in self.results] + [a.at for a in self.attempts]
        dated = [t for t in times if try_parse_time(t)]
        return max(dated, key=lambda t: try_parse_time(t)) if dated else None


@dataclass(frozen=True)
class LeaderboardState:
    """Everything public about the competition; each part empty when its file is absent."""

    king: King | None = None
    kings: list[Crowning] = field(default_factory=list)
    results: list[Result] = field(default_factory=list)
    attempts: list[Attempt] = field(default_factory=list)
    manifest: dict[str, Any] | None = None
    fairness: dict[str, Any] | None = None
    queue: list[dict[str, Any]] | None = None  # None: this store keeps no queue events
    revealed: Path | None = None  # the retired season's published files, once revealed

    @property
    def benchmarks(self) -> dict[str, Any]:
        return dict((self.manifest or {}).get("benchmarks") or {})

    def miners(self) -> list[MinerSummary]:
        """Every miner's summary, by id; grouped in one pass and kept (the state is frozen)."""
        cached = self.__dict__.get("_miners")
        if cached is None:
            cached = _group_miners(self)
            object.__setattr__(self, "_miners", cached)
        return cached

    def display_names(self) -> dict[str, str]:
        """Miner id → the name to show for it."""
        return {m.id: m.name for m in self.miners()}


def _group_miners(state: LeaderboardState) -> list[MinerSummary]:
    records: dict[str, list[tuple[float, str]]] = {}
    attempts: dict[str, list[Attempt]] = {}
    results: dict[str, list[Result]] = {}
    crowns: dict[str, int] = {}
    for when, name in ([(r.evaluated_at, r.miner) for r in state.results]
                       + [(a.at, a.miner) for a in state.attempts]
                       + [(k.crowned_at, k.miner) for k in state.kings]):
        records.setdefault(miner_id(name), []).append((_sort_time(when), name))
    for attempt in reversed(state.attempts):
        attempts.setdefault(miner_id(attempt.miner), []).append(attempt)
    for result in state.results:
        results.setdefault(miner_id(result.miner), []).append(result)
    for king in state.kings:
        crowns[miner_id(king.miner)] = crowns.get(miner_id(king.miner), 0) + 1
    return [MinerSummary(id=key, name=max(seen, key=lambda pair: pair[0])[1],
                         attempts=attempts.get(key, []), results=results.get(key, []),
                         crowns=crowns.get(key, 0))
            for key, seen in sorted(records.items())]


def _sort_time(value: Any) -> float:
    moment = try_parse_time(value)
    return moment.timestamp() if moment else float("-inf")


def load_state(leaderboard_dir: str | Path) -> LeaderboardState:
    """Read `leaderboard_dir`; a missing folder or file is the empty state, a corrupt one an error."""
    folder = Path(leaderboard_dir)
    if not folder.is_dir():
        log.info("no leaderboard at %s: building the empty site", folder)
    store = Store(folder.parent, board=folder, lenient=True)
    revealed = store.file(REVEALED_DIR)
    return LeaderboardState(king=store.king(), kings=store.history(), results=store.results(),
                            attempts=store.attempts(), manifest=store.manifest(),
                            fairness=_fairness(store), queue=_queue(store),
                            revealed=revealed if revealed.is_dir() else None)


def _queue(store: Store) -> list[dict[str, Any]] | None:
    """The queue's events (a head being evaluated), where the store keeps them."""
    reader = getattr(store, "queue_events", None)
    if reader is None:
        return None
    return [_as_dict(event) for event in reader()]


def _as_dict(event: Any) -> dict[str, Any]:
    if isinstance(event, dict):
        return event
    to_dict = getattr(event, "to_dict", None)
    return to_dict() if callable(to_dict) else dict(vars(event))


def _fairness(store: Store) -> dict[str, Any] | None:
    """The fairness figures, or None: the page renders tables from them, so a file that breaks
    the schema is left out (with a warning) rather than shown loosely."""
    data = store.fairness()
    if data is None:
        return None
    try:
        validate("fairness", data, FAIRNESS_FILE)
    except LeaderboardError as exc:
        log.warning("the Fairness page leaves the figures out: %s", exc)
        return None
    return data
