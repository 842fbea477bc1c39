"""`tinyrouter serve` on 127.0.0.1 in front of the simulated pool, driven by the official
`openai` client: completions, streams, and each refusal a client must be able to act on."""

from __future__ import annotations

import json

import httpx
import pytest
from kings import TOKEN, make_theta

from evaluator.benchmarks.corpus import load_corpus
from evaluator.errors import UsageError
from evaluator.pool.ledger import verify_ledger
from evaluator.serve import ServeLimits
from evaluator.serve.endpoint import check_binding


@pytest.fixture
def question(tiny_rules) -> str:
    return load_corpus(tiny_rules, ["math500"])[0].item.prompt


def ask(question: str) -> list[dict]:
    return [{"role": "user", "content": question}]


def test_a_completion_says_which_models_and_roles_answered_and_what_it_cost(
        start_server, served_king, openai_client, question, tmp_path):
    server = start_server(served_king)
    raw = openai_client(server).chat.completions.with_raw_response.create(
        model=served_king.model_id, messages=ask(question))
    reply = raw.parse()
    summary = reply.model_extra["tinyrouter"]
    turns = summary["turns"]
    assert reply.model == "tinyrouter/alice-1" and reply.object == "chat.completion"
    assert 1 <= len(turns) <= 5 and reply.usage.model_extra["turns"] == len(turns)
    answer = reply.choices[0].message.content
    assert answer and answer == next(  # the latest Worker output
        t for t in reversed(served_turns(server, question)) if t["role"] == "Worker")["text"]
    assert raw.headers["x-tinyrouter-models"] == ",".join(t["model"] for t in turns)
    assert raw.headers["x-tinyrouter-roles"] == ",".join(t["role"] for t in turns)
    assert int(raw.headers["x-tinyrouter-turns"]) == len(turns)
    cost = reply.usage.model_extra["cost"]
    assert cost > 0 and cost == pytest.approx(sum(t["cost_usd"] for t in turns))
    assert float(raw.headers["x-tinyrouter-cost-usd"]) == pytest.approx(cost, abs=1e-6)
    assert reply.usage.total_tokens == reply.usage.prompt_tokens + reply.usage.completion_tokens
    assert "text" not in turns[0]  # the full transcript only when asked
    ledger = verify_ledger(tmp_path / "serve-ledger.jsonl")  # every paid call, chained
    assert ledger.total_cost_usd == pytest.approx(2 * cost)  # this request and served_turns'


def served_turns(server, question: str) -> list[dict]:
    """The same question again, asking for the transcript (the simulator is deterministic)."""
    import openai

    client = openai.OpenAI(base_url=server.base_url, api_key=TOKEN, max_retries=0)
    reply = client.chat.completions.create(model=server.served.model_id, messages=ask(question),
                                           extra_body={"tinyrouter": {"transcript": True}})
    return reply.model_extra["tinyrouter"]["turns"]


def test_a_stream_is_openais_chunks_ending_in_done(start_server, served_king, openai_client,
                                                   question):
    server = start_server(served_king)
    client = openai_client(server)
    plain = client.chat.completions.create(model=served_king.model_id, messages=ask(question))
    chunks = list(client.chat.completions.create(
        model=served_king.model_id, messages=ask(question), stream=True,
        stream_options={"include_usage": True}))
    assert {c.id for c in chunks} == {chunks[0].id} and chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == plain.choices[0].message.content
    progress = [c.model_extra["tinyrouter"] for c in chunks if "turn" in c.model_extra.get(
        "tinyrouter", {})]
    final = next(c for c in chunks if c.choices and c.choices[0].finish_reason)
    turns = final.model_extra["tinyrouter"]["turns"]
    assert [(p["model"], p["role"]) for p in progress] == [(t["model"], t["role"]) for t in turns]
    assert final.choices[0].finish_reason == "stop"
    assert chunks[-1].choices == [] and chunks[-1].usage.model_extra["cost"] > 0
    # on the wire: `data: {json}` events and the closing `data: [DONE]`
    with httpx.stream("POST", f"{server.base_url}/chat/completions", json={
            "model": served_king.model_id, "messages": ask(question), "stream": True}) as wire:
        body = wire.read().decode()
    assert wire.headers["content-type"] == "text/event-stream"
    events = [e for e in body.split("\n\n") if e]
    assert all(e.startswith("data: ") for e in events) and events[-1] == "data: [DONE]"


@pytest.mark.parametrize(("key", "sent"), [
    ("wrong-token-0123456789abcdef", True),  # a wrong key
    ("", False),  # none at all
])
def test_a_bad_key_is_refused_without_a_call(start_server, served_king, openai_client, question,
                                             key, sent, simulator):
    import openai

    server = start_server(served_king, token=TOKEN)
    client = openai_client(server, key=key) if sent else openai_client(server, key="x")
    headers = {} if sent else {"Authorization": ""}
    with pytest.raises(openai.AuthenticationError) as refused:
        client.chat.completions.create(model=served_king.model_id, messages=ask(question),
                                       extra_headers=headers)
    assert refused.value.status_code == 401 and refused.value.code == "invalid_api_key"
    with pytest.raises(openai.AuthenticationError):
        client.models.list(extra_headers=headers)
    assert simulator.requests == 0
    assert [m.id for m in openai_client(server).models.list()] == [served_king.model_id]
    assert httpx.get(server.base_url.removesuffix("/v1") + "/health").json()["model"] == \
        served_king.model_id  # health asks for no token


def test_an_oversize_request_is_refused_before_it_is_read(start_server, served_king,
                                                          openai_client, simulator):
    import openai

    server = start_server(served_king, limits=ServeLimits(max_request_bytes=4096))
    with pytest.raises(openai.APIStatusError) as refused:
        openai_client(server).chat.completions.create(model=served_king.model_id,
                                                      messages=ask("x" * 5000))
    assert refused.value.status_code == 413 and refused.value.code == "request_too_large"
    assert "at most 4096" in refused.value.message and simulator.requests == 0


@pytest.mark.parametrize(("faults", "status", "code"), [
    (("503", "503"), 503, "pool_unavailable"),  # retried, then given up: the session failed
    (("401",), 502, "pool_error"),  # the operator's key refused: nothing to retry here
])
def test_a_pool_failure_is_an_openai_error_with_a_retry_hint(start_server, served_king,
                                                             openai_client, question, simulator,
                                                             faults, status, code):
    import openai

    server = start_server(served_king)
    simulator.inject(*faults)
    with pytest.raises(openai.APIStatusError) as failed:
        openai_client(server).chat.completions.with_raw_response.create(
            model=served_king.model_id, messages=ask(question))
    error = failed.value
    assert error.status_code == status and error.code == code and error.type == "pool_error"
    assert error.response.headers["retry-after"] == "7" and "retry in 7 s" in error.message
    assert "Traceback" not in error.response.text
    # the server goes on: the next request is answered
    reply = openai_client(server).chat.completions.create(model=served_king.model_id,
                                                          messages=ask(question))
    assert reply.choices[0].message.content


def test_a_pool_failure_mid_stream_ends_it_with_an_error_event(start_server, served_king,
                                                               openai_client, question, simulator):
    import openai

    server = start_server(served_king)
    simulator.inject("503", "503")
    with pytest.raises(openai.APIError, match="retry in 7 s"):
        list(openai_client(server).chat.completions.create(
            model=served_king.model_id, messages=ask(question), stream=True))


@pytest.mark.parametrize(("limits", "code"), [
    (ServeLimits(requests_per_minute=1), "requests_limit_exceeded"),
    (ServeLimits(spend_usd_per_hour=1e-9), "spend_limit_exceeded"),  # the first one spends it
])
def test_a_client_over_its_allowance_is_told_when_to_come_back(start_server, served_king,
                                                               openai_client, question, limits,
                                                               code):
    import openai

    server = start_server(served_king, limits=limits)
    client = openai_client(server)
    client.chat.completions.create(model=served_king.model_id, messages=ask(question))
    with pytest.raises(openai.RateLimitError) as refused:
        client.chat.completions.create(model=served_king.model_id, messages=ask(question))
    assert refused.value.code == code
    assert 1 <= int(refused.value.response.headers["retry-after"]) <= 3600


@pytest.mark.parametrize(("body", "status", "param"), [
    # requests OpenAI refuses, refused the same way
    ({"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}, 404, "model"),
    ({"messages": [{"role": "user", "content": "hi"}]}, 404, "model"),
    ({"model": "M", "messages": []}, 400, "messages"),
    ({"model": "M", "messages": [{"role": "system", "content": "be brief"}]}, 400, "messages"),
    ({"model": "M", "messages": [{"role": "tool", "content": "42"}]}, 400, "messages[0]"),
    ({"model": "M", "messages": [{"role": "user", "content": [{"type": "image_url"}]}]}, 400,
     "messages[0].content"),
    ({"model": "M", "messages": [{"role": "user", "content": "hi"}], "n": 2}, 400, "n"),
    ({"model": "M", "messages": [{"role": "user", "content": "hi"}],
      "tools": [{"type": "function", "function": {"name": "f"}}]}, 400, "tools"),
])
def test_a_malformed_request_is_refused_as_openai_does(start_server, served_king, body, status,
                                                       param, simulator):
    server = start_server(served_king)
    if body.get("model") == "M":
        body = {**body, "model": served_king.model_id}
    response = httpx.post(f"{server.base_url}/chat/completions", json=body)
    assert response.status_code == status
    assert response.json()["error"]["param"] == param and simulator.requests == 0


def test_a_conversation_is_played_as_one_query_and_the_access_log_keeps_no_prompt(
        start_server, served_king, openai_client, access_lines):
    server = start_server(served_king, token=TOKEN)
    reply = openai_client(server).chat.completions.create(
        model=served_king.model_id, messages=[
            {"role": "system", "content": "Answer briefly."},
            {"role": "user", "content": "What is the capital of the secret land?"}])
    assert reply.choices[0].message.content  # the simulator's reply to an unknown question
    line = next(entry for entry in access_lines() if entry["path"] == "/v1/chat/completions")
    assert line["status"] == 200 and line["client"] == "127.0.0.1" and line["messages"] == 2
    assert line["turns"] == len(line["models"]) == len(line["roles"]) >= 1
    assert line["prompt_chars"] == len("System:\nAnswer briefly.\n\nUser:\n"
                                       "What is the capital of the secret land?")
    text = json.dumps(access_lines())
    assert "secret land" not in text and TOKEN not in text


def test_the_prompt_is_logged_only_when_asked(start_server, served_king, openai_client,
                                              access_lines, question):
    server = start_server(served_king, log_prompts=True)
    openai_client(server).chat.completions.create(model=served_king.model_id,
                                                  messages=ask(question))
    assert any(entry.get("prompt") == question for entry in access_lines())


@pytest.mark.parametrize(("host", "token", "refused"), [
    ("127.0.0.1", None, False),
    ("localhost", None, False),
    ("::1", None, False),
    ("0.0.0.0", None, True),  # every interface, no token
    ("192.168.1.5", "", True),
    ("my-host.example", None, True),  # a name may resolve anywhere
    ("0.0.0.0", TOKEN, False),
    ("127.0.0.1", "short", True),  # a token must be worth the name, anywhere
])
def test_binding_beyond_loopback_needs_a_token(host, token, refused):
    if refused:
        with pytest.raises(UsageError, match="TINYROUTER_SERVE_TOKEN"):
            check_binding(host, token)
    else:
        check_binding(host, token)


def test_it_serves_on_ipv6_loopback_too(start_server, served_king):
    server = start_server(served_king, host="::1")
    assert server.base_url.startswith("http://[::1]:")
    health = httpx.get(server.base_url.removesuffix("/v1") + "/health").json()
    assert health["status"] == "ok"


def test_requests_that_arrive_together_share_the_encoders_passes(router, tiny_rules):
    import threading

    import numpy as np

    from evaluator.serve.batcher import RoutingBatcher

    head, scales = make_theta(tiny_rules, router)
    decide = router.bind(np.concatenate([head.ravel(), scales]))
    texts = [f"QUERY:\n{entry.item.prompt}" for entry in load_corpus(tiny_rules, ["mmlu"])[:8]]
    batcher = RoutingBatcher(decide, wait=0.2, length_ratio=100.0)
    found: dict[int, object] = {}
    threads = [threading.Thread(target=lambda i=i: found.update({i: batcher.decide([texts[i]])}))
               for i in range(len(texts))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    batcher.close()
    assert batcher.decided == 8 and batcher.passes < 8
    assert [found[i][0] for i in range(8)] == decide(texts)  # as the router decides them


def test_a_request_past_its_deadline_is_a_timeout_with_a_retry_hint(
        start_server, served_king, openai_client, question, simulator):
    import openai

    simulator.slow_seconds = 2.0
    simulator.inject("slow")
    server = start_server(served_king, limits=ServeLimits(request_timeout=0.5, retry_after=7))
    with pytest.raises(openai.APIStatusError) as late:
        openai_client(server).chat.completions.create(model=served_king.model_id,
                                                      messages=ask(question))
    assert late.value.status_code == 504 and late.value.code == "timeout"
    assert late.value.response.headers["retry-after"] == "7"


def test_a_client_holding_its_connections_cannot_take_the_servers(start_server, served_king,
                                                                 openai_client, question):
    import socket
    import time

    import openai

    server = start_server(served_king, limits=ServeLimits(connections_per_client=1))
    host, port = server.base_url.removeprefix("http://").split("/")[0].split(":")
    idle = socket.create_connection((host, int(port)))  # opens and sends nothing
    try:
        with pytest.raises(openai.APIStatusError) as refused:
            openai_client(server).chat.completions.create(model=served_king.model_id,
                                                          messages=ask(question))
        assert refused.value.status_code == 503 and refused.value.code == "overloaded"
        assert "retry-after" in refused.value.response.headers
    finally:
        idle.close()
    for _ in range(50):  # once its thread has seen the close, the slot is free again
        try:
            openai_client(server).models.list()
            break
        except openai.APIStatusError:
            time.sleep(0.05)
    else:
        pytest.fail("the closed connection's slot was never freed")


@pytest.mark.parametrize(("raw", "status"), [
    (b"BREW /v1/chat/completions HTTP/1.1\r\nHost: x\r\n\r\n", 501),  # no such method
    (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
     b"0\r\n\r\n", 411),  # a body of unknown length
    (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{}", 400),
])
def test_what_is_not_http_the_server_expects_gets_a_json_error(start_server, served_king, raw,
                                                               status):
    import socket

    server = start_server(served_king, limits=ServeLimits(read_timeout=0.5))
    host, port = server.base_url.removeprefix("http://").split("/")[0].split(":")
    with socket.create_connection((host, int(port)), timeout=5) as conn:
        conn.sendall(raw)
        answer = b""
        while chunk := conn.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.split(b" ")[1] == str(status).encode()
    assert "message" in json.loads(body)["error"]
