"""Fixtures for the evaluation tests; the fakes themselves live in evaluation_fakes.py."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from evaluation_fakes import RULES, SMART, FakePool, LinearRouter, head_theta, make_sets


@pytest.fixture
def sets():
    return make_sets()


@pytest.fixture
def router():
    return LinearRouter()


@pytest.fixture
def pool():
    return FakePool()


@pytest.fixture
def eval_repo(repo: Path, make_submission):
    """A repository with alice's generation 1 whose head reads the category (the smart one)."""
    theta = head_theta(SMART)
    head = theta[: RULES.n_head_params].reshape(RULES.head_shape).astype(np.float32)
    make_submission(repo, "alice", 1, head=head, scales=np.ones(8, np.float32), rules=RULES)
    return repo
