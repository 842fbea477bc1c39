"""Live questions through the pool: the evaluator's and live training's real runner."""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
from collections.abc import Sequence
from typing import Any

from evaluator.benchmarks import get_benchmark
from evaluator.loop import Decide, LiveOutcome, LiveRunner, play
from evaluator.pool.client import Completion, OpenRouterClient, RetryBudget
from evaluator.pool.ledger import Ledger
from evaluator.rules import Competition
from evaluator.types import Item


class SharedResponses:
    """A client that answers a call it has already made from memory: within one evaluation
    the king, playing after the challenger, replays the challenger's exact call (same model,
    role and transcript) wherever both heads decide alike, so the crown test compares
    decisions, not the provider's sampling noise. A replay bills nothing and says it is one
    (`Completion.replayed`); a call that failed is not remembered."""

    def __init__(self, client: Any, seen: dict[str, Completion]):
        self.client, self.seen = client, seen

    @staticmethod
    def key(model_name: str, messages: list[dict]) -> str:
        return hashlib.sha256(json.dumps([model_name, messages], sort_keys=True).encode()).hexdigest()

    async def chat(self, model_name: str, messages: list[dict]) -> Completion:
        key = self.key(model_name, messages)
        if key in self.seen:
            return dataclasses.replace(self.seen[key], prompt_tokens=0, completion_tokens=0,
                                       cost_usd=0.0, replayed=True)
        completion = await self.client.chat(model_name, messages)
        self.seen[key] = completion
        return completion


def pool_runner(pool_url: str | None, rules: Competition,
                retry_budget_seconds: float | None = None,
                ledger: Ledger | None = None, share_responses: bool = False) -> LiveRunner:
    """Play one benchmark's live questions through the pool client and grade them.

    Every run shares one retry budget (default `rules.pool_retry_budget_seconds`), started by
    the first run: the evaluation's live play, both contenders and every benchmark. With a
    `ledger`, every billed call is appended to it. With `share_responses` (one evaluation),
    every run replays the calls an earlier run made (`SharedResponses`)."""
    seconds = rules.pool_retry_budget_seconds if retry_budget_seconds is None else retry_budget_seconds
    budget: list[RetryBudget] = []
    seen: dict[str, Completion] = {}

    def run(bench: str, items: Sequence[Item], decide: Decide) -> list[LiveOutcome]:
        if not budget:
            budget.append(RetryBudget(seconds))

        async def go() -> list[LiveOutcome]:
            async with OpenRouterClient(rules, base_url=pool_url, retry_budget=budget[0],
                                        ledger=ledger) as client:
                caller = SharedResponses(client, seen) if share_responses else client
                return await play(list(items), get_benchmark(bench), decide, caller, rules)

        return asyncio.run(go())

    return run
