"""The OpenRouter client: OpenAI-compatible chat completions with retries, bounded concurrency,
usage and cost per call, and one ledger line per paid call.

A call's cost is what the response says it billed (`usage.cost`, one credit per US dollar; a
200 without it is malformed and retried). The network enters through `base_url` (env
`OPENROUTER_BASE_URL`) and `transport`, so tests and the demo talk to the loopback simulator.
The key and message bodies are never logged.
"""

from __future__ import annotations

import asyncio
import dataclasses
import email.utils
import logging
import os
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import httpx

from evaluator import finite, vault
from evaluator.errors import InfrastructureError, OutOfCreditError, PoolError
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

# OpenRouter's normalized finish reasons that change how a returned call counts.
STOP, LENGTH, CONTENT_FILTER, FINISH_ERROR = "stop", "length", "content_filter", "error"
RETRYABLE_STATUS = (408, 409, 429)  # besides every 5xx
# A 402 that is transient: running requests fill the in-flight budget; it comes with Retry-After.
IN_FLIGHT_LIMIT = "openrouter_in_flight_budget"
IN_FLIGHT_REASON = "in_flight_budget_exhausted"
# error.metadata keys of a moderation flag, and error_types of a content refusal.
MODERATION_KEYS = ("reasons", "flagged_input")
REFUSAL_ERROR_TYPES = ("content_policy_violation", "refusal")
GUARDRAIL_MESSAGE = "request blocked"  # how a guardrail's 403 message starts

# Statuses that will not fix themselves, with what the maintainer should do.
FATAL_STATUS = {
    400: "the request was rejected as malformed; check the model slug and parameters",
    401: f"the API key was refused; check {API_KEY_ENV}",
    403: "the key may not use this model; check the key's permissions",
    404: "no such model or endpoint; check the model slug in the rules and the base URL",
}
# What to do about a spending limit, by OpenRouter's error.metadata reason or limit_source.
CREDIT_FIX = {
    "weight_exceeds_budget": "one request's estimated cost exceeds the in-flight budget: "
                             "top up the key's account (or lower max_completion_tokens)",
    IN_FLIGHT_LIMIT: "the in-flight budget is full and no Retry-After came: top up the key's "
                     "account to raise it",
    "openrouter_key_limit": "the key's credit limit is spent: raise it or wait for its reset",
    "openrouter_guardrail_budget": "a guardrail budget is spent: raise it or wait for its reset",
    "openrouter_workspace_budget": "the workspace budget is spent: raise it or wait for its reset",
}
TOP_UP = "the account is out of credit: top up the key's account on OpenRouter"


@dataclass(frozen=True)
class Completion:
    """A call that returned. `cost_usd` is all it billed, failed attempts that reported a cost
    included; `finish_reason` is OpenRouter's normalized one."""

    text: str
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float
    request_id: str
    finish_reason: str = STOP
    reasoning_tokens: int | None = None  # of completion_tokens, when the provider reports it
    replayed: bool = False  # answered from the evaluation's response cache, not the provider

    @property
    def refused(self) -> bool:
        return self.finish_reason == CONTENT_FILTER

    @property
    def truncated(self) -> bool:
        return self.finish_reason == LENGTH


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


class RetryBudget:
    """A deadline for retries, shared by every call of an evaluation: once it has passed, a
    failed call fails for good instead of waiting again."""

    def __init__(self, seconds: float, clock: Callable[[], float] = time.monotonic):
        self.seconds = seconds
        self._clock = clock
        self._deadline = clock() + seconds

    def left(self) -> float:
        return self._deadline - self._clock()


class _Retryable(Exception):
    """One failed attempt that may succeed if tried again; `billed` is a paid attempt's record."""

    def __init__(self, reason: str, retry_after: float | None = None,
                 billed: Completion | None = None):
        super().__init__(reason)
        self.reason = reason
        self.retry_after = retry_after
        self.billed = billed


class OpenRouterClient:
    """Async chat client for the pool; use as `async with OpenRouterClient(...) as client:`."""

    def __init__(self, rules: Competition, base_url: str | None = None,
                 api_key: str | None = None, transport: httpx.AsyncBaseTransport | None = None,
                 ledger: Ledger | None = None,
                 max_concurrency: int = DEFAULT_CONCURRENCY, timeout: float = DEFAULT_TIMEOUT,
                 retry: RetryPolicy | None = None, retry_budget: RetryBudget | None = None,
                 sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep):
        self.base_url = (base_url or os.environ.get(BASE_URL_ENV) or DEFAULT_BASE_URL).rstrip("/")
        key = api_key if api_key is not None else vault.take(API_KEY_ENV)
        if not key and self.base_url == DEFAULT_BASE_URL:
            raise PoolError(f"no OpenRouter API key: set {API_KEY_ENV} "
                            f"(or point {BASE_URL_ENV} at a local simulator)")
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._http = httpx.AsyncClient(base_url=self.base_url, headers=headers,
                                       transport=transport, timeout=httpx.Timeout(timeout))
        self.rules = rules
        self.ledger = ledger
        self.retry = retry or RetryPolicy()
        self.budget = retry_budget or RetryBudget(rules.pool_retry_budget_seconds)
        self._sleep = sleep
        self._slots = asyncio.Semaphore(max_concurrency)

    async def __aenter__(self) -> OpenRouterClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def listed_models(self) -> set[str] | None:
        """The model ids the provider's `/models` lists (free, no key needed), or None when the
        listing cannot be read."""
        try:
            response = await self._http.get("/models")
            data = response.json()
        except (httpx.HTTPError, ValueError):
            return None
        models = data.get("data") if isinstance(data, dict) else None
        if response.status_code != 200 or not isinstance(models, list):
            return None
        return {str(m.get("id")) for m in models if isinstance(m, dict)}

    def request_body(self, model_name: str, messages: list[dict]) -> dict[str, Any]:
        """The chat completions request for a pool model, with the rules' sampling settings."""
        try:
            slug = self.rules.pool_model(model_name).slug
        except KeyError as exc:
            raise PoolError(f"{model_name!r} is not a pool model; the pool is "
                            f"{', '.join(self.rules.pool_names)}") from exc
        return {"model": slug, "messages": messages, "temperature": self.rules.temperature,
                "max_tokens": self.rules.max_completion_tokens,
                "reasoning": {"effort": self.rules.reasoning_effort}}

    async def chat(self, model_name: str, messages: list[dict]) -> Completion:
        """One call, ending as exactly one of (after OpenRouter's documented error shapes):

        - an answer: a 200 that finished any other way than below;
        - a refusal (`Completion.refused`): a 403 moderation or guardrail block, a 400 whose
          `error.metadata.error_type` is a content-policy violation or refusal, or a 200 with
          `finish_reason: "content_filter"`;
        - a truncated answer (`Completion.truncated`): a 200 with `finish_reason: "length"`;
        - `InfrastructureError`: a retryable failure (408, 409, 429, 5xx, a 402 naming the
          in-flight budget with `Retry-After`, a 200 carrying an `error` or `finish_reason:
          "error"`, a broken body, a timeout, a dropped connection) still failing after
          `RetryPolicy.attempts`, or once the `RetryBudget` is spent;
        - `OutOfCreditError` (any other 402, or a 403 naming a spending limit) or `PoolError`
          (another 4xx): fatal at once.

        Ledger lines: the 200 it returned, and each failed attempt that reported a cost."""
        body = self.request_body(model_name, messages)
        wasted, attempt = 0.0, 0  # what failed attempts billed
        while True:
            attempt += 1
            try:
                async with self._slots:
                    completion, billed = await self._attempt(model_name, body)
            except _Retryable as failure:
                if failure.billed is not None:
                    await self._record(model_name, failure.billed)
                    wasted += failure.billed.cost_usd
                wait = self.retry.delay(attempt, failure.retry_after)
                if attempt == self.retry.attempts or wait > self.budget.left():
                    raise self._give_up(model_name, attempt, failure.reason, wasted) from None
                log.warning("%s: %s; retry %d/%d in %.1fs", model_name, failure.reason, attempt,
                            self.retry.attempts - 1, wait)
                await self._sleep(wait)
                continue
            if billed:
                await self._record(model_name, completion)
            if completion.refused or completion.truncated:
                log.info("%s: the call ended with finish_reason %s", model_name,
                         completion.finish_reason)
            return dataclasses.replace(completion, cost_usd=completion.cost_usd + wasted)

    def _give_up(self, model_name: str, attempt: int, last: str,
                 wasted: float) -> InfrastructureError:
        why = (f"gave up after {attempt} attempts" if attempt == self.retry.attempts else
               f"the retry budget of {self.budget.seconds:.0f}s is spent after {attempt} attempts")
        return InfrastructureError(f"{model_name}: {why}; last failure: {last}", cost_usd=wasted)

    async def _record(self, model_name: str, completion: Completion) -> None:
        if self.ledger is not None:
            await asyncio.to_thread(
                self.ledger.append, model_name, completion.prompt_tokens,
                completion.completion_tokens, completion.cost_usd, completion.request_id)

    async def _attempt(self, model_name: str, body: dict[str, Any]) -> tuple[Completion, bool]:
        """The call's completion, and whether it was billed (any 200 is)."""
        started = time.monotonic()
        try:
            response = await self._http.post("/chat/completions", json=body)
        except httpx.TimeoutException as exc:
            raise _Retryable(f"timed out ({type(exc).__name__})") from exc
        except httpx.TransportError as exc:
            raise _Retryable(f"connection failed ({type(exc).__name__})") from exc
        log.debug("%s: HTTP %d in %.2fs", model_name, response.status_code,
                  time.monotonic() - started)
        if response.status_code != 200:
            _raise_unless_refused(model_name, response)
            return self._refusal(model_name, response), False
        return self._completion(model_name, response), True

    def _refusal(self, model_name: str, response: httpx.Response) -> Completion:
        """A moderation or guardrail block: nothing was generated and nothing billed."""
        log.info("%s: HTTP %d: the provider refused the request", model_name,
                 response.status_code)
        return Completion(text="", prompt_tokens=0, completion_tokens=0, cost_usd=0.0,
                          request_id=str(response.headers.get("x-request-id") or ""),
                          finish_reason=CONTENT_FILTER)

    def _completion(self, model_name: str, response: httpx.Response) -> Completion:
        try:
            data = response.json()
        except ValueError as exc:
            raise _Retryable("HTTP 200 with a body that is not JSON") from exc
        if not isinstance(data, dict) or "error" in data:
            error = data.get("error") if isinstance(data, dict) else None
            raise _Retryable(f"HTTP 200 carrying an error{_provider_message(error)}")
        choices = data.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise _Retryable("HTTP 200 with no choices")
        choice = choices[0]
        usage = data.get("usage")
        if not isinstance(usage, dict) or "cost" not in usage:  # OpenRouter bills every answer
            raise _Retryable("HTTP 200 without usage.cost, which OpenRouter reports on every "
                             "response")
        try:
            text = choice["message"].get("content") or ""
            prompt_tokens = finite.count(usage.get("prompt_tokens", 0), "usage.prompt_tokens")
            completion_tokens = finite.count(usage.get("completion_tokens", 0),
                                             "usage.completion_tokens")
            cost = finite.amount(usage["cost"], "usage.cost")
        except (KeyError, TypeError, AttributeError, ValueError) as exc:
            raise _Retryable(f"HTTP 200 with a malformed completion ({exc})") from exc
        request_id = str(data.get("id") or response.headers.get("x-request-id") or "")
        finish = choice.get("finish_reason")
        details = usage.get("completion_tokens_details")
        reasoning = details.get("reasoning_tokens") if isinstance(details, dict) else None
        completion = Completion(text=str(text), prompt_tokens=prompt_tokens,
                                completion_tokens=completion_tokens, cost_usd=float(cost),
                                request_id=request_id,
                                finish_reason=finish if isinstance(finish, str) else STOP,
                                reasoning_tokens=reasoning if type(reasoning) is int else None)
        if finish == FINISH_ERROR or choice.get("error"):
            raise _Retryable(f"HTTP 200 whose generation failed"
                             f"{_provider_message(choice.get('error'))}",
                             billed=completion)
        return completion


def _raise_unless_refused(model_name: str, response: httpx.Response) -> None:
    """Returns for a content refusal; otherwise raises what the status means."""
    status = response.status_code
    error = _error_object(response)
    metadata = error.get("metadata") if isinstance(error.get("metadata"), dict) else {}
    if status == 402:
        _raise_for_credit(model_name, response, metadata)
    if status == 403 and "limit_source" in metadata:
        raise OutOfCreditError(f"{model_name}: HTTP 403: {_credit_fix(metadata)}")
    if status in (400, 403) and _is_refusal(status, error, metadata):
        return
    if status in RETRYABLE_STATUS or status >= 500:
        raise _Retryable(f"HTTP {status}", _retry_after(response))
    hint = FATAL_STATUS.get(status, "the request was refused")
    raise PoolError(f"{model_name}: HTTP {status}: {hint}{_provider_message(error)}")


def _raise_for_credit(model_name: str, response: httpx.Response, metadata: dict) -> None:
    """A 402: retryable when it names the in-flight budget and says when; else out of credit."""
    retry_after = _retry_after(response)
    in_flight = (metadata.get("limit_source") == IN_FLIGHT_LIMIT
                 or metadata.get("reason") == IN_FLIGHT_REASON)
    if in_flight and retry_after is not None:
        raise _Retryable("HTTP 402: the in-flight spending budget is full", retry_after)
    raise OutOfCreditError(f"{model_name}: HTTP 402: {_credit_fix(metadata)}")


def _credit_fix(metadata: dict) -> str:
    known = [CREDIT_FIX[key] for key in (metadata.get("reason"), metadata.get("limit_source"))
             if isinstance(key, str) and key in CREDIT_FIX]
    return known[0] if known else TOP_UP


def _is_refusal(status: int, error: dict, metadata: dict) -> bool:
    """A moderation flag or guardrail block (403), or a content-policy refusal (400)."""
    if metadata.get("error_type") in REFUSAL_ERROR_TYPES:
        return True
    if status != 403:
        return False
    message = str(error.get("message") or "").lower()
    return any(key in metadata for key in MODERATION_KEYS) or message.startswith(GUARDRAIL_MESSAGE)


def _error_object(response: httpx.Response) -> dict:
    try:
        error = response.json().get("error")
    except (ValueError, AttributeError):
        return {}
    return error if isinstance(error, dict) else {}


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


def _provider_message(error: Any) -> str:
    """The provider's short message from an error object (never its metadata, which can quote
    the request), for an actionable error."""
    message = error.get("message") if isinstance(error, dict) else error
    return f" ({str(message)[:200]})" if message else ""
