"""Where the search starts: the model rows fitted to the category lookup's choices.

CMA-ES from W = 0 spends most of its generations finding what a convex fit finds in a second,
so the search starts from a softmax regression of each training row's category's best model
(the category → best-model lookup, imitated by a linear head), fitted in whitened coordinates
and mapped back. The role rows start at 0 and the scales at 1; deterministic for the data, so a
resumed run rebuilds the same start.
"""

from __future__ import annotations

import numpy as np

from evaluator.coordinator import head as routing
from evaluator.rules import Competition
from evaluator.submission.weights import theta_from_tensors
from evaluator.train.data import TrainingSet

START_SHRINK = 1.0  # the start imitates the category's best model (data.targets' shrink)
L2 = 1e-3  # on whitened features; chosen on held-out rows of the demo's collected data
FLOOR = 1e-5  # smallest eigenvalue kept, as a share of the largest: noise is not amplified
STEPS = 3000
STEP_SIZE = 2.0  # the features are unit vectors, so the loss is smooth enough for this step
WHITE_STEP_SIZE = 1.0  # whitened features have unit mean square length


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


def whitening(feats: np.ndarray, floor: float = FLOOR) -> np.ndarray:
    """The symmetric P with feats·P of unit mean square length and near-identity second
    moments (eigenvalues below floor × the largest are not blown up)."""
    feats = np.asarray(feats, dtype=np.float64)
    values, vectors = np.linalg.eigh(feats.T @ feats / len(feats))
    values = np.maximum(values, 0.0)
    p = vectors @ np.diag(1 / np.sqrt(values + floor * values.max())) @ vectors.T
    return p / np.sqrt(((feats @ p) ** 2).sum(axis=1).mean())


def whitened_fit(feats: np.ndarray, target: np.ndarray, l2: float = L2) -> np.ndarray:
    """`softmax_fit` in whitened coordinates, mapped back: rows on `feats` themselves."""
    p = whitening(feats)
    return softmax_fit(np.asarray(feats, dtype=np.float64) @ p, target, l2,
                       step_size=WHITE_STEP_SIZE) @ p


def best_models(targets: np.ndarray) -> np.ndarray:
    """Each row's best models as class probabilities (ties share the row)."""
    best = np.isclose(targets, targets.max(axis=1, keepdims=True))
    return best / best.sum(axis=1, keepdims=True)


def start_targets(data: TrainingSet, shrink: float) -> np.ndarray:
    """What the start imitates: on a row with a category, its category's rate (the lookup's
    choice); on a row without one, the blended grade the fitness reads (`shrink`), since its
    benchmark's rate alone would only name the best single model."""
    has_category = np.array([bool(row.item.category) for row in data.rows])[:, None]
    return np.where(has_category, data.targets(START_SHRINK), data.targets(shrink))


def fitted_theta(feats: np.ndarray, targets: np.ndarray, rules: Competition) -> np.ndarray:
    """θ with the model rows fitted to `targets`' best models on `feats` (scales at 1), role
    rows 0 and scales 1. The run passes `start_targets`."""
    head = np.zeros(rules.head_shape, np.float32)
    head[:rules.n_models] = whitened_fit(feats, best_models(targets))
    return theta_from_tensors(head, np.ones(rules.svf_scale_count, np.float32)).astype(np.float64)
