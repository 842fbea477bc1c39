"""What the Benchmarks page says about grading: the limits, and the graders' agreement with an
independent grader.

Another routing benchmark publishes the cases its graders are tested on (response, reference,
expected verdict). `tinyrouter dev grading --vectors FILE --agreement OUT` grades them with
this package's graders and writes, per benchmark, how many cases there are and on how many the
two graders agree; the file ships beside this module and the site renders it, so the page
states what was measured, never a typed number.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evaluator.benchmarks.math500 import MAX_PARSED_CHARS
from evaluator.benchmarks.verifier import VERIFY_SECONDS
from evaluator.sandbox import DEFAULT_LIMITS

PUBLISHED = Path(__file__).with_name("agreement.json")
CORPUS = "tests/benchmarks/test_grading_corpus.py"  # the regression corpus, in the repository


@dataclass(frozen=True)
class Agreement:
    """Per benchmark: (cases, cases on which both graders give the same verdict)."""

    counts: dict[str, tuple[int, int]]

    @property
    def cases(self) -> int:
        return sum(cases for cases, _ in self.counts.values())

    @property
    def agreeing(self) -> int:
        return sum(agreeing for _, agreeing in self.counts.values())

    @property
    def share(self) -> float:
        return self.agreeing / self.cases if self.cases else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"benchmarks": {name: {"cases": cases, "agreeing": agreeing}
                               for name, (cases, agreeing) in sorted(self.counts.items())}}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Agreement:
        return cls({name: (int(row["cases"]), int(row["agreeing"]))
                    for name, row in data["benchmarks"].items()})


def published(path: Path = PUBLISHED) -> Agreement | None:
    """The published agreement, or None when none has been measured."""
    try:
        return Agreement.from_dict(json.loads(path.read_text(encoding="utf-8")))
    except FileNotFoundError:
        return None


def grading_facts() -> dict[str, Any]:
    """The numbers the Benchmarks page renders, each read from where it lives."""
    return {"verify_seconds": VERIFY_SECONDS, "max_parsed_chars": MAX_PARSED_CHARS,
            "sandbox": DEFAULT_LIMITS, "agreement": published(), "corpus": CORPUS}
