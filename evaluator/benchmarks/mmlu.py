"""MMLU: one committed letter A–D, exact match against the reference letter."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from typing import Any

from evaluator.benchmarks import datasets
from evaluator.benchmarks.base import Benchmark, Grade
from evaluator.benchmarks.math500 import boxed_contents, unwrap_fonts
from evaluator.benchmarks.normalise import normalise
from evaluator.errors import BenchmarkError
from evaluator.types import Item

LETTERS = "ABCD"
INSTRUCTION = ("Think it through briefly, then end with one line of the form `Answer: X`, "
               "where X is the letter of the correct choice (A, B, C or D).")

_LETTER = r"(?-i:(?P<upper>[A-D])(?![A-Za-z0-9])|(?P<lower>[a-d])(?=\s*(?:[.,;:!)\]*_`]|$)))"
_MARKUP = r"[\s*_`(\[{$]*(?:\\[a-zA-Z]+\s*\{[\s(]*)*"
# "the answer is (B)", "Answer: **D**", "correct option is C", "answer is I think option B"
COMMITTED = re.compile(
    r"(?:answer|option|choice)\s*(?:is|:)\s*:?"
    r"(?:\s*(?:I\s+think|I\s+believe|probably|clearly|definitely)(?![A-Za-z]))?"
    rf"(?:\s*(?:option|choice|letter)(?![A-Za-z]))?{_MARKUP}{_LETTER}",
    re.I)
MAX_MARKUP_CHARS = 200
# a line that is nothing but a letter: "B", "(C)", "C)", "**B**", "Option C"
BARE = re.compile(r"^[\s*_`(\[]*(?:(?:option|choice)\s+)?\(?(?P<upper>[A-D])[)\].:]?[\s*_`]*$",
                  re.I)


class MMLU(Benchmark):
    name = "mmlu"
    dataset = datasets.MMLU

    def items_from_rows(self, rows: Iterable[dict[str, Any]]) -> list[Item]:
        seen: Counter[str] = Counter()
        items = []
        for row in rows:
            try:
                subject, choices = str(row["subject"]), list(row["choices"])
                reference = _letter_of(row["answer"], len(choices))
                question = row["question"]
            except (KeyError, TypeError, ValueError) as exc:
                raise BenchmarkError(f"mmlu row is not in the cais/mmlu schema "
                                     f"(question, subject, choices, answer): {exc}") from exc
            items.append(Item(benchmark=self.name, id=f"{subject}/{seen[subject]}",
                              prompt=format_question(question, choices),
                              reference=reference, category=subject))
            seen[subject] += 1
        return items

    def render_prompt(self, item: Item) -> str:
        return f"{item.prompt}\n\n{INSTRUCTION}"

    def extract(self, response: str) -> str | None:
        return extract_letter(response)

    def grade(self, response: str, reference: Any) -> Grade:
        letter = extract_letter(response)
        expected = normalise(str(reference)).strip().upper()
        if expected not in LETTERS or len(expected) != 1:
            return Grade(False, letter, f"reference {reference!r} is not a letter A-D")
        return Grade(letter == expected, letter, None)


def format_question(question: str, choices: list[str]) -> str:
    lines = [question.strip(), ""]
    lines += [f"{LETTERS[i]}. {str(choice).strip()}" for i, choice in enumerate(choices)]
    return "\n".join(lines)


def _letter_of(answer: Any, n_choices: int) -> str:
    if n_choices != len(LETTERS):
        raise ValueError(f"expected {len(LETTERS)} choices, got {n_choices}")
    if isinstance(answer, str) and answer.strip().upper() in LETTERS:
        return answer.strip().upper()
    return LETTERS[int(answer)]


def extract_letter(text: str) -> str | None:
    """The last committed letter; a bare letter on the last line only when none is committed."""
    text = normalise(text)
    found: list[tuple[int, str]] = []
    for match in COMMITTED.finditer(text):
        found.append((match.start(), (match["upper"] or match["lower"]).upper()))
    for position, content in boxed_contents(text):
        letter = _as_letter(content)
        if letter:
            found.append((position, letter))
    if found:
        return max(found)[1]
    lines = [line for line in text.strip().splitlines() if line.strip()]
    bare = BARE.match(_short_unwrapped(lines[-1])) if lines else None
    return bare["upper"].upper() if bare else None


def _as_letter(content: str) -> str | None:
    content = _short_unwrapped(content).strip(" ().:")
    return content.upper() if len(content) == 1 and content.upper() in LETTERS else None


def _short_unwrapped(text: str) -> str:
    """A letter in markup is a short string; long ones are prose and stay as they are."""
    return unwrap_fonts(text) if len(text) <= MAX_MARKUP_CHARS else text
