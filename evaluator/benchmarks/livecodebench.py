"""LiveCodeBench code generation: pass@1 of the last fenced Python block, run in the sandbox."""

from __future__ import annotations

import base64
import io
import json
import math
import os
import pickle
import re
import zlib
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal, InvalidOperation
from typing import Any

from evaluator import sandbox
from evaluator.benchmarks.base import Benchmark, Grade
from evaluator.errors import BenchmarkError
from evaluator.types import Item

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
FLOAT_TOLERANCE = 1e-6


class LiveCodeBench(Benchmark):
    name = "livecodebench"
    hub_id = "livecodebench/code_generation_lite"
    upstream_files = ("test*.jsonl",)

    def __init__(self, limits: sandbox.Limits = sandbox.DEFAULT_LIMITS) -> None:
        self.limits = limits

    def items_from_rows(self, rows: list[dict[str, Any]]) -> list[Item]:
        return [self._item(row) for row in rows]

    def _item(self, row: dict[str, Any]) -> Item:
        try:
            metadata = json.loads(row.get("metadata") or "{}")
            tests = json.loads(row["public_test_cases"]) + decode_tests(row["private_test_cases"])
            prompt = row["question_content"].strip()
            if (row.get("starter_code") or "").strip():
                prompt += f"\n\n```python\n{row['starter_code'].rstrip()}\n```"
            reference = {"tests": [{k: t[k] for k in ("input", "output", "testtype")}
                                   for t in tests],
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
        except (ValueError, TypeError, AttributeError) as exc:
            return Grade(False, program, f"bad reference: {exc}")
        if program is None:
            return Grade(False, None, None, "no program in the response")
        for number, test in enumerate(tests, 1):
            failure = self.run_test(program, test, fn_name)
            if failure:
                return Grade(False, program, None, f"test {number}/{len(tests)}: {failure}")
        return Grade(True, program, None, f"all {len(tests)} tests passed")

    def grade_many(self, pairs, workers: int | None = None) -> list[Grade]:
        """Programs graded in parallel, as many at a time as there are cores."""
        pairs = list(pairs)
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1
        workers = max(1, min(workers or cores, cores, len(pairs)))
        with ThreadPoolExecutor(max_workers=workers) as pool:
            return list(pool.map(lambda pair: self.grade(*pair), pairs))

    def run_test(self, program: str, test: dict[str, str], fn_name: str | None) -> str | None:
        """Why the program fails this test, or None when it passes."""
        if test["testtype"] == FUNCTIONAL:
            result = sandbox.call_function(program, fn_name, test["input"], self.limits)
        else:
            result = sandbox.run_program(program, test["input"], self.limits)
        if not result.ok:
            return result.reason()
        same = (same_value if test["testtype"] == FUNCTIONAL else same_output)
        return None if same(result.stdout, test["output"]) else "wrong answer"


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
    """Tests with their type filled in, and the function name, from a reference."""
    if isinstance(reference, str):
        reference = json.loads(reference)
    if not isinstance(reference, dict) or not isinstance(reference.get("tests"), list):
        raise ValueError('expected {"tests": [...], "fn_name": str | null}')
    fn_name = reference.get("fn_name")
    if fn_name is not None and (not isinstance(fn_name, str) or not fn_name.isidentifier()):
        raise ValueError(f"fn_name must be a Python name or null, not {fn_name!r}")
    tests = []
    for test in reference["tests"]:
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


# Comparison -------------------------------------------------------------------------------


def same_output(actual: str, expected: str) -> bool:
    """Equal ignoring trailing whitespace; numbers written differently ("0.50", "0.5") agree."""
    got, want = _lines(actual), _lines(expected)
    if got == want:
        return True
    return len(got) == len(want) and all(_same_tokens(g, w) for g, w in zip(got, want, strict=True))


def _lines(text: str) -> list[str]:
    return [line.rstrip() for line in text.rstrip().splitlines()]


def _same_tokens(got: str, want: str) -> bool:
    a, b = got.split(), want.split()
    if len(a) != len(b):
        return False
    try:
        return all(x == y or Decimal(x) == Decimal(y) for x, y in zip(a, b, strict=True))
    except InvalidOperation:
        return False


def same_value(stdout: str, expected: str) -> bool:
    """The harness's JSON result equals the expected JSON value (floats close, tuple = list)."""
    lines = stdout.strip().splitlines()
    try:
        got = json.loads(lines[-1]) if lines else None
        want = json.loads(expected)
    except ValueError:
        return bool(lines) and lines[-1].strip() == expected.strip()
    return bool(lines) and values_equal(got, want)


def values_equal(got: Any, want: Any) -> bool:
    if isinstance(got, bool) or isinstance(want, bool):
        return isinstance(got, bool) and isinstance(want, bool) and got == want
    if isinstance(got, (int, float)) and isinstance(want, (int, float)):
        return math.isclose(got, want, rel_tol=FLOAT_TOLERANCE, abs_tol=FLOAT_TOLERANCE)
    if isinstance(got, list) and isinstance(want, list):
        return len(got) == len(want) and all(values_equal(g, w) for g, w in zip(got, want, strict=True))
    if isinstance(got, dict) and isinstance(want, dict):
        return got.keys() == want.keys() and all(values_equal(got[k], want[k]) for k in got)
    return type(got) is type(want) and got == want
