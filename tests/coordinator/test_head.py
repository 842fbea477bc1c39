"""The routing head: logits, the two softmaxes, argmax and sampled decisions."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from evaluator.coordinator import head as routing
from evaluator.errors import SubmissionError
from evaluator.rules import OFFICIAL, ROLES
from evaluator.types import Decision

RULES = dataclasses.replace(OFFICIAL, hidden_size=4)
POOL = RULES.pool_names


def _head(model_row: int, role_row: int, strength: float = 5.0) -> np.ndarray:
    """A head that routes feature e0 to one model row and one role row."""
    head = np.zeros(RULES.head_shape, dtype=np.float32)
    head[model_row, 0] = strength
    head[RULES.n_models + role_row, 0] = strength
    return head


E0 = np.array([[1.0, 0.0, 0.0, 0.0]])


@pytest.mark.parametrize(("model_row", "role_row", "expected"), [
    # each pool model, in pool order
    (0, 0, Decision(POOL[0], "Thinker")),
    (1, 1, Decision(POOL[1], "Worker")),
    (2, 2, Decision(POOL[2], "Verifier")),
    # model and role are chosen independently
    (2, 0, Decision(POOL[2], "Thinker")),
])
def test_rows_map_to_pool_models_then_roles(model_row, role_row, expected):
    z = routing.logits(E0, _head(model_row, role_row), RULES)
    assert routing.decide(z, RULES) == [expected]


def test_a_zero_head_routes_uniformly_and_ties_go_first():
    z = routing.logits(np.random.default_rng(0).normal(size=(3, 4)), np.zeros(RULES.head_shape),
                       RULES)
    p_models, p_roles = routing.group_probs(z, RULES)
    assert np.allclose(p_models, 1 / 3) and np.allclose(p_roles, 1 / 3)
    assert routing.decide(z, RULES) == [Decision(POOL[0], ROLES[0])] * 3


def test_large_logits_stay_finite_and_saturate():
    p = routing.model_probs(routing.logits(E0, _head(1, 0, strength=1e6), RULES), RULES)
    assert np.isfinite(p).all()
    assert p[0].tolist() == [0.0, 1.0, 0.0]


def test_sampling_is_seeded_and_follows_the_softmax():
    feats = np.repeat(E0, 400, axis=0)
    head = _head(2, 1, strength=0.0)
    head[2, 0] = 2.0  # model 2 gets e² / (e² + 2) ≈ 0.79
    z = routing.logits(feats, head, RULES)
    draws = routing.sample(z, np.random.default_rng(7), RULES)
    assert draws == routing.sample(z, np.random.default_rng(7), RULES)
    share = sum(d.model == POOL[2] for d in draws) / len(draws)
    assert 0.7 < share < 0.88
    assert {d.role for d in draws} == set(ROLES)


@pytest.mark.parametrize(("features", "head", "message"), [
    (np.zeros((2, 4)), np.zeros((5, 4)), "head has shape"),
    (np.zeros((2, 4)), np.zeros(24), "head has shape"),
    (np.zeros((2, 4)), np.zeros((6, 5)), "features must be"),
    (np.zeros((2, 5)), np.zeros((6, 4)), "features must be"),
    (np.zeros(4), np.zeros((6, 4)), "features must be"),
])
def test_wrong_shapes_are_refused(features, head, message):
    with pytest.raises(SubmissionError, match=message):
        routing.logits(features, head, RULES)
