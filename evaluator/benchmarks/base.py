"""The one small interface every benchmark implements: load rows, render a prompt, grade.

A benchmark turns upstream dataset rows into `Item`s, renders the prompt a pool model
sees (asking for the answer format its grader reads), extracts the answer from a
response and grades it against the item's reference.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from evaluator.benchmarks.datasets import DatasetPin, stream_rows
from evaluator.errors import BenchmarkError, GraderError, IsolationError
from evaluator.types import Item


@dataclass(frozen=True)
class Grade:
    """A grading decision: correct or not, what was extracted, why it could not be graded.

    `error` is set only when the case could not be graded at all (then `correct` is False);
    `detail` is a human note on the decision (e.g. which test failed), not part of the record.
    """

    correct: bool
    extracted: str | None = None
    error: str | None = None
    detail: str | None = field(default=None, compare=False)

    def to_dict(self) -> dict[str, Any]:
        return {"correct": self.correct, "extracted": self.extracted, "error": self.error}


class Benchmark(ABC):
    """One benchmark: its upstream source, prompt template, extractor and grader."""

    name: ClassVar[str]
    dataset: ClassVar[DatasetPin]
    runs_code: ClassVar[bool] = False  # grading runs what a model wrote (in the sandbox)

    def load_upstream(self, source: str | None = None) -> list[Item]:
        """Items from the pinned upstream dataset: the hub (default) or a local file or folder."""
        items = self.items_from_rows(stream_rows(self.dataset, source))
        where = source or self.dataset.ref
        if not items:
            raise BenchmarkError(f"{self.name}: no rows found in {where}")
        ids = [item.id for item in items]
        if len(set(ids)) != len(ids):
            raise BenchmarkError(f"{self.name}: duplicate item ids in {where}")
        return items

    @abstractmethod
    def items_from_rows(self, rows: Iterable[dict[str, Any]]) -> list[Item]:
        """Map upstream rows (in file order, possibly a stream) to items."""

    @abstractmethod
    def render_prompt(self, item: Item) -> str:
        """The question as a pool model sees it, with the answer format the grader reads."""

    @abstractmethod
    def extract(self, response: str) -> str | None:
        """The gradable answer in a response, or None when there is none."""

    @abstractmethod
    def grade(self, response: str, reference: Any) -> Grade:
        """Grade one response; a case that cannot be graded is wrong with an error, never raises."""

    def grade_many(self, pairs: Iterable[tuple[str, Any]], workers: int | None = None
                   ) -> list[Grade]:
        """Grade (response, reference) pairs in order; benchmarks that run code parallelise."""
        return [self.grade_pair(pair) for pair in pairs]

    def grade_pair(self, pair: tuple[str, Any]) -> Grade:
        """`grade` on one pair; whatever it raises makes that pair wrong, with the error."""
        try:
            response, reference = pair
            return self.grade(response, reference)
        except ImportError:
            raise  # a grader's library is not installed: no pair can be graded
        except (IsolationError, GraderError):  # not this pair's fault: nothing is graded at all
            raise
        except Exception as exc:  # one bad pair must not sink the others
            return Grade(False, None, f"grader failed: {type(exc).__name__}: {str(exc)[:200]}")
