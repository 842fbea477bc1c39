"""The heads in the ring, and how they route the public items before the hidden sets open.

A contender is a head read from its submission folder. The behavioural duplicate check (gate
3's second half, `alike`) compares the challenger's turn-1 models on the public train items
with the king's and every earlier attempt's: a copy is marked by an earlier head's own
choices (the items it sends away from its category's most-picked model), which an independent
miner does not reach by the same road; agreeing on the category lookup is no evidence.
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
from evaluator.recheck import own_attempt
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
class Alike:
    """How the challenger routes the public items beside one earlier head: on how many of
    them it picks the same model, and of the earlier head's own choices (the items it sends
    away from the model it picks most for their category) how many it makes too, with the
    categories they fall in (`benchmark/category`, most first)."""

    what: str
    items: int
    same: int
    own: int
    followed: int
    categories: tuple[str, ...] = ()

    @property
    def agreement(self) -> float:
        return self.same / self.items if self.items else 0.0

    def copied(self, rules: Competition) -> bool:
        return (self.agreement >= rules.duplicate_agreement
                and self.own >= rules.duplicate_own_items
                and self.followed >= rules.duplicate_own_share * self.own)


def alike(what: str, items: Sequence[Item], mine: Sequence[str], theirs: Sequence[str]) -> Alike:
    """`Alike` of the challenger's models `mine` and an earlier head's `theirs` on `items`."""
    groups: dict[str, list[int]] = {}
    for i, item in enumerate(items):
        groups.setdefault(f"{item.benchmark}/{item.category or '-'}", []).append(i)
    own: dict[str, list[int]] = {}
    for group, rows in groups.items():
        picks = [theirs[i] for i in rows]
        usual = max(dict.fromkeys(picks), key=picks.count)  # the first most picked
        own[group] = [i for i in rows if theirs[i] != usual]
    chosen = [i for rows in own.values() for i in rows]
    where = sorted((g for g in own if own[g]), key=lambda g: (-len(own[g]), g))
    return Alike(what, len(items), sum(a == b for a, b in zip(mine, theirs, strict=True)),
                 len(chosen), sum(mine[i] == theirs[i] for i in chosen), tuple(where))


@dataclass(frozen=True)
class PublicRouting:
    """The challenger's turn-1 decisions on the public train items, the share of them on
    which it picks the king's model (None without a king), and how alike it routes with the
    king and each earlier attempt compared (the king first)."""

    items: tuple[Item, ...] = ()
    decisions: tuple[Decision, ...] = ()
    agreement: float | None = None
    compared: tuple[Alike, ...] = ()

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
    """The challenger's turn-1 decisions on the public items (no hidden data), and how alike
    it routes with the king and each earlier head there."""
    if (king is not None or earlier) and not public_items:
        raise BenchmarkError("no public train items to compare the heads on; check the "
                             "manifest's train ids and the dataset source")
    items = tuple(public_items)
    transcripts = [coordinator_transcript(item.prompt, []) for item in items]
    mine = tuple(router.decide(transcripts, challenger.theta, reuse=True)) if items else ()
    models = [d.model for d in mine]
    others = ([("the king", king)] if king is not None else []) + list(earlier)
    compared = tuple(alike(what, items, models,
                           [d.model for d in router.decide(transcripts, head.theta, reuse=True)])
                     for what, head in others)
    return PublicRouting(items, mine, compared[0].agreement if king is not None else None,
                         compared)


BEHAVIOUR_ADVICE = ("agreeing on each category's usual model is no evidence (every default run "
                    "converges there), so what to change is those choices: train on with "
                    "another --seed or more --generations, or from your own earlier head, and "
                    "check it with `tinyrouter preflight` before you spend a slot")


def behaviour_line(found: Alike, rules: Competition) -> str:
    """How alike the challenger routes with one earlier head, in one sentence."""
    where = ", ".join(found.categories[:3]) + (" …" if len(found.categories) > 3 else "")
    own = (f"of the {found.own} public items {found.what} sends away from the model it picks "
           f"most for their category (its own choices{f', in {where}' if where else ''}), "
           f"the head makes the same choice on {found.followed}"
           f" ({found.followed / found.own:.0%})" if found.own else
           f"{found.what} makes no choice of its own (it picks one model per category)")
    return (f"the head picks the same model as {found.what} on {found.agreement:.1%} of the "
            f"{found.items} public train items; {own}")


def behaviour_reason(public: PublicRouting, rules: Competition) -> str | None:
    """The behavioural duplicate check: a head that makes an earlier head's own choices (the
    king's, or an attempt's still open or decided) is a copy, however its weights were moved;
    the earlier head wins."""
    for found in public.compared:
        log.info("behaviour: %d of %d public items routed like %s; %d of its %d own choices",
                 found.same, found.items, found.what, found.followed, found.own)
        if found.copied(rules):
            return (f"{BEHAVIOUR_GATE}: {behaviour_line(found, rules)}; a head picking the same "
                    f"model on {rules.duplicate_agreement:.0%} of the items or more and making "
                    f"{rules.duplicate_own_share:.0%} of another's own choices or more is a "
                    f"copy; {BEHAVIOUR_ADVICE}")
    return None


def judged_copies(store: Store) -> set[tuple[int | None, str | None]]:
    """(PR, head) of every attempt its own evaluation rejected as a duplicate: a copy is never
    the original that a later head is compared with."""
    return {(r.pr, r.head_sha) for r in store.results()
            if r.outcome == REJECTED and (r.reason or "").startswith(BEHAVIOUR_GATE)}


def earlier_attempts(store: Store, miner: str, pr: int | None, head_sha: str | None,
                     king: King | None, weights_sha256: str = "") -> list[Attempt]:
    """The heads the behavioural check compares a challenger with besides the king: other
    miners' attempts shown on a pull request before this one (`Attempt.precedence`, whatever
    order their gates ran in; its own line found by `recheck.own_attempt`) that passed every
    gate (open, evaluating or decided), one per weights file, copies judged at evaluation left
    out."""
    attempts = store.attempts()
    mine = own_attempt(attempts, miner, weights_sha256, pr, head_sha)
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
            log.warning("behaviour: %s not compared (its recorded weights are not in %s)", what,
                        "the head cache" if heads is not None else "its submission folder")
            missing.append((what, attempt))
            continue
        theta = theta_from_tensors(*read_weights(path, rules))
        found.append((what, Contender(attempt.miner, attempt.generation, theta, attempt.pr,
                                      attempt.head_sha)))
    return found, missing
