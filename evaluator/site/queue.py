"""The queue: where every attempt stands, and when each miner's next slot opens.

Built from the attempts log and the results (plus the store's queue events, where it keeps
them): an attempt is open while it waits for approval, is being evaluated, or was stale and
is to run again; it is settled once a gate failed, a newer head replaced it on its pull
request, a result ended it (decisive, void, withdrawn) or its evaluation ended without one
(declined, expired, failed: refunded, as a void). The states are `evaluator.lifecycle`'s.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from evaluator.files import format_time, try_parse_time
from evaluator.lifecycle import UNFINISHED, refunded
from evaluator.records import STALE, VOID, WITHDRAWN, Attempt, Result
from evaluator.rules import Competition
from evaluator.site.markup import miner_id
from evaluator.site.state import LeaderboardState

EVALUATING_EVENT = "evaluating"
# status → is the attempt still open
# (the states of evaluator.lifecycle as the queue shows them: a void, declined, expired or
# failed head is refunded, never evaluated again; a withdrawn one is spent)
STATUSES = {"waiting": True, "evaluating": True, "stale": True, VOID: False, WITHDRAWN: False,
            **dict.fromkeys(UNFINISHED, False),
            "gate_failed": False, "superseded": False, "recorded": False}
SETTLED_ROWS = 30  # the queue page shows this many settled attempts; the rest are on miner pages


@dataclass(frozen=True)
class QueueEntry:
    """One attempt and where it stands: `since` is when it entered `status`."""

    attempt: Attempt
    status: str
    since: str | None
    result: Result | None = None
    reason: str | None = None  # why its evaluation ended without a result

    @property
    def open(self) -> bool:
        return STATUSES[self.status]


@dataclass(frozen=True)
class Queue:
    open: list[QueueEntry]  # oldest first: the order evaluations are taken in
    settled: list[QueueEntry]  # newest first, at most SETTLED_ROWS
    settled_total: int
    next_slots: list[tuple[str, str]]  # (miner id, when their next slot opens), soonest first
    tracks_evaluations: bool  # whether the store keeps "being evaluated" events


def _time(value: Any) -> float:
    moment = try_parse_time(value)
    return moment.timestamp() if moment else float("-inf")


def _same_head(attempt: Attempt, record: Any) -> bool:
    if attempt.head_sha is not None:
        return (record.pr, record.head_sha) == (attempt.pr, attempt.head_sha)
    return (miner_id(record.miner), record.generation, record.pr) == (
        miner_id(attempt.miner), attempt.generation, attempt.pr)


def _head(record: Any) -> tuple:
    """What `_same_head` compares for an attempt with a head SHA, and for one without."""
    if record.head_sha is not None:
        return (record.pr, record.head_sha)
    return (miner_id(record.miner), record.generation, record.pr)


def _by_head(records: list[Any]) -> dict[tuple, list[Any]]:
    """Records under both keys an attempt may look them up by (see `_same_head`)."""
    found: dict[tuple, list[Any]] = {}
    for record in records:
        found.setdefault((record.pr, record.head_sha), []).append(record)
        found.setdefault((miner_id(record.miner), record.generation, record.pr), []).append(record)
    return found


class _Event:
    """A queue event read loosely: the fields `_same_head` compares, and its time."""

    def __init__(self, data: dict[str, Any]) -> None:
        self.miner = str(data.get("miner"))
        self.generation = data.get("generation")
        self.pr = data.get("pr")
        self.head_sha = data.get("head_sha")
        self.at = str(data.get("at"))
        self.event = str(data.get("event"))
        self.reason = data.get("reason") if isinstance(data.get("reason"), str) else None


def _entry(attempt: Attempt, results: list[Result], events: list[_Event],
           newer: Attempt | None) -> QueueEntry:
    if not attempt.gates_passed:
        return QueueEntry(attempt, "gate_failed", attempt.at)
    mine = sorted((r for r in results if _same_head(attempt, r)),
                  key=lambda r: _time(r.evaluated_at))
    latest = mine[-1] if mine else None
    if latest is not None and latest.outcome not in (VOID, STALE, WITHDRAWN):
        return QueueEntry(attempt, "recorded", latest.evaluated_at, latest)
    if latest is not None and latest.outcome in (VOID, WITHDRAWN):  # this head ends here
        return QueueEntry(attempt, latest.outcome, latest.evaluated_at, latest)
    since = [e for e in events if _same_head(attempt, e)
             and _time(e.at) > (_time(latest.evaluated_at) if latest else float("-inf"))]
    if since:
        last = max(since, key=lambda e: _time(e.at))
        status = last.event if last.event in UNFINISHED else "evaluating"
        return QueueEntry(attempt, status, last.at, latest, last.reason)
    if newer is not None:
        return QueueEntry(attempt, "superseded", newer.at, latest)
    if latest is not None:
        return QueueEntry(attempt, latest.outcome, latest.evaluated_at, latest)
    return QueueEntry(attempt, "waiting", attempt.at)


def next_slots(attempts: list[Attempt], refunded: frozenset[str], rules: Competition,
               now: datetime) -> dict[str, datetime]:
    """Miner id → when their next slot opens, for each miner whose slots are all taken now
    (the rate-limit gate's count: attempts in the window, refunded heads left out)."""
    window = timedelta(hours=rules.rate_limit_hours)
    recent: dict[str, list[datetime]] = {}
    for attempt in attempts:
        moment = try_parse_time(attempt.at)
        if moment is not None and attempt.head_sha not in refunded and now - window < moment <= now:
            recent.setdefault(miner_id(attempt.miner), []).append(moment)
    return {miner: sorted(times)[-rules.rate_limit_count] + window
            for miner, times in recent.items() if len(times) >= rules.rate_limit_count}


def build_queue(state: LeaderboardState, rules: Competition, now: datetime) -> Queue:
    events = [_Event(e) for e in state.queue or []
              if e.get("event") in (EVALUATING_EVENT, *UNFINISHED)]
    # records indexed by the head they are of, so a season's queue is one pass, not N²
    results, by_event, by_pr = _by_head(state.results), _by_head(events), {}
    for index, attempt in enumerate(state.attempts):
        by_pr.setdefault(attempt.pr, []).append(index)
    entries = []
    for index, attempt in enumerate(state.attempts):
        newer = next((state.attempts[i] for i in by_pr[attempt.pr] if i > index
                      and attempt.pr is not None
                      and state.attempts[i].head_sha != attempt.head_sha), None)
        entries.append(_entry(attempt, results.get(_head(attempt), []),
                              by_event.get(_head(attempt), []), newer))
    open_ = sorted((e for e in entries if e.open), key=lambda e: _time(e.attempt.at))
    settled = sorted((e for e in entries if not e.open), key=lambda e: _time(e.since),
                     reverse=True)
    slots = next_slots(state.attempts, refunded(state.results, state.queue or []), rules, now)
    return Queue(open=open_, settled=settled[:SETTLED_ROWS], settled_total=len(settled),
                 next_slots=[(m, format_time(t)) for m, t in sorted(slots.items(),
                                                                   key=lambda p: p[1])],
                 tracks_evaluations=state.queue is not None)
