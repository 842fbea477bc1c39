"""The programs a bare interpreter runs for the sandbox: standalone, and what the grader reads."""

from __future__ import annotations

import ast
import resource
import sys
from importlib import resources

import pytest

from evaluator import sandbox
from evaluator.sandbox.inside import harness
from evaluator.sandbox.inside import program_runner as runner
from evaluator.sandbox.limits import as_pairs, run_rlimits

PROGRAMS = sorted(p.name for p in resources.files(sandbox.inside).iterdir()
                  if p.name.endswith(".py") and p.name != "__init__.py")


def test_every_program_is_handed_over():
    texts = {sandbox.inside.HARNESS, sandbox.inside.RUNNER, sandbox.inside.LAUNCHER,
             sandbox.inside.SWEEPER, sandbox.inside.INTERPRETER_PATHS}
    assert {resources.files(sandbox.inside).joinpath(name).read_text() for name in PROGRAMS} == texts


@pytest.mark.parametrize("name", PROGRAMS)
def test_a_program_imports_the_standard_library_only(name):
    """Inside there is no site-packages and no repository: `evaluator` is not there to import."""
    tree = ast.parse(resources.files(sandbox.inside).joinpath(name).read_text())
    imported = {alias.name.split(".")[0] for node in ast.walk(tree)
                if isinstance(node, ast.Import) for alias in node.names}
    imported |= {node.module.split(".")[0] for node in ast.walk(tree)
                 if isinstance(node, ast.ImportFrom) and node.module}
    assert imported and imported <= set(sys.stdlib_module_names), imported


@pytest.mark.parametrize(("value", "expected"), [
    # what JSON lacks, as the reference compares it
    ({3}, [3]),
    (frozenset(), []),
    ((1, "a"), [1, "a"]),
])
def test_the_harness_writes_sets_and_tuples_as_lists(value, expected):
    assert harness.plain(value) == expected


@pytest.mark.parametrize("value", [object(), 1j, b"bytes"])
def test_the_harness_refuses_what_it_cannot_compare(value):
    with pytest.raises(TypeError, match=f"cannot compare a {type(value).__name__}"):
        harness.plain(value)


def test_the_runner_reads_the_rlimits_the_grader_writes():
    rlimits = run_rlimits(sandbox.DEFAULT_LIMITS, sandbox.PER_PROCESS, 1)
    assert runner.parse(as_pairs(rlimits).encode()) == [
        (getattr(resource, name), value) for name, value in rlimits.items()]


def test_the_runner_reads_its_spec_line():
    spec = runner.Spec(b"2.5 4096 1 RLIMIT_CPU=4,RLIMIT_CORE=0 RLIMIT_CPU=9\n")
    assert (spec.wall, spec.cap, spec.sweep) == (2.5, 4096, True)
    assert spec.rlimits == [(resource.RLIMIT_CPU, 4), (resource.RLIMIT_CORE, 0)]
    assert spec.own == [(resource.RLIMIT_CPU, 9)]


@pytest.mark.parametrize(("ended", "expected"), [
    # an exit status, a signal, and a timeout (no status: the run was killed)
    ((0, False, False, b"ok\n", b""), b"0 0 0 3 0\nok\n"),
    ((-9, False, True, b"xx", b"e"), b"-9 0 1 2 1\nxxe"),
    ((-9, True, False, b"", b"late"), b"- 1 0 0 4\nlate"),
])
def test_the_runner_answers_as_the_grader_reads(ended, expected):
    assert runner.answer(*ended) == expected
