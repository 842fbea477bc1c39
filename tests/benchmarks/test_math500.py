"""math500: boxed extraction, fallbacks, and equivalence as a careful human judges it."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from evaluator.benchmarks import datasets, get_benchmark
from evaluator.benchmarks.math500 import Math500, extract_answer
from evaluator.errors import BenchmarkError
from evaluator.rules import DATASET_REVISIONS

FIXTURES = Path(__file__).parents[1] / "fixtures" / "upstream"
MATH = get_benchmark("math500")


@pytest.mark.parametrize(("response", "extracted"), [
    # the last non-empty \boxed{} wins, nested braces included
    (r"First \boxed{1}, then \boxed{\frac{1}{2}}.", r"\frac{1}{2}"),
    (r"\boxed{5} and finally \boxed{}", "5"),
    (r"\boxed{\left(\frac{1}{2}, \sqrt{3}\right)}", r"\left(\frac{1}{2}, \sqrt{3}\right)"),
    (r"\fbox{7}", "7"),
    # without a box: a stated final answer
    ("So the answer is $\\frac{1}{2}$.", r"\frac{1}{2}"),
    ("Final answer: 42", "42"),
    # else the value written last
    ("first 1/2 then finally 42", "42"),
    ("The total is 1,234.50 dollars.", "1,234.50"),
    (r"Thus x = \frac{\sqrt{2}}{2} is the final value.", r"\frac{\sqrt{2}}{2}"),
    ("we get $-\\frac{1}{2}$", r"-\frac{1}{2}"),
    # nothing to extract
    ("VERDICT: ACCEPT", None),
    ("", None),
])
def test_extraction(response, extracted):
    assert extract_answer(response) == extracted


@pytest.mark.slow
@pytest.mark.parametrize(("response", "reference", "correct"), [
    # fractions and decimals
    (r"\boxed{\frac{1}{2}}", "0.5", True),
    (r"\boxed{\dfrac12}", r"\frac{1}{2}", True),
    (r"\boxed{-\frac{6}{8}}", "-3/4", True),
    (r"\boxed{\frac{3}{4}}", "-3/4", False),
    (r"\boxed{0.333333}", "1/3", True),
    (r"\boxed{1 1/2}", "3/2", True),
    # thousands separators are not lists
    (r"\boxed{1{,}000}", "1000", True),
    (r"\boxed{12,345}", "12345", True),
    (r"\boxed{1,2,3}", "123", False),
    (r"\boxed{1000001}", "1000000", False),
    # units, degrees, currency and fonts are not part of the value
    (r"\boxed{90^\circ}", "90", True),
    (r"\boxed{90°}", "90", True),
    (r"\boxed{\$18.90}", "18.90", True),
    (r"\boxed{\mathbf{5}}", "5", True),
    (r"\boxed{\text{5}}", "5", True),
    (r"\boxed{\mathbf{6}}", "5", False),
    # radicals, pi and powers
    (r"\boxed{\sqrt2}", r"\sqrt{2}", True),
    (r"\boxed{2\sqrt{3}}", r"2\sqrt3", True),
    (r"\boxed{2\pi}", "2π", True),
    (r"\boxed{3\pi}", r"2\pi", False),
    (r"\boxed{2^{10}}", "1024", True),
    (r"\boxed{10^{-2}}", "10^-2", True),
    ("the answer is 1e3", "1000", True),
    # equations and tuples
    (r"\boxed{x = 5}", "5", True),
    (r"\boxed{x=5}", "6", False),
    (r"\boxed{(5, 120)}", "(5,120)", True),
    (r"\boxed{\{1,2,3\}}", "{1,2,3}", True),
    (r"\boxed{\bigl(\frac{1}{2}\bigr)}", "1/2", True),
    # the last box counts, earlier ones do not
    (r"\boxed{old} ... \boxed{new}", "old", False),
    ("wrong", "42", False),
])
def test_grading(response, reference, correct):
    assert MATH.grade(response, reference).correct is correct


def test_a_grade_reports_what_was_extracted():
    grade = MATH.grade(r"Hence \boxed{\frac{3}{4}}.", "0.75")
    assert (grade.correct, grade.extracted, grade.error) == (True, r"\frac{3}{4}", None)


def test_loading_the_upstream_rows():
    items = MATH.load_upstream(str(FIXTURES / "math500"))
    assert [i.id for i in items][:2] == ["test/prealgebra/1001.json", "test/algebra/2002.json"]
    assert items[0].category == "Prealgebra" and items[0].reference == r"\frac{3}{4}"
    assert MATH.render_prompt(items[0]).startswith(items[0].prompt)
    assert r"\boxed{}" in MATH.render_prompt(items[0])


def test_the_reference_solutions_grade_correct():
    for item in MATH.load_upstream(str(FIXTURES / "math500" / "test.jsonl")):
        assert MATH.grade(f"Work.\n\\boxed{{{item.reference}}}", item.reference).correct


def test_rows_in_another_schema_are_refused(tmp_path):
    (tmp_path / "test.jsonl").write_text('{"question": "1+1?", "answer": "2"}\n')
    with pytest.raises(BenchmarkError, match="unique_id"):
        MATH.load_upstream(str(tmp_path))


def test_an_unreachable_hub_is_an_actionable_error(monkeypatch):
    huggingface_hub = pytest.importorskip("huggingface_hub")
    asked = []

    def unreachable(repo_id, **kwargs):
        asked.append((repo_id, kwargs["allow_patterns"]))
        assert kwargs["revision"] == DATASET_REVISIONS["math500"]
        raise OSError("no route to huggingface.co")

    monkeypatch.setattr(huggingface_hub, "snapshot_download", unreachable)
    with pytest.raises(BenchmarkError, match="pass a local file or folder"):
        MATH.load_upstream()
    assert asked == [("HuggingFaceH4/MATH-500", ["test.jsonl"])]


def test_the_hub_is_read_at_the_pinned_commit(monkeypatch):
    huggingface_hub = pytest.importorskip("huggingface_hub")
    asked = []

    def snapshot(repo_id, **kwargs):
        asked.append((repo_id, kwargs["repo_type"], kwargs["revision"]))
        return str(FIXTURES / "math500")

    monkeypatch.setattr(huggingface_hub, "snapshot_download", snapshot)
    assert len(MATH.load_upstream("HuggingFaceH4/MATH-500")) == 4
    assert asked == [("HuggingFaceH4/MATH-500", "dataset", DATASET_REVISIONS["math500"])]
    assert datasets.COMMIT.fullmatch(DATASET_REVISIONS["math500"])


@pytest.mark.parametrize(("revision", "source", "message"), [
    # no commit pinned: the hub is not asked at all
    ("main", None, "no pinned commit"),
    ("", None, "no pinned commit"),
    # neither a local copy nor the pinned dataset
    (DATASET_REVISIONS["math500"], "HuggingFaceH4/MATH-501", "neither a local file or folder"),
    (DATASET_REVISIONS["math500"], "HuggingFaceH4/MATH-500@main", "neither a local file or folder"),
])
def test_anything_but_the_pinned_dataset_is_refused(monkeypatch, revision, source, message):
    pin = dataclasses.replace(datasets.MATH500, revision=revision)
    monkeypatch.setattr(Math500, "dataset", pin)
    with pytest.raises(BenchmarkError, match=message):
        Math500().load_upstream(source)


@pytest.mark.timeout(30)
@pytest.mark.parametrize("response", [
    "\\boxed{" * 50000,
    "\\boxed{" + "\\text{" * 20000 + "}" * 20001,
    "answer is " * 20000,
    "1" * 200000,
])
def test_pathological_responses_are_graded_promptly(response):
    assert MATH.grade(response, "1").correct is False
