"""The typed records of the leaderboard: attempts, evaluation results, the king and its history.

A `Result` is one evaluation; `public()` applies the disclosure rule in one place (SPEC §8,
`PUBLIC_FIELDS`), `private()` keeps everything for the maintainers. Every record is a
`HeadRef` plus its own fields, read and written by the one codec (`evaluator.codec`).
"""

from __future__ import annotations

import hashlib
import math
import secrets
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any, ClassVar

from evaluator.codec import Record, encode, on_disk
from evaluator.files import parse_time
from evaluator.rules import FORMAT_VERSION
from evaluator.scoring import BenchmarkScore


class Outcome(StrEnum):
    """How an evaluation ended: its record's `outcome` (the text on disk is the value).

    VOID: the infrastructure failed (the pool, the runner, GitHub refusing the merge): no score,
    and the attempt is refunded. STALE: the king changed while it ran; it is evaluated again.
    WITHDRAWN: the PR's author changed it after the evaluation was approved (a new head, a close,
    another base): no score, nothing published, the attempt stays spent. See `lifecycle`.
    """

    KING = "king"
    LOST = "lost"
    REJECTED = "rejected"
    VOID = "void"
    STALE = "stale"
    WITHDRAWN = "withdrawn"


KING, LOST, REJECTED = Outcome.KING, Outcome.LOST, Outcome.REJECTED
VOID, STALE, WITHDRAWN = Outcome.VOID, Outcome.STALE, Outcome.WITHDRAWN
DECISIVE = (KING, LOST, REJECTED)  # a head and its generation are decided for good
OUTCOMES = tuple(Outcome)
UNSCORED = (REJECTED, VOID, STALE, WITHDRAWN)  # a public record of a reason and no score
DATED = (VOID, STALE, WITHDRAWN)  # recorded in a file of their own, named by their time
IDENTITY_FIELDS = ("format", "miner", "generation", "pr", "head_sha", "evaluated_at",
                   "benchmark_manifest", "partition_commitment")
# The disclosure rule as data: the public record of each outcome holds exactly these fields.
PUBLIC_FIELDS = {
    KING: (*IDENTITY_FIELDS, "outcome", "composite", "king_composite", "delta", "ci95",
           "crown_test", "against", "reason", "per_benchmark", "live_cost_usd", "router_card",
           "isolation", "not_compared"),
    LOST: (*IDENTITY_FIELDS, "outcome", "composite", "delta", "ci95", "crown_test", "against",
           "isolation", "not_compared"),
    **{outcome: (*IDENTITY_FIELDS, "outcome", "reason", "composite", "delta", "isolation",
                 "not_compared")
       for outcome in UNSCORED},
}
# What the disclosure rule rounds: in a loss, these fields; in a king's breakdown, these parts.
ROUNDED_IN_LOSS = ("composite", "delta")
# What a loss shows of its crown test: where it ended, none of its figures. They read the
# never-published audit, and a campaign keeping whichever loss's figures went up would climb
# there (`tinyrouter fairness`, the climber); its interval goes with them.
LOSS_TEST = ("stage", "live_items", "live_sessions")
ROUNDED_IN_BREAKDOWN = ("audit_acc",)
PRIVATE_ONLY = ("partition", "challenger_run", "king_run")  # never in a public record


def disclosed(value: Any, precision: float) -> Any:
    """A number (or a pair of them) at the disclosure precision, e.g. 0.01 → two decimals."""
    digits = max(0, round(-math.log10(precision)))
    if isinstance(value, (list, tuple)):
        return [disclosed(v, precision) for v in value]
    return value if value is None else round(float(value), digits) + 0.0  # never -0.0


@dataclass(frozen=True)
class HeadRef(Record):
    """One head of one pull request: the identity every record of it starts with, and the four
    keys it has on disk. PR and head are None where they are unknown (a seeded first king)."""

    miner: str
    generation: int
    pr: int | None
    head_sha: str | None

    @property
    def key(self) -> tuple[str, int, int | None, str | None]:
        """What makes two records the same head: miner (any case), generation, PR, head."""
        return (self.miner.lower(), self.generation, self.pr, self.head_sha)

    @property
    def ref(self) -> HeadRef:
        """Just the identity of a record that carries more."""
        return HeadRef(self.miner, self.generation, self.pr, self.head_sha)


@dataclass(frozen=True)
class Partition(Record):
    """This evaluation's secret split of the scored pool into eval and audit.

    The seed is drawn on the runner and stays in the private record; the public record
    carries `commitment`, sha256(salt ‖ seed), so the private record can later be checked
    against it without the seed ever being published.
    """

    seed: str
    salt: str

    @property
    def commitment(self) -> str:
        return hashlib.sha256(bytes.fromhex(self.salt) + self.seed.encode()).hexdigest()

    @classmethod
    def draw(cls) -> Partition:
        return cls(seed=secrets.token_hex(32), salt=secrets.token_hex(16))


# ---------------------------------------------------------------- attempts

@dataclass(frozen=True)
class Seen(Record):
    """The feature basis a recorded fingerprint is projected on (its digest's first 16 hex
    digits): gate 3 compares it only on that basis."""

    basis: str


@dataclass(frozen=True)
class Attempt(HeadRef):
    """One line of the attempts log: a head that passed the rate-limit gate.

    `fingerprint` is the head's model rows as gate 3 compares them (see gates.fingerprint),
    None when its weights could not be read; `gates_passed`/`failed_gate` say how its gates
    ended; `shown_at` when GitHub first showed the head on a pull request.
    """

    at: str
    weights_sha256: str | None = None
    fingerprint: str | None = None
    gates_passed: bool = field(default=False, metadata=on_disk("gates.passed"))
    failed_gate: int | None = field(default=None, metadata=on_disk("gates.failed"))
    seen: Seen | None = field(default=None, metadata=on_disk(omit_none=True))
    shown_at: str | None = field(default=None, metadata=on_disk(omit_none=True))

    @property
    def time(self) -> datetime:
        return parse_time(self.at)

    @property
    def precedence(self) -> tuple[datetime, int]:
        """Which of two heads is the earlier one: when GitHub first showed it on a pull
        request (`shown_at`; the time its gates ran where no run said), then the lower PR
        number (GitHub numbers pull requests as they are opened; its times are to the
        second)."""
        return parse_time(self.shown_at or self.at), self.pr or 0

    @property
    def is_original(self) -> bool:
        """Whether gate 3 refuses a copy of this attempt's head: every head that passed gate 3
        (its later gates do not matter: a head stopped at gate 4 is still its author's). A
        head stopped at gate 2 has nothing sane to copy, and one stopped at gate 3 is itself
        a copy, whose original is compared instead (so a copy never locks the original's
        author out)."""
        return self.gates_passed or (self.failed_gate or 0) > 3


# ---------------------------------------------------------------- results

@dataclass(frozen=True)
class HeadRecord(HeadRef):
    """Everything measured for one head in one evaluation: private, per item, ids only."""

    composite: float | None
    per_benchmark: dict[str, BenchmarkScore]
    live_cost_usd: float
    items: dict[str, Any]


@dataclass(frozen=True)
class Result(HeadRef):
    """One evaluation of one submission. Undisclosed fields read back from a public file as None.

    On disk `challenger_run` and `king_run` are the private record's `challenger` and `king`."""

    JSON_IGNORED: ClassVar[tuple[str, ...]] = ("format", "public")

    evaluated_at: str
    outcome: Outcome
    benchmark_manifest: str | None = None
    partition_commitment: str | None = None
    reason: str | None = None
    composite: float | None = None
    king_composite: float | None = None
    delta: float | None = None
    ci95: tuple[float, float] | None = None
    crown_test: dict[str, Any] | None = None  # the crown test's stage, difference, se and z
    against: HeadRef | None = None  # the king it was scored against (public: who reigned)
    per_benchmark: dict[str, BenchmarkScore] | None = None
    live_cost_usd: float | None = None
    router_card: dict[str, Any] | None = None  # a new king's routing mix and cost (public)
    isolation: str | None = None  # how the graded code was sandboxed (public, every outcome)
    # the earlier attempts (their PRs) the behavioural check could not compare with, their
    # heads not to be had (public, every outcome)
    not_compared: tuple[int, ...] | None = None
    partition: Partition | None = field(default=None, compare=False)
    challenger_run: HeadRecord | None = field(default=None, compare=False,
                                              metadata=on_disk("challenger"))
    king_run: HeadRecord | None = field(default=None, compare=False, metadata=on_disk("king"))

    def _all(self) -> dict[str, Any]:
        return {"format": FORMAT_VERSION, **encode(self, skip=PRIVATE_ONLY)}

    def public(self, precision: float) -> dict[str, Any]:
        """The disclosure rule: only the fields `PUBLIC_FIELDS` names for this outcome, with
        what it rounds at `precision` (the rules' disclosure precision)."""
        full = self._all()
        public = {name: full[name]
                  for name in PUBLIC_FIELDS.get(self.outcome, PUBLIC_FIELDS[REJECTED])}
        if self.outcome in UNSCORED:
            public.update(composite=None, delta=None)
        if self.outcome == LOST:
            public.update({name: disclosed(public[name], precision) for name in ROUNDED_IN_LOSS})
            public["ci95"] = None
            if public["crown_test"] is not None:
                public["crown_test"] = {name: public["crown_test"][name] for name in LOSS_TEST
                                        if name in public["crown_test"]}
        if public.get("per_benchmark"):
            public["per_benchmark"] = {
                bench: {**parts, **{name: disclosed(parts[name], precision)
                                    for name in ROUNDED_IN_BREAKDOWN}}
                for bench, parts in public["per_benchmark"].items()}
        return public

    def private(self, precision: float) -> dict[str, Any]:
        """Everything, both heads per item and the partition's seed included; never leaves the
        evaluation runner."""
        return {"format": FORMAT_VERSION, **encode(self), "public": self.public(precision)}


def refunded_heads(results: Iterable[Result]) -> frozenset[str]:
    """Head SHAs whose attempts do not count against the rate limit (SPEC §8): those with a
    void evaluation (an infrastructure failure) and no decisive result. A decisive result of
    the same head wins over a void whatever either's time says (a runner's clock may be
    ahead); withdrawn and stale evaluations refund nothing. `results`: any order."""
    void, decided = set(), set()
    for result in results:
        if result.head_sha is None:
            continue
        if result.outcome == VOID:
            void.add(result.head_sha)
        elif result.outcome in DECISIVE:
            decided.add(result.head_sha)
    return frozenset(void - decided)


# ---------------------------------------------------------------- the king and its history

@dataclass(frozen=True)
class PreviousKing(Record):
    miner: str
    generation: int
    composite: float | None


@dataclass(frozen=True)
class King(HeadRef):
    """The reigning head: king.json's `king`."""

    composite: float | None
    per_benchmark: dict[str, BenchmarkScore]
    crowned_at: str
    ci95: tuple[float, float] | None = None
    previous: PreviousKing | None = None

    @classmethod
    def crowned(cls, public: dict[str, Any], previous: King | None) -> King:
        """The king a crowning result's public record installs."""
        result = Result.from_dict(public)
        return cls(miner=result.miner, generation=result.generation, pr=result.pr,
                   head_sha=result.head_sha, composite=result.composite,
                   per_benchmark=result.per_benchmark or {}, crowned_at=result.evaluated_at,
                   ci95=result.ci95,
                   previous=None if previous is None else PreviousKing(
                       previous.miner, previous.generation, result.king_composite))


@dataclass(frozen=True)
class Crowning(HeadRef):
    """One entry of history.json: a king, when it was crowned and by how much."""

    composite: float | None
    crowned_at: str
    delta: float | None
    ci95: tuple[float, float] | None
    scores: dict[str, float]

    @classmethod
    def of(cls, public: dict[str, Any]) -> Crowning:
        """The history entry of a crowning result's public record."""
        result = Result.from_dict(public)
        return cls(miner=result.miner, generation=result.generation, pr=result.pr,
                   head_sha=result.head_sha, composite=result.composite,
                   crowned_at=result.evaluated_at, delta=result.delta, ci95=result.ci95,
                   scores={b: s.score for b, s in (result.per_benchmark or {}).items()})
