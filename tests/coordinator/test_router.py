"""The router: θ in, decisions out, the same way evaluation, the loop and novelty call it."""

from __future__ import annotations

import numpy as np
import pytest
from deferred import deferred

from evaluator.coordinator import head as routing
from evaluator.errors import SubmissionError
from evaluator.rules import ROLES
from evaluator.submission import tensors_from_theta, theta_from_tensors
from evaluator.train.fitness import argmax_accuracy, expected_accuracy

prefix, routers = deferred("evaluator.coordinator.prefix"), deferred("evaluator.coordinator.router")


def test_theta_round_trips_through_head_and_scales(tiny_rules, make_theta):
    theta = make_theta(tiny_rules, np.random.default_rng(0))
    head, scales = tensors_from_theta(theta, tiny_rules)
    assert head.shape == tiny_rules.head_shape
    assert scales.shape == (tiny_rules.svf_scale_count,)
    assert np.array_equal(theta_from_tensors(head, scales), theta)
    assert np.array_equal(head[1], theta[tiny_rules.hidden_size:2 * tiny_rules.hidden_size])


@pytest.mark.slow
@pytest.mark.parametrize("reuse", [False, True])
def test_router_matches_the_cached_path(encoder, make_transcripts, make_theta, reuse):
    texts = make_transcripts(30, seed=4)
    theta = make_theta(encoder.rules, np.random.default_rng(9), head_std=50.0)
    router = routers.Router(encoder)
    head, scales = tensors_from_theta(theta, encoder.rules)
    cached = routing.decide(routing.logits(prefix.features(prefix.prefix_of(encoder, texts), scales), head,
                                           encoder.rules), encoder.rules)
    assert router.decide(texts, theta, reuse) == cached
    assert router.bind(theta)(texts) == cached


@pytest.mark.slow
def test_training_fitness_reads_the_same_logits_as_the_decisions(encoder, make_transcripts,
                                                                 make_theta):
    texts = make_transcripts(24, seed=5)
    rules = encoder.rules
    theta = make_theta(rules, np.random.default_rng(4), head_std=20.0)
    router = routers.Router(encoder)
    correct = np.random.default_rng(2).integers(0, 2, (len(texts), rules.n_models)).astype(float)
    head, scales = tensors_from_theta(theta, rules)
    feats = router.features(texts, scales)
    picks = [rules.pool_names.index(d.model) for d in router.decide(texts, theta)]
    assert argmax_accuracy(head, feats, correct, rules) == pytest.approx(
        correct[np.arange(len(texts)), picks].mean())
    p_models, _ = router.probabilities(texts, theta)
    assert expected_accuracy(head, feats, correct, rules) == pytest.approx(
        (p_models * correct).sum(axis=1).mean(), rel=1e-6)


def test_probabilities_and_logits_agree(encoder, make_transcripts, make_theta):
    texts = make_transcripts(6, seed=2)
    theta = make_theta(encoder.rules, np.random.default_rng(1))
    router = routers.Router(encoder)
    p_models, p_roles = router.probabilities(texts, theta)
    z = router.logits(texts, theta)
    assert z.shape == (6, 6)
    assert np.allclose(p_models.sum(axis=1), 1.0) and np.allclose(p_roles.sum(axis=1), 1.0)
    assert np.array_equal(p_models.argmax(axis=1), z[:, :3].argmax(axis=1))


@pytest.mark.slow
def test_sampling_is_reproducible_with_a_seed(encoder, make_transcripts, make_theta):
    texts = make_transcripts(50, seed=6)
    theta = make_theta(encoder.rules, np.random.default_rng(3), head_std=0.0)  # uniform softmax
    router = routers.Router(encoder)
    first = router.decide(texts, theta, rng=np.random.default_rng(1))
    assert first == router.decide(texts, theta, rng=np.random.default_rng(1))
    assert {d.role for d in first} == set(ROLES)


@pytest.mark.parametrize("delta", [-1, 1, -768])
def test_a_wrong_sized_theta_is_refused(encoder, tiny_rules, delta):
    theta = np.zeros(tiny_rules.n_params + delta, dtype=np.float32)
    with pytest.raises(SubmissionError, match=str(tiny_rules.n_params)):
        routers.Router(encoder).decide(["QUERY:\nx"], theta)
