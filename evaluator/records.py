"""The typed records of the leaderboard: attempts, evaluation results, the king and its history.

A `Result` is one evaluation. `public()` applies the disclosure rule in one place (SPEC §8):
a new king shows every component (its audit accuracy at the disclosure precision), a loss
only its composite, its delta to the king and the interval of that delta, all at the
disclosure precision, a rejection only its reason. `private()` keeps everything, per item
and with the partition's secret seed, for the maintainers.
`from_dict` reads either view back; it coerces loosely (a field of the wrong type reads as
None), so the site can display what a file holds, while `store` validates files against
their JSON Schemas first when it reads strictly.
"""

from __future__ import annotations

import hashlib
import math
import secrets
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from evaluator.files import parse_time
from evaluator.rules import FORMAT_VERSION
from evaluator.scoring import BenchmarkScore

KING, LOST, REJECTED = "king", "lost", "rejected"
DECISIVE = (KING, LOST, REJECTED)  # a head and its generation are decided for good
# VOID: the infrastructure failed (the pool, the runner, GitHub refusing the merge): no score,
# and the attempt is refunded. STALE: the king changed while it ran; it is evaluated again.
# WITHDRAWN: the PR's author changed it after the evaluation was approved (a new head, a close,
# another base): no score, nothing published, the attempt stays spent. See `lifecycle`.
VOID, STALE, WITHDRAWN = "void", "stale", "withdrawn"
OUTCOMES = (KING, LOST, REJECTED, VOID, STALE, WITHDRAWN)
UNSCORED = (REJECTED, VOID, STALE, WITHDRAWN)  # a public record of a reason and no score
DATED = (VOID, STALE, WITHDRAWN)  # recorded in a file of their own, named by their time
IDENTITY_FIELDS = ("format", "miner", "generation", "pr", "head_sha", "evaluated_at",
                   "benchmark_manifest", "partition_commitment")
# The disclosure rule as data: the public record of each outcome holds exactly these fields.
PUBLIC_FIELDS = {
    KING: (*IDENTITY_FIELDS, "outcome", "composite", "king_composite", "delta", "ci95",
           "crown_test", "reason", "per_benchmark", "live_cost_usd", "router_card", "isolation"),
    LOST: (*IDENTITY_FIELDS, "outcome", "composite", "delta", "ci95", "crown_test", "isolation"),
    **{outcome: (*IDENTITY_FIELDS, "outcome", "reason", "composite", "delta", "isolation")
       for outcome in UNSCORED},
}
# Public fields a record written before they were kept lacks (the schema does not require them)
LATER_FIELDS = ("isolation", "crown_test")
# What the disclosure rule rounds: in a loss, these fields; in a king's breakdown, these parts.
ROUNDED_IN_LOSS = ("composite", "delta", "ci95")
ROUNDED_IN_TEST = ("difference", "se", "z")  # a loss's crown test, at the disclosure precision
ROUNDED_IN_BREAKDOWN = ("audit_acc",)


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _int(value: Any) -> int | None:
    return value if type(value) is int else None


def _float(value: Any) -> float | None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    return float(value) if ok else None


def _pair(value: Any) -> tuple[float, float] | None:
    if isinstance(value, (list, tuple)) and len(value) == 2:
        low, high = (_float(v) for v in value)
        if low is not None and high is not None:
            return (low, high)
    return None


def _scores(value: Any) -> dict[str, BenchmarkScore] | None:
    if not isinstance(value, dict):
        return None
    scores = {}
    for bench, parts in value.items():
        if isinstance(parts, dict):
            scores[str(bench)] = BenchmarkScore(**{
                name: _float(parts.get(name)) for name in BenchmarkScore.FIELDS})
    return scores


def _scores_dict(scores: dict[str, BenchmarkScore] | None) -> dict[str, dict] | None:
    return None if scores is None else {b: s.to_dict() for b, s in scores.items()}


def disclosed(value: Any, precision: float) -> Any:
    """A number (or a pair of them) at the disclosure precision, e.g. 0.01 → two decimals."""
    digits = max(0, round(-math.log10(precision)))
    if isinstance(value, (list, tuple)):
        return [disclosed(v, precision) for v in value]
    return value if value is None else round(float(value), digits) + 0.0  # never -0.0


@dataclass(frozen=True)
class Partition:
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

    def to_dict(self) -> dict[str, str]:
        return {"seed": self.seed, "salt": self.salt}

    @classmethod
    def from_dict(cls, value: Any) -> Partition | None:
        if not isinstance(value, dict) or not all(isinstance(value.get(k), str)
                                                  for k in ("seed", "salt")):
            return None
        return cls(value["seed"], value["salt"])


# ---------------------------------------------------------------- attempts

@dataclass(frozen=True)
class Seen:
    """A recorded fingerprint's energy on the season's feature basis (its digest's first 16
    hex digits): gate 3's divisor for that fingerprint, worked out once when it is recorded."""

    basis: str
    energy: float

    def to_dict(self) -> dict[str, Any]:
        return {"basis": self.basis, "energy": self.energy}

    @classmethod
    def from_dict(cls, value: Any) -> Seen | None:
        if not isinstance(value, dict) or not isinstance(value.get("basis"), str):
            return None
        energy = _float(value.get("energy"))
        return (cls(value["basis"], energy) if energy is not None and 0 < energy < float("inf")
                else None)


@dataclass(frozen=True)
class Attempt:
    """One line of the attempts log: a head that passed the rate-limit gate.

    `fingerprint` is the head's model rows as gate 3 compares them (see gates.fingerprint),
    None when its weights could not be read; `gates_passed`/`failed_gate` say how its gates
    ended.
    """

    miner: str
    generation: int
    pr: int | None
    head_sha: str | None
    at: str
    weights_sha256: str | None = None
    fingerprint: str | None = None
    gates_passed: bool = False
    failed_gate: int | None = None
    seen: Seen | None = None

    @property
    def time(self) -> datetime:
        return parse_time(self.at)

    def to_dict(self) -> dict[str, Any]:
        return {"miner": self.miner, "generation": self.generation, "pr": self.pr,
                "head_sha": self.head_sha, "at": self.at, "weights_sha256": self.weights_sha256,
                "fingerprint": self.fingerprint,
                "gates": {"passed": self.gates_passed, "failed": self.failed_gate},
                **({} if self.seen is None else {"seen": self.seen.to_dict()})}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Attempt:
        gates = data.get("gates") if isinstance(data.get("gates"), dict) else {}
        return cls(miner=str(data.get("miner")), generation=_int(data.get("generation")) or 0,
                   pr=_int(data.get("pr")), head_sha=_str(data.get("head_sha")),
                   at=str(data.get("at")), weights_sha256=_str(data.get("weights_sha256")),
                   fingerprint=_str(data.get("fingerprint")),
                   gates_passed=gates.get("passed") is True, failed_gate=_int(gates.get("failed")),
                   seen=Seen.from_dict(data.get("seen")))


# ---------------------------------------------------------------- results

@dataclass(frozen=True)
class HeadRecord:
    """Everything measured for one head in one evaluation: private, per item, ids only."""

    miner: str
    generation: int
    pr: int | None
    head_sha: str | None
    composite: float | None
    per_benchmark: dict[str, BenchmarkScore]
    live_cost_usd: float
    items: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {"miner": self.miner, "generation": self.generation, "pr": self.pr,
                "head_sha": self.head_sha, "composite": self.composite,
                "per_benchmark": _scores_dict(self.per_benchmark),
                "live_cost_usd": self.live_cost_usd, "items": self.items}

    @classmethod
    def from_dict(cls, value: Any) -> HeadRecord | None:
        if not isinstance(value, dict):
            return None
        return cls(miner=str(value.get("miner")), generation=_int(value.get("generation")) or 0,
                   pr=_int(value.get("pr")), head_sha=_str(value.get("head_sha")),
                   composite=_float(value.get("composite")),
                   per_benchmark=_scores(value.get("per_benchmark")) or {},
                   live_cost_usd=_float(value.get("live_cost_usd")) or 0.0,
                   items=value.get("items") if isinstance(value.get("items"), dict) else {})


@dataclass(frozen=True)
class Result:
    """One evaluation of one submission. Undisclosed fields read back from a public file as None."""

    miner: str
    generation: int
    pr: int | None
    head_sha: str | None
    evaluated_at: str
    outcome: str
    benchmark_manifest: str | None = None
    partition_commitment: str | None = None
    reason: str | None = None
    composite: float | None = None
    king_composite: float | None = None
    delta: float | None = None
    ci95: tuple[float, float] | None = None
    crown_test: dict[str, Any] | None = None  # the crown test's stage, difference, se and z
    per_benchmark: dict[str, BenchmarkScore] | None = None
    live_cost_usd: float | None = None
    router_card: dict[str, Any] | None = None  # a new king's routing mix and cost (public)
    isolation: str | None = None  # how the graded code was sandboxed (public, every outcome)
    partition: Partition | None = field(default=None, compare=False)
    challenger_run: HeadRecord | None = field(default=None, compare=False)
    king_run: HeadRecord | None = field(default=None, compare=False)

    @property
    def key(self) -> tuple[str, int, int | None, str | None]:
        """What makes two records the same evaluation: miner (any case), generation, PR, head."""
        return (self.miner.lower(), self.generation, self.pr, self.head_sha)

    def _all(self) -> dict[str, Any]:
        return {"format": FORMAT_VERSION, "miner": self.miner, "generation": self.generation,
                "pr": self.pr, "head_sha": self.head_sha, "evaluated_at": self.evaluated_at,
                "benchmark_manifest": self.benchmark_manifest,
                "partition_commitment": self.partition_commitment, "outcome": self.outcome,
                "reason": self.reason, "composite": self.composite,
                "king_composite": self.king_composite, "delta": self.delta,
                "ci95": None if self.ci95 is None else list(self.ci95),
                "crown_test": None if self.crown_test is None else dict(self.crown_test),
                "per_benchmark": _scores_dict(self.per_benchmark),
                "live_cost_usd": self.live_cost_usd, "router_card": self.router_card,
                "isolation": self.isolation}

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
            if public["crown_test"] is not None:
                public["crown_test"].update({name: disclosed(public["crown_test"][name], precision)
                                             for name in ROUNDED_IN_TEST})
        if public.get("per_benchmark"):
            public["per_benchmark"] = {
                bench: {**parts, **{name: disclosed(parts[name], precision)
                                    for name in ROUNDED_IN_BREAKDOWN}}
                for bench, parts in public["per_benchmark"].items()}
        return public

    def private(self, precision: float) -> dict[str, Any]:
        """Everything, both heads per item and the partition's seed included; never leaves the
        evaluation runner."""
        full = self._all()
        full.update(public=self.public(precision),
                    partition=None if self.partition is None else self.partition.to_dict(),
                    challenger=None if self.challenger_run is None else self.challenger_run.to_dict(),
                    king=None if self.king_run is None else self.king_run.to_dict())
        return full

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Result:
        """A public or private record as a Result (fields it does not hold are None)."""
        return cls(miner=str(data.get("miner")), generation=_int(data.get("generation")) or 0,
                   pr=_int(data.get("pr")), head_sha=_str(data.get("head_sha")),
                   evaluated_at=str(data.get("evaluated_at")), outcome=str(data.get("outcome")),
                   benchmark_manifest=_str(data.get("benchmark_manifest")),
                   partition_commitment=_str(data.get("partition_commitment")),
                   reason=_str(data.get("reason")), composite=_float(data.get("composite")),
                   king_composite=_float(data.get("king_composite")),
                   delta=_float(data.get("delta")), ci95=_pair(data.get("ci95")),
                   crown_test=data.get("crown_test") if isinstance(data.get("crown_test"),
                                                                   dict) else None,
                   per_benchmark=_scores(data.get("per_benchmark")),
                   live_cost_usd=_float(data.get("live_cost_usd")),
                   router_card=data.get("router_card") if isinstance(data.get("router_card"),
                                                                     dict) else None,
                   isolation=_str(data.get("isolation")),
                   partition=Partition.from_dict(data.get("partition")),
                   challenger_run=HeadRecord.from_dict(data.get("challenger")),
                   king_run=HeadRecord.from_dict(data.get("king")))


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
class PreviousKing:
    miner: str
    generation: int
    composite: float | None

    def to_dict(self) -> dict[str, Any]:
        return {"miner": self.miner, "generation": self.generation, "composite": self.composite}


@dataclass(frozen=True)
class King:
    """The reigning head: king.json's `king`."""

    miner: str
    generation: int
    pr: int | None
    head_sha: str | None
    composite: float | None
    per_benchmark: dict[str, BenchmarkScore]
    crowned_at: str
    ci95: tuple[float, float] | None = None
    previous: PreviousKing | None = None

    @property
    def key(self) -> tuple[str, int, int | None, str | None]:
        return (self.miner.lower(), self.generation, self.pr, self.head_sha)

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

    def to_dict(self) -> dict[str, Any]:
        return {"miner": self.miner, "generation": self.generation, "pr": self.pr,
                "head_sha": self.head_sha, "composite": self.composite,
                "per_benchmark": _scores_dict(self.per_benchmark), "crowned_at": self.crowned_at,
                "ci95": None if self.ci95 is None else list(self.ci95),
                "previous": None if self.previous is None else self.previous.to_dict()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> King:
        previous = data.get("previous")
        return cls(miner=str(data.get("miner")), generation=_int(data.get("generation")) or 0,
                   pr=_int(data.get("pr")), head_sha=_str(data.get("head_sha")),
                   composite=_float(data.get("composite")),
                   per_benchmark=_scores(data.get("per_benchmark")) or {},
                   crowned_at=str(data.get("crowned_at")), ci95=_pair(data.get("ci95")),
                   previous=PreviousKing(str(previous.get("miner")),
                                         _int(previous.get("generation")) or 0,
                                         _float(previous.get("composite")))
                   if isinstance(previous, dict) else None)


@dataclass(frozen=True)
class Crowning:
    """One entry of history.json: a king, when it was crowned and by how much."""

    miner: str
    generation: int
    pr: int | None
    head_sha: str | None
    composite: float | None
    crowned_at: str
    delta: float | None
    ci95: tuple[float, float] | None
    scores: dict[str, float]

    @property
    def key(self) -> tuple[str, int, int | None, str | None]:
        return (self.miner.lower(), self.generation, self.pr, self.head_sha)

    @classmethod
    def of(cls, public: dict[str, Any]) -> Crowning:
        """The history entry of a crowning result's public record."""
        result = Result.from_dict(public)
        return cls(miner=result.miner, generation=result.generation, pr=result.pr,
                   head_sha=result.head_sha, composite=result.composite,
                   crowned_at=result.evaluated_at, delta=result.delta, ci95=result.ci95,
                   scores={b: s.score for b, s in (result.per_benchmark or {}).items()})

    def to_dict(self) -> dict[str, Any]:
        return {"miner": self.miner, "generation": self.generation, "pr": self.pr,
                "head_sha": self.head_sha, "composite": self.composite,
                "crowned_at": self.crowned_at, "delta": self.delta,
                "ci95": None if self.ci95 is None else list(self.ci95),
                "scores": dict(self.scores)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Crowning:
        scores = data.get("scores") if isinstance(data.get("scores"), dict) else {}
        return cls(miner=str(data.get("miner")), generation=_int(data.get("generation")) or 0,
                   pr=_int(data.get("pr")), head_sha=_str(data.get("head_sha")),
                   composite=_float(data.get("composite")), crowned_at=str(data.get("crowned_at")),
                   delta=_float(data.get("delta")), ci95=_pair(data.get("ci95")),
                   scores={str(b): v for b, v in scores.items() if _float(v) is not None})
