"""What the Benchmarks page says about grading is read from where each fact lives, and the
limits it admits are the graders' true behaviour (a fix flips a row here and the page with it)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evaluator.benchmarks import get_benchmark
from evaluator.benchmarks.agreement import CORPUS, Agreement, grading_facts, published
from evaluator.benchmarks.verifier import VERIFY_SECONDS
from evaluator.rules import OFFICIAL

ROOT = Path(__file__).resolve().parents[2]
MATH = get_benchmark("math500")


def benchmarks_page(tmp_path, repo_url: str | None = "https://github.com/o/r") -> str:
    from evaluator.site.pages import generate
    from evaluator.site.state import load_state

    return generate(load_state(tmp_path), OFFICIAL, repo_url).pages["benchmarks.md"]


def test_the_page_renders_the_limit_the_corpus_link_and_the_measured_agreement(tmp_path):
    page = benchmarks_page(tmp_path)
    agreement = published()
    assert agreement is not None and (ROOT / CORPUS).is_file()
    assert f"may take {VERIFY_SECONDS:g} s of wall clock" in page
    assert f"[`{CORPUS}`](https://github.com/o/r/blob/main/{CORPUS})" in page
    assert f"agree on {agreement.agreeing} of\n{agreement.cases} cases" in page
    for name, (cases, agreeing) in agreement.counts.items():
        assert f"| {name} | {cases} | {agreeing} |" in page


def test_without_a_repository_the_corpus_is_named_not_linked(tmp_path):
    assert f"It is `{CORPUS}` in the repository" in benchmarks_page(tmp_path, None)


def test_without_a_measurement_the_page_claims_no_agreement(tmp_path, monkeypatch):
    monkeypatch.setattr("evaluator.site.pages.grading_facts",
                        lambda: grading_facts() | {"agreement": None})
    assert "independent grader" not in benchmarks_page(tmp_path)


def test_the_published_file_round_trips(tmp_path):
    agreement = Agreement({"math500": (10, 9), "mmlu": (4, 4)})
    path = tmp_path / "agreement.json"
    path.write_text(json.dumps(agreement.to_dict()))
    assert published(path) == agreement
    assert (agreement.cases, agreement.agreeing, agreement.share) == (14, 13, 13 / 14)
    assert published(tmp_path / "none.json") is None


KNOWN_LIMITS = [
    # math-verify compares to six decimal places: two tiny values pass for each other
    (r"\boxed{\frac{1}{2^{99}}}", r"\frac{1}{2^{98}}", True),
    # no decimal comma: 3{,}14 is the list 3, 14
    (r"\boxed{3{,}14}", "3.14", False),
    # degrees and radians are different answers
    (r"\boxed{30^\circ}", r"\frac{\pi}{6}", False),
    # the last box counts, even before a later "answer is"
    (r"\boxed{3}, and so the answer is 4", "4", False),
]


@pytest.mark.parametrize(("response", "reference", "graded"), KNOWN_LIMITS)
def test_the_known_limits_the_page_lists(response, reference, graded):
    assert MATH.grade(response, reference).correct is graded
