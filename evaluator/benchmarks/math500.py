"""MATH-500: the final answer in `\\boxed{}`, judged equivalent by math-verify."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from typing import Any

from evaluator.benchmarks import datasets, verifier
from evaluator.benchmarks.base import Benchmark, Grade
from evaluator.benchmarks.normalise import normalise
from evaluator.errors import BenchmarkError
from evaluator.types import Item

log = logging.getLogger(__name__)

MAX_PARSED_CHARS = 1000  # longer "answers" are prose: compared as text, not parsed
INSTRUCTION = "Reason step by step, then put your final answer within \\boxed{}."

BOXED = re.compile(r"\\(?:boxed|fbox)\s*\{")
ANSWER_IS = re.compile(r"(?:answer|result)\s*(?:is|:|=)\s*:?\s*", re.I)  # the value follows
INLINE_MATH = re.compile(r"\$(?P<value>[^$]+)\$|\\\((?P<paren>.+?)\\\)")
EQUALS = re.compile(r"=\s*(?P<value>[^\s,;]+)")
NUMBER = re.compile(r"-?\d{1,3}(?:,\d{3})+(?:\.\d+)?"
                    r"|-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?(?:/\d+)?"
                    r"|-?\.\d+")
FULL_STOP = re.compile(r"(?<=[\d}])\.$")  # \boxed{42.}: the sentence ended inside the box
SCIENTIFIC = re.compile(r"^-?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)$")
MIXED_NUMBER = re.compile(r"^(?P<sign>-?)(?P<whole>\d+)\s+(?P<num>\d+)/(?P<den>\d+)$")
CURRENCY = re.compile(r"^\\?\$\s*|\\\$|[€£¥]|\\(?:euro|pounds|yen)(?![a-zA-Z])")
SPACED_GROUPS = re.compile(r"^-?\d{1,3}(?: \d{3})+(?:\.\d+)?$")  # 1 000 000: one number
FONT = re.compile(r"\\(?:mathbf|mathrm|mathit|mathsf|mathtt|mathnormal|boldsymbol|bm|textbf|textit"
                  r"|textrm|textsf|texttt|textnormal|text|emph)\s*\{")
SIZING = re.compile(r"\\(?:big|Big|bigg|Bigg)[lrm]?(?![a-zA-Z])")
DEGREE = re.compile(r"°|\\degree(?![a-zA-Z])")
BARE_EXPONENT = re.compile(r"\^(-?\d+)")
BARE_PI = re.compile(r"(?<![\\a-zA-Z])pi(?![a-zA-Z])|π")


class Math500(Benchmark):
    name = "math500"
    dataset = datasets.MATH500

    def __init__(self, bound: verifier.Verifier | None = None):
        self.bound = bound  # where comparisons run; None: this process's shared verifier

    def items_from_rows(self, rows: Iterable[dict[str, Any]]) -> list[Item]:
        try:
            return [Item(benchmark=self.name, id=str(row["unique_id"]), prompt=row["problem"],
                         reference=str(row["answer"]), category=str(row.get("subject", "")))
                    for row in rows]
        except KeyError as exc:
            raise BenchmarkError(f"math500 row without {exc} (expected the MATH-500 "
                                 "columns problem, answer, subject, unique_id)") from exc

    def render_prompt(self, item: Item) -> str:
        return f"{item.prompt}\n\n{INSTRUCTION}"

    def extract(self, response: str) -> str | None:
        return extract_answer(response)

    def grade(self, response: str, reference: Any) -> Grade:
        extracted = extract_answer(response)
        if extracted is None:
            return Grade(False, None, None)
        same, error = equivalent(extracted, normalise(str(reference)),
                                 self.bound or verifier.shared())
        if error:
            log.debug("%r vs %r: %s", extracted, reference, error)
        return Grade(same, extracted, error)


# Extraction -----------------------------------------------------------------------------


def extract_answer(text: str) -> str | None:
    """The last non-empty `\\boxed{}`, else a final "answer is ...", else the last value."""
    text = normalise(text)
    boxed = last_boxed(text)
    if boxed is not None:
        return boxed
    stated = [m.end() for m in ANSWER_IS.finditer(text)]
    if stated:
        value = _clean_stated(text[stated[-1]:].partition("\n")[0])
        if value:
            return value
    return last_value(text)


def last_boxed(text: str) -> str | None:
    """The content of the last non-empty `\\boxed{...}`, nested braces included."""
    found = [content.strip() for _, content in boxed_contents(text) if content.strip()]
    return found[-1] if found else None


def boxed_contents(text: str) -> list[tuple[int, str]]:
    """(position, content) of every closed `\\boxed{...}`, in order."""
    closing = _closing_braces(text)
    found = []
    for match in BOXED.finditer(text):
        end = closing.get(match.end() - 1)
        if end is not None:
            found.append((match.start(), text[match.end():end]))
    return found


def _braced(text: str, start: int) -> str | None:
    """The text from `start` up to the brace that closes the one just before it."""
    end = _closing_braces(text[start - 1:]).get(0)
    return None if end is None else text[start:start - 1 + end]


def _closing_braces(text: str) -> dict[int, int]:
    """Where each `{` is closed, in one pass (nested boxes must not cost quadratic time)."""
    opened, closing = [], {}
    for pos, char in enumerate(text):
        if char == "{":
            opened.append(pos)
        elif char == "}" and opened:
            closing[opened.pop()] = pos
    return closing


def _clean_stated(value: str) -> str:
    """The value of an "answer is" sentence: its math segment, or the line up to a full stop."""
    inline = INLINE_MATH.search(value)
    if inline:
        return (inline.group("value") or inline.group("paren")).strip()
    value = re.split(r"\.(?:\s|$)", value)[0]
    return value.strip().rstrip(".").strip().strip("*_`").strip()  # **42** is bold, not math


def last_value(text: str) -> str | None:
    """The value written last: an inline math segment, an `= value`, or a number."""
    candidates = []
    for match in INLINE_MATH.finditer(text):
        candidates.append((match.end(), -match.start(),
                           match.group("value") or match.group("paren")))
    for pattern in (EQUALS, NUMBER):
        for match in pattern.finditer(text):
            value = match.group("value") if pattern is EQUALS else match.group(0)
            candidates.append((match.end(), -match.start(), value.rstrip(".")))
    candidates = [c for c in candidates if c[2].strip()]
    return max(candidates)[2].strip() if candidates else None


# Equivalence ----------------------------------------------------------------------------


def equivalent(answer: str, reference: str, bound: verifier.Verifier
               ) -> tuple[bool, str | None]:
    """Whether two normalised answers are mathematically the same, as math-verify judges
    within the verifier's limit, and why not when it could not judge (see `verifier`)."""
    if max(len(answer), len(reference)) > MAX_PARSED_CHARS:
        return _same_text(answer, reference), None
    compared = bound.compare(_as_latex(answer), _as_latex(reference))
    if compared.same is None:  # a side is not math: compared as text
        return _same_text(answer, reference), None
    return compared.same, compared.error


def _as_latex(text: str) -> str:
    """Forms math-verify's LaTeX parser reads differently from a human: `1e3`, `1 1/2`, `$`,
    `1 000`, `\\tbinom`, a full stop after the value."""
    text = unwrap_fonts(CURRENCY.sub("", text.strip()), words=False).strip()
    text = SIZING.sub("", DEGREE.sub("^\\\\circ", text)).replace("\\tbinom", "\\binom")
    text = BARE_PI.sub(r"\\pi ", BARE_EXPONENT.sub(r"^{\1}", text))
    text = FULL_STOP.sub("", text)
    if SCIENTIFIC.match(text):
        return repr(float(text))
    if SPACED_GROUPS.match(text):
        return text.replace(" ", "")
    mixed = MIXED_NUMBER.match(text)
    if mixed:
        return f"{mixed['sign']}({mixed['whole']}+\\frac{{{mixed['num']}}}{{{mixed['den']}}})"
    return text


def unwrap_fonts(text: str, words: bool = True) -> str:
    """`\\mathbf{5}`, `\\text{5}` and friends as their content: a font is not a value.
    With `words=False` a font around letters alone stays: math-verify reads `\\text{ cm}` as a
    unit and `\\text{ and }` as a list, but `5 cm^2` as a product."""
    start = 0
    while match := FONT.search(text, start):
        content = _braced(text, match.end())
        if content is None:
            break
        if not words and _is_words(content):
            start = match.end()
            continue
        text = text[:match.start()] + content + text[match.end() + len(content) + 1:]
        start = match.start()
    return text


def _is_words(text: str) -> bool:
    """Letters and no digit: a unit (`cm`, `m/s`) or a conjunction (`and`), not a value."""
    return re.search(r"[A-Za-z]", text) is not None and re.search(r"\d", text) is None


def _same_text(answer: str, reference: str) -> bool:
    def squash(s: str) -> str:
        return re.sub(r"\s+", "", s)
    return squash(answer) == squash(reference)
