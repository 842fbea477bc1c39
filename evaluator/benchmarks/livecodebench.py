"""LiveCodeBench code generation: pass@1 of the last fenced Python block, run in the sandbox."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import io
import json
import logging
import math
import os
import pickle
import re
import zlib
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from decimal import Decimal, InvalidOperation
from typing import Any

from evaluator import isolation, sandbox
from evaluator.benchmarks import datasets
from evaluator.benchmarks.base import Benchmark, Grade
from evaluator.errors import BenchmarkError
from evaluator.rules import LIVECODEBENCH_CONTEST_DATES
from evaluator.types import Item

log = logging.getLogger(__name__)

STDIN, FUNCTIONAL = "stdin", "functional"
INSTRUCTIONS = {
    STDIN: "Write a Python 3 program that reads the input from standard input and prints "
           "the answer to standard output. Give the complete program in one ```python "
           "fenced block.",
    FUNCTIONAL: "Complete the starter code above in Python 3, keeping its class, method "
                "name and signature. Give the complete solution in one ```python fenced "
                "block.",
}
FENCE = re.compile(r"```[ \t]*(?P<lang>[\w+-]*)[^\n]*\n(?P<body>.*?)(?:\n[ \t]*```|\Z)", re.S)
PYTHON_TAGS = {"", "python", "python3", "py", "py3"}
FLOAT_TOLERANCE = 1e-6  # absolute and relative, for numbers written as floats only
JSON_MAX_DEPTH = 64  # deeper replies are refused before a recursive parser sees them
JSON_MAX_CHARS = sandbox.DEFAULT_LIMITS.output_bytes  # no reply is longer than a run may print
JSON_SPECIAL = re.compile(r'[\\"\[\]{}]')
INTEGER = re.compile(r"[+-]?\d+")
BAD_REFERENCE = (ValueError, TypeError, AttributeError, KeyError, zlib.error, pickle.UnpicklingError)
# grades kept by `remembered_grades` (None: off), keyed by a digest of the program, its tests,
# the limits and the isolation mode
_REMEMBERED: dict[str, Grade] | None = None
REMEMBER_AT_MOST = 20_000


@contextlib.contextmanager
def remembered_grades() -> Iterator[None]:
    """Within the block, a program met again with the same tests is graded once per process,
    not once per call of `grade_many`: the demo's memoriser re-asks the sealed pool's
    questions and the simulator gives it the same programs. Off by default: a real run grades
    each collection afresh, and tests that change the sandbox see every run."""
    global _REMEMBERED
    outer, _REMEMBERED = _REMEMBERED, {} if _REMEMBERED is None else _REMEMBERED
    try:
        yield
    finally:
        _REMEMBERED = outer


class LiveCodeBench(Benchmark):
    name = "livecodebench"
    dataset = datasets.LIVECODEBENCH
    runs_code = True

    def __init__(self, limits: sandbox.Limits = sandbox.DEFAULT_LIMITS,
                 sandbox_per_test: bool = False) -> None:
        self.limits = limits
        self.sandbox_per_test = sandbox_per_test  # the slower way, kept to check the fast one

    def items_from_rows(self, rows: Iterable[dict[str, Any]]) -> list[Item]:
        """Items of the rows inside the pinned contest dates; the others are counted, skipped."""
        items, skipped = [], 0
        for row in rows:
            if in_contest_window(row):
                items.append(self._item(row))
            else:
                skipped += 1
        if skipped:
            log.info("livecodebench: skipped %d rows dated outside %s to %s", skipped,
                     *LIVECODEBENCH_CONTEST_DATES)
        return items

    def _item(self, row: dict[str, Any]) -> Item:
        """The private tests stay encoded on the reference: decoded only when graded."""
        try:
            metadata = json.loads(row.get("metadata") or "{}")
            public = [{k: t[k] for k in ("input", "output", "testtype")}
                      for t in json.loads(row["public_test_cases"])]
            prompt = row["question_content"].strip()
            if (row.get("starter_code") or "").strip():
                prompt += f"\n\n```python\n{row['starter_code'].rstrip()}\n```"
            if not isinstance(row["private_test_cases"], str):
                raise TypeError("private_test_cases is an encoded string upstream")
            reference = {"tests": public, "private_tests": row["private_test_cases"],
                         "fn_name": metadata.get("func_name")}
            return Item(benchmark=self.name, id=str(row["question_id"]), prompt=prompt,
                        reference=reference, category=str(row.get("difficulty", "")))
        except (KeyError, TypeError, ValueError) as exc:
            raise BenchmarkError(f"livecodebench row {row.get('question_id')!r} is not in the "
                                 f"code_generation_lite schema: {exc}") from exc

    def render_prompt(self, item: Item) -> str:
        kind = FUNCTIONAL if item.reference.get("fn_name") else STDIN
        return f"{item.prompt}\n\n{INSTRUCTIONS[kind]}"

    def extract(self, response: str) -> str | None:
        return extract_program(response)

    def grade(self, response: str, reference: Any) -> Grade:
        program = extract_program(response)
        try:
            tests, fn_name = parse_reference(reference)
        except BAD_REFERENCE as exc:
            return Grade(False, program, f"bad reference: {exc}")
        if program is None:
            return Grade(False, None, None, "no program in the response")
        for number, failure in enumerate(self.verdicts(program, tests, fn_name), 1):
            if failure:
                return Grade(False, program, None, f"test {number}/{len(tests)}: {failure}")
        return Grade(True, program, None, f"all {len(tests)} tests passed")

    def grade_many(self, pairs, workers: int | None = None) -> list[Grade]:
        """Programs graded in parallel, as many at a time as there are cores; a program met
        again with the same tests is graded once."""
        pairs = list(pairs)
        seen: dict[Any, int] = {}
        keys = [grading_key(pair, i) for i, pair in enumerate(pairs)]
        first = [seen.setdefault(key, i) for i, key in enumerate(keys)]
        memo = _REMEMBERED
        digests = {}  # a malformed pair (keyed by its index) is never kept
        if memo is not None:
            context = [repr(self.limits), self.sandbox_per_test, isolation.grading_mode()]
            digests = {i: _digest(keys[i], context) for i in set(first)
                       if not isinstance(keys[i], int)}
        grades = {i: memo[d] for i, d in digests.items() if d in memo}
        distinct = sorted(set(first) - set(grades))
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1
        workers = max(1, min(workers or cores, cores, len(distinct) or 1))
        with ThreadPoolExecutor(max_workers=workers) as pool:
            fresh = dict(zip(distinct, pool.map(self.grade_pair, [pairs[i] for i in distinct]),
                             strict=True))
        grades.update(fresh)
        if memo is not None:
            for i, grade in fresh.items():
                if i not in digests:
                    continue
                if len(memo) >= REMEMBER_AT_MOST:
                    memo.pop(next(iter(memo)))
                memo[digests[i]] = grade
        return [grades[i] for i in first]

    def verdicts(self, program: str, tests: list[dict[str, str]], fn_name: str | None
                 ) -> list[str | None]:
        """Why the program fails each test, in order up to the first failure (None: passed)."""
        mode = isolation.grading_mode()  # proven here, or the explicit opt-in; else refused
        if self.sandbox_per_test or not sandbox.runs_share_a_sandbox(mode):
            found: list[str | None] = []
            for test in tests:
                found.append(self.run_test(program, test, fn_name, mode))
                if found[-1]:
                    break
            return found
        runs = [sandbox.Run(t["input"], fn_name if t["testtype"] == FUNCTIONAL else None)
                for t in tests]
        found = []

        def failed(result: sandbox.RunResult) -> bool:
            found.append(verdict(tests[len(found)], result))
            return found[-1] is not None

        sandbox.run_each(program, runs, self.limits, mode, stop=failed)
        return found

    def run_test(self, program: str, test: dict[str, str], fn_name: str | None,
                 mode: str | None = None) -> str | None:
        """Why the program fails this test in a sandbox of its own, or None when it passes."""
        mode = mode or isolation.grading_mode()
        if test["testtype"] == FUNCTIONAL:
            result = sandbox.call_function(program, fn_name, test["input"], self.limits, mode)
        else:
            result = sandbox.run_program(program, test["input"], self.limits, mode)
        return verdict(test, result)


def _digest(key: Any, context: list[Any]) -> str:
    """What a remembered grade is kept under: the grading key, the limits, the sandbox mode."""
    return hashlib.sha256(json.dumps([repr(key), *context]).encode()).hexdigest()


def verdict(test: dict[str, str], result: sandbox.RunResult) -> str | None:
    """Why this run fails the test (the run's own failure first), or None when it passes."""
    if not result.ok:
        return result.reason()
    return check_output(test["testtype"], result.stdout, test["output"])


def grading_key(pair: Any, index: int) -> Any:
    """What decides a pair's grade: its program and its reference (a malformed pair: itself)."""
    try:
        response, reference = pair
        return extract_program(response), json.dumps(reference, sort_keys=True)
    except (TypeError, ValueError):
        return index


def check_output(kind: str, stdout: str, expected: str) -> str | None:
    """Why this output fails the test, or None; an output that breaks the comparison fails."""
    same = same_value if kind == FUNCTIONAL else same_output
    try:
        return None if same(stdout, expected) else "wrong answer"
    except Exception as exc:  # overflow, recursion, a huge number: the program's doing
        return f"output not comparable ({type(exc).__name__}: {str(exc)[:200]})"


def in_contest_window(row: dict[str, Any]) -> bool:
    """Whether the problem's contest date lies in the pinned window [first, last)."""
    try:
        date = datetime.fromisoformat(str(row["contest_date"]))
    except (KeyError, ValueError) as exc:
        raise BenchmarkError(f"livecodebench row {row.get('question_id')!r} is not in the "
                             f"code_generation_lite schema: no ISO contest_date ({exc})") from exc
    first, last = (datetime.fromisoformat(d) for d in LIVECODEBENCH_CONTEST_DATES)
    return first <= date < last


# Extraction and reference ----------------------------------------------------------------


def extract_program(response: str) -> str | None:
    """The last fenced Python block; the whole text when it has no fence at all."""
    blocks = [m for m in FENCE.finditer(response) if m["lang"].lower() in PYTHON_TAGS]
    if blocks:
        program = blocks[-1]["body"]
    elif "```" in response:
        return None
    else:
        program = response
    return program if program.strip() else None


def parse_reference(reference: Any) -> tuple[list[dict[str, str]], str | None]:
    """Tests with their type filled in, and the function name, from a reference.

    A reference from upstream rows carries its private tests still encoded
    (`private_tests`); they are decoded here, when the problem is graded.
    """
    if isinstance(reference, str):
        reference = json.loads(reference)
    if not isinstance(reference, dict) or not isinstance(reference.get("tests"), list):
        raise ValueError('expected {"tests": [...], "private_tests"?: str, "fn_name": str | null}')
    fn_name = reference.get("fn_name")
    if fn_name is not None and (not isinstance(fn_name, str) or not fn_name.isidentifier()):
        raise ValueError(f"fn_name must be a Python name or null, not {fn_name!r}")
    private = decode_tests(reference["private_tests"]) if "private_tests" in reference else []
    tests = []
    for test in [*reference["tests"], *private]:
        if not isinstance(test, dict):
            raise ValueError("each test must be an object")
        given = test.get("input", test.get("stdin"))
        expected = test.get("output", test.get("expected_stdout"))
        kind = test.get("testtype") or (FUNCTIONAL if fn_name else STDIN)
        if not isinstance(given, str) or not isinstance(expected, str) or \
                kind not in (STDIN, FUNCTIONAL):
            raise ValueError("each test needs string input and output and a known testtype")
        if kind == FUNCTIONAL and not fn_name:
            raise ValueError("a functional test needs fn_name")
        tests.append({"input": given, "output": expected, "testtype": kind})
    if not tests:
        raise ValueError("no tests")
    return tests, fn_name


def decode_tests(blob: str) -> list[dict[str, Any]]:
    """Upstream private tests: plain JSON, or base64(zlib(pickle(JSON text)))."""
    try:
        return json.loads(blob)
    except ValueError:
        raw = zlib.decompress(base64.b64decode(blob.encode("utf-8")))
        return json.loads(_StringOnly(io.BytesIO(raw)).load())


class _StringOnly(pickle.Unpickler):
    """Unpickles plain data only: a pickle that names any class or function is refused."""

    def find_class(self, module: str, name: str):
        raise pickle.UnpicklingError(f"refusing to load {module}.{name}")


# Comparison: LiveCodeBench's rules, numbers written as floats within FLOAT_TOLERANCE ------


def same_output(actual: str, expected: str) -> bool:
    """stdin/stdout: the same lines after stripping; a line that differs as text matches when
    all its tokens are numbers that agree (integers exactly, floats within the tolerance)."""
    got, want = _lines(actual), _lines(expected)
    return len(got) == len(want) and all(
        g == w or _same_numbers(g.split(), w.split()) for g, w in zip(got, want, strict=True))


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.strip().split("\n")]


def _same_numbers(got: list[str], want: list[str]) -> bool:
    return len(got) == len(want) and all(_same_number(g, w) for g, w in zip(got, want, strict=True))


def _same_number(got: str, want: str) -> bool:
    try:
        a, b = Decimal(got), Decimal(want)
    except InvalidOperation:
        return False  # LiveCodeBench: a line with a word in it matches as text or not at all
    if not (a.is_finite() and b.is_finite()):
        return False
    if INTEGER.fullmatch(got) and INTEGER.fullmatch(want):
        return a == b
    x, y = float(a), float(b)
    if math.isinf(x) or math.isinf(y):  # past a float's range only the exact value agrees
        return a == b
    return a == b or math.isclose(x, y, rel_tol=FLOAT_TOLERANCE, abs_tol=FLOAT_TOLERANCE)


def same_value(stdout: str, expected: str) -> bool:
    """Call-based: the harness's JSON reply equals the expected JSON value (tuple = list).

    The reply is the program's: it is parsed within JSON_MAX_CHARS and JSON_MAX_DEPTH,
    and one it cannot be raises (the test fails, saying why). An expected output that is
    not JSON is compared as text.
    """
    lines = stdout.strip().splitlines()
    if not lines:
        return False
    try:
        want = bounded_json(expected)
    except ValueError:
        return lines[-1].strip() == expected.strip()
    return values_equal(bounded_json(lines[-1]), want)


def bounded_json(text: str) -> Any:
    """json.loads, refused with ValueError past JSON_MAX_CHARS or nested past JSON_MAX_DEPTH."""
    if len(text) > JSON_MAX_CHARS:
        raise ValueError(f"{len(text)} characters of JSON (at most {JSON_MAX_CHARS})")
    depth, in_string, escaped_at = 0, False, -1
    for match in JSON_SPECIAL.finditer(text):
        char, at = match[0], match.start()
        if at == escaped_at:
            continue
        if char == "\\":
            escaped_at = at + 1
        elif char == '"':
            in_string = not in_string
        elif not in_string:
            depth += 1 if char in "[{" else -1
            if depth > JSON_MAX_DEPTH:
                raise ValueError(f"JSON nested deeper than {JSON_MAX_DEPTH}")
    return json.loads(text)


def values_equal(got: Any, want: Any) -> bool:
    """JSON equality: integers, strings and booleans exactly (a boolean is not a number);
    a float within the tolerance; lists and objects element by element."""
    if isinstance(got, bool) or isinstance(want, bool):
        return isinstance(got, bool) and isinstance(want, bool) and got == want
    if isinstance(got, int) and isinstance(want, int):
        return got == want
    if isinstance(got, (int, float)) and isinstance(want, (int, float)):
        return _close(got, want)
    if isinstance(got, list) and isinstance(want, list):
        return len(got) == len(want) and all(values_equal(g, w) for g, w in zip(got, want, strict=True))
    if isinstance(got, dict) and isinstance(want, dict):
        return got.keys() == want.keys() and all(values_equal(got[k], want[k]) for k in got)
    return type(got) is type(want) and got == want


def _close(got: float, want: float) -> bool:
    try:
        return math.isclose(got, want, rel_tol=FLOAT_TOLERANCE, abs_tol=FLOAT_TOLERANCE)
    except OverflowError:  # an integer past a float's range: only the exact value agrees
        return got == want
