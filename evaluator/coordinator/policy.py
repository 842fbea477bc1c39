"""The coordinator as evaluation, novelty and the loop use it: transcripts + θ → decisions."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from evaluator.coordinator import head as routing
from evaluator.coordinator.encoder import Encoder
from evaluator.rules import Competition
from evaluator.submission import tensors_from_theta
from evaluator.types import Decision


class Policy:
    """One encoder, batched: logits, probabilities and decisions for many transcripts."""

    def __init__(self, encoder: Encoder, rules: Competition | None = None):
        self.encoder = encoder
        self.rules = rules or encoder.rules

    def _logits(self, transcripts: Sequence[str], theta: np.ndarray) -> torch.Tensor:
        head, scales = tensors_from_theta(theta, self.rules)
        return routing.logits(self.encoder.features(list(transcripts), scales), head, self.rules)

    def logits(self, transcripts: Sequence[str], theta: np.ndarray) -> np.ndarray:
        """(N, n_models + n_roles) logits."""
        return self._logits(transcripts, theta).numpy()

    def probabilities(self, transcripts: Sequence[str],
                      theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(N, n_models) model probabilities and (N, n_roles) role probabilities."""
        p_models, p_roles = routing.group_probs(self._logits(transcripts, theta), self.rules)
        return p_models.numpy(), p_roles.numpy()

    def decide(self, transcripts: Sequence[str], theta: np.ndarray, *, sample: bool = False,
               rng: np.random.Generator | None = None) -> list[Decision]:
        """Argmax decisions (evaluation), or draws from the softmaxes with a seeded `rng`."""
        z = self._logits(transcripts, theta)
        if sample:
            return routing.sample(z, rng if rng is not None else np.random.default_rng(0),
                                  self.rules)
        return routing.decide(z, self.rules)

    def bind(self, theta: np.ndarray) -> PolicyFn:
        """A `session.Policy` callable (transcripts → decisions) for one θ."""
        return PolicyFn(self, np.asarray(theta, dtype=np.float32))


class PolicyFn:
    """`Policy.decide` with θ fixed, as the multi-turn loop calls it."""

    def __init__(self, policy: Policy, theta: np.ndarray):
        self.policy, self.theta = policy, theta

    def __call__(self, transcripts: list[str]) -> list[Decision]:
        return self.policy.decide(transcripts, self.theta)
