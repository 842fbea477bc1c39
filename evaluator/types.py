"""Shared nouns: the item every benchmark produces and the answers the pool gives for it."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class Item:
    """One benchmark question, in the same shape for every benchmark.

    `prompt` is the question as the coordinator and the models see it (for mmlu it
    includes the lettered choices; for livecodebench the statement and starter code).
    `reference` is what the grader needs: the math answer string, the mmlu letter, or
    `{"tests": [{"input", "output", "testtype"}], "fn_name": str | None}`; an upstream
    LiveCodeBench item also keeps its private tests still encoded, as `"private_tests"`,
    decoded only when the item is graded.
    `category` is the kind of item (math subject, mmlu subject, code difficulty).
    """

    benchmark: str
    id: str
    prompt: str
    reference: Any
    category: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Item:
        return cls(benchmark=data["benchmark"], id=str(data["id"]), prompt=data["prompt"],
                   reference=data["reference"], category=data.get("category", ""))


@dataclass(frozen=True)
class ModelAnswer:
    """A pool model's single-turn Worker answer to an item, graded once."""

    text: str
    correct: bool
    extracted: str | None = None
    cost_usd: float = 0.0


@dataclass(frozen=True)
class AnsweredItem:
    """An item with each pool model's graded answer: a cached-answer row or a training row."""

    item: Item
    answers: dict[str, ModelAnswer] = field(default_factory=dict)

    def correct_vector(self, pool_names: tuple[str, ...]) -> list[float]:
        return [1.0 if self.answers[name].correct else 0.0 for name in pool_names]

    def to_dict(self) -> dict[str, Any]:
        return {"item": self.item.to_dict(),
                "answers": {name: asdict(a) for name, a in sorted(self.answers.items())}}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AnsweredItem:
        return cls(item=Item.from_dict(data["item"]),
                   answers={name: ModelAnswer(**a) for name, a in data["answers"].items()})


@dataclass(frozen=True)
class Decision:
    """One routing decision: which pool model to call, in which role."""

    model: str
    role: str
