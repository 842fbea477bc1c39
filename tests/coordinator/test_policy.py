"""The policy: θ in, decisions out, the same way evaluation and the loop call it."""

from __future__ import annotations

import numpy as np
import pytest

from evaluator.coordinator import head as routing
from evaluator.coordinator.policy import Policy
from evaluator.coordinator.prefix import features
from evaluator.errors import SubmissionError
from evaluator.rules import ROLES
from evaluator.submission import tensors_from_theta, theta_from_tensors


def test_theta_round_trips_through_head_and_scales(tiny_rules, make_theta):
    theta = make_theta(tiny_rules, np.random.default_rng(0))
    head, scales = tensors_from_theta(theta, tiny_rules)
    assert head.shape == tiny_rules.head_shape
    assert scales.shape == (tiny_rules.svf_scale_count,)
    assert np.array_equal(theta_from_tensors(head, scales), theta)
    assert np.array_equal(head[1], theta[tiny_rules.hidden_size:2 * tiny_rules.hidden_size])


def test_policy_matches_the_cached_path(encoder, make_transcripts, make_theta):
    texts = make_transcripts(30, seed=4)
    theta = make_theta(encoder.rules, np.random.default_rng(9), head_std=50.0)
    policy = Policy(encoder)
    head, scales = tensors_from_theta(theta, encoder.rules)
    cached = routing.decide(routing.logits(features(encoder.prefix(texts), scales), head,
                                           encoder.rules), encoder.rules)
    assert policy.decide(texts, theta) == cached
    assert policy.bind(theta)(texts) == cached


def test_probabilities_and_logits_agree(encoder, make_transcripts, make_theta):
    texts = make_transcripts(6, seed=2)
    theta = make_theta(encoder.rules, np.random.default_rng(1))
    policy = Policy(encoder)
    p_models, p_roles = policy.probabilities(texts, theta)
    z = policy.logits(texts, theta)
    assert z.shape == (6, 6)
    assert np.allclose(p_models.sum(axis=1), 1.0) and np.allclose(p_roles.sum(axis=1), 1.0)
    assert np.array_equal(p_models.argmax(axis=1), z[:, :3].argmax(axis=1))


def test_sampling_is_reproducible_with_a_seed(encoder, make_transcripts, make_theta):
    texts = make_transcripts(50, seed=6)
    theta = make_theta(encoder.rules, np.random.default_rng(3), head_std=0.0)  # uniform softmax
    policy = Policy(encoder)
    first = policy.decide(texts, theta, sample=True, rng=np.random.default_rng(1))
    assert first == policy.decide(texts, theta, sample=True, rng=np.random.default_rng(1))
    assert {d.role for d in first} == set(ROLES)


@pytest.mark.parametrize("delta", [-1, 1, -768])
def test_a_wrong_sized_theta_is_refused(encoder, tiny_rules, delta):
    theta = np.zeros(tiny_rules.n_params + delta, dtype=np.float32)
    with pytest.raises(SubmissionError, match=str(tiny_rules.n_params)):
        Policy(encoder).decide(["QUERY:\nx"], theta)
