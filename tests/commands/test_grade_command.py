"""`tinyrouter grade`: one response or a batch; a bad case is wrong with an error, never a crash."""

from __future__ import annotations

import io
import json

import pytest

from evaluator import cli
from evaluator.benchmarks import BENCHMARK_REGISTRY, get_benchmark, verifier
from evaluator.errors import BenchmarkError
from evaluator.rules import BENCHMARKS

CODE_REF = {"tests": [{"input": "2\n", "output": "4", "testtype": "stdin"}], "fn_name": None}


@pytest.fixture
def grade(capsys, monkeypatch):
    """grade(*argv, stdin="") -> (exit code, JSON lines printed, stderr)."""
    def run(*argv, stdin=""):
        capsys.readouterr()
        monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
        code = cli.main(["grade", *argv])
        out, err = capsys.readouterr()
        return code, [json.loads(line) for line in out.splitlines()], err
    return run


def test_every_benchmark_in_the_rules_has_a_module():
    assert tuple(BENCHMARK_REGISTRY) == BENCHMARKS
    assert all(get_benchmark(name).name == name for name in BENCHMARKS)
    with pytest.raises(BenchmarkError, match="unknown benchmark"):
        get_benchmark("gsm8k")


def test_a_single_response_from_stdin(grade):
    code, lines, _ = grade("math500", "--reference", "0.5", stdin=r"so \boxed{\frac12}")
    assert code == 0 and lines == [{"correct": True, "extracted": r"\frac12", "error": None}]


def test_a_single_response_from_a_file_with_a_code_reference(grade, tmp_path):
    (tmp_path / "r.md").write_text("```python\nprint(int(input()) * 3)\n```")
    (tmp_path / "ref.json").write_text(json.dumps(CODE_REF))
    code, lines, err = grade("livecodebench", "--reference", f"@{tmp_path / 'ref.json'}",
                             "--response-file", str(tmp_path / "r.md"))
    assert code == 0 and lines[0]["correct"] is False and "test 1/1: wrong answer" in err


def test_a_batch_answers_one_line_per_line_in_order(grade, tmp_path):
    cases = [
        {"benchmark": "mmlu", "response": "Answer: B", "reference": "B"},
        {"benchmark": "livecodebench", "response": "print(int(input()) * 2)",
         "reference": CODE_REF},
        {"benchmark": "math500", "response": r"\boxed{3}", "reference": "4"},
        {"benchmark": "livecodebench", "response": "```python\nraise SystemExit(3)\n```",
         "reference": CODE_REF},
    ]
    batch = tmp_path / "cases.jsonl"
    batch.write_text("".join(json.dumps(c) + "\n" for c in cases))
    code, lines, _ = grade("--batch", str(batch), "--json", str(tmp_path / "grades.json"))
    assert code == 0
    assert [line["correct"] for line in lines] == [True, True, False, False]
    assert lines[0] == {"correct": True, "extracted": "B", "error": None}
    assert json.loads((tmp_path / "grades.json").read_text()) == lines


def test_a_math_comparison_past_its_limit_is_wrong_with_the_reason(capsys, monkeypatch):
    bounded = verifier.Verifier(seconds=1.0)
    monkeypatch.setattr(verifier, "shared", lambda: bounded)
    monkeypatch.setattr("sys.stdin", io.StringIO(r"so \boxed{2^{2^{2^{2^{2^{2^{2}}}}}}}"))
    try:
        code = cli.main(["grade", "math500", "--reference", "5", "--json", "-"])
    finally:
        bounded.close()
    out, err = capsys.readouterr()
    assert code == 0
    assert json.loads(out) == {"correct": False, "extracted": "2^{2^{2^{2^{2^{2^{2}}}}}}",
                               "error": "math-verify took longer than 1 s"}
    assert json.loads(err.splitlines()[0]) == json.loads(out)  # the line went to stderr


@pytest.mark.parametrize(("line", "error"), [
    # cases that cannot be graded
    ("not json", "not JSON"),
    ("", "empty"),
    ("[1, 2]", "JSON object"),
    ('{"benchmark": "gsm8k", "response": "1", "reference": "1"}', "unknown benchmark"),
    ('{"benchmark": "mmlu", "response": "Answer: B"}', "missing reference"),
    ('{"benchmark": "mmlu", "response": 7, "reference": "B"}', "response must be a string"),
    ('{"benchmark": "livecodebench", "response": "print(1)", "reference": {"tests": 3}}',
     "bad reference"),
])
def test_a_bad_case_is_wrong_with_an_error(grade, line, error):
    good = '{"benchmark": "mmlu", "response": "B", "reference": "B"}'
    code, lines, _ = grade("--batch", "-", stdin=f"{line}\n{good}\n")
    assert code == 0 and len(lines) == 2
    assert lines[0]["correct"] is False and error in lines[0]["error"]
    assert lines[1]["correct"] is True


@pytest.mark.parametrize("argv", [
    ["mmlu"],
    ["--batch", "x.jsonl", "--reference", "B"],
])
def test_usage_mistakes_are_one_line_errors(grade, argv):
    code, _, err = grade(*argv)
    assert code == 2 and err.startswith("usage error: ")
