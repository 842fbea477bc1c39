"""Fixtures shared across the suite: valid submissions to build hostile variants from, and
the tiny encoder, built once per run whatever the number of workers."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from evaluator.rules import OFFICIAL, Competition
from evaluator.submission import write_submission

# Tests must never reach a real API, even by accident.
os.environ.pop("OPENROUTER_API_KEY", None)
os.environ.pop("GITHUB_TOKEN", None)
# Each worker of a parallel run computes on one thread: two workers on two cores must not
# each start a thread per core (read by torch and numpy's BLAS when they first load)
if os.environ.get("PYTEST_XDIST_WORKER"):
    for _name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(_name, "1")


# The lanes, by where a test lives: the end-to-end checks and the studies' tests are slow by
# nature, and the end-to-end ones may take minutes (the demo, a pip install of the floors)
E2E = ("tests/commands/test_demo_command.py", "tests/test_wheel.py",
       "tests/test_dependency_floors.py", "tests/site/test_browser.py")
STUDIES = ("tests/studies/",)
E2E_TIMEOUT_S = 900
# fixtures that take seconds to build: a test using one is slow however quick its own part
SLOW_FIXTURES = {"tiny_path", "built_sites"}
# installs into fresh environments: one unit of work, so they never run side by side
INSTALLS = ("tests/test_wheel.py", "tests/test_dependency_floors.py")
ROOT = Path(__file__).resolve().parent.parent


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    for item in items:
        where = Path(item.path).relative_to(config.rootpath).as_posix()
        if where.startswith(E2E):
            item.add_marker(pytest.mark.e2e)
            item.add_marker(pytest.mark.timeout(E2E_TIMEOUT_S))
        if where.startswith(STUDIES):
            item.add_marker(pytest.mark.studies)
        if (item.get_closest_marker("e2e") or item.get_closest_marker("studies")
                or SLOW_FIXTURES & set(getattr(item, "fixturenames", ()))):
            item.add_marker(pytest.mark.slow)


def pytest_runtest_setup(item):
    if item.get_closest_marker("gpu"):
        import torch  # asked when the test runs: collecting the suite never loads torch

        if not torch.cuda.is_available():
            pytest.skip("needs a CUDA device")


# What each run measured, written when it ends (the README points here, never at numbers)
TIMES_FILE = ROOT / "test-artifacts" / "suite-times.json"
LANES = ("e2e", "studies", "slow")  # a test counts in the first of these it is marked with


class _Times:
    """Wall time of the run, and per lane the tests and the seconds they took (setup, call
    and teardown, summed over the workers), with the slowest tests outside the e2e lane."""

    def __init__(self) -> None:
        self.start, self.seconds, self.tests = time.monotonic(), Counter(), Counter()
        self.by_test: Counter[str] = Counter()
        self.lane: dict[str, str] = {}

    def add(self, report) -> None:
        lane = next((name for name in LANES if name in report.keywords), "quick")
        self.seconds[lane] += report.duration
        self.by_test[report.nodeid] += report.duration
        self.lane[report.nodeid] = lane
        if report.when == "call":
            self.tests[lane] += 1

    def write(self, config) -> None:
        slowest = [{"test": test, "seconds": round(seconds, 2), "lane": self.lane[test]}
                   for test, seconds in self.by_test.most_common() if self.lane[test] != "e2e"]
        TIMES_FILE.parent.mkdir(parents=True, exist_ok=True)
        TIMES_FILE.write_text(json.dumps({
            "args": config.invocation_params.args, "workers": config.getoption("numprocesses",
                                                                                None),
            "wall_seconds": round(time.monotonic() - self.start, 1),
            "lanes": {lane: {"tests": self.tests[lane], "seconds": round(self.seconds[lane], 1)}
                      for lane in (*LANES, "quick") if self.tests[lane]},
            "slowest_outside_e2e": slowest[:25]}, indent=2, default=str) + "\n",
            encoding="utf-8")


_TIMES: list[_Times] = []  # the run's, in the process that runs the workers (or the tests)


def pytest_configure(config):
    if not hasattr(config, "workerinput"):
        _TIMES.append(_Times())


def pytest_runtest_logreport(report):
    for times in _TIMES:
        times.add(report)


def pytest_sessionfinish(session):
    if not session.config.option.collectonly:
        for times in _TIMES:
            times.write(session.config)


def _builds_once_per_module(path: Path) -> bool:
    text = path.read_text(encoding="utf-8")
    return 'scope="module"' in text or 'scope="class"' in text


# test files whose tests share a fixture built once per module: their tests run in one worker
TOGETHER = frozenset(p.relative_to(ROOT).as_posix() for p in (ROOT / "tests").rglob("test_*.py")
                     if _builds_once_per_module(p))


def work_unit(nodeid: str) -> str:
    """What a parallel run hands a worker at once: the installs together, a module that builds
    a fixture once with all its tests, any other test alone."""
    where = nodeid.split("::", 1)[0]
    if where in INSTALLS:
        return "installs"
    return where if where in TOGETHER else nodeid


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """Units of work by `work_unit`, the largest first (pytest-xdist's own grouping by mark
    depends on rewriting test ids, which pytest 9.2 no longer allows)."""
    from xdist.scheduler import LoadScopeScheduling

    class ByUnit(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return work_unit(nodeid)

    return ByUnit(config, log)


def _trained_weights(seed: int, rules: Competition = OFFICIAL) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    head = rng.normal(0, 0.1, rules.head_shape).astype(np.float32)
    scales = (1 + rng.normal(0, 0.05, rules.svf_scale_count)).astype(np.float32)
    return head, scales


@pytest.fixture
def trained_weights():
    """trained_weights(seed, rules) -> (head, scales): random, plausible, distinct per seed."""
    return _trained_weights


def receipt_fields(**overrides) -> dict:
    fields = {
        "benchmarks": ["math500", "mmlu", "livecodebench"],
        "optimizer": {"name": "sep-cma-es", "popsize": 32, "sigma0": 0.1, "generations": 3,
                      "seed": 0},
        "fitness_history": [{"generation": g, "mean": 0.5 + g / 100, "max": 0.6, "best": 0.6}
                            for g in range(3)],
        "total_cost_usd": 1.25,
        "ledger_head": "ab" * 32,
        "init_weights_sha256": None,
        "held_out": None,
        "tinyrouter_version": "0.1.0",
        "created_at": "2026-11-28T10:00:00Z",
    }
    fields.update(overrides)
    return fields


@pytest.fixture
def make_receipt_fields():
    """make_receipt_fields(**overrides) -> the receipt fields `make_submission` writes."""
    return receipt_fields


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    (tmp_path / "submissions").mkdir()
    (tmp_path / "leaderboard").mkdir()
    return tmp_path


@pytest.fixture
def make_submission():
    """make_submission(repo, login, generation, seed=…) writes a valid folder and returns it."""

    def make(repo: Path, login: str = "alice", generation: int = 1, seed: int = 0,
             head: np.ndarray | None = None, scales: np.ndarray | None = None,
             rules: Competition = OFFICIAL, **receipt_overrides) -> Path:
        default_head, default_scales = _trained_weights(seed, rules)
        return write_submission(repo, login, generation,
                                default_head if head is None else head,
                                default_scales if scales is None else scales,
                                receipt_fields(**receipt_overrides), readme="# my head\n",
                                rules=rules)

    return make


@pytest.fixture(autouse=True)
def _no_secret_outlives_a_test():
    """Secrets the code under test took from the environment are dropped after each test."""
    from evaluator import vault

    yield
    vault.forget()


def shared_folder(config: pytest.Config, factory: pytest.TempPathFactory, name: str,
                  build) -> Path:
    """`build(path)` run once per test run: every parallel worker gets the same folder."""
    root = factory.getbasetemp()
    if hasattr(config, "workerinput"):  # a parallel worker (not a run it started itself)
        root = root.parent  # the run's base folder, above each worker's own
    folder = root / name
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not folder.is_dir():
            partial = root / f"{name}.partial"
            shutil.rmtree(partial, ignore_errors=True)
            build(partial)
            partial.rename(folder)
    return folder


@pytest.fixture(scope="session")
def tiny_path(pytestconfig, tmp_path_factory) -> Path:
    """The tiny Qwen3 checkpoint (seed 0), read-only for every test that encodes."""
    from evaluator.coordinator.tiny import make_tiny

    return shared_folder(pytestconfig, tmp_path_factory, "tiny-encoder",
                         lambda path: make_tiny(path, seed=0))


@pytest.fixture(scope="session")
def tiny_rules(tiny_path):
    """The official rules with the tiny encoder's shape."""
    from evaluator.coordinator.encoder import competition_for_encoder

    return competition_for_encoder(tiny_path, OFFICIAL)
