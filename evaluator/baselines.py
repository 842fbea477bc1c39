"""What a router has to beat: the single-model floor, random routing and the oracle ceiling.

Everything reads a correctness matrix: per item, per model, one 0/1 per sample (cached
answers and training data have one sample; the peer data has k). The cross-fitted oracle
picks each item's best model on one half of the samples and scores it on the other, so the
ceiling is not inflated by the winner's curse of picking and scoring on the same draws.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from evaluator.errors import BaselineError
from evaluator.rules import Competition
from evaluator.types import AnsweredItem, Item


@dataclass(frozen=True)
class CorrectnessMatrix:
    """Per item (ids), per model (models), the 0/1 outcome of each sample."""

    models: tuple[str, ...]
    ids: tuple[str, ...]
    samples: tuple[tuple[tuple[int, ...], ...], ...]  # [item][model] -> outcomes

    def means(self) -> np.ndarray:
        """(items, models) mean correctness over each cell's samples."""
        return np.array([[sum(cell) / len(cell) for cell in row] for row in self.samples])

    @property
    def min_samples(self) -> int:
        return min((len(cell) for row in self.samples for cell in row), default=0)


def matrix_from_json(data: dict[str, Any]) -> CorrectnessMatrix:
    """The peer format: `tasks[].id`, `tasks[].per_model{model: [0|1 per sample]}`."""
    tasks = data.get("tasks") if isinstance(data, dict) else None
    if not isinstance(tasks, list) or not tasks:
        raise BaselineError("the matrix has no 'tasks' list; expected "
                            "{'tasks': [{'id': ..., 'per_model': {model: [0|1, ...]}}]}")
    models = None
    ids, rows = [], []
    for n, task in enumerate(tasks):
        per_model = task.get("per_model") if isinstance(task, dict) else None
        if not isinstance(per_model, dict) or not per_model:
            raise BaselineError(f"task {n} has no 'per_model' mapping")
        names = tuple(sorted(per_model))
        if models is None:
            models = names
        elif names != models:
            raise BaselineError(f"task {n} ({task.get('id')!r}) has models {list(names)}, "
                                f"the first task has {list(models)}")
        rows.append(tuple(_outcomes(per_model[m], n, m) for m in models))
        ids.append(str(task.get("id", n)))
    return CorrectnessMatrix(models=models, ids=tuple(ids), samples=tuple(rows))


def _outcomes(values: Any, n: int, model: str) -> tuple[int, ...]:
    if not isinstance(values, list) or not values or not all(
            not isinstance(v, str) and v in (0, 1) for v in values):
        raise BaselineError(f"task {n}, model {model!r}: expected a non-empty list of 0/1, "
                            f"got {str(values)[:80]}")
    return tuple(int(v) for v in values)


def load_matrix(path: str | Path) -> CorrectnessMatrix:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise BaselineError(f"cannot read the correctness matrix {path}: {exc}") from exc
    return matrix_from_json(data)


def matrix_from_answered(items: Sequence[AnsweredItem],
                         pool_names: Sequence[str]) -> CorrectnessMatrix:
    """One sample per cell: the cached (or training) answer's correct flag."""
    if not items:
        raise BaselineError("no answered items to compute baselines from")
    rows = []
    for row in items:
        missing = [m for m in pool_names if m not in row.answers]
        if missing:
            raise BaselineError(f"item {row.item.id!r} has no answer from {missing}: "
                                f"the data was collected for another pool")
        rows.append(tuple((int(row.answers[m].correct),) for m in pool_names))
    return CorrectnessMatrix(models=tuple(pool_names), ids=tuple(r.item.id for r in items),
                             samples=tuple(rows))


def from_answered(items: Sequence[AnsweredItem], pool_names: Sequence[str]) -> dict[str, Any]:
    """The manifest's baselines for one benchmark's cached answers: overall, per category,
    and what each model's answers cost per 1,000 questions."""
    means = matrix_from_answered(items, pool_names).means()
    categories = np.array([row.item.category for row in items])
    by_category = {}
    for category in sorted(set(categories)):
        rows = categories == category
        by_category[str(category)] = {"items": int(rows.sum()),
                                      **from_means(means[rows], pool_names)}
        del by_category[str(category)]["random"]
    cost = {m: round(1000 * float(np.mean([row.answers[m].cost_usd for row in items])), 6)
            for m in pool_names}
    return {**from_means(means, pool_names), "by_category": by_category, "cost_per_1k_usd": cost}


def from_means(means: np.ndarray, pool_names: Sequence[str]) -> dict[str, Any]:
    """Each model alone, the best of them, random routing and the oracle, from an
    (items, models) matrix of mean correctness."""
    per_model = {m: float(means[:, j].mean()) for j, m in enumerate(pool_names)}
    best = max(pool_names, key=lambda m: per_model[m])
    return {"per_model": per_model,
            "best_single": {"model": best, "accuracy": per_model[best]},
            "random": float(means.mean()),
            "oracle": float(means.max(axis=1).mean())}


def gap_closed(accuracy: float | None, best_single: float | None,
               oracle: float | None) -> float | None:
    """The share of the best-single-to-oracle headroom a router's accuracy captures.

    None when a number is missing or there is no headroom to capture.
    """
    if accuracy is None or best_single is None or oracle is None or oracle <= best_single:
        return None
    return (accuracy - best_single) / (oracle - best_single)


def crossfit_item(cells: Sequence[Sequence[int]], preference: Sequence[int]) -> float:
    """Expected split-half oracle accuracy on one item, exact over every split.

    Each model's samples split into halves of ⌊k/2⌋ and ⌈k/2⌉ (independently per model:
    samples are exchangeable); the model with the best mean on one half is scored on the
    other, in both directions. Ties go to the earlier model in `preference` (the best
    single model first), as a router that cannot tell the models apart would fall back.
    """
    rank = {m: r for r, m in enumerate(preference)}
    options = []  # per model: [(probability, mean_small_half, mean_large_half)]
    for cell in cells:
        k, c = len(cell), sum(cell)
        a, b = k // 2, k - k // 2
        if a == 0:
            raise BaselineError("the cross-fitted oracle needs at least 2 samples per model")
        options.append([(math.comb(c, x) * math.comb(k - c, a - x) / math.comb(k, a),
                         x / a, (c - x) / b) for x in range(max(0, c - b), min(a, c) + 1)])
    total = 0.0
    for combo in itertools.product(*options):
        p = math.prod(o[0] for o in combo)
        for pick_on, score_on in ((1, 2), (2, 1)):
            best = max(range(len(combo)), key=lambda m: (combo[m][pick_on], -rank[m]))
            total += p * combo[best][score_on] / 2
    return total


def _point(means: np.ndarray, crossfit: np.ndarray | None) -> dict[str, Any]:
    per_model = means.mean(axis=0)
    out = {"per_model": per_model, "best_single": float(per_model.max()),
           "random": float(means.mean()), "oracle_naive": float(means.max(axis=1).mean())}
    if crossfit is not None:
        out["oracle_crossfit"] = float(crossfit.mean())
        out["headroom"] = out["oracle_crossfit"] - out["best_single"]
    return out


def oracle_report(matrix: CorrectnessMatrix, rules: Competition, seed: int = 0) -> dict[str, Any]:
    """Baselines and ceilings of one matrix, each with a bootstrap 95% interval over items."""
    means = matrix.means()
    per_model = {m: float(means[:, j].mean()) for j, m in enumerate(matrix.models)}
    best = max(matrix.models, key=lambda m: per_model[m])
    preference = sorted(range(len(matrix.models)), key=lambda j: -means[:, j].mean())
    crossfit = None
    if matrix.min_samples >= 2:
        crossfit = np.array([crossfit_item(row, preference) for row in matrix.samples])
    point = _point(means, crossfit)
    rng = np.random.default_rng(seed)
    draws = [_point(means[idx], None if crossfit is None else crossfit[idx])
             for idx in rng.integers(0, len(means), (rules.bootstrap_resamples, len(means)))]

    def ci(key: str, j: int | None = None) -> list[float]:
        values = [d[key][j] if j is not None else d[key] for d in draws]
        return [float(v) for v in np.percentile(values, [2.5, 97.5])]

    report = {
        "n_items": len(matrix.ids), "models": list(matrix.models),
        "samples_per_item": matrix.min_samples,
        "per_model_accuracy": per_model,
        "best_single": {"model": best, "accuracy": per_model[best]},
        "random": point["random"], "oracle_naive": point["oracle_naive"],
        "oracle_crossfit": point.get("oracle_crossfit"), "headroom": point.get("headroom"),
        "ci95": {"per_model_accuracy": {m: ci("per_model", j)
                                        for j, m in enumerate(matrix.models)},
                 "best_single": ci("best_single"), "random": ci("random"),
                 "oracle_naive": ci("oracle_naive"),
                 "oracle_crossfit": ci("oracle_crossfit") if crossfit is not None else None,
                 "headroom": ci("headroom") if crossfit is not None else None},
    }
    return report


def always_model_accuracy(items: Sequence[AnsweredItem], model: str) -> float:
    """Cached accuracy of the router that always picks `model`."""
    if not items:
        raise BaselineError("no answered items")
    if any(model not in row.answers for row in items):
        raise BaselineError(f"{model!r} has no answers in this data; "
                            f"models present: {sorted(items[0].answers)}")
    return sum(row.answers[model].correct for row in items) / len(items)


def random_router_accuracies(items: Sequence[AnsweredItem], pool_names: Sequence[str],
                             seeds: int) -> list[float]:
    """Cached accuracy of a uniform random router, once per seed (0..seeds-1)."""
    means = matrix_from_answered(items, pool_names).means()
    rows = np.arange(len(means))
    return [float(means[rows, np.random.default_rng(s).integers(0, means.shape[1], len(means))]
                  .mean()) for s in range(seeds)]


def simplest_routers(fitted: Sequence[AnsweredItem], held: Sequence[AnsweredItem],
                     pool_names: Sequence[str]) -> dict[str, Any]:
    """What the simplest routers learnt on `fitted` rows score on `held` rows: the best single
    model, and the category lookup (each category's best model; a category the fitted rows
    lack takes the best single model). With the held rows' oracle, so a head's share of the
    headroom can be set beside the lookup's (`gap_closed`)."""
    kept = matrix_from_answered(held, pool_names).means()
    best, picks = lookup_picks(fitted, [row.item for row in held], pool_names)
    return {"best_single": {"model": pool_names[best], "accuracy": float(kept[:, best].mean())},
            "lookup": float(kept[np.arange(len(kept)), picks].mean()),
            "oracle": float(kept.max(axis=1).mean())}


def lookup_picks(fitted: Sequence[AnsweredItem], items: Sequence[Item],
                 pool_names: Sequence[str]) -> tuple[int, np.ndarray]:
    """(the fitted rows' best single model, each item's pick by the category lookup learnt on
    them): a category the fitted rows lack takes the best single model."""
    fit = matrix_from_answered(fitted, pool_names).means()
    best = int(np.argmax(fit.mean(axis=0)))
    categories = np.array([row.item.category for row in fitted])
    table = {c: int(np.argmax(fit[categories == c].mean(axis=0))) for c in set(categories)}
    return best, np.array([table.get(item.category, best) for item in items], dtype=int)
