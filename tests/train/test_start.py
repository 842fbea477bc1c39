"""Where the search starts: the category lookup, imitated by a fit in whitened coordinates."""

import numpy as np

from evaluator.rules import OFFICIAL
from evaluator.train.data import TrainingSet
from evaluator.train.start import best_models, softmax_fit, start_targets, whitened_fit
from evaluator.types import AnsweredItem, Item, ModelAnswer

POOL = OFFICIAL.pool_names


def shared_component_problem(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Unit features that are mostly one shared direction, with the category (which model is
    best) in a faint one of its own, as an encoder's read position is: (features, category)."""
    rng = np.random.default_rng(seed)
    category = rng.integers(0, 3, n)
    feats = np.zeros((n, 16))
    feats[:, 0] = 1.0
    feats[np.arange(n), 1 + category] += 0.01
    feats[:, 4:] += rng.normal(0, 0.002, (n, 12))
    return feats / np.linalg.norm(feats, axis=1, keepdims=True), category


def accuracy(rows: np.ndarray, feats: np.ndarray, category: np.ndarray) -> float:
    return float(np.mean((feats @ rows.T).argmax(axis=1) == category))


def test_the_whitened_fit_finds_what_the_shared_component_hides():
    feats, category = shared_component_problem(300, seed=0)
    target = np.eye(3)[category]
    held, held_category = shared_component_problem(300, seed=1)
    assert accuracy(whitened_fit(feats, target), held, held_category) == 1.0
    # plain gradient descent on the same features, same steps, barely leaves uniform routing
    assert accuracy(softmax_fit(feats, target, 1e-4), held, held_category) < 0.6


def test_the_start_imitates_the_lookup_where_a_row_has_a_category():
    def row(i, category, flags):
        return AnsweredItem(Item("math500", f"q{i}", "?", "1", category),
                            {m: ModelAnswer("…", bool(f)) for m, f in zip(POOL, flags, strict=True)})

    # geometry: model 0 is right on two rows of three; row 2 happened to go to model 1
    rows = [row(0, "geometry", (1, 0, 0)), row(1, "geometry", (1, 0, 0)),
            row(2, "geometry", (0, 1, 0)), row(3, "", (0, 0, 1)), row(4, "", (1, 0, 0))]
    data = TrainingSet.of(rows, OFFICIAL)
    picks = best_models(start_targets(data, shrink=0.5)).argmax(axis=1)
    # every geometry row starts at the category's best model; uncategorised rows keep their own
    assert picks.tolist() == [0, 0, 0, 2, 0]
