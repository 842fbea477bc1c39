"""livecodebench: program extraction, output comparison, pass@1, hostile programs graded wrong."""

from __future__ import annotations

import base64
import dataclasses
import json
import logging
import os
import pickle
import shutil
import uuid
import zlib
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from evaluator.benchmarks import datasets
from evaluator.benchmarks.livecodebench import (
    JSON_MAX_CHARS,
    JSON_MAX_DEPTH,
    LiveCodeBench,
    check_output,
    decode_tests,
    extract_program,
    in_contest_window,
    parse_reference,
    same_output,
    values_equal,
)
from evaluator.errors import BenchmarkError
from evaluator.rules import LIVECODEBENCH_CONTEST_DATES, LIVECODEBENCH_RELEASE
from evaluator.sandbox import Limits

FIXTURES = Path(__file__).parents[1] / "fixtures" / "upstream" / "livecodebench"
LIMITS = Limits(cpu_seconds=2, wall_seconds=3.0, memory_mb=256, processes=16,
                file_size_mb=1, open_files=32, tmpfs_mb=8, output_bytes=64 * 1024,
                process_memory_mb=64)
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
    # LiveCodeBench: the same lines once each line and the whole are stripped
    ("9\n", "9", True),
    ("1 2  \n3\n\n", "1 2\n3", True),
    ("  1 2\r\n", "1 2", True),
    ("12\n", "1 2", False),
    ("1\n\n2\n", "1\n2", False),
    ("yes\n", "YES", False),
    # a line of numbers: integers exactly, however large
    ("1000000000\n", "1000000007", False),
    ("9" * 400 + "\n", "9" * 400, True),
    ("9" * 400 + "\n", "9" * 399 + "8", False),
    ("007 -0\n", "7 0", True),
    # floats within the tolerance, however written
    ("0.50\n", "0.5", True),
    ("0.5000001\n", "0.5", True),
    ("0.5001\n", "0.5", False),
    ("1e5 2\n", "100000 2.0", True),
    ("1e400\n", "1E400", True),
    ("1e400\n", "1e401", False),
    # a word on the line: the line matches as text or not at all
    ("x 0.50\n", "x 0.5", False),
    ("sNaN\n", "1", False),
])
def test_stdout_comparison(actual, expected, same):
    assert same_output(actual, expected) is same


@pytest.mark.parametrize(("got", "want", "same"), [
    # integers and strings exactly
    (1000000000, 1000000007, False),
    (10**400, 10**400, True),
    (10**400, 10**400 + 1, False),
    ("abc", "abd", False),
    # floats within tolerance (an integer against a float too), tuple as list
    (2.5000000001, 2.5, True),
    (2.6, 2.5, False),
    (3, 3.0000000001, True),
    (10**400, 1.5, False),
    ([0, 1], [0, 1], True),
    ([[1.5000000001, 2]], [[1.5, 2]], True),
    # booleans are not numbers
    (True, 1, False),
    (True, True, True),
    # containers element by element
    ({"a": [1]}, {"a": [1]}, True),
    ([0], [0, 1], False),
    (None, 0, False),
])
def test_value_comparison(got, want, same):
    assert values_equal(got, want) is same


@pytest.mark.parametrize(("kind", "stdout", "expected", "verdict"), [
    # call-based: the reply is parsed within limits, and one past them fails its test
    ("functional", "[" * 5000 + "]" * 5000 + "\n", "[]", "output not comparable"),
    ("functional", "[" * (JSON_MAX_DEPTH + 1) + "]" * (JSON_MAX_DEPTH + 1), "[]", "output not comparable"),
    ("functional", '"[[[[' + "[" * JSON_MAX_DEPTH + '"\n', '"x"', "wrong answer"),
    ("functional", '"' + "x" * JSON_MAX_CHARS + '"\n', '"x"', "output not comparable"),
    ("functional", '"unterminated\n', '"x"', "output not comparable"),
    ("functional", f"{10**400}\n", "1.5", "wrong answer"),
    ("functional", f"{10**400}\n", f"{10**400}", None),
    # an expected output that is not JSON is compared as text
    ("functional", "[1, 2]\n", "not json", "wrong answer"),
    ("functional", "noise\nnot json\n", "not json", None),
    # stdin: numbers past a float's range, or not numbers at all
    ("stdin", "9" * 5000 + "\n", "1", "wrong answer"),
    ("stdin", "1e999999999\n", "1", "wrong answer"),
    ("stdin", "sNaN Infinity\n", "1 2", "wrong answer"),
])
def test_an_output_that_breaks_the_comparison_fails_its_test(kind, stdout, expected, verdict):
    result = check_output(kind, stdout, expected)
    assert result == verdict if verdict in (None, "wrong answer") else result.startswith(verdict)


@pytest.mark.slow
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


HARNESS_PIPE = "import os, sys\nout = sys.modules['__main__'].out\n"


@pytest.mark.parametrize(("code", "expected"), [
    # a number past a float's range, against a float
    ("def f():\n    return 10 ** 400", "1.5"),
    # 5,000-deep JSON written straight to the harness's pipe, then a clean exit
    (HARNESS_PIPE + "out.write('[' * 5000 + ']' * 5000 + '\\n')\nout.flush()\nos._exit(0)", "[]"),
])
def test_a_hostile_reply_is_graded_wrong_not_raised(code, expected):
    reference = {"tests": [{"input": "", "output": expected, "testtype": "functional"}],
                 "fn_name": "f"}
    grade = LCB.grade(fenced(code), reference)
    assert (grade.correct, grade.error) == (False, None) and grade.detail.startswith("test 1/1")


def test_one_pair_that_raises_does_not_sink_the_batch(monkeypatch):
    real = LCB.verdicts

    def explode(program, tests, fn_name):
        if "boom" in program:
            raise RecursionError("maximum recursion depth exceeded")
        return real(program, tests, fn_name)

    monkeypatch.setattr(LCB, "verdicts", explode)
    pairs = [(fenced("n = int(input())\nprint(n * n)"), SQUARE), (fenced("# boom"), SQUARE),
             (fenced("n = int(input())\nprint(n * n)"), SQUARE), ("not a pair",)]
    grades = LCB.grade_many(pairs, workers=2)
    assert [g.correct for g in grades] == [True, False, True, False]
    assert grades[1].error.startswith("grader failed: RecursionError")
    assert grades[3].error.startswith("grader failed: ValueError")


ADD = {"tests": [{"input": "1\n2", "output": "3", "testtype": "functional"},
               {"input": "5\n5", "output": "10", "testtype": "functional"}], "fn_name": "add"}


@pytest.mark.slow
@pytest.mark.parametrize(("program", "reference", "detail"), [
    # passing, and failing at the second test: wrong, crashing, out of time, flooding output
    ("n = int(input())\nprint(n * n)", SQUARE, "all 2 tests passed"),
    ("n = int(input())\nprint(9)", SQUARE, "test 2/2: wrong answer"),
    ("n = int(input())\nassert n == 3, 'only three'\nprint(9)", SQUARE,
     "test 2/2: exit status 1: AssertionError: only three"),
    ("import time\nn = int(input())\ntime.sleep(n - 3)\nprint(n * n)", SQUARE,
     "test 2/2: time limit exceeded"),
    ("n = int(input())\nprint('9' * (10 ** 6) if n == 5 else 9)", SQUARE,
     "test 2/2: output limit exceeded"),
    # failing at the first: memory, a signal, a syntax error
    ("x = bytearray(1 << 30)", SQUARE, "test 1/2: exit status 1: MemoryError"),
    ("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)", SQUARE,
     "test 1/2: killed by SIGKILL (a resource limit or a crash)"),
    ("def (:", SQUARE, "test 1/2: exit status 1: SyntaxError: invalid syntax"),
    # call-based: passing, wrong at the second test, no such function
    ("class Solution:\n    def add(self, a, b):\n        return a + b", ADD, "all 2 tests passed"),
    ("def add(a, b):\n    return 3", ADD, "test 2/2: wrong answer"),
    ("def plus(a, b):\n    return a + b", ADD,
     "test 1/2: exit status 3: no function or Solution method named 'add'"),
])
def test_a_grade_is_the_same_with_a_sandbox_per_test_or_per_program(program, reference, detail):
    limits = dataclasses.replace(LIMITS, wall_seconds=1.0)
    per_test, per_program = (LiveCodeBench(limits, sandbox_per_test=per).grade(fenced(program),
                                                                              reference)
                             for per in (True, False))
    assert (per_test, per_test.detail) == (per_program, per_program.detail)
    assert per_program.detail == detail


def test_where_the_per_program_runner_cannot_start_each_test_gets_a_sandbox(monkeypatch):
    from evaluator import sandbox

    assert sandbox.runs_share_a_sandbox()  # this machine's sandbox runs it
    started = []
    monkeypatch.setattr(sandbox, "runs_share_a_sandbox", lambda mode=None: False)
    monkeypatch.setattr(sandbox, "run_each", lambda *a, **k: started.append("shared") or [])
    real = sandbox.run_program
    monkeypatch.setattr(sandbox, "run_program", lambda *a, **k: started.append("own")
                        or real(*a, **k))
    grade = LiveCodeBench(LIMITS).grade(fenced("n = int(input())\nprint(n * n)"), SQUARE)
    assert (grade.correct, grade.detail) == (True, "all 2 tests passed")
    assert started == ["own", "own"]


def test_the_same_program_on_the_same_tests_is_graded_once_per_batch(monkeypatch):
    graded = []
    real = LCB.verdicts
    monkeypatch.setattr(LCB, "verdicts", lambda *args: graded.append(args[0]) or real(*args))
    square = "n = int(input())\nprint(n * n)"
    other = {"tests": [{"input": "4\n", "output": "16", "testtype": "stdin"}], "fn_name": None}
    pairs = [(fenced(square), SQUARE), ("Reworded:\n" + fenced(square), SQUARE),
             (fenced(square), other), (fenced(square), json.loads(json.dumps(SQUARE)))]
    assert [g.correct for g in LCB.grade_many(pairs, workers=2)] == [True] * 4
    assert graded == [square, square]  # once against SQUARE, once against the other tests


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


def test_loading_the_upstream_rows(caplog):
    with caplog.at_level(logging.INFO, logger="evaluator.benchmarks.livecodebench"):
        items = LCB.load_upstream(str(FIXTURES))
    assert [(i.id, i.category) for i in items] == [("abc900_a", "easy"), ("3999", "medium"),
                                                   ("2050B", "hard")]
    assert "skipped 5 rows dated outside" in caplog.text  # one per release file before the window
    stdin_item, functional_item, _ = items
    assert len(stdin_item.reference["tests"]) == 1  # public; the private ones wait, encoded
    assert isinstance(stdin_item.reference["private_tests"], str)
    assert len(parse_reference(stdin_item.reference)[0]) == 3
    assert functional_item.reference["fn_name"] == "doubleAll"
    assert "def doubleAll" in functional_item.prompt
    assert "```python" in LCB.render_prompt(functional_item)
    assert "standard input" in LCB.render_prompt(stdin_item)


FIRST, LAST = (datetime.fromisoformat(d) for d in LIVECODEBENCH_CONTEST_DATES)


@pytest.mark.parametrize(("date", "inside"), [
    (FIRST - timedelta(seconds=1), False),
    (FIRST, True),
    (LAST - timedelta(seconds=1), True),
    (LAST, False),
])
def test_the_contest_window_includes_its_first_day_not_its_last(date, inside):
    assert in_contest_window({"contest_date": date.isoformat()}) is inside


def test_a_local_copy_must_hold_the_whole_release(tmp_path):
    shutil.copytree(FIXTURES, tmp_path / "lcb")
    (tmp_path / "lcb" / "test4.jsonl").unlink()
    with pytest.raises(BenchmarkError, match=f"lacks test4.jsonl.*{LIVECODEBENCH_RELEASE}|"
                                             f"{LIVECODEBENCH_RELEASE}.*lacks test4.jsonl"):
        LCB.load_upstream(str(tmp_path / "lcb"))
    with pytest.raises(BenchmarkError, match="pass the folder"):
        LCB.load_upstream(str(FIXTURES / "test6.jsonl"))


def test_the_hub_is_read_at_the_pinned_commit_and_release(monkeypatch):
    huggingface_hub = pytest.importorskip("huggingface_hub")
    asked = []

    def snapshot(repo_id, **kwargs):
        asked.append((repo_id, kwargs["revision"], kwargs["allow_patterns"]))
        return str(FIXTURES)

    monkeypatch.setattr(huggingface_hub, "snapshot_download", snapshot)
    assert [i.id for i in LCB.load_upstream()] == ["abc900_a", "3999", "2050B"]
    pin = datasets.LIVECODEBENCH
    assert asked == [(pin.hub_id, pin.revision, list(pin.files))]
    assert pin.files[-1] == f"test{pin.release.removeprefix('release_v')}.jsonl"


@pytest.mark.slow
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
    grade = LCB.grade(fenced("print(1)"), {"tests": [], "private_tests": evil, "fn_name": None})
    assert not grade.correct and grade.error.startswith("bad reference: refusing")


def test_a_row_in_another_schema_is_refused(tmp_path):
    for name in datasets.LIVECODEBENCH.files:
        (tmp_path / name).write_text('{"question_id": "x", "prompt": "hi"}\n')
    with pytest.raises(BenchmarkError, match="code_generation_lite"):
        LCB.load_upstream(str(tmp_path))


@pytest.mark.slow
def test_within_remembered_grades_a_program_met_again_is_graded_once(monkeypatch):
    from evaluator.benchmarks.livecodebench import remembered_grades

    runs = []
    real = LCB.verdicts

    def counted(program, tests, fn_name):
        runs.append(program)
        return real(program, tests, fn_name)

    monkeypatch.setattr(LCB, "verdicts", counted)
    square = (fenced("n = int(input())\nprint(n * n)"), SQUARE)
    wrong = (fenced("print(0)"), SQUARE)
    with remembered_grades():
        first = LCB.grade_many([square, wrong])
        again = LCB.grade_many([wrong, square, ("not a pair",)])
        assert len(runs) == 2  # the second call ran nothing it had graded
        with remembered_grades():  # nested: the same memory
            LCB.grade_many([square])
        assert len(runs) == 2
    assert [g.correct for g in first] == [True, False]
    assert [g.correct for g in again] == [False, True, False]
    LCB.grade_many([square, ("not a pair",)])
    assert len(runs) == 3  # outside the block every call grades afresh
    other = LiveCodeBench(dataclasses.replace(LIMITS, cpu_seconds=1))
    monkeypatch.setattr(other, "verdicts", counted)
    with remembered_grades():
        LCB.grade_many([square])
        other.grade_many([square])  # other limits could grade it otherwise
    assert len(runs) == 5
