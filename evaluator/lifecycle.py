"""The life of an attempt, decided once: its states, who moves it, what happens to its slot.

An attempt is one head of one pull request that passed the rate-limit gate. Every rule about
where it may go next lives here, and the workflows' commands (`gh pr-info`, `gh record`), the
gates and the queue page ask this module rather than deciding for themselves. The table on
the maintaining guide is `STATES`, and a test keeps the two the same.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from evaluator.records import (
    DECISIVE,
    KING,
    LOST,
    REJECTED,
    STALE,
    VOID,
    WITHDRAWN,
    Attempt,
    Result,
    refunded_heads,
)
from evaluator.rules import Competition

GATED, WAITING, EVALUATING = "gated", "waiting", "evaluating"
DECLINED, EXPIRED, FAILED = "declined", "expired", "failed"
UNFINISHED = (DECLINED, EXPIRED, FAILED)  # queue events: an evaluation that left no result
LIFTED = "lifted"  # a queue event: a maintainer took an unfinished mark back (`leaderboard lift`)
MARKED_BY = ("the evaluation workflow's failure path, or a maintainer with `tinyrouter "
             "leaderboard mark`")
REFUND = ("refunded; this head is not evaluated again (a new push is a new attempt) unless a "
          "maintainer lifts the mark before the refund is spent")
VOID_REFUND = ("refunded; a new push is a new attempt, and a re-run of this head is recorded "
               "only while the refund is unspent")


@dataclass(frozen=True)
class State:
    name: str
    means: str
    moved_by: str  # who puts an attempt into this state
    slot: str  # what becomes of its rate-limit slot
    then: tuple[str, ...]  # the states it may move to; none: final


STATES = (
    State(GATED, "its gates passed on this head; the attempt is recorded", "the gates job",
          "spent", (WAITING,)),
    State(WAITING, "its evaluation waits for a maintainer's approval",
          "the gates job, starting the evaluation", "spent",
          (EVALUATING, DECLINED, EXPIRED)),
    State(EVALUATING, "a maintainer approved it; the GPU job runs", "a maintainer, approving",
          "spent", (KING, LOST, REJECTED, VOID, WITHDRAWN, STALE, FAILED)),
    State(KING, "it beat the king by the margin: crowned and merged", "the record job",
          "spent", ()),
    State(LOST, "it did not beat the king; the pull request is closed", "the record job",
          "spent", ()),
    State(REJECTED, "a gate re-checked at evaluation failed; no score", "the record job",
          "spent", ()),
    State(VOID, "the infrastructure failed (the pool, GitHub refusing the merge); no score",
          "the record job", VOID_REFUND, ()),
    State(DECLINED, "a maintainer declined to evaluate it (rejected the deployment, or "
          "cancelled the run before approving it); no score", MARKED_BY, REFUND, (EVALUATING,)),
    State(EXPIRED, "nobody approved its evaluation before GitHub failed the waiting job (30 "
          "days); no score", MARKED_BY, REFUND, (EVALUATING,)),
    State(FAILED, "the approved GPU job crashed, timed out or was cancelled before a result; "
          "no score", MARKED_BY, REFUND, (EVALUATING,)),
    State(WITHDRAWN, "its author pushed, closed the pull request or changed its base after "
          "the approval; nothing about its score is published", "the record job", "spent", ()),
    State(STALE, "the king changed while it ran", "the record job, which starts it again",
          "spent once; the re-run is free", (WAITING,)),
)
BY_NAME = {state.name: state for state in STATES}
# Only what the infrastructure or the maintainers did gives a slot back, never the author.
REFUNDED = (VOID, *UNFINISHED)
# Outcomes after which this head is never evaluated again (stale runs again; a refunded head
# is never also run again).
ENDS_HEAD = (*DECISIVE, VOID, WITHDRAWN, *UNFINISHED)


def ends_head(outcome: str) -> bool:
    """Whether a head with this recorded outcome may not be evaluated again."""
    return outcome in ENDS_HEAD


def marks(events: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The unfinished marks in force: each head's declined, expired or failed event that no
    later `lifted` event of that head took back, in the queue's order."""
    latest: dict[tuple[Any, Any], dict[str, Any]] = {}
    for event in events:
        if event.get("event") in (*UNFINISHED, LIFTED):
            latest.pop((event.get("pr"), event.get("head_sha")), None)
            latest[event.get("pr"), event.get("head_sha")] = event
    return [e for e in latest.values() if e.get("event") in UNFINISHED]


def refunded(results: Iterable[Result], events: Iterable[dict[str, Any]]) -> frozenset[str]:
    """Heads whose slot is given back: a void result or an unfinished evaluation (a mark in
    force), and no decisive result of that head, whatever the clocks say. The one count the
    rate-limit gate and the queue page share."""
    results = list(results)
    decided = {r.head_sha for r in results if r.outcome in DECISIVE}
    unfinished = {e.get("head_sha") for e in marks(events)}
    return refunded_heads(results) | frozenset(
        h for h in unfinished - decided if isinstance(h, str))


def recent(times: Iterable[datetime], now: datetime, rules: Competition) -> list[datetime]:
    """The times within the rate limit's window before `now`, oldest first."""
    window = timedelta(hours=rules.rate_limit_hours)
    return sorted(t for t in times if now - window < t <= now)


def slot_opens(times: list[datetime], now: datetime, rules: Competition) -> datetime | None:
    """When a miner whose counted attempts were at `times` may submit again; None: now."""
    found = recent(times, now, rules)
    if len(found) < rules.rate_limit_count:
        return None
    return found[-rules.rate_limit_count] + timedelta(hours=rules.rate_limit_hours)


def refund_spent(head: Attempt, attempts: Sequence[Attempt], refunded_now: frozenset[str],
                 rules: Competition) -> Attempt | None:
    """The later attempt of the same miner that passed the rate limit only because `head`'s
    slot was refunded, if any: counting `head` again would put that one over the limit (two
    evaluations for one slot)."""
    # later means a later line of the log (the gates append as they pass), not a later second
    at = next((n for n, a in enumerate(attempts) if (a.pr, a.head_sha) == (head.pr, head.head_sha)),
              -1)
    mine = [(n, a) for n, a in enumerate(attempts) if a.miner.lower() == head.miner.lower()
            and a.head_sha not in refunded_now and n != at]
    for n, later in ((n, a) for n, a in mine if n > at):
        counted: list[datetime] = [a.time for m, a in mine if m < n] + [head.time]
        if slot_opens(counted, later.time, rules) is not None:
            return later
    return None


def head_end(results: Iterable[Result], events: Iterable[dict[str, Any]], pr: int | None,
             head_sha: str | None) -> tuple[str, str | None] | None:
    """(state, reason) after which this PR's head is never evaluated again, if it reached one:
    a decisive, void or withdrawn result first (a result wins over an event), else an
    evaluation that ended without one."""
    if pr is None:
        return None
    mine = [r for r in results if ends_head(r.outcome) and (r.pr, r.head_sha) == (pr, head_sha)]
    decisive = [r for r in mine if r.outcome in DECISIVE]
    if decisive or mine:
        found = (decisive or mine)[0]
        return found.outcome, found.reason
    return next(((e["event"], e.get("reason")) for e in marks(events)
                 if (e.get("pr"), e.get("head_sha")) == (pr, head_sha)), None)


def withdrawal(pull: Any, sha: str, branch: str) -> str | None:
    """Why what the pull request's author did after the approval withdraws the evaluation of
    `sha`, or None. `pull` is the PR as GitHub shows it now (state, merged, head, base)."""
    if pull.merged:
        return None  # merged at this head by the bot, or at another by a maintainer (void)
    if pull.state != "open":
        return "the pull request was closed after its evaluation was approved"
    if pull.head_sha != sha:
        return (f"its head moved from {sha[:12]} to {pull.head_sha[:12]} after its evaluation "
                "was approved")
    if pull.base_ref != branch:
        return (f"its base was changed from {branch} to {pull.base_ref} after its evaluation "
                "was approved")
    return None


MAX_REASON = 300  # characters of an unfinished evaluation's reason (queue.schema.json's too)


def one_line(text: str) -> str:
    """A reason as the queue shows it: one line of at most MAX_REASON characters."""
    line = " ".join("".join(c if c.isprintable() else " " for c in text).split())
    return line if len(line) <= MAX_REASON else line[:MAX_REASON - 1] + "…"


def unfinished(reviews: list[tuple[str, str]], evaluated: str) -> tuple[str, str]:
    """(state, reason) of an evaluation whose GPU job ended without a result, from the run's
    deployment reviews ((state, comment) as GitHub lists them) and how the GPU job ended
    (GitHub's `needs.evaluate.result`: failure or cancelled)."""
    rejected = [comment for state, comment in reviews if state == "rejected"]
    if rejected:
        said = one_line(rejected[0])
        return DECLINED, one_line("a maintainer declined to evaluate this head"
                                  + (f": {said}" if said else ""))
    ended = "was cancelled" if evaluated == "cancelled" else "failed"
    if any(state == "approved" for state, _ in reviews):
        return FAILED, f"the evaluation job was approved, then {ended} before a result"
    if evaluated == "cancelled":
        return DECLINED, "the run was cancelled before anyone approved its evaluation"
    return EXPIRED, ("nobody approved its evaluation and GitHub failed the waiting job (after "
                     "30 days unapproved, or a protection rule refused it)")
