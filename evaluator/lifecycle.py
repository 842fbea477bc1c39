"""The life of an attempt, decided once: its states, who moves it, what happens to its slot.

An attempt is one head of one pull request that passed the rate-limit gate. Every rule about
where it may go next lives here, and the workflows' commands (`gh pr-info`, `gh record`), the
gates and the queue page ask this module rather than deciding for themselves. The table on
the maintaining guide is `STATES`, and a test keeps the two the same.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from evaluator.records import DECISIVE, STALE, VOID, WITHDRAWN

GATED, WAITING, EVALUATING = "gated", "waiting", "evaluating"


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
          ("evaluating",)),
    State(EVALUATING, "a maintainer approved it; the GPU job runs", "a maintainer, approving",
          "spent", ("king", "lost", "rejected", VOID, WITHDRAWN, STALE)),
    State("king", "it beat the king by the margin: crowned and merged", "the record job",
          "spent", ()),
    State("lost", "it did not beat the king; the pull request is closed", "the record job",
          "spent", ()),
    State("rejected", "a gate re-checked at evaluation failed; no score", "the record job",
          "spent", ()),
    State(VOID, "the infrastructure failed (the pool, GitHub refusing the merge); no score",
          "the record job",
          "refunded; this head is not evaluated again, a new push is a new attempt", ()),
    State(WITHDRAWN, "its author pushed, closed the pull request or changed its base after "
          "the approval; nothing about its score is published", "the record job", "spent", ()),
    State(STALE, "the king changed while it ran", "the record job, which starts it again",
          "spent once; the re-run is free", (WAITING,)),
)
BY_NAME = {state.name: state for state in STATES}
REFUNDED = (VOID,)  # only the infrastructure's failures give a slot back
# Outcomes after which this head is never evaluated again (stale runs again; a void is refunded
# instead of run again, so never both).
ENDS_HEAD = (*DECISIVE, VOID, WITHDRAWN)


def ends_head(outcome: str) -> bool:
    """Whether a head with this recorded outcome may not be evaluated again."""
    return outcome in ENDS_HEAD


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
