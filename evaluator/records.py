"""The typed records of the leaderboard: attempts, evaluation results, the king and its history.

A `Result` is one evaluation. `public()` applies the disclosure rule in one place (SPEC §8):
a new king shows every component, a loss only its composite and its delta to the king, a
rejection only its reason. `private()` keeps everything, per item, for the maintainers.
`from_dict` reads either view back; it coerces loosely (a field of the wrong type reads as
None), so the site can display what a file holds, while `store` validates files against
their JSON Schemas first when it reads strictly.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from evaluator.files import parse_time
from evaluator.rules import FORMAT_VERSION
from evaluator.scoring import BenchmarkScore

KING, LOST, REJECTED = "king", "lost", "rejected"
OUTCOMES = (KING, LOST, REJECTED)
IDENTITY_FIELDS = ("format", "miner", "generation", "pr", "head_sha", "evaluated_at",
                   "benchmark_manifest")
# The disclosure rule as data: the public record of each outcome holds exactly these fields.
PUBLIC_FIELDS = {
    KING: (*IDENTITY_FIELDS, "outcome", "composite", "king_composite", "delta", "reason",
           "per_benchmark", "paired", "live_cost_usd"),
    LOST: (*IDENTITY_FIELDS, "outcome", "composite", "king_composite", "delta"),
    REJECTED: (*IDENTITY_FIELDS, "outcome", "reason", "composite", "king_composite", "delta"),
}


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


# ---------------------------------------------------------------- attempts

@dataclass(frozen=True)
class Attempt:
    """One line of the attempts log: a submission that passed the rate-limit gate."""

    miner: str
    generation: int
    pr: int | None
    head_sha: str | None
    at: str

    @property
    def time(self) -> datetime:
        return parse_time(self.at)

    def to_dict(self) -> dict[str, Any]:
        return {"miner": self.miner, "generation": self.generation, "pr": self.pr,
                "head_sha": self.head_sha, "at": self.at}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Attempt:
        return cls(miner=str(data.get("miner")), generation=_int(data.get("generation")) or 0,
                   pr=_int(data.get("pr")), head_sha=_str(data.get("head_sha")),
                   at=str(data.get("at")))


# ---------------------------------------------------------------- results

@dataclass(frozen=True)
class Paired:
    """The paired comparison with the king: cached-accuracy difference and its 95% interval."""

    delta_cached: float
    ci95: tuple[float, float]

    def to_dict(self) -> dict[str, Any]:
        return {"delta_cached": self.delta_cached, "ci95": list(self.ci95)}

    @classmethod
    def from_dict(cls, value: Any) -> Paired | None:
        if not isinstance(value, dict):
            return None
        delta, interval = _float(value.get("delta_cached")), _pair(value.get("ci95"))
        return None if delta is None or interval is None else cls(delta, interval)


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
    reason: str | None = None
    composite: float | None = None
    king_composite: float | None = None
    per_benchmark: dict[str, BenchmarkScore] | None = None
    paired: Paired | None = None
    live_cost_usd: float | None = None
    challenger_run: HeadRecord | None = field(default=None, compare=False)
    king_run: HeadRecord | None = field(default=None, compare=False)

    @property
    def delta(self) -> float | None:
        if self.composite is None or self.king_composite is None:
            return None
        return self.composite - self.king_composite

    @property
    def key(self) -> tuple[str, int, int | None, str | None]:
        """What makes two records the same evaluation: miner (any case), generation, PR, head."""
        return (self.miner.lower(), self.generation, self.pr, self.head_sha)

    def _all(self) -> dict[str, Any]:
        return {"format": FORMAT_VERSION, "miner": self.miner, "generation": self.generation,
                "pr": self.pr, "head_sha": self.head_sha, "evaluated_at": self.evaluated_at,
                "benchmark_manifest": self.benchmark_manifest, "outcome": self.outcome,
                "reason": self.reason, "composite": self.composite,
                "king_composite": self.king_composite, "delta": self.delta,
                "per_benchmark": _scores_dict(self.per_benchmark),
                "paired": None if self.paired is None else self.paired.to_dict(),
                "live_cost_usd": self.live_cost_usd}

    def public(self) -> dict[str, Any]:
        """The disclosure rule: only the fields `PUBLIC_FIELDS` names for this outcome."""
        full = self._all()
        return {name: full[name] for name in PUBLIC_FIELDS.get(self.outcome, PUBLIC_FIELDS[REJECTED])}

    def private(self) -> dict[str, Any]:
        """Everything, both heads per item included; never leaves the evaluation runner."""
        full = self._all()
        full.update(public=self.public(),
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
                   reason=_str(data.get("reason")), composite=_float(data.get("composite")),
                   king_composite=_float(data.get("king_composite")),
                   per_benchmark=_scores(data.get("per_benchmark")),
                   paired=Paired.from_dict(data.get("paired")),
                   live_cost_usd=_float(data.get("live_cost_usd")),
                   challenger_run=HeadRecord.from_dict(data.get("challenger")),
                   king_run=HeadRecord.from_dict(data.get("king")))


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
    novelty: dict[str, float]
    paired: Paired | None = None
    previous: PreviousKing | None = None

    @property
    def key(self) -> tuple[str, int, int | None, str | None]:
        return (self.miner.lower(), self.generation, self.pr, self.head_sha)

    @classmethod
    def crowned(cls, result: Result, previous: King | None) -> King:
        per = result.per_benchmark or {}
        return cls(miner=result.miner, generation=result.generation, pr=result.pr,
                   head_sha=result.head_sha, composite=result.composite, per_benchmark=per,
                   crowned_at=result.evaluated_at,
                   novelty={bench: score.novelty for bench, score in per.items()},
                   paired=result.paired,
                   previous=None if previous is None else PreviousKing(
                       previous.miner, previous.generation, result.king_composite))

    def to_dict(self) -> dict[str, Any]:
        return {"miner": self.miner, "generation": self.generation, "pr": self.pr,
                "head_sha": self.head_sha, "composite": self.composite,
                "per_benchmark": _scores_dict(self.per_benchmark), "crowned_at": self.crowned_at,
                "novelty": dict(self.novelty),
                "paired": None if self.paired is None else self.paired.to_dict(),
                "previous": None if self.previous is None else self.previous.to_dict()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> King:
        previous = data.get("previous")
        novelty = data.get("novelty") if isinstance(data.get("novelty"), dict) else {}
        return cls(miner=str(data.get("miner")), generation=_int(data.get("generation")) or 0,
                   pr=_int(data.get("pr")), head_sha=_str(data.get("head_sha")),
                   composite=_float(data.get("composite")),
                   per_benchmark=_scores(data.get("per_benchmark")) or {},
                   crowned_at=str(data.get("crowned_at")),
                   novelty={str(b): _float(v) for b, v in novelty.items()},
                   paired=Paired.from_dict(data.get("paired")),
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
    def of(cls, result: Result) -> Crowning:
        return cls(miner=result.miner, generation=result.generation, pr=result.pr,
                   head_sha=result.head_sha, composite=result.composite,
                   crowned_at=result.evaluated_at, delta=result.delta,
                   ci95=None if result.paired is None else result.paired.ci95,
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
