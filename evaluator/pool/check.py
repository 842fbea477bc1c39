"""`tinyrouter pool check`: one cheap call per pool model through the real client.

Before spending money on collection or live training, a miner (or a maintainer before an
evaluation) checks that the key works, has credit, that every slug exists and answers, and
what one call costs. The listing comes from `/models` (free); each model then gets one short
Worker-style question. Failures are reported per model, never as a traceback.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import asdict, dataclass
from typing import Any

from evaluator.errors import PoolError
from evaluator.pool.client import OpenRouterClient, RetryPolicy
from evaluator.rules import Competition

PING = [{"role": "system", "content": "You are the Worker. Answer in one word."},
        {"role": "user", "content": "Reply with the single word: ready"}]
QUICK_RETRY = RetryPolicy(attempts=2, base_delay=0.5, max_delay=2.0)


@dataclass(frozen=True)
class ModelCheck:
    """How one pool model answered the check; `problem` is None when it worked."""

    model: str
    slug: str
    listed: bool | None  # on the provider's /models listing (None: the listing failed)
    seconds: float | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    reasoning_tokens: int | None = None
    cost_usd: float | None = None
    finish_reason: str | None = None
    answer: str | None = None
    problem: str | None = None

    @property
    def ok(self) -> bool:
        return self.problem is None

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ok": self.ok}


async def check_model(client: OpenRouterClient, model: str, listed: set[str] | None,
                      rules: Competition) -> ModelCheck:
    slug = rules.pool_model(model).slug
    on_list = None if listed is None else slug in listed
    started = time.monotonic()
    try:
        completion = await client.chat(model, PING)
    except PoolError as exc:
        return ModelCheck(model, slug, on_list, problem=str(exc))
    seconds = round(time.monotonic() - started, 3)
    problem = None
    if completion.refused:
        problem = "the provider blocked the request (moderation or a guardrail)"
    elif not completion.text.strip():
        problem = f"an empty answer (finish reason {completion.finish_reason})"
    elif on_list is False:
        problem = f"{slug} answers but is not on the provider's /models listing"
    return ModelCheck(model, slug, on_list, seconds, completion.prompt_tokens,
                      completion.completion_tokens, completion.reasoning_tokens,
                      completion.cost_usd, completion.finish_reason,
                      completion.text.strip()[:80], problem)


async def check_pool(rules: Competition, base_url: str | None = None,
                     api_key: str | None = None) -> list[ModelCheck]:
    """One check per pool model, in pool order (the calls run concurrently)."""
    async with OpenRouterClient(rules, base_url=base_url, api_key=api_key,
                                retry=QUICK_RETRY) as client:
        listed = await client.listed_models()
        return list(await asyncio.gather(*(check_model(client, m, listed, rules)
                                           for m in rules.pool_names)))


def reasoning_note(check: ModelCheck, rules: Competition) -> str:
    """Whether the reasoning setting shows in the reply's usage."""
    if check.reasoning_tokens is None:
        return f"reasoning tokens not reported (asked for effort {rules.reasoning_effort!r})"
    return (f"{check.reasoning_tokens} reasoning tokens at effort {rules.reasoning_effort!r}"
            if check.reasoning_tokens else
            f"no reasoning tokens although effort {rules.reasoning_effort!r} was asked for")
