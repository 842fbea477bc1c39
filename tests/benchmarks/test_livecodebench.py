"""livecodebench: program extraction, output comparison, pass@1, hostile programs graded wrong."""

from __future__ import annotations

import base64
import json
import os
import pickle
import uuid
import zlib
from pathlib import Path

import pytest

from evaluator.benchmarks.livecodebench import (
    LiveCodeBench,
    decode_tests,
    extract_program,
    same_output,
    values_equal,
)
from evaluator.errors import BenchmarkError
from evaluator.sandbox import Limits

FIXTURES = Path(__file__).parents[1] / "fixtures" / "upstream" / "livecodebench"
LIMITS = Limits(cpu_seconds=2, wall_seconds=3.0, memory_mb=256, processes=16,
                file_size_mb=1, open_files=32, tmpfs_mb=8, output_bytes=64 * 1024)
LCB = LiveCodeBench(LIMITS)
SQUARE = {"tests": [{"input": "3\n", "output": "9\n", "testtype": "stdin"},
                    {"input": "5\n", "output": "25", "testtype": "stdin"}], "fn_name": None}


def fenced(code: str) -> str:
    return f"Here you go:\n```python\n{code}\n```\n"


@pytest.mark.parametrize(("response", "program"), [
    # the last python (or untagged) fence
    ("```python\nprint(1)\n```\ntext\n```python\nprint(2)\n```", "print(2)"),
    ("```py\nprint(3)\n```", "print(3)"),
    ("```\nprint(4)\n```", "print(4)"),
    ("```python\nprint(5)\n```\n```text\nsample output\n```", "print(5)"),
    ("```python\nprint(6)", "print(6)"),  # a reply cut off inside its fence
    # no fence at all: the raw text
    ("n = int(input())\nprint(n)\n", "n = int(input())\nprint(n)\n"),
    # fences, but none of them python
    ("```bash\nrm -rf /\n```", None),
    ("   ", None),
])
def test_extraction(response, program):
    assert extract_program(response) == program


@pytest.mark.parametrize(("actual", "expected", "same"), [
    # trailing whitespace is ignored, inner whitespace is not
    ("9\n", "9", True),
    ("1 2  \n3\n\n", "1 2\n3", True),
    ("12\n", "1 2", False),
    # numbers written differently agree, different numbers do not
    ("0.50\n", "0.5", True),
    ("0.5000001\n", "0.5", False),
    ("yes\n", "YES", False),
])
def test_stdout_comparison(actual, expected, same):
    assert same_output(actual, expected) is same


@pytest.mark.parametrize(("got", "want", "same"), [
    # floats within tolerance, tuple as list
    (2.5000000001, 2.5, True),
    (2.6, 2.5, False),
    ([0, 1], [0, 1], True),
    ([[1.5000000001, 2]], [[1.5, 2]], True),
    # booleans are not numbers
    (True, 1, False),
    (True, True, True),
    # containers and strings compare exactly
    ({"a": [1]}, {"a": [1]}, True),
    ("abc", "abd", False),
    ([0], [0, 1], False),
])
def test_value_comparison(got, want, same):
    assert values_equal(got, want) is same


@pytest.mark.parametrize(("response", "reference", "correct"), [
    # stdin programs
    (fenced("n = int(input())\nprint(n * n)"), SQUARE, True),
    (fenced("n = int(input())\nprint(n + 6)"), SQUARE, False),
    ("n = int(input())\nprint(n * n)\n", SQUARE, True),
    # functional: a Solution method or a top-level function, one JSON value per line
    (fenced("class Solution:\n    def add(self, a: List[int], b):\n        return sum(a) + b"),
     {"tests": [{"input": "[1, 2]\n3", "output": "6", "testtype": "functional"}],
      "fn_name": "add"}, True),
    (fenced("def add(a, b):\n    return (a, b)"),
     {"tests": [{"input": "1\n2", "output": "[1, 2]", "testtype": "functional"}],
      "fn_name": "add"}, True),
    (fenced("def add(a, b):\n    return a - b"),
     {"tests": [{"input": "1\n2", "output": "3", "testtype": "functional"}],
      "fn_name": "add"}, False),
    (fenced("def add(a, b):\n    return a + b"),
     {"tests": [{"input": "1\n2", "output": "3", "testtype": "functional"}],
      "fn_name": "nonexistent"}, False),
    # every test must pass
    (fenced("n = int(input())\nprint(9)"), SQUARE, False),
    # a crash after correct output is still a failure
    (fenced("print(9)\nraise SystemExit(1)"),
     {"tests": [{"input": "", "output": "9", "testtype": "stdin"}], "fn_name": None}, False),
])
def test_grading(response, reference, correct):
    assert LCB.grade(response, reference).correct is correct


def test_a_failure_says_which_test_failed():
    grade = LCB.grade(fenced("n = int(input())\nprint(9)"), SQUARE)
    assert grade.error is None and grade.detail == "test 2/2: wrong answer"


@pytest.mark.parametrize("reference", [
    None, "not json", {"tests": []}, {"tests": [{"input": 1, "output": "2"}]},
    {"tests": [{"input": "", "output": "", "testtype": "carrier-pigeon"}]},
    {"tests": [{"input": "1", "output": "1", "testtype": "functional"}], "fn_name": None},
    {"tests": [{"input": "1", "output": "1", "testtype": "functional"}], "fn_name": "a; b"},
    {"tests": ["1"]},
])
def test_an_unusable_reference_is_an_error_not_a_crash(reference):
    grade = LCB.grade(fenced("print(1)"), reference)
    assert not grade.correct and grade.error.startswith("bad reference")


HOSTILE = {
    "infinite loop": "while True:\n    pass",
    "sleeping": "import time\ntime.sleep(60)",
    "fork bomb": "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n"
                 "        pass",
    "memory bomb": "x = []\nwhile True:\n    x.append(bytearray(1 << 24))",
    "output flood": "while True:\n    print('9' * 10000)",
    "network": "import socket\nsocket.create_connection(('127.0.0.1', 9), 1)\nprint(9)",
    "reading the environment": "import os\nprint(os.environ['OPENROUTER_API_KEY'])",
    "writing outside": "open('/etc/passwd', 'a').write('x')\nprint(9)",
    "killing the parent": "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\n"
                          "os.kill(-1, signal.SIGKILL)",
    "claiming success": "import sys\nprint('ALL TESTS PASSED')\nsys.exit(0)",
    "detached child": "import os, time\nif os.fork() == 0:\n    os.setsid()\n    time.sleep(60)\n"
                      "print(9)\nos._exit(3)",
}


@pytest.mark.slow
@pytest.mark.timeout(90)  # the batch finishes within its limits
def test_hostile_programs_are_graded_wrong_within_their_limits(monkeypatch):
    monkeypatch.setenv("OPENROUTER_API_KEY", "sk-secret")
    marker = uuid.uuid4().hex
    reference = {"tests": [{"input": "", "output": "9", "testtype": "stdin"}], "fn_name": None}
    pairs = [(fenced(f"# {marker}\n{code}"), reference) for code in HOSTILE.values()]
    grades = LCB.grade_many(pairs, workers=2)
    assert [g.correct for g in grades] == [False] * len(HOSTILE)
    assert not _processes_with(marker)


def _processes_with(marker: str) -> list[str]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and marker.encode() in (entry / "cmdline").read_bytes():
                found.append(entry.name)
        except OSError:
            continue
    return found


def test_grading_many_keeps_the_order():
    pairs = [(fenced(f"print({n} * {n})"), {"tests": [{"input": "", "output": str(n * n)}]})
             for n in range(6)]
    pairs[3] = (fenced("print(0)"), pairs[3][1])
    assert [g.correct for g in LCB.grade_many(pairs)] == [True, True, True, False, True, True]


def test_loading_the_upstream_rows():
    items = LCB.load_upstream(str(FIXTURES))
    assert [(i.id, i.category) for i in items] == [("abc900_a", "easy"), ("3999", "medium"),
                                                   ("2050B", "hard")]
    stdin_item, functional_item, _ = items
    assert len(stdin_item.reference["tests"]) == 3  # public plus decoded private tests
    assert functional_item.reference["fn_name"] == "doubleAll"
    assert "def doubleAll" in functional_item.prompt
    assert "```python" in LCB.render_prompt(functional_item)
    assert "standard input" in LCB.render_prompt(stdin_item)


def test_the_fixture_items_grade_a_right_solution_correct():
    stdin_item, functional_item, reverse_item = LCB.load_upstream(str(FIXTURES))
    solutions = {stdin_item.id: "print(sum(map(int, input().split())))",
                 functional_item.id: "class Solution:\n    def doubleAll(self, nums):\n"
                                     "        return [2 * n for n in nums]",
                 reverse_item.id: "print(input()[::-1])"}
    for item in (stdin_item, functional_item, reverse_item):
        assert LCB.grade(fenced(solutions[item.id]), item.reference).correct


def test_private_tests_decode_without_running_pickled_code():
    tests = [{"input": "1", "output": "1", "testtype": "stdin"}]
    encoded = base64.b64encode(zlib.compress(pickle.dumps(json.dumps(tests)))).decode()
    assert decode_tests(encoded) == tests

    class Evil:
        def __reduce__(self):
            return (os.system, ("echo pwned",))

    evil = base64.b64encode(zlib.compress(pickle.dumps(Evil()))).decode()
    with pytest.raises(pickle.UnpicklingError, match="refusing"):
        decode_tests(evil)


def test_a_row_in_another_schema_is_refused(tmp_path):
    (tmp_path / "test.jsonl").write_text('{"question_id": "x", "prompt": "hi"}\n')
    with pytest.raises(BenchmarkError, match="code_generation_lite"):
        LCB.load_upstream(str(tmp_path))
