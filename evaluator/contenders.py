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

from evaluator.errors import BenchmarkError
from evaluator.loop import coordinator_transcript
from evaluator.records import REJECTED, Attempt, King
from evaluator.rules import ROLES, WEIGHTS_FILE, Competition
from evaluator.store import Store, submission_path
from evaluator.submission import Submission, sha256_file
from evaluator.submission.weights import read_weights, theta_from_tensors
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


def judged_copies(store: Store) -> set[tuple[int | None, str | None]]:
    """(PR, head) of every attempt its own evaluation rejected as a duplicate: a copy is never
    the original that a later head is compared with."""
    return {(r.pr, r.head_sha) for r in store.results()
            if r.outcome == REJECTED and (r.reason or "").startswith(BEHAVIOUR_GATE)}


def earlier_attempts(store: Store, miner: str, pr: int | None, head_sha: str | None,
                     king: King | None) -> list[Attempt]:
    """The heads the behavioural check compares a challenger with besides the king: other
    miners' attempts shown on a pull request before this one (`Attempt.precedence`, whatever
    order their gates ran in) that passed every gate (open, evaluating or decided), one per
    weights file, copies judged at evaluation left out."""
    attempts = store.attempts()
    mine = next((a for a in attempts
                 if head_sha is not None and (a.pr, a.head_sha) == (pr, head_sha)), None)
    copies = judged_copies(store)
    found, seen = [], set()
    for attempt in attempts:
        if (mine is not None and not attempt.precedence < mine.precedence) or attempt is mine:
            continue
        if (not attempt.gates_passed or attempt.miner.lower() == miner.lower()
                or attempt.head_sha is None or attempt.weights_sha256 in seen
                or (king is not None and (attempt.miner.lower(), attempt.generation)
                    == (king.miner.lower(), king.generation))
                or (attempt.pr, attempt.head_sha) in copies):
            continue
        seen.add(attempt.weights_sha256)
        found.append(attempt)
    return found


def earlier_contenders(attempts: Sequence[Attempt], rules: Competition,
                       heads: Path | None = None, repo: Path | None = None
                       ) -> tuple[list[tuple[str, Contender]], list[tuple[str, Attempt]]]:
    """Each earlier attempt's head, read as data: from `heads`, the runner's head cache (one
    weights file per SHA-256 the gates recorded, `gh fetch-earlier`), or without one from the
    `repo` checkout's submission folders. A head whose recorded weights are not there (its
    commit could not be fetched) is not compared, and returned apart, so the evaluation goes
    on and says which."""
    from evaluator.github.fetch import cached_head

    found, missing = [], []
    for attempt in attempts:
        what = f"the attempt of PR #{attempt.pr} ({attempt.miner})"
        path = (cached_head(heads, attempt.weights_sha256 or "") if heads is not None else
                Path(repo or ".") / submission_path(attempt.miner, attempt.generation)
                / WEIGHTS_FILE)
        try:
            same = sha256_file(path) == attempt.weights_sha256
        except OSError:
            same = False
        if not same:
            log.warning("behaviour: %s not compared (its head is not in the head cache)", what)
            missing.append((what, attempt))
            continue
        theta = theta_from_tensors(*read_weights(path, rules))
        found.append((what, Contender(attempt.miner, attempt.generation, theta, attempt.pr,
                                      attempt.head_sha)))
    return found, missing
