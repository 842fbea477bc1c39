"""Live fitness: each candidate's argmax router played through the multi-turn loop, ledgered."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from evaluator.benchmarks import get_benchmark
from evaluator.loop import play
from evaluator.pool.client import OpenRouterClient
from evaluator.pool.ledger import Ledger
from evaluator.rules import Competition
from evaluator.train.data import TrainingSet
from evaluator.types import Item

LiveFitness = Callable[[Sequence[np.ndarray], int], np.ndarray]
LIVE_STREAM = 1  # keeps live draws apart from the minibatch's random stream


def live_weight(rules: Competition) -> float:
    """Live accuracy's share of the fitness: as the score weighs it against cached accuracy."""
    return rules.weight_live / (rules.weight_cached + rules.weight_live)


def live_items(data: TrainingSet, generation: int, seed: int,
               per_benchmark: int) -> dict[str, list[Item]]:
    """One generation's live questions, per benchmark, shared by every candidate."""
    rng = np.random.default_rng([seed, generation, LIVE_STREAM])
    picked = {}
    for b, name in enumerate(data.benchmarks):
        pool = np.flatnonzero(data.benchmark_of == b)
        chosen = rng.choice(pool, size=min(per_benchmark, len(pool)), replace=False)
        picked[name] = [data.rows[i].item for i in np.sort(chosen)]
    return picked


def pool_live_fitness(data: TrainingSet, router: Any, pool_url: str | None, ledger: Path,
                      rules: Competition, seed: int, per_benchmark: int) -> LiveFitness:
    """Live accuracy of each candidate through the pool (`router`: a coordinator Router)."""
    book = Ledger(ledger)

    async def score(theta: np.ndarray, picked: dict[str, list[Item]], client: Any) -> float:
        correct = []
        for name, items in picked.items():
            outcomes = await play(items, get_benchmark(name), router.bind(theta), client, rules)
            correct += [o.correct for o in outcomes]
        return float(np.mean(correct))

    def fitness(thetas: Sequence[np.ndarray], generation: int) -> np.ndarray:
        picked = live_items(data, generation, seed, per_benchmark)

        async def run() -> list[float]:
            async with OpenRouterClient(rules, base_url=pool_url, ledger=book) as client:
                return list(await asyncio.gather(*(score(t, picked, client) for t in thetas)))

        return np.array(asyncio.run(run()))

    return fitness
