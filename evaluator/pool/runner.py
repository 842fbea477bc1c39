"""Live questions through the pool: the evaluator's and live training's real runner."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from evaluator.benchmarks import get_benchmark
from evaluator.loop import Decide, LiveOutcome, play
from evaluator.pool.client import OpenRouterClient
from evaluator.rules import Competition
from evaluator.types import Item

LiveRunner = Callable[[str, Sequence[Item], Decide], list[LiveOutcome]]


def pool_runner(pool_url: str | None, rules: Competition) -> LiveRunner:
    """Play one benchmark's live questions through the pool client and grade them."""

    def run(bench: str, items: Sequence[Item], decide: Decide) -> list[LiveOutcome]:
        async def go() -> list[LiveOutcome]:
            async with OpenRouterClient(rules, base_url=pool_url) as client:
                return await play(list(items), get_benchmark(bench), decide, client, rules)

        return asyncio.run(go())

    return run
