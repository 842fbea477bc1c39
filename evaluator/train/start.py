"""Where the search starts: the model rows fitted to each training row's best model.

CMA-ES from W = 0 spends most of its generations finding what a convex fit finds in a
second: which model is best for questions like this one. So by default the search starts
from a softmax regression (L2-penalised) of each row's best model, read from the same
targets the fitness uses (the cached grade pulled toward its category's rate), on the
encoder's features with the SVF scales at 1. The role rows start at 0 (they are fitted after
the search, train/roles.py) and the scales at 1; CMA-ES then climbs the expected cached
accuracy from there. Deterministic for the data, so a resumed run rebuilds the same start.
"""

from __future__ import annotations

import numpy as np

from evaluator.coordinator import head as routing
from evaluator.rules import Competition
from evaluator.submission.weights import theta_from_tensors

L2 = 1e-4  # on the demo's hidden pool, the fitted start alone routes best at 1e-4 of 1e-2 … 1e-4
STEPS = 3000
STEP_SIZE = 2.0  # the features are unit vectors, so the loss is smooth enough for this step


def softmax_fit(feats: np.ndarray, target: np.ndarray, l2: float, steps: int = STEPS,
                step_size: float = STEP_SIZE) -> np.ndarray:
    """(classes, hidden) rows minimising the mean cross-entropy against `target` (rows of
    class probabilities) plus l2·‖rows‖², by gradient descent from 0."""
    feats = np.asarray(feats, dtype=np.float64)
    rows = np.zeros((target.shape[1], feats.shape[1]))
    for _ in range(steps):
        p = routing.softmax(feats @ rows.T)
        rows -= step_size * ((p - target).T @ feats / len(feats) + 2 * l2 * rows)
    return rows


def best_models(targets: np.ndarray) -> np.ndarray:
    """Each row's best models as class probabilities (ties share the row)."""
    best = np.isclose(targets, targets.max(axis=1, keepdims=True))
    return best / best.sum(axis=1, keepdims=True)


def fitted_theta(feats: np.ndarray, targets: np.ndarray, rules: Competition) -> np.ndarray:
    """θ with the model rows fitted to `targets`' best models on `feats` (scales at 1), role
    rows 0 and scales 1."""
    head = np.zeros(rules.head_shape, np.float32)
    head[:rules.n_models] = softmax_fit(feats, best_models(targets), L2)
    return theta_from_tensors(head, np.ones(rules.svf_scale_count, np.float32)).astype(np.float64)
