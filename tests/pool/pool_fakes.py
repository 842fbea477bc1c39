"""Offline fakes for the pool tests: a small corpus, persona skills, a stand-in benchmark."""

from __future__ import annotations

import re
from dataclasses import dataclass

from evaluator.benchmarks.corpus import CorpusItem
from evaluator.rules import OFFICIAL
from evaluator.types import Item

QWEN, GEMINI, DEEPSEEK = OFFICIAL.pool_names
BOXED = re.compile(r"\\boxed\{([^{}]*)\}")

# skills designed so the best persona differs by category
PERSONAS = {"personas": {
    QWEN: {"math500": {"algebra": 0.9, "geometry": 0.2}},
    GEMINI: {"math500": {"algebra": 0.3, "geometry": 0.8}},
    DEEPSEEK: {"math500": {"algebra": 0.5, "geometry": 0.5}},
}}


class FakeMath:
    """A stand-in benchmark: the answer is the last \\boxed{}."""

    name = "math500"

    def render_prompt(self, item: Item) -> str:
        return f"{item.prompt}\n\nPut the final answer in \\boxed{{}}."

    def extract(self, response: str) -> str | None:
        found = BOXED.findall(response)
        return found[-1] if found else None

    def grade(self, response: str, reference: str) -> bool:
        return self.extract(response) == reference

    def grade_many(self, pairs: list[tuple[str, str]]) -> list[Grade]:
        return [Grade(self.grade(response, reference)) for response, reference in pairs]


@dataclass(frozen=True)
class Grade:
    correct: bool


def make_corpus(n: int = 200) -> list[CorpusItem]:
    entries = []
    for i in range(n):
        category = "algebra" if i % 2 == 0 else "geometry"
        item = Item("math500", f"q{i}", f"Question {i}: what is {i} plus {i}?", str(2 * i),
                    category)
        entries.append(CorpusItem(item, f"We add: {i} + {i} = {2 * i}.\n\\boxed{{{2 * i}}}",
                                   f"We add: {i} + {i} = {2 * i + 1}.\n\\boxed{{{2 * i + 1}}}"))
    return entries


class Sleeps(list):
    """Records the client's backoff waits instead of sleeping."""

    async def __call__(self, seconds: float) -> None:
        self.append(seconds)


class FakeTime:
    """A clock that only the client's backoff waits move: `sleep` advances `clock`."""

    def __init__(self) -> None:
        self.now = 0.0
        self.waits: list[float] = []

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)
        self.now += seconds
