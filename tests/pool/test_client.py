"""The OpenRouter client against the loopback simulator: usage, cost, retries and every fault."""

from __future__ import annotations

import asyncio
import json
import logging

import httpx
import pytest
from pool_fakes import GEMINI, QWEN

from evaluator.errors import PoolError
from evaluator.pool.client import OpenRouterClient, RetryPolicy
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
                                                       "completion_tokens": 2000}})

    client = OpenRouterClient(api_key="sk-x", transport=httpx.MockTransport(handler), rules=OFFICIAL)
    completion = chat(client, GEMINI)
    assert seen["url"] == "https://openrouter.ai/api/v1/chat/completions"
    assert seen["auth"] == "Bearer sk-x"
    body = seen["body"]
    assert body["model"] == OFFICIAL.pool_model(GEMINI).slug
    assert body["temperature"] == OFFICIAL.temperature
    assert body["max_tokens"] == OFFICIAL.max_completion_tokens
    assert body["reasoning"] == {"effort": OFFICIAL.reasoning_effort}
    # no cost in the response: the rules' price table
    assert completion.cost_usd == pytest.approx(OFFICIAL.pool_model(GEMINI).cost_usd(1000, 2000))


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


RECOVERABLE = [
    # throttled and server errors
    "429", "500", "502", "503",
    # broken answers
    "malformed", "empty",
    # transport failures
    "drop", "slow",
]


@pytest.mark.parametrize("fault", RECOVERABLE)
def test_the_client_survives_each_fault(make_client, simulator, sleeps, tmp_path, fault):
    ledger = Ledger(tmp_path / "ledger.jsonl")
    simulator.inject(fault, fault)
    completion = chat(make_client(ledger=ledger, timeout=0.3))
    assert "\\boxed{" in completion.text
    assert simulator.requests == 3
    assert len(sleeps) == 2
    assert verify_ledger(tmp_path / "ledger.jsonl").entries == 1  # only the paid call


def test_retry_after_is_honoured(make_client, simulator, sleeps):
    simulator.inject("429")
    chat(make_client())
    assert sleeps == [pytest.approx(simulator.retry_after)]


FATAL = [
    # the maintainer must fix something; retrying cannot help
    ("400", "malformed"),
    ("401", "OPENROUTER_API_KEY"),
    ("402", "credit"),
    ("403", "key"),
    ("404", "model slug"),
]


@pytest.mark.parametrize(("status", "hint"), FATAL)
def test_fatal_statuses_raise_at_once_with_a_hint(make_client, simulator, sleeps, tmp_path,
                                                  status, hint):
    simulator.inject(status)
    with pytest.raises(PoolError, match=f"{QWEN}: HTTP {status}: .*{hint}"):
        chat(make_client(ledger=Ledger(tmp_path / "ledger.jsonl")))
    assert simulator.requests == 1 and sleeps == []
    assert not (tmp_path / "ledger.jsonl").exists()


def test_giving_up_names_the_model_and_last_failure_and_keeps_the_ledger_valid(
        make_client, simulator, tmp_path):
    path = tmp_path / "ledger.jsonl"
    client = make_client(ledger=Ledger(path))

    async def go():
        async with client:
            await client.chat(QWEN, MESSAGES)
            simulator.inject("500", "503", "429", "500")
            await client.chat(GEMINI, MESSAGES)

    with pytest.raises(PoolError, match=f"{GEMINI}: gave up after 4 attempts.*HTTP 500"):
        asyncio.run(go())
    assert verify_ledger(path).entries == 1


def test_the_key_and_bodies_never_reach_the_log(make_client, simulator, caplog):
    simulator.inject("500", "429")
    with caplog.at_level(logging.DEBUG):
        chat(make_client())
    assert caplog.records  # the retries were logged
    assert "sk-test-secret" not in caplog.text
    assert "plus" not in caplog.text


def test_concurrency_is_bounded():
    in_flight, peak = 0, 0

    async def handler(request: httpx.Request) -> httpx.Response:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        await asyncio.sleep(0.01)
        in_flight -= 1
        return httpx.Response(200, json={"id": "r", "choices": [{"message": {"content": "ok"}}],
                                         "usage": {"prompt_tokens": 1, "completion_tokens": 1}})

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
        "RetryPolicy", "Simulator", "SimulatorServer", "bundled_simulator", "read_corpus",
        "serve_simulator", "verify_ledger"}
