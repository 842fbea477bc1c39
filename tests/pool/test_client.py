"""The OpenRouter client against the loopback simulator: usage, cost, retries and every fault."""

from __future__ import annotations

import asyncio
import json
import logging

import httpx
import pytest
from pool_fakes import GEMINI, QWEN, FakeTime, Sleeps

from evaluator.errors import InfrastructureError, OutOfCreditError, PoolError
from evaluator.pool.client import OpenRouterClient, RetryBudget, RetryPolicy
from evaluator.pool.ledger import Ledger, verify_ledger
from evaluator.rules import OFFICIAL

MESSAGES = [{"role": "user", "content": "Question 4: what is 4 plus 4?"}]


def chat(client: OpenRouterClient, model: str = QWEN, messages=MESSAGES):
    async def go():
        async with client:
            return await client.chat(model, messages)
    return asyncio.run(go())


def test_a_completion_carries_text_usage_cost_and_a_ledger_line(make_client, tmp_path):
    ledger = Ledger(tmp_path / "ledger.jsonl")
    completion = chat(make_client(ledger=ledger))
    assert "\\boxed{" in completion.text
    assert completion.prompt_tokens > 0 and completion.completion_tokens > 0
    price = OFFICIAL.pool_model(QWEN)
    assert completion.cost_usd == pytest.approx(
        price.cost_usd(completion.prompt_tokens, completion.completion_tokens))
    assert completion.request_id.startswith("gen-sim-")
    line = json.loads((tmp_path / "ledger.jsonl").read_text())
    assert (line["model"], line["prompt_tokens"], line["cost_usd"], line["request_id"]) == (
        QWEN, completion.prompt_tokens, completion.cost_usd, completion.request_id)


def test_the_request_follows_the_rules():
    seen = {}

    def handler(request: httpx.Request) -> httpx.Response:
        seen["url"], seen["auth"] = str(request.url), request.headers.get("authorization")
        seen["body"] = json.loads(request.content)
        return httpx.Response(200, json={"id": "r1", "choices": [
            {"message": {"content": "hi"}}], "usage": {"prompt_tokens": 1000,
                                                       "completion_tokens": 2000, "cost": 0.0123}})

    client = OpenRouterClient(api_key="sk-x", transport=httpx.MockTransport(handler), rules=OFFICIAL)
    completion = chat(client, GEMINI)
    assert seen["url"] == "https://openrouter.ai/api/v1/chat/completions"
    assert seen["auth"] == "Bearer sk-x"
    body = seen["body"]
    assert body["model"] == OFFICIAL.pool_model(GEMINI).slug
    assert body["temperature"] == OFFICIAL.temperature
    assert body["max_tokens"] == OFFICIAL.max_completion_tokens
    assert body["reasoning"] == {"effort": OFFICIAL.reasoning_effort}
    assert "usage" not in body  # `usage: {include: true}` is deprecated: cost comes unasked
    # what the response says it billed, not the rules' price table
    assert completion.cost_usd == 0.0123 != OFFICIAL.pool_model(GEMINI).cost_usd(1000, 2000)


def test_base_url_and_key_come_from_the_environment(monkeypatch, base_url):
    monkeypatch.setenv("OPENROUTER_BASE_URL", base_url)
    monkeypatch.delenv("OPENROUTER_API_KEY", raising=False)
    assert chat(OpenRouterClient(rules=OFFICIAL)).text


def test_openrouter_without_a_key_is_refused(monkeypatch):
    monkeypatch.delenv("OPENROUTER_BASE_URL", raising=False)
    monkeypatch.delenv("OPENROUTER_API_KEY", raising=False)
    with pytest.raises(PoolError, match="OPENROUTER_API_KEY"):
        OpenRouterClient(rules=OFFICIAL)


def test_an_unknown_model_is_refused_before_any_call(make_client, simulator):
    with pytest.raises(PoolError, match="not a pool model"):
        chat(make_client(), "gpt-5")
    assert simulator.requests == 0


def ledger_lines(path) -> int:
    return verify_ledger(path).entries if path.exists() else 0


# fault -> the billed attempts among two failed ones (a billed attempt gets its ledger line)
RECOVERABLE = [
    # throttled and server errors
    ("429", 0), ("500", 0), ("502", 0), ("503", 0),
    # the in-flight budget is full: a 402 with metadata and Retry-After
    ("402-in-flight", 0),
    # broken answers
    ("malformed", 0), ("empty", 0), ("error-body", 0),
    # numbers no arithmetic can use: refused where they enter, never ledgered
    ("usage-overflow", 0), ("usage-negative", 0), ("cost-nan", 0),
    # a generation that failed midway was billed
    ("finish-error", 2),
    # transport failures
    ("drop", 0), ("slow", 0), ("hang", 0),
]


@pytest.mark.parametrize(("fault", "billed"), RECOVERABLE)
def test_the_client_survives_each_fault(make_client, simulator, sleeps, tmp_path, fault, billed):
    path = tmp_path / "ledger.jsonl"
    simulator.inject(fault, fault)
    completion = chat(make_client(ledger=Ledger(path), timeout=0.3))
    assert "\\boxed{" in completion.text
    assert not (completion.refused or completion.truncated)
    assert simulator.requests == 3
    assert len(sleeps) == 2
    assert ledger_lines(path) == 1 + billed  # only the paid calls
    assert completion.cost_usd == pytest.approx(verify_ledger(path).total_cost_usd)


@pytest.mark.slow
@pytest.mark.parametrize(("fault", "billed"), RECOVERABLE)
def test_a_fault_that_persists_is_an_infrastructure_failure(make_client, simulator, sleeps,
                                                            tmp_path, fault, billed):
    path = tmp_path / "ledger.jsonl"
    simulator.inject(*[fault] * 4)
    with pytest.raises(InfrastructureError, match=f"{QWEN}: gave up after 4 attempts") as caught:
        chat(make_client(ledger=Ledger(path), timeout=0.3))
    assert simulator.requests == 4 and len(sleeps) == 3
    assert ledger_lines(path) == 2 * billed
    assert caught.value.cost_usd == pytest.approx(
        verify_ledger(path).total_cost_usd if billed else 0.0)


# fault -> (refused, truncated, ledger lines): the call returns and is not retried
ENDINGS = [
    # a moderation block: nothing generated, nothing billed
    ("403-moderation", True, False, 0),
    # the provider's content filter cut a billed answer
    ("finish-content-filter", True, False, 1),
    # reasoning used the whole token budget: content null
    ("finish-length", False, True, 1),
]


@pytest.mark.parametrize(("fault", "refused", "truncated", "lines"), ENDINGS)
def test_refusals_and_truncations_end_the_call_as_returned(make_client, simulator, sleeps,
                                                            tmp_path, fault, refused,
                                                            truncated, lines):
    path = tmp_path / "ledger.jsonl"
    simulator.inject(fault)
    completion = chat(make_client(ledger=Ledger(path)))
    assert (completion.refused, completion.truncated) == (refused, truncated)
    assert completion.text == ""
    assert simulator.requests == 1 and sleeps == []
    assert ledger_lines(path) == lines
    if truncated:
        assert completion.completion_tokens == OFFICIAL.max_completion_tokens


def test_retry_after_is_honoured(make_client, simulator, sleeps):
    simulator.inject("429")
    chat(make_client())
    assert sleeps == [pytest.approx(simulator.retry_after)]


FATAL = [
    # the maintainer must fix something; retrying cannot help
    ("400", PoolError, "malformed"),
    ("401", PoolError, "OPENROUTER_API_KEY"),
    ("403", PoolError, "key"),
    ("404", PoolError, "model slug"),
    # out of credit, with no in-flight metadata: a distinct error, so an evaluation can void
    ("402", OutOfCreditError, "top up the key"),
]


@pytest.mark.parametrize(("status", "error", "hint"), FATAL)
def test_fatal_statuses_raise_at_once_with_a_hint(make_client, simulator, sleeps, tmp_path,
                                                  status, error, hint):
    simulator.inject(status)
    with pytest.raises(error, match=f"{QWEN}: HTTP {status}: .*{hint}") as caught:
        chat(make_client(ledger=Ledger(tmp_path / "ledger.jsonl")))
    assert not isinstance(caught.value, InfrastructureError)
    assert simulator.requests == 1 and sleeps == []
    assert not (tmp_path / "ledger.jsonl").exists()


def reply(status: int, error: dict | None = None, headers: dict | None = None,
          choice: dict | None = None) -> httpx.Response:
    if error is not None:
        return httpx.Response(status, json={"error": error}, headers=headers)
    return httpx.Response(status, json={"id": "r", "choices": [choice], "usage": {
        "prompt_tokens": 5, "completion_tokens": 7, "cost": 0.01}}, headers=headers)


def flagged(status: int, message: str, **metadata) -> dict:
    return {"code": status, "message": message, "metadata": metadata}


IN_FLIGHT = dict(reason="in_flight_budget_exhausted", limit_source="openrouter_in_flight_budget")
ANSWER = {"message": {"content": "\\boxed{8}"}, "finish_reason": "stop"}

# OpenRouter's documented shapes -> how the first attempt counts (the second one answers)
SHAPES = [
    # 402: transient only with in-flight metadata and Retry-After
    (reply(402, flagged(402, "in flight", **IN_FLIGHT), {"Retry-After": "3"}), "retried"),
    (reply(402, flagged(402, "in flight", **IN_FLIGHT)), OutOfCreditError),
    (reply(402, flagged(402, "too big", reason="weight_exceeds_budget",
                        limit_source="openrouter_credits")), OutOfCreditError),
    (reply(402, flagged(402, "key limit", limit_source="openrouter_key_limit")),
     OutOfCreditError),
    (reply(402, {"code": 402, "message": "Insufficient credits"}), OutOfCreditError),
    # 403: moderation and guardrail blocks are refusals; a spent budget or a permission is not
    (reply(403, flagged(403, "flagged", reasons=["x"], flagged_input="y", provider_name="p",
                        model_slug="m")), "refused"),
    (reply(403, flagged(403, "Request blocked: prompt injection patterns detected",
                        patterns=["ignore"])), "refused"),
    (reply(403, flagged(403, "Budget limit exceeded", limit_source="openrouter_workspace_budget")),
     OutOfCreditError),
    (reply(403, {"code": 403, "message": "Forbidden"}), PoolError),
    # 400: a content-policy refusal is a refusal; anything else a broken request
    (reply(400, flagged(400, "flagged", error_type="content_policy_violation")), "refused"),
    (reply(400, flagged(400, "bad", error_type="invalid_request")), PoolError),
    # 408 and 5xx are retried
    (reply(408, {"code": 408, "message": "timeout"}), "retried"),
    (reply(504, {"code": 504, "message": "timeout"}), "retried"),
    # 200s: finish_reason decides
    (reply(200, choice={"message": {"content": None}, "finish_reason": "length"}), "truncated"),
    (reply(200, choice={"message": {"content": "cut"}, "finish_reason": "content_filter"}),
     "refused"),
    (reply(200, choice={"message": {"content": "half"}, "finish_reason": "error"}), "retried"),
    (reply(200, choice={"message": {"content": "half"}, "error": {"code": 502}}), "retried"),
    (reply(200, {"code": 502, "message": "Provider returned error"}), "retried"),
    (reply(200, choice={"message": {"content": "\\boxed{8}"}, "finish_reason": "tool_calls"}),
     "answered"),
    (reply(200, choice={"message": {"content": "\\boxed{8}"}}), "answered"),
    # every answer reports its cost: one without it is malformed, and retried
    (httpx.Response(200, json={"id": "r", "choices": [ANSWER],
                               "usage": {"prompt_tokens": 5, "completion_tokens": 7}}), "retried"),
    (httpx.Response(200, json={"id": "r", "choices": [ANSWER]}), "retried"),
]


@pytest.mark.parametrize(("first", "expected"), SHAPES)
def test_each_documented_shape_has_one_outcome(first, expected):
    replies = [first, reply(200, choice=ANSWER)]
    sleeps = Sleeps()
    client = OpenRouterClient(api_key="k", rules=OFFICIAL, sleep=sleeps,
                              transport=httpx.MockTransport(lambda request: replies.pop(0)))
    if isinstance(expected, type):
        with pytest.raises(PoolError) as caught:
            chat(client)
        assert type(caught.value) is expected
        assert len(replies) == 1 and sleeps == []
        return
    completion = chat(client)
    status = ("refused" if completion.refused else "truncated" if completion.truncated
              else "retried" if replies == [] else "answered")
    assert status == expected
    assert len(sleeps) == (expected == "retried")


def test_retries_stop_when_the_time_budget_is_spent(make_client, simulator):
    time = FakeTime()
    budget = RetryBudget(5.0, clock=time.clock)
    simulator.inject("429", "429", "429")  # each asks for a 2 s wait
    with pytest.raises(InfrastructureError, match="retry budget of 5s is spent after 3 attempts"):
        chat(make_client(retry_budget=budget, sleep=time.sleep))
    assert time.waits == [2.0, 2.0] and simulator.requests == 3


def test_the_time_budget_is_shared_by_every_call(make_client, simulator):
    time = FakeTime()
    budget = RetryBudget(3.0, clock=time.clock)
    simulator.inject("429")
    chat(make_client(retry_budget=budget, sleep=time.sleep))  # waits 2 of the 3 s
    simulator.inject("429")
    with pytest.raises(InfrastructureError, match="retry budget"):
        chat(make_client(retry_budget=budget, sleep=time.sleep))
    assert time.waits == [2.0]


def test_the_default_time_budget_is_the_rules():
    client = OpenRouterClient(api_key="k", rules=OFFICIAL, base_url="http://127.0.0.1:9")
    assert client.budget.seconds == OFFICIAL.pool_retry_budget_seconds
    assert 0 < client.budget.left() <= OFFICIAL.pool_retry_budget_seconds


def test_giving_up_names_the_model_and_last_failure_and_keeps_the_ledger_valid(
        make_client, simulator, tmp_path):
    path = tmp_path / "ledger.jsonl"
    client = make_client(ledger=Ledger(path))

    async def go():
        async with client:
            await client.chat(QWEN, MESSAGES)
            simulator.inject("500", "503", "429", "500")
            await client.chat(GEMINI, MESSAGES)

    with pytest.raises(InfrastructureError, match=f"{GEMINI}: gave up after 4 attempts.*HTTP 500"):
        asyncio.run(go())
    assert verify_ledger(path).entries == 1


LOGGED = [
    # retries
    ("500", "429"),
    # a moderation error quotes the flagged input back
    ("403-moderation",),
    # a failed generation carries partial text
    ("finish-error", "finish-error"),
    # out of credit ends the call with an error
    ("402",),
]


@pytest.mark.parametrize("faults", LOGGED)
def test_the_key_and_bodies_never_reach_the_log_or_errors(make_client, simulator, caplog,
                                                          faults):
    simulator.inject(*faults)
    with caplog.at_level(logging.DEBUG):
        try:
            chat(make_client())
            error = ""
        except PoolError as exc:
            error = str(exc)
    assert caplog.records  # the endings were logged
    for text in (caplog.text, error):
        assert "sk-test-secret" not in text
        assert "plus" not in text and "boxed" not in text


def test_concurrency_is_bounded():
    in_flight, peak = 0, 0

    async def handler(request: httpx.Request) -> httpx.Response:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        await asyncio.sleep(0.01)
        in_flight -= 1
        return httpx.Response(200, json={"id": "r", "choices": [{"message": {"content": "ok"}}],
                                         "usage": {"prompt_tokens": 1, "completion_tokens": 1,
                                                   "cost": 1e-6}})

    async def go():
        async with OpenRouterClient(api_key="k", transport=httpx.MockTransport(handler),
                                    max_concurrency=3, rules=OFFICIAL) as client:
            return await asyncio.gather(*(client.chat(QWEN, MESSAGES) for _ in range(12)))

    assert len(asyncio.run(go())) == 12
    assert peak == 3


def test_concurrent_calls_write_one_valid_chain(make_client, tmp_path):
    path = tmp_path / "ledger.jsonl"
    client = make_client(ledger=Ledger(path))

    async def go():
        async with client:
            return await asyncio.gather(*(
                client.chat(QWEN, [{"role": "user", "content": f"Question {i}: what is {i} "
                                                               f"plus {i}?"}])
                for i in range(30)))

    completions = asyncio.run(go())
    summary = verify_ledger(path)
    assert summary.entries == 30
    assert summary.total_cost_usd == pytest.approx(sum(c.cost_usd for c in completions))


def test_backoff_grows_and_stays_under_the_cap():
    policy = RetryPolicy(attempts=10, base_delay=1.0, max_delay=8.0)
    assert all(0 <= policy.delay(n, None) <= min(8.0, 2 ** (n - 1)) for n in range(1, 10))
    assert policy.delay(1, 30.0) == 8.0  # a Retry-After beyond the cap waits the cap


def test_the_pool_package_exports_its_public_names():
    import evaluator.pool

    assert set(evaluator.pool.__all__) == {
        "GENESIS", "Completion", "CorpusItem", "Ledger", "LedgerSummary", "OpenRouterClient",
        "RetryBudget", "RetryPolicy", "Simulator", "SimulatorServer", "bundled_simulator", "read_corpus",
        "serve_simulator", "verify_ledger"}
