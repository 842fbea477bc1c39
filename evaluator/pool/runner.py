"""Live questions through the pool: the evaluator's and live training's real runner."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from evaluator.benchmarks import get_benchmark
from evaluator.loop import Decide, LiveOutcome, play
from evaluator.pool.client import OpenRouterClient, RetryBudget
from evaluator.pool.ledger import Ledger
from evaluator.rules import Competition
from evaluator.types import Item

LiveRunner = Callable[[str, Sequence[Item], Decide], list[LiveOutcome]]


def pool_runner(pool_url: str | None, rules: Competition,
                retry_budget_seconds: float | None = None,
                ledger: Ledger | None = None) -> LiveRunner:
    """Play one benchmark's live questions through the pool client and grade them.

    Every run shares one retry budget (default `rules.pool_retry_budget_seconds`), started by
    the first run: the evaluation's live play, both contenders and every benchmark. With a
    `ledger`, every billed call is appended to it."""
    seconds = rules.pool_retry_budget_seconds if retry_budget_seconds is None else retry_budget_seconds
    budget: list[RetryBudget] = []

    def run(bench: str, items: Sequence[Item], decide: Decide) -> list[LiveOutcome]:
        if not budget:
            budget.append(RetryBudget(seconds))

        async def go() -> list[LiveOutcome]:
            async with OpenRouterClient(rules, base_url=pool_url, retry_budget=budget[0],
                                        ledger=ledger) as client:
                return await play(list(items), get_benchmark(bench), decide, client, rules)

        return asyncio.run(go())

    return run
