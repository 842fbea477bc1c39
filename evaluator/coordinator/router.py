"""The router: θ + transcripts → decisions, the one path evaluation, the live loop and novelty take.

One encoder serves every head. Transcripts decided with `reuse` (the cached questions, for
the challenger and then the king) keep their frozen prefix, so the next θ recomputes only
the last layers; others run the full forward pass. Decisions are `head.decide` of
`head.logits`, the same logits training's fitness reads.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from evaluator.coordinator import head as routing
from evaluator.coordinator.encoder import Encoder, load_encoder
from evaluator.coordinator.prefix import PrefixCache, features, prefix_of
from evaluator.loop import Decide
from evaluator.rules import Competition
from evaluator.submission.weights import tensors_from_theta
from evaluator.types import Decision


class Router:
    """Logits, probabilities and decisions for many transcripts under a θ."""

    def __init__(self, encoder: Encoder, rules: Competition | None = None):
        self.encoder = encoder
        self.rules = rules or encoder.rules
        self._prefixes: dict[tuple[str, ...], PrefixCache] = {}

    def features(self, transcripts: Sequence[str], scales: np.ndarray,
                 reuse: bool = False) -> np.ndarray:
        """(N, hidden) head-input features under the SVF scales."""
        if not reuse:
            return self.encoder.features(list(transcripts), scales).numpy()
        key = tuple(transcripts)
        if key not in self._prefixes:
            self._prefixes[key] = prefix_of(self.encoder, list(transcripts))
        return features(self._prefixes[key], scales).numpy()

    def logits(self, transcripts: Sequence[str], theta: np.ndarray,
               reuse: bool = False) -> np.ndarray:
        """(N, n_models + n_roles) logits."""
        head, scales = tensors_from_theta(theta, self.rules)
        return routing.logits(self.features(transcripts, scales, reuse), head, self.rules)

    def probabilities(self, transcripts: Sequence[str],
                      theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(N, n_models) model probabilities and (N, n_roles) role probabilities."""
        return routing.group_probs(self.logits(transcripts, theta), self.rules)

    def decide(self, transcripts: Sequence[str], theta: np.ndarray, reuse: bool = False, *,
               rng: np.random.Generator | None = None) -> list[Decision]:
        """Argmax decisions (evaluation), or draws from the softmaxes with a seeded `rng`."""
        z = self.logits(transcripts, theta, reuse)
        return routing.decide(z, self.rules) if rng is None else routing.sample(z, rng, self.rules)

    def bind(self, theta: np.ndarray) -> Decide:
        """The loop's per-turn decision function for one θ."""
        theta = np.asarray(theta, dtype=np.float32)
        return lambda transcripts: self.decide(transcripts, theta)


def load_router(encoder_id: str, rules: Competition, device: str | None = None) -> Router:
    return Router(load_encoder(encoder_id, rules, device), rules)
