"""Training's fitness: expected cached accuracy under the head's softmax over models.

Fitness is Σ_m p(m|q)·target(q,m) over a minibatch shared by every candidate of a generation
(common random numbers); p is `head.model_probs` of `head.logits`, the same logits whose
argmax the evaluator takes, so training and evaluation read one function of the head.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

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


@runtime_checkable
class BatchedFeaturizer(Featurizer, Protocol):
    """A featurizer that evaluates a whole generation's scales in one call."""

    def features_many(self, index: np.ndarray, scales: np.ndarray) -> np.ndarray:
        """(K, len(index), hidden) for (K, count) scales: row k is `features(index, scales[k])`."""


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
    if not len(thetas):
        return np.array([])
    heads, scales = zip(*(tensors_from_theta(np.asarray(theta, dtype=np.float32), rules)
                          for theta in thetas), strict=True)
    feats = population_features(featurizer, index, np.stack(scales))
    correct = targets[index]
    return np.array([expected_accuracy(head, f, correct, rules)
                     for head, f in zip(heads, feats, strict=True)])


def population_features(featurizer: Featurizer, index: np.ndarray,
                        scales: np.ndarray) -> Sequence[np.ndarray]:
    """Each candidate's features of items[index]: one batched call where the featurizer has one."""
    if isinstance(featurizer, BatchedFeaturizer):
        return featurizer.features_many(index, scales)
    return [featurizer.features(index, s) for s in scales]


def encoder_featurizer(encoder: Any, data: TrainingSet, rules: Competition,
                       transcripts: Sequence[str] | None = None) -> Featurizer:
    """Features through the coordinator's frozen-prefix cache of each row's turn-1 transcript
    (the query alone), or of `transcripts` when given (row k: the k-th transcript).

    `encoder` is a hub id, a local folder, or an already loaded coordinator encoder.
    """
    # torch loads here, when features are needed: packing and scoring a run read this module
    from evaluator.coordinator import CachedFeaturizer, load_encoder

    if isinstance(encoder, str):
        encoder = load_encoder(encoder, rules)
    if transcripts is None:
        transcripts = [coordinator_transcript(row.item.prompt, []) for row in data.rows]
    return CachedFeaturizer(encoder, list(transcripts))
