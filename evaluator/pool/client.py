"""The OpenRouter client: OpenAI-compatible chat completions with retries, bounded concurrency,
usage and cost per call, and one ledger line per paid call.

The network enters through `base_url` (env `OPENROUTER_BASE_URL`) and `transport`, so tests
and the demo talk to the loopback simulator. The key and message bodies are never logged.
"""

from __future__ import annotations

import asyncio
import email.utils
import logging
import os
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import httpx

from evaluator.errors import PoolError
from evaluator.pool.ledger import Ledger
from evaluator.rules import Competition

log = logging.getLogger(__name__)
# httpx logs every request at INFO; an evaluation or the demo sends thousands.
logging.getLogger("httpx").setLevel(logging.WARNING)

DEFAULT_BASE_URL = "https://openrouter.ai/api/v1"
BASE_URL_ENV = "OPENROUTER_BASE_URL"
API_KEY_ENV = "OPENROUTER_API_KEY"
DEFAULT_TIMEOUT = 180.0
DEFAULT_CONCURRENCY = 8

# Statuses that will not fix themselves, with what the maintainer should do.
FATAL_STATUS = {
    400: "the request was rejected as malformed; check the model slug and parameters",
    401: f"the API key was refused; check {API_KEY_ENV}",
    402: "the account has no credit left; add credit on OpenRouter",
    403: "the key may not use this model (or a moderation block); check the key's limits",
    404: "no such model or endpoint; check the model slug in the rules and the base URL",
}


@dataclass(frozen=True)
class Completion:
    text: str
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float
    request_id: str


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff with full jitter; `Retry-After` is honoured up to `max_delay`."""

    attempts: int = 6
    base_delay: float = 1.0
    max_delay: float = 60.0

    def delay(self, attempt: int, retry_after: float | None) -> float:
        backoff = random.uniform(0, min(self.max_delay, self.base_delay * 2 ** (attempt - 1)))
        if retry_after is not None:
            return min(self.max_delay, max(retry_after, backoff))
        return backoff


class _Retryable(Exception):
    """One failed attempt that may succeed if tried again."""

    def __init__(self, reason: str, retry_after: float | None = None):
        super().__init__(reason)
        self.reason = reason
        self.retry_after = retry_after


class OpenRouterClient:
    """Async chat client for the pool; use as `async with OpenRouterClient(...) as client:`."""

    def __init__(self, rules: Competition, base_url: str | None = None,
                 api_key: str | None = None, transport: httpx.AsyncBaseTransport | None = None,
                 ledger: Ledger | None = None,
                 max_concurrency: int = DEFAULT_CONCURRENCY, timeout: float = DEFAULT_TIMEOUT,
                 retry: RetryPolicy | None = None,
                 sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep):
        self.base_url = (base_url or os.environ.get(BASE_URL_ENV) or DEFAULT_BASE_URL).rstrip("/")
        key = api_key if api_key is not None else os.environ.get(API_KEY_ENV, "")
        if not key and self.base_url == DEFAULT_BASE_URL:
            raise PoolError(f"no OpenRouter API key: set {API_KEY_ENV} "
                            f"(or point {BASE_URL_ENV} at a local simulator)")
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._http = httpx.AsyncClient(base_url=self.base_url, headers=headers,
                                       transport=transport, timeout=httpx.Timeout(timeout))
        self.rules = rules
        self.ledger = ledger
        self.retry = retry or RetryPolicy()
        self._sleep = sleep
        self._slots = asyncio.Semaphore(max_concurrency)

    async def __aenter__(self) -> OpenRouterClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    def request_body(self, model_name: str, messages: list[dict]) -> dict[str, Any]:
        """The chat completions request for a pool model, with the rules' sampling settings."""
        try:
            slug = self.rules.pool_model(model_name).slug
        except KeyError as exc:
            raise PoolError(f"{model_name!r} is not a pool model; the pool is "
                            f"{', '.join(self.rules.pool_names)}") from exc
        return {"model": slug, "messages": messages, "temperature": self.rules.temperature,
                "max_tokens": self.rules.max_completion_tokens,
                "reasoning": {"effort": self.rules.reasoning_effort},
                "usage": {"include": True}}

    async def chat(self, model_name: str, messages: list[dict]) -> Completion:
        """One completion, retried on transient failures; raises PoolError when it gives up."""
        body = self.request_body(model_name, messages)
        last = "no attempt"
        for attempt in range(1, self.retry.attempts + 1):
            try:
                async with self._slots:
                    completion = await self._attempt(model_name, body)
            except _Retryable as failure:
                last = failure.reason
                if attempt == self.retry.attempts:
                    break
                wait = self.retry.delay(attempt, failure.retry_after)
                log.warning("%s: %s; retry %d/%d in %.1fs", model_name, last, attempt,
                            self.retry.attempts - 1, wait)
                await self._sleep(wait)
                continue
            if self.ledger is not None:
                await asyncio.to_thread(
                    self.ledger.append, model_name, completion.prompt_tokens,
                    completion.completion_tokens, completion.cost_usd, completion.request_id)
            return completion
        raise PoolError(f"{model_name}: gave up after {self.retry.attempts} attempts; "
                        f"last failure: {last}")

    async def _attempt(self, model_name: str, body: dict[str, Any]) -> Completion:
        started = time.monotonic()
        try:
            response = await self._http.post("/chat/completions", json=body)
        except httpx.TimeoutException as exc:
            raise _Retryable(f"timed out ({type(exc).__name__})") from exc
        except httpx.TransportError as exc:
            raise _Retryable(f"connection failed ({type(exc).__name__})") from exc
        log.debug("%s: HTTP %d in %.2fs", model_name, response.status_code,
                  time.monotonic() - started)
        status = response.status_code
        if status in FATAL_STATUS or (400 <= status < 500 and status not in (408, 409, 429)):
            hint = FATAL_STATUS.get(status, "the request was refused")
            raise PoolError(f"{model_name}: HTTP {status}: {hint}"
                            f"{_provider_message(response)}")
        if status != 200:
            raise _Retryable(f"HTTP {status}", _retry_after(response))
        return self._completion(model_name, response)

    def _completion(self, model_name: str, response: httpx.Response) -> Completion:
        try:
            data = response.json()
        except ValueError as exc:
            raise _Retryable("HTTP 200 with a body that is not JSON") from exc
        if not isinstance(data, dict) or "error" in data:
            raise _Retryable(f"HTTP 200 carrying an error{_provider_message(response)}")
        choices = data.get("choices")
        if not isinstance(choices, list) or not choices:
            raise _Retryable("HTTP 200 with no choices")
        try:
            text = choices[0]["message"].get("content") or ""
            usage = data.get("usage") or {}
            prompt_tokens = int(usage.get("prompt_tokens", 0))
            completion_tokens = int(usage.get("completion_tokens", 0))
        except (KeyError, TypeError, AttributeError, ValueError) as exc:
            raise _Retryable("HTTP 200 with a malformed completion") from exc
        cost = usage.get("cost")
        if not isinstance(cost, (int, float)) or isinstance(cost, bool) or cost < 0:
            cost = self.rules.pool_model(model_name).cost_usd(prompt_tokens, completion_tokens)
        request_id = str(data.get("id") or response.headers.get("x-request-id") or "")
        return Completion(text=str(text), prompt_tokens=prompt_tokens,
                          completion_tokens=completion_tokens, cost_usd=float(cost),
                          request_id=request_id)


def _retry_after(response: httpx.Response) -> float | None:
    """Seconds from a `Retry-After` header (delta seconds or an HTTP date), if any."""
    value = response.headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _provider_message(response: httpx.Response) -> str:
    """The provider's short error message (never the request), for an actionable error."""
    try:
        error = response.json().get("error")
        message = error.get("message") if isinstance(error, dict) else error
    except (ValueError, AttributeError):
        return ""
    return f" ({str(message)[:200]})" if message else ""
