"""Fixtures shared across the suite: valid submissions to build hostile variants from."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from evaluator.rules import OFFICIAL, Competition
from evaluator.submission import write_submission

# Tests must never reach a real API, even by accident.
os.environ.pop("OPENROUTER_API_KEY", None)
os.environ.pop("GITHUB_TOKEN", None)


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
