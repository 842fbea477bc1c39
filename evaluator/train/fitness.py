"""Training's fitness: expected cached accuracy under the head's softmax over models.

Fitness is Σ_m p(m|q)·target(q,m) over a minibatch shared by every candidate of a generation
(common random numbers); p is `head.model_probs` of `head.logits`, the same logits whose
argmax the evaluator takes, so training and evaluation read one function of the head.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from evaluator.coordinator import head as routing
from evaluator.loop import coordinator_transcript
from evaluator.rules import Competition
from evaluator.submission.weights import tensors_from_theta
from evaluator.train.data import TrainingSet


class Featurizer(Protocol):
    """Head-input features of the training items under a θ's SVF scales."""

    def features(self, index: np.ndarray, scales: np.ndarray) -> np.ndarray:
        """(len(index), hidden) L2-normalised features of items[index]."""


def expected_accuracy(head: np.ndarray, feats: np.ndarray, correct: np.ndarray,
                      rules: Competition) -> float:
    """Mean over items of Σ_m p(m|q)·correct(q,m)."""
    p = routing.model_probs(routing.logits(feats, head, rules), rules)
    return float((p * correct).sum(axis=1).mean())


def argmax_accuracy(head: np.ndarray, feats: np.ndarray, correct: np.ndarray,
                    rules: Competition) -> float:
    """Cached accuracy of the evaluation's decision: the argmax model's answer."""
    picks, _ = routing.choices(routing.logits(feats, head, rules), rules)
    return float(correct[np.arange(len(picks)), picks].mean())


def evaluate_population(thetas: Sequence[np.ndarray], index: np.ndarray, targets: np.ndarray,
                        featurizer: Featurizer, rules: Competition) -> np.ndarray:
    """Each θ's expected accuracy on items[index], against `targets` (TrainingSet.targets)."""
    correct = targets[index]
    values = []
    for theta in thetas:
        head, scales = tensors_from_theta(np.asarray(theta, dtype=np.float32), rules)
        values.append(expected_accuracy(head, featurizer.features(index, scales), correct, rules))
    return np.array(values)


def encoder_featurizer(encoder: Any, data: TrainingSet, rules: Competition) -> Featurizer:
    """Features through the coordinator's frozen-prefix cache of each turn-1 transcript.

    `encoder` is a hub id, a local folder, or an already loaded coordinator encoder.
    """
    # torch loads here, when features are needed: packing and scoring a run read this module
    from evaluator.coordinator import CachedFeaturizer, load_encoder

    if isinstance(encoder, str):
        encoder = load_encoder(encoder, rules)
    transcripts = [coordinator_transcript(row.item.prompt, []) for row in data.rows]
    return CachedFeaturizer(encoder, transcripts)
