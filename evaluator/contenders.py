"""The heads in the ring, and how they route the public items before the hidden sets open.

A contender is a head read from its submission folder. Before anything hidden is opened, the
behavioural duplicate check (gate 3's second half) decides the challenger's turn-1 model on
every public train item and compares it with the king's and with every earlier attempt's
still open or decided: a head that picks the same model as one of them on a share of the
items at or above `duplicate_agreement` is a copy, however its weights were moved, and the
earlier head wins.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from evaluator.errors import BenchmarkError, LeaderboardError
from evaluator.loop import coordinator_transcript
from evaluator.records import REJECTED, Attempt, King
from evaluator.rules import ROLES, WEIGHTS_FILE, Competition
from evaluator.store import Store, submission_path
from evaluator.submission import Submission, sha256_file
from evaluator.types import Decision, Item

log = logging.getLogger(__name__)
BEHAVIOUR_GATE = "gate 3 (duplicate, behaviour)"


class Decider(Protocol):
    """Decisions for many transcripts under one θ (see coordinator.router.Router)."""

    def decide(self, transcripts: list[str], theta: np.ndarray,
               reuse: bool = False) -> list[Decision]: ...


@dataclass(frozen=True)
class Contender:
    """A head in the ring: who, which generation, which commit, and its θ."""

    miner: str
    generation: int
    theta: np.ndarray
    pr: int | None = None
    head_sha: str | None = None


def load_contender(repo: Path, relpath: str, rules: Competition, pr: int | None = None,
                   head_sha: str | None = None) -> Contender:
    sub = Submission(Path(repo), relpath, rules)
    return Contender(miner=sub.login, generation=sub.generation, theta=sub.theta, pr=pr,
                     head_sha=head_sha)


@dataclass(frozen=True)
class PublicRouting:
    """The challenger's turn-1 decisions on the public train items, the share of them on
    which it picks the king's model (None without a king), and that share for each earlier
    attempt compared."""

    items: tuple[Item, ...] = ()
    decisions: tuple[Decision, ...] = ()
    agreement: float | None = None
    earlier: tuple[tuple[str, float], ...] = ()  # (which earlier attempt, agreement with it)

    def mix(self, rules: Competition) -> dict[str, Any]:
        """Per benchmark and item category: how many items, and each model's and role's share."""
        mix: dict[str, Any] = {}
        for item, decision in zip(self.items, self.decisions, strict=True):
            bench = mix.setdefault(item.benchmark, {"items": 0, "by_category": {}})
            bench["items"] += 1
            group = bench["by_category"].setdefault(str(item.category), {
                "items": 0, "models": dict.fromkeys(rules.pool_names, 0),
                "roles": dict.fromkeys(ROLES, 0)})
            group["items"] += 1
            group["models"][decision.model] += 1
            group["roles"][decision.role] += 1
        for bench in mix.values():
            for group in bench["by_category"].values():
                for part in ("models", "roles"):
                    group[part] = {k: v / group["items"] for k, v in group[part].items()}
        return mix


def public_routing(challenger: Contender, king: Contender | None, router: Decider,
                   public_items: Sequence[Item],
                   earlier: Sequence[tuple[str, Contender]] = ()) -> PublicRouting:
    """The challenger's turn-1 decisions on the public items (no hidden data), the share of
    them on which it picks the king's model, and the same share against each earlier head."""
    if (king is not None or earlier) and not public_items:
        raise BenchmarkError("no public train items to compare the heads on; check the "
                             "manifest's train ids and the dataset source")
    items = tuple(public_items)
    transcripts = [coordinator_transcript(item.prompt, []) for item in items]
    mine = tuple(router.decide(transcripts, challenger.theta, reuse=True)) if items else ()

    def share(other: Contender) -> float:
        theirs = router.decide(transcripts, other.theta, reuse=True)
        return sum(a.model == b.model for a, b in zip(mine, theirs, strict=True)) / len(items)

    return PublicRouting(items, mine, None if king is None else share(king),
                         tuple((what, share(head)) for what, head in earlier))


def behaviour_reason(public: PublicRouting, rules: Competition) -> str | None:
    """The behavioural duplicate check: a head that routes like the king, or like an earlier
    attempt still open or decided, on the public train items is a copy, however its weights
    were moved; the earlier head wins."""
    compared = ([("the king", public.agreement)] if public.agreement is not None else []) + \
        list(public.earlier)
    for what, agreement in compared:
        log.info("behaviour: %.3f of %d public items routed like %s", agreement,
                 len(public.items), what)
        if agreement >= rules.duplicate_agreement:
            return (f"{BEHAVIOUR_GATE}: on the {len(public.items)} public train items the head "
                    f"picks the same model as {what} on {agreement:.3f} of them (the limit is "
                    f"{rules.duplicate_agreement}); submit a head you trained yourself")
    return None


def judged_a_copy(store: Store, attempt: Attempt) -> bool:
    """Whether the attempt's own evaluation rejected it as a duplicate: a copy is never the
    original that a later head is compared with."""
    result = store.decided(attempt.pr, attempt.head_sha)
    return result is not None and result.outcome == REJECTED and \
        (result.reason or "").startswith(BEHAVIOUR_GATE)


def earlier_attempts(store: Store, miner: str, pr: int | None, head_sha: str | None,
                     king: King | None) -> list[Attempt]:
    """The heads the behavioural check compares a challenger with besides the king: other
    miners' attempts recorded before this one that passed every gate (open, evaluating or
    decided), one per weights file, copies judged at evaluation left out."""
    attempts = store.attempts()
    mine = next((i for i, a in enumerate(attempts)
                 if head_sha is not None and (a.pr, a.head_sha) == (pr, head_sha)), len(attempts))
    found, seen = [], set()
    for attempt in attempts[:mine]:
        if (not attempt.gates_passed or attempt.miner.lower() == miner.lower()
                or attempt.head_sha is None or attempt.weights_sha256 in seen
                or (king is not None and (attempt.miner.lower(), attempt.generation)
                    == (king.miner.lower(), king.generation))
                or judged_a_copy(store, attempt)):
            continue
        seen.add(attempt.weights_sha256)
        found.append(attempt)
    return found


def earlier_contenders(folders: Path, attempts: Sequence[Attempt], rules: Competition
                       ) -> list[tuple[str, Contender]]:
    """Each earlier attempt's head, read as data from `folders` (a checkout holding their
    `submissions/<login>/<n>` folders as copied from their PR heads). Fails closed: a folder
    that is missing or holds other weights than the attempt recorded stops the evaluation."""
    found = []
    for attempt in attempts:
        relpath = submission_path(attempt.miner, attempt.generation)
        what = f"the attempt of PR #{attempt.pr} ({attempt.miner})"
        weights = Path(folders) / relpath / WEIGHTS_FILE
        try:
            same = sha256_file(weights) == attempt.weights_sha256
        except OSError:
            same = False
        if not same:
            raise LeaderboardError(
                f"{relpath} in {folders} is missing or is not {what} at {attempt.head_sha}; copy "
                "the earlier attempts' folders in first (`tinyrouter gh fetch-earlier`)")
        found.append((what, load_contender(Path(folders), relpath, rules, attempt.pr,
                                           attempt.head_sha)))
    return found
