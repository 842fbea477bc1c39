"""The bounded verifier: a runaway comparison is wrong with its reason, from any thread, and the
worker that ran it is replaced; a worker that cannot start stops grading instead of failing it.

The slow comparison is a real one (a tower of powers sympy tries to evaluate); the failure modes
of a broken install use a stand-in `math_verify` module put first on the worker's PYTHONPATH.
"""

from __future__ import annotations

import importlib.metadata
import os
import threading
import time
import tomllib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement

from evaluator.benchmarks import get_benchmark, grade_batch, verifier
from evaluator.benchmarks.math500 import Math500
from evaluator.benchmarks.verifier import Verifier
from evaluator.errors import GraderError

TOWER = r"\boxed{2^{2^{2^{2^{2^{2^{2}}}}}}}"
LIMIT = 1.0
SLACK = 2.0  # a busy machine's delay in noticing the limit and killing the worker


@pytest.fixture
def bounded():
    """A verifier with a limit of LIMIT seconds, its worker already started."""
    bounded = Verifier(seconds=LIMIT)
    assert bounded.compare("1", "1").same is True
    yield bounded
    bounded.close()


@pytest.fixture
def stand_in(tmp_path, monkeypatch):
    """stand_in(source): the worker imports `math_verify` from `source` instead."""
    def install(source: str) -> None:
        (tmp_path / "math_verify.py").write_text(source)
        monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
            [str(tmp_path), *filter(None, [os.environ.get("PYTHONPATH")])]))
    return install


STAND_IN = """\
import os
LatexExtractionConfig = object
def verify(gold, target, timeout_seconds=None):
    return gold == target
"""


def test_a_runaway_comparison_in_a_worker_thread_is_wrong_with_its_reason(bounded):
    grades = []

    def grade():
        started = time.monotonic()
        grades.append((Math500(bounded).grade(TOWER, "5"), time.monotonic() - started))

    thread = threading.Thread(target=grade)
    thread.start()
    thread.join(timeout=LIMIT + SLACK + 10)
    assert not thread.is_alive(), "the comparison hung"
    [(grade, seconds)] = grades
    assert grade.correct is False and grade.extracted == "2^{2^{2^{2^{2^{2^{2}}}}}}"
    assert grade.error == f"math-verify took longer than {LIMIT:g} s"
    assert seconds < LIMIT + SLACK
    # the next comparison has a fresh worker
    assert Math500(bounded).grade(r"\boxed{2^{10}}", "1024").correct is True


def test_threads_share_one_worker_and_each_gets_its_own_answer():
    cases = [(rf"\boxed{{{n}/{n + 1}}}", rf"\frac{{{n}}}{{{n + 1}}}", True) for n in range(1, 9)]
    cases += [(rf"\boxed{{{n}}}", str(n + 1), False) for n in range(1, 9)]
    math = get_benchmark("math500")
    with ThreadPoolExecutor(max_workers=8) as pool:
        grades = list(pool.map(lambda case: math.grade(case[0], case[1]), cases))
    assert [g.correct for g in grades] == [correct for _, _, correct in cases]
    assert all(g.error is None for g in grades)


def test_a_worker_that_dies_grades_that_pair_wrong_with_the_reason(stand_in):
    stand_in(STAND_IN + "def parse(text, **options):\n    os._exit(3)\n")
    dying = Verifier(seconds=LIMIT)
    try:
        assert dying.compare("1", "1") == verifier.Comparison(
            False, "the math-verify worker died (exit code 3)")
        assert dying.compare("1", "1").error.endswith("(exit code 3)")  # a new worker each time
    finally:
        dying.close()


def test_the_worker_inherits_no_secret(stand_in, monkeypatch):
    monkeypatch.setenv("OPENROUTER_API_KEY", "sk-or-not-for-the-worker")
    stand_in(STAND_IN + "def parse(text, **options):\n    raise KeyError(sorted(os.environ))\n")
    probe = Verifier(seconds=LIMIT)
    try:
        seen = probe.compare("1", "1")
    finally:
        probe.close()
    assert seen.same is False and seen.error.startswith("math-verify failed: KeyError")
    assert "PYTHONPATH" in seen.error and "OPENROUTER_API_KEY" not in seen.error


def test_without_math_verify_grading_stops_with_the_missing_module(stand_in):
    stand_in("raise ModuleNotFoundError(\"No module named 'math_verify'\", name='math_verify')\n")
    with pytest.raises(ModuleNotFoundError) as missing:
        Verifier().compare("1", "1")
    assert missing.value.name == "math_verify"


def test_a_worker_that_does_not_start_stops_grading(stand_in, monkeypatch):
    stand_in("import time\ntime.sleep(30)\n")
    monkeypatch.setattr(verifier, "shared", lambda: Verifier(start_seconds=0.5))
    started = time.monotonic()
    with pytest.raises(GraderError, match=r"did not start within 0\.5 s"):
        grade_batch([{"benchmark": "math500", "response": r"\boxed{1}", "reference": "1"}])
    assert time.monotonic() - started < 0.5 + SLACK


VERIFIER_PACKAGES = ("math-verify", "latex2sympy2-extended")


def test_the_verifier_is_pinned_and_upgraded_only_in_its_own_gated_pull_request():
    root = Path(__file__).resolve().parents[2]
    grade = tomllib.loads((root / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    pins = {r.name: r for r in map(Requirement, grade["grade"]) if r.name in VERIFIER_PACKAGES}
    assert set(pins) == set(VERIFIER_PACKAGES)
    for name, requirement in pins.items():
        (spec,) = requirement.specifier
        assert spec.operator == "==", f"{requirement}: the verifier is pinned to one version"
        # the corpus passing here says something about the pinned version only
        assert importlib.metadata.version(name) == spec.version
    dependabot = yaml.safe_load((root / ".github" / "dependabot.yml").read_text())
    [pip] = [u for u in dependabot["updates"] if u["package-ecosystem"] == "pip"]
    assert next(iter(pip["groups"].values()))["patterns"] == list(VERIFIER_PACKAGES)
