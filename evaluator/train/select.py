"""Which head a training run keeps: the start, or the search after a generation, chosen on
rows the search never reads (`TrainConfig.select`).

Among hundreds of generations scored on a few dozen rows, some lead their start by a row or
two by luck alone, so a later head replaces the kept one only for a lead beyond chance.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from evaluator.coordinator import head as routing
from evaluator.errors import TrainingError
from evaluator.rules import Competition
from evaluator.submission.weights import tensors_from_theta
from evaluator.train.data import TrainingSet
from evaluator.train.fitness import Featurizer


@contextlib.contextmanager
def global_random_kept() -> Iterator[None]:
    """What runs inside cannot disturb pycma's stream (numpy's global one)."""
    state = np.random.get_state()
    try:
        yield
    finally:
        np.random.set_state(state)


def clear_lead(right: np.ndarray, kept: np.ndarray, z: float) -> bool:
    """Whether the head right on `right` leads the kept head (right on `kept`) beyond chance: on
    the rows exactly one of them gets right, its wins less its losses exceed z·√(those rows)
    (a sign test, so a one-row lead that many generations' tries would find by chance is not
    one)."""
    wins, losses = int(np.sum(right & ~kept)), int(np.sum(kept & ~right))
    return wins - losses > z * math.sqrt(wins + losses)


class Chooser:
    """Keeps the run's head by the rows set aside: the start (unless it is a given
    head, which a submission must differ from), then the search's mean after a generation
    whenever it leads the kept head there beyond chance (`clear_lead` at the rules'
    `train_select_z`). A head is right on a row when its turn-1 model's cached answer is; its
    score is that accuracy averaged over the benchmarks, as the composite averages them. With
    no rows set aside every generation is kept (the last one wins).
    """

    def __init__(self, featurizer: Featurizer, data: TrainingSet, aside: np.ndarray,
                 rules: Competition, start: np.ndarray | None):
        self.featurizer, self.data, self.aside, self.rules = featurizer, data, aside, rules
        self.kept: int | None = None  # generations searched before the kept head (0: the start)
        self.right: np.ndarray | None = None  # the kept head's rows right, set aside
        self.start_score: float | None = None
        if start is not None and len(aside):
            self.right = self.rows_right(start)
            self.start_score = self.score(self.right)
            self.kept = 0

    def rows_right(self, theta: np.ndarray) -> np.ndarray:
        head, scales = tensors_from_theta(np.asarray(theta, dtype=np.float32), self.rules)
        with global_random_kept():
            feats = self.featurizer.features(self.aside, scales)
        picks, _ = routing.choices(routing.logits(feats, head, self.rules), self.rules)
        return self.data.correct[self.aside, picks] > 0.5

    def score(self, right: np.ndarray) -> float:
        owner = self.data.benchmark_of[self.aside]
        return float(np.mean([right[owner == b].mean() for b in np.unique(owner)]))

    def offer(self, theta: np.ndarray, searched: int, extra: dict[str, Any]) -> bool:
        """True when the head after `searched` generations is now the one to keep; its score
        (and whether it was kept) goes into `extra`, the generation's history entry."""
        if not len(self.aside):
            self.kept = searched
            return True
        right = self.rows_right(theta)
        extra["aside"] = self.score(right)
        if self.right is not None and not clear_lead(right, self.right,
                                                     self.rules.train_select_z):
            return False
        extra["kept"] = True
        self.right, self.kept = right, searched
        return True

    def replay(self, history: list[dict], kept_theta: Callable[[], np.ndarray]) -> None:
        """The choice as the recorded history left it (a resumed run); `kept_theta` reads the
        head the run kept after a generation (its model rows and scales are the search's)."""
        for entry in history:
            if not len(self.aside):
                self.kept = entry["generation"] + 1
            elif not isinstance(entry.get("aside"), (int, float)):
                raise TrainingError("the run's history lacks the set-aside rows' scores; "
                                    "start a new run")
            elif entry.get("kept"):
                self.kept = entry["generation"] + 1
        if len(self.aside) and self.kept:
            self.right = self.rows_right(kept_theta())

    def record(self, share: float) -> dict[str, Any]:
        """The summary's account of the choice (`share`: the run's --select)."""
        if not len(self.aside):
            return {"share": share, "rows": 0, "kept_after": self.kept}
        return {"share": share, "rows": len(self.aside), "kept_after": self.kept,
                "accuracy": None if self.right is None else self.score(self.right),
                "start_accuracy": self.start_score}
