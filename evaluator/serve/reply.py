"""One chat request through the evaluator's own loop (`loop.run_sessions`) against the pool.

A conversation has no benchmark to extract an answer for, so every non-empty output counts
as one: the final reply is what `loop.select_answer` picks, the latest non-empty Worker
output, else the latest non-empty output of any role (a Thinker's plan when no Worker ran).
Everything else is the evaluator's: the head decides each turn on the same transcript text,
the roles' messages, the early stop on an accepted verdict, the turn cap.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from evaluator.errors import InfrastructureError, PoolError, TinyRouterError
from evaluator.loop import FAILED, REFUSED, TRUNCATED, Decide, Trajectory, run_sessions
from evaluator.pool.client import OpenRouterClient, RetryBudget, RetryPolicy
from evaluator.pool.ledger import Ledger
from evaluator.rules import Competition
from evaluator.serve.allowance import ServeLimits
from evaluator.serve.wire import POOL, SERVER, TIMEOUT, ApiError
from evaluator.types import Decision, Item

log = logging.getLogger(__name__)

CONVERSATION = "chat"  # an Item's benchmark when it is a user's conversation
POOL_RETRY = RetryPolicy(attempts=3, base_delay=1.0, max_delay=10.0)  # a person is waiting
GONE = 499  # the client hung up (nginx's code): nothing is sent, the log says so


class FreeForm:
    """The loop's grader for a conversation: the prompt as written, any text an answer."""

    def render_prompt(self, item: Item) -> str:
        return item.prompt

    def extract(self, response: str) -> str | None:
        return response if response.strip() else None

    def grade_many(self, pairs: list[tuple[str, Any]]) -> list[Any]:
        raise TinyRouterError("a conversation has no reference answer to grade against")


FREE_FORM = FreeForm()


class ClientGone(Exception):
    """The client closed the connection mid-stream: the session stops before its next call."""


class _Metered:
    """The pool client, counting what this request's calls billed (failed ones included)."""

    def __init__(self, client: OpenRouterClient):
        self.client, self.cost_usd = client, 0.0

    async def chat(self, model_name: str, messages: list[dict]) -> Any:
        try:
            completion = await self.client.chat(model_name, messages)
        except InfrastructureError as exc:
            self.cost_usd += exc.cost_usd
            raise
        self.cost_usd += completion.cost_usd
        return completion


@dataclass
class Reply:
    """How one request ended: a finished session, or the error the client gets; and what its
    calls billed and how long the head took to decide."""

    request_id: str
    trajectory: Trajectory | None = None
    error: ApiError | None = None
    cost_usd: float = 0.0
    routing_seconds: float = 0.0
    decisions: list[Decision] = field(default_factory=list)

    @property
    def answer(self) -> str:
        return (self.trajectory.answer if self.trajectory else None) or ""

    @property
    def finish_reason(self) -> str:
        t = self.trajectory
        if t is not None and t.stop == REFUSED:
            return "content_filter"
        if t is not None and t.answer_turn is not None and t.turns[t.answer_turn].status == TRUNCATED:
            return "length"
        return "stop"

    def usage(self) -> dict[str, Any]:
        """OpenAI's usage, summed over the turns, with the cost (OpenRouter's `cost` field)."""
        t = self.trajectory
        prompt, completion = (t.prompt_tokens, t.completion_tokens) if t else (0, 0)
        return {"prompt_tokens": prompt, "completion_tokens": completion,
                "total_tokens": prompt + completion, "cost": self.cost_usd,
                "turns": t.n_turns if t else 0}

    def summary(self, transcript: bool = False) -> dict[str, Any]:
        """Which models and roles answered, turn by turn, and how the session ended."""
        t = self.trajectory
        turns = [{"turn": k, "model": turn.model, "role": turn.role, "verdict": turn.verdict,
                  "status": turn.status, "cost_usd": turn.cost_usd,
                  **({"text": turn.text} if transcript else {})}
                 for k, turn in enumerate(t.turns if t else (), start=1)]
        return {"turns": turns, "answer_turn": None if t is None or t.answer_turn is None
                else t.answer_turn + 1, "stop": t.stop if t else None,
                "cost_usd": self.cost_usd, "routing_ms": round(1000 * self.routing_seconds, 3)}

    def headers(self) -> dict[str, str]:
        turns = self.trajectory.turns if self.trajectory else []
        return {"X-TinyRouter-Turns": str(len(turns)),
                "X-TinyRouter-Models": ",".join(turn.model for turn in turns),
                "X-TinyRouter-Roles": ",".join(turn.role for turn in turns),
                "X-TinyRouter-Cost-USD": f"{self.cost_usd:.6f}"}


class ConversationPlayer:
    """Plays conversations through the loop: one event loop and pool client per request (on
    the request's thread), one shared `decide` (thread-safe: the batcher) and ledger."""

    def __init__(self, rules: Competition, decide: Decide, pool_url: str | None,
                 ledger: Ledger | None, limits: ServeLimits, retry: RetryPolicy = POOL_RETRY):
        self.rules, self._decide, self.pool_url = rules, decide, pool_url
        self.ledger, self.limits, self.retry = ledger, limits, retry

    def client(self) -> OpenRouterClient:
        """A client for one request: its calls time out as any pool call does, its retries
        never wait past the request's deadline."""
        return OpenRouterClient(self.rules, base_url=self.pool_url, ledger=self.ledger,
                                retry=self.retry,
                                retry_budget=RetryBudget(self.limits.request_timeout))

    def answer(self, request_id: str, query: str,
               on_decision: Callable[[int, Decision], None] | None = None) -> Reply:
        """The reply to one conversation; every failure becomes the reply's error."""
        reply = Reply(request_id)

        def decide(transcripts: list[str]) -> list[Decision]:
            started = time.perf_counter()
            decisions = self._decide(transcripts)
            reply.routing_seconds += time.perf_counter() - started
            reply.decisions.append(decisions[0])
            if on_decision is not None:
                on_decision(len(reply.decisions), decisions[0])
            return decisions

        item = Item(benchmark=CONVERSATION, id=request_id, prompt=query, reference=None)
        try:
            reply.trajectory = asyncio.run(self._play(item, decide, reply))
        except Exception as exc:  # the client gets a shaped error, the log the details
            reply.error = self._error(exc, reply)
            return reply
        if reply.trajectory.stop == FAILED:
            reply.error = ApiError(
                503, POOL, f"the pool could not answer turn {reply.trajectory.n_turns + 1} "
                f"({reply.trajectory.failure}); retry in {self.limits.retry_after} s",
                "pool_unavailable", retry_after=self.limits.retry_after)
        return reply

    async def _play(self, item: Item, decide: Decide, reply: Reply) -> Trajectory:
        async with self.client() as client:
            meter = _Metered(client)
            try:
                return (await asyncio.wait_for(
                    run_sessions([item], FREE_FORM, decide, meter, self.rules),
                    self.limits.request_timeout))[0]
            finally:
                reply.cost_usd = meter.cost_usd

    def _error(self, exc: Exception, reply: Reply) -> ApiError:
        wait = self.limits.retry_after
        if isinstance(exc, ClientGone):
            return ApiError(GONE, SERVER, "the client closed the connection")
        if isinstance(exc, TimeoutError):
            return ApiError(504, TIMEOUT, f"the session ran past the server's "
                            f"{self.limits.request_timeout:g} s limit after "
                            f"{len(reply.decisions)} turns; retry in {wait} s", "timeout",
                            retry_after=wait)
        if isinstance(exc, PoolError):
            log.error("request %s: the pool refused the server: %s", reply.request_id, exc)
            return ApiError(502, POOL, "the pool refused the server's calls (its operator's "
                            f"key, credit or pool address); retry in {wait} s", "pool_error",
                            retry_after=wait)
        log.error("request %s failed", reply.request_id, exc_info=exc)
        return ApiError(500, SERVER, f"the server failed on request {reply.request_id}; its "
                        "log has the details", "server_error")
