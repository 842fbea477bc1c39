"""The routing head (SPEC §3) as pure array functions: z = W·h, a softmax per group, decisions.

Rows 0..n_models−1 of W are the pool models in pool order, the remaining rows the roles in
ROLES order. Evaluation takes each group's argmax; training's fitness takes the model
group's softmax of the same logits, so both read `logits` and nothing else.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from evaluator.errors import SubmissionError
from evaluator.rules import ROLES, Competition
from evaluator.types import Decision


def _array(x: Any) -> np.ndarray:
    if hasattr(x, "detach"):  # a torch tensor from the encoder
        x = x.detach().cpu().numpy()
    return np.asarray(x, dtype=np.float32)


def logits(features: Any, head: Any, rules: Competition) -> np.ndarray:
    """(N, n_models + n_roles) logits z = W·h in fp32 (the hidden size is the head's)."""
    feats, weights = _array(features), _array(head)
    rows = rules.n_models + rules.n_roles
    if weights.ndim != 2 or weights.shape[0] != rows:
        raise SubmissionError(f"the head has shape {tuple(weights.shape)}, the rules want "
                              f"{rows} rows (pool models, then roles)")
    if feats.ndim != 2 or feats.shape[1] != weights.shape[1]:
        raise SubmissionError(f"features must be (N, {weights.shape[1]}) for this head, "
                              f"got {tuple(feats.shape)}")
    return feats @ weights.T


def softmax(z: np.ndarray) -> np.ndarray:
    """Softmax over the last axis, stable for large logits."""
    shifted = np.exp(z - z.max(axis=-1, keepdims=True))
    return shifted / shifted.sum(axis=-1, keepdims=True)


def group_probs(z: np.ndarray, rules: Competition) -> tuple[np.ndarray, np.ndarray]:
    """The model softmax and the role softmax of each row of logits."""
    return softmax(z[..., :rules.n_models]), softmax(z[..., rules.n_models:])


def model_probs(z: np.ndarray, rules: Competition) -> np.ndarray:
    """(…, n_models) routing probabilities over the pool: training's expected accuracy."""
    return softmax(z[..., :rules.n_models])


def choices(z: np.ndarray, rules: Competition) -> tuple[np.ndarray, np.ndarray]:
    """Each row's argmax model and role index; ties go to the earlier row."""
    return z[..., :rules.n_models].argmax(axis=-1), z[..., rules.n_models:].argmax(axis=-1)


def decide(z: np.ndarray, rules: Competition) -> list[Decision]:
    """The argmax of each group (evaluation's decisions)."""
    models, roles = choices(np.asarray(z), rules)
    return [Decision(rules.pool_names[m], ROLES[r])
            for m, r in zip(models.tolist(), roles.tolist(), strict=True)]


def sample(z: np.ndarray, rng: np.random.Generator, rules: Competition) -> list[Decision]:
    """Decisions drawn from each group's softmax with a seeded generator."""
    p_models, p_roles = (p.astype(np.float64) for p in group_probs(np.asarray(z), rules))
    return [Decision(rules.pool_names[rng.choice(len(pm), p=pm / pm.sum())],
                     ROLES[rng.choice(len(pr), p=pr / pr.sum())])
            for pm, pr in zip(p_models, p_roles, strict=True)]
