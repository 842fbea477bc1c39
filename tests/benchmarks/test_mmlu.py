"""mmlu: the committed letter from many phrasings; prose is not a letter."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evaluator.benchmarks import datasets, get_benchmark
from evaluator.benchmarks.mmlu import extract_letter
from evaluator.errors import BenchmarkError
from evaluator.rules import DATASET_REVISIONS

FIXTURES = Path(__file__).parents[1] / "fixtures" / "upstream" / "mmlu"
MMLU = get_benchmark("mmlu")


@pytest.mark.parametrize(("response", "letter"), [
    # committed phrasings
    ("Answer: B", "B"),
    ("The answer is (C).", "C"),
    ("The answer is **B**.", "B"),
    ("Answer: **D**", "D"),
    ("answer is __A__", "A"),
    (r"Therefore the answer is \boxed{\text{B}}.", "B"),
    (r"\boxed{C}", "C"),
    ("the answer is c.", "C"),
    ("The answer is I think option B is correct", "B"),
    ("The correct option is D", "D"),
    ("Final answer:\nB", "B"),
    # a bare letter on the last line
    ("B", "B"),
    ("(C)", "C"),
    ("C)", "C"),
    ("**B**", "B"),
    ("Option C", "C"),
    # the last committed answer wins
    ("At first the answer is A. Wait, reconsidering, the answer is C.", "C"),
    ("The answer is D. Actually the answer is B.", "B"),
    ("The answer is B.\n\nFinal answer: \\boxed{D}", "D"),
    ("The answer is C. Option B is wrong.", "C"),
    ("I think **A** is wrong; the answer is C.", "C"),
    ("The answer is B.\nA) one\nB) two\nC) three\nD) four", "B"),
    # prose is not a letter
    ("A nice approach to think about it", None),
    ("The answer is a decrease in pressure.", None),
    ("MAX_A_VAL is the constant", None),
    ("let me reconsider the whole approach", None),
    ("", None),
])
def test_extraction(response, letter):
    assert extract_letter(response) == letter


@pytest.mark.parametrize(("response", "reference", "correct"), [
    ("Answer: C", "C", True),
    ("Answer: C", "B", False),
    ("answer: c", "C", True),
    ("A nice approach, but the answer is C.", "C", True),
    ("The answer is B.", "Beta particle", False),
])
def test_grading(response, reference, correct):
    assert MMLU.grade(response, reference).correct is correct


def test_a_reference_that_is_not_a_letter_is_an_error():
    grade = MMLU.grade("Answer: B", "Beta particle")
    assert not grade.correct and "not a letter" in grade.error


def test_loading_the_upstream_rows():
    items = MMLU.load_upstream(str(FIXTURES))
    assert [i.id for i in items] == ["high_school_chemistry/0", "high_school_chemistry/1",
                                     "high_school_biology/0", "elementary_mathematics/0"]
    first = items[0]
    assert (first.reference, first.category) == ("B", "high_school_chemistry")
    assert first.prompt.splitlines()[-4:] == ["A. Oxygen", "B. Nitrogen", "C. Carbon dioxide",
                                              "D. Argon"]
    assert "Answer: X" in MMLU.render_prompt(first)


def test_loading_the_upstream_parquet(tmp_path):
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    rows = [json.loads(line) for line in
            (FIXTURES / "all" / "test-00000-of-00001.jsonl").read_text().splitlines()]
    (tmp_path / "all").mkdir()
    pd.DataFrame(rows).to_parquet(tmp_path / "all" / "test-00000-of-00001.parquet",
                                  row_group_size=1)
    assert [i.reference for i in MMLU.load_upstream(str(tmp_path))] == ["B", "C", "A", "B"]


def test_rows_arrive_one_at_a_time(tmp_path):
    source = FIXTURES / "all" / "test-00000-of-00001.jsonl"
    (tmp_path / "all").mkdir()
    broken = tmp_path / "all" / "test-00000-of-00001.jsonl"
    broken.write_text(source.read_text() + "{not json\n")
    rows = datasets.stream_rows(datasets.MMLU, str(tmp_path))
    assert next(rows)["subject"] == "high_school_chemistry"  # read before the bad line is reached
    with pytest.raises(BenchmarkError, match="line 5"):
        list(rows)


def test_the_hub_is_read_at_the_pinned_commit(monkeypatch):
    huggingface_hub = pytest.importorskip("huggingface_hub")
    asked = []

    def snapshot(repo_id, **kwargs):
        asked.append((repo_id, kwargs["revision"], kwargs["allow_patterns"]))
        return str(FIXTURES)

    monkeypatch.setattr(huggingface_hub, "snapshot_download", snapshot)
    assert len(MMLU.load_upstream()) == 4
    assert asked == [("cais/mmlu", DATASET_REVISIONS["mmlu"], list(datasets.MMLU.files))]


@pytest.mark.timeout(30)
@pytest.mark.parametrize("response", [
    "\\boxed{" * 50000,
    "Answer: (" * 30000,
    "x" * 100000 + "\n" + "\\text{" * 30000,
])
def test_pathological_responses_are_graded_promptly(response):
    assert MMLU.grade(response, "B").correct is False
