"""`tinyrouter dev grading`: agreement with another grader's cases, and grading timed three ways."""

import json

import pytest

from evaluator.benchmarks.agreement import Agreement, published
from evaluator.cli import main

VECTORS = {
    "math": [
        {"response": r"so \boxed{1\,000}", "reference": "1000", "expected": True,
         "benchmark": "math500"},
        {"response": r"\boxed{7}", "reference": "8", "expected": True, "benchmark": "math500"},
        {"response": r"\boxed{5}", "reference": "5", "expected": True, "benchmark": "aime"},
    ],
    "choice": [
        {"response": "答案是B", "reference": "B", "expected": True, "benchmark": "mmlu"},
        {"response": "Answer: C", "reference": "C", "expected": True, "benchmark": "mmlu_pro"},
    ],
    "verdict": [{"text": "VERDICT: ACCEPT", "expected": "ACCEPT"}],
}


def test_agreement_per_benchmark_with_each_disagreement(tmp_path, capsys):
    vectors, out, report = tmp_path / "v.json", tmp_path / "a.json", tmp_path / "r.json"
    vectors.write_text(json.dumps(VECTORS))
    assert main(["dev", "grading", "--vectors", str(vectors), "--agreement", str(out),
                 "--answers", "0", "--json", str(report)]) == 0
    # out-of-scope benchmarks and the Verifier's verdicts are left out
    assert published(out) == Agreement({"math500": (2, 1), "mmlu": (1, 1)})
    [disagreement] = json.loads(report.read_text())["disagreements"]
    assert (disagreement["response"], disagreement["extracted"]) == (r"\boxed{7}", "7")
    assert "agreement: 2 of 3 cases" in capsys.readouterr().out


def test_grading_is_timed_in_process_in_the_worker_and_per_process(tmp_path):
    out = tmp_path / "timing.json"
    assert main(["dev", "grading", "--answers", "1", "--repeats", "1", "--json", str(out)]) == 0
    timing = json.loads(out.read_text())["timing"]
    assert timing["answers"] == 1 and timing["worker start s"] > 0
    assert {"bounded worker / in process", "process per comparison / in process"} <= set(timing)
    assert timing["process per comparison ms per answer"] > timing["bounded worker ms per answer"]


@pytest.mark.parametrize("argv", [
    ["--answers", "-1"],
    ["--repeats", "0"],
    ["--agreement", "a.json"],
    ["--vectors", "no-such-file.json", "--answers", "0"],
])
def test_usage_mistakes(argv):
    assert main(["dev", "grading", *argv]) == 2
