"""The loopback simulator: personas, determinism, plans and verdicts, the HTTP shape, the CLI."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys

import httpx
import pytest
from pool_fakes import DEEPSEEK, GEMINI, PERSONAS, QWEN, FakeMath, make_corpus

from evaluator.benchmarks.corpus import read_corpus
from evaluator.benchmarks.math500 import extract_answer
from evaluator.benchmarks.mmlu import extract_letter
from evaluator.commands.pool import load_inputs, parse_fault_rates
from evaluator.errors import CorpusError, UsageError
from evaluator.loop import Turn, model_messages, truncate_output
from evaluator.pool.simulator import (
    JUDGED,
    NO_WORK,
    PLANS,
    Simulator,
    bundled_simulator,
    serve_simulator,
)
from evaluator.rules import OFFICIAL

BENCH = FakeMath()


def turn(role: str, model: str, text: str) -> Turn:
    return Turn(model=model, role=role, text=text, shown=truncate_output(text, OFFICIAL))


def worker_accuracy(sim: Simulator, model: str, category: str, before=()) -> float:
    entries = [e for e in sim.entries if e.item.category == category]
    right = 0
    for entry in entries:
        messages = model_messages(entry.item, BENCH, "Worker", list(before))
        right += sim.answer(model, messages) == entry.right
    return right / len(entries)


def verifier_accuracy(sim: Simulator, model: str) -> float:
    hits = 0
    for i, entry in enumerate(sim.entries):
        shown = entry.right if i % 2 else entry.wrong
        messages = model_messages(entry.item, BENCH, "Verifier", [turn("Worker", DEEPSEEK, shown)])
        hits += sim.answer(model, messages) == JUDGED[shown == entry.right]
    return hits / len(sim.entries)


def test_worker_accuracy_follows_the_persona_skill_per_category(simulator):
    assert worker_accuracy(simulator, QWEN, "algebra") > 0.8
    assert worker_accuracy(simulator, QWEN, "geometry") < 0.35
    assert worker_accuracy(simulator, GEMINI, "geometry") > 0.7


def test_answers_are_deterministic_in_the_seed(corpus):
    def answers(seed):
        sim = Simulator(corpus, PERSONAS, seed=seed, rules=OFFICIAL)
        return [sim.answer(DEEPSEEK, model_messages(e.item, BENCH, "Worker", [])) for e in corpus]

    assert answers(1) == answers(1)
    assert answers(1) != answers(2)


def test_a_plan_helps_the_worker(simulator):
    plan = [turn("Thinker", GEMINI, PLANS["math500"])]
    alone = worker_accuracy(simulator, DEEPSEEK, "geometry")
    assert worker_accuracy(simulator, DEEPSEEK, "geometry", plan) > alone + 0.1


def test_a_stronger_persona_judges_more_accurately():
    sim = Simulator(make_corpus(400), PERSONAS, seed=3, rules=OFFICIAL)
    # on algebra qwen is strong (0.9) and gemini weak (0.3)
    sim.entries = [e for e in sim.entries if e.item.category == "algebra"]
    assert verifier_accuracy(sim, QWEN) > verifier_accuracy(sim, GEMINI) + 0.15


def test_a_verifier_with_no_worker_output_asks_for_revision(simulator, corpus):
    plan = [turn("Thinker", QWEN, PLANS["math500"])]
    assert simulator.answer(QWEN, model_messages(corpus[0].item, BENCH, "Verifier", plan)) \
        == NO_WORK


@pytest.mark.parametrize("text", [*PLANS.values(), *JUDGED.values(), NO_WORK])
def test_plans_and_verdicts_hold_no_gradable_answer(text):
    assert extract_answer(text) is None
    assert extract_letter(text) is None


def test_an_unknown_question_gets_a_reply(simulator):
    assert simulator.answer(QWEN, [{"role": "user", "content": "Who are you?"}])


# over HTTP, with a client that is not ours ------------------------------------------------


def test_the_response_has_the_openai_shape(base_url, corpus):
    body = {"model": OFFICIAL.pool_model(QWEN).slug,
            "messages": [{"role": "user", "content": corpus[3].item.prompt}]}
    response = httpx.post(f"{base_url}/chat/completions", json=body)
    assert response.status_code == 200
    data = response.json()
    assert data["choices"][0]["message"]["content"] in (corpus[3].right, corpus[3].wrong)
    usage = data["usage"]
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    assert usage["cost"] == pytest.approx(OFFICIAL.pool_model(QWEN).cost_usd(
        usage["prompt_tokens"], usage["completion_tokens"]))
    assert data["id"] and data["model"] == body["model"]


def test_cost_comes_on_every_answer_unasked_and_the_deprecated_option_changes_nothing(
        base_url, corpus):
    """OpenRouter reports usage and cost on every response; `usage: {include: true}` is
    deprecated and has no effect, so the fake neither needs nor rewards it."""
    body = {"model": OFFICIAL.pool_model(GEMINI).slug, "reasoning": {"effort": "low"},
            "messages": [{"role": "user", "content": corpus[5].item.prompt}]}
    plain = httpx.post(f"{base_url}/chat/completions", json=body).json()
    asked = httpx.post(f"{base_url}/chat/completions",
                       json=body | {"usage": {"include": True}}).json()
    assert plain["usage"]["cost"] > 0
    assert {k: v for k, v in asked.items() if k != "created"} == {
        k: v for k, v in plain.items() if k != "created"}


def test_models_are_listed_with_the_openai_and_openrouter_fields(base_url):
    listing = httpx.get(f"{base_url}/models").json()
    assert listing["object"] == "list"
    data = listing["data"]
    assert [m["id"] for m in data] == [m.slug for m in OFFICIAL.pool]
    for entry, model in zip(data, OFFICIAL.pool, strict=True):
        # what the OpenAI client's Model needs
        assert entry["object"] == "model" and isinstance(entry["created"], int)
        assert entry["owned_by"] == model.slug.split("/")[0]
        # OpenRouter's: the name, the window and the USD price per token, as strings
        assert entry["name"] == model.name and entry["canonical_slug"] == model.slug
        assert entry["context_length"] > OFFICIAL.max_completion_tokens
        assert float(entry["pricing"]["prompt"]) == pytest.approx(model.usd_per_m_prompt / 1e6)
        assert float(entry["pricing"]["completion"]) == pytest.approx(
            model.usd_per_m_completion / 1e6)
        assert "e" not in entry["pricing"]["prompt"].lower()  # plain decimals, as OpenRouter has them


BAD_REQUESTS = [
    # not JSON, not a chat request, not a pool model
    (b"{oops", 400),
    (json.dumps({"model": "qwen/qwen3.5-35b-a3b"}).encode(), 400),
    (json.dumps({"model": "openai/gpt-5", "messages": []}).encode(), 404),
]


@pytest.mark.parametrize(("content", "status"), BAD_REQUESTS)
def test_bad_requests_get_an_error_object(base_url, content, status):
    response = httpx.post(f"{base_url}/chat/completions", content=content)
    assert response.status_code == status
    assert response.json()["error"]["message"]


def test_unknown_faults_are_refused(simulator):
    with pytest.raises(ValueError, match="unknown faults"):
        simulator.inject("418")


# the faults ------------------------------------------------------------------------------


def post(base_url, corpus, timeout=5.0) -> httpx.Response:
    body = {"model": OFFICIAL.pool_model(QWEN).slug, "max_tokens": 4096,
            "messages": [{"role": "user", "content": corpus[3].item.prompt}]}
    return httpx.post(f"{base_url}/chat/completions", json=body, timeout=timeout)


def error_of(response: httpx.Response) -> dict:
    return response.json()["error"]


def choice_of(response: httpx.Response) -> dict:
    return response.json()["choices"][0]


def billed(response: httpx.Response) -> bool:
    return response.json()["usage"]["cost"] > 0


# fault -> (status, what else holds): every ending the client's policy names
FAULT_SHAPES = [
    # throttled, with Retry-After (the fixture's 2 s)
    ("429", 429, lambda r: r.headers["retry-after"] == "2"),
    ("503", 503, lambda r: r.headers["retry-after"] == "2"),
    ("500", 500, lambda r: "retry-after" not in r.headers),
    # out of credit, and the in-flight budget that is not
    ("402", 402, lambda r: "metadata" not in error_of(r) and "retry-after" not in r.headers),
    ("402-in-flight", 402, lambda r: error_of(r)["metadata"]["limit_source"]
     == "openrouter_in_flight_budget" and r.headers["retry-after"] == "2"),
    # a moderation flag quotes at most 100 characters of the input
    ("403-moderation", 403, lambda r: error_of(r)["metadata"]["reasons"]
     and 0 < len(error_of(r)["metadata"]["flagged_input"]) <= 103),
    # 200s that are not answers
    ("error-body", 200, lambda r: "choices" not in r.json() and error_of(r)["message"]),
    ("finish-error", 200, lambda r: choice_of(r)["finish_reason"] == "error"
     and choice_of(r)["error"]["code"] == 502 and choice_of(r)["message"]["content"]
     and billed(r)),
    ("finish-length", 200, lambda r: choice_of(r)["finish_reason"] == "length"
     and choice_of(r)["message"]["content"] is None
     and r.json()["usage"]["completion_tokens"] == 4096 and billed(r)),
    ("finish-content-filter", 200, lambda r: choice_of(r)["finish_reason"] == "content_filter"
     and choice_of(r)["message"]["content"] is None and billed(r)),
    ("empty", 200, lambda r: r.json()["choices"] == [] and "usage" not in r.json()),
]


@pytest.mark.parametrize(("fault", "status", "holds"), FAULT_SHAPES)
def test_each_fault_has_its_documented_shape(simulator, base_url, corpus, fault, status, holds):
    simulator.inject(fault)
    response = post(base_url, corpus)
    assert response.status_code == status
    assert holds(response)
    assert post(base_url, corpus).status_code == 200  # one request, one fault


def test_a_failed_generation_keeps_part_of_the_answer(simulator, base_url, corpus):
    simulator.inject("finish-error")
    partial = choice_of(post(base_url, corpus))["message"]["content"]
    assert any(whole.startswith(partial) and len(partial) < len(whole)
               for whole in (corpus[3].right, corpus[3].wrong))


def test_a_hung_request_outlasts_the_client_timeout(simulator, base_url, corpus):
    simulator.inject("hang")
    with pytest.raises(httpx.ReadTimeout):
        post(base_url, corpus, timeout=0.2)
    assert post(base_url, corpus).status_code == 200


def request(i: int) -> bytes:
    return json.dumps({"model": QWEN, "messages": [{"role": "user", "content": f"q{i}"}]}).encode()


def draws(sim: Simulator, n: int = 400, repeats: int = 1) -> list[str | None]:
    return [sim.next_fault(request(i)) for i in range(n) for _ in range(repeats)]


def test_fault_rates_are_met_and_deterministic_in_the_seed(corpus):
    rates = {"500": 0.1, "finish-length": 0.05}
    seen = draws(Simulator(corpus, PERSONAS, rules=OFFICIAL, seed=3, fault_rates=rates))
    assert 0.06 < seen.count("500") / len(seen) < 0.14
    assert 0.02 < seen.count("finish-length") / len(seen) < 0.08
    assert set(seen) == {None, "500", "finish-length"}
    again = Simulator(corpus, PERSONAS, rules=OFFICIAL, seed=3, fault_rates=rates)
    assert draws(again) == seen
    other = Simulator(corpus, PERSONAS, rules=OFFICIAL, seed=4, fault_rates=rates)
    assert draws(other) != seen


def test_a_retried_request_draws_again(corpus):
    sim = Simulator(corpus, PERSONAS, rules=OFFICIAL, fault_rates={"500": 0.5})
    seen = draws(sim, n=50, repeats=4)
    per_request = [seen[i:i + 4] for i in range(0, len(seen), 4)]
    assert any(len(set(tries)) > 1 for tries in per_request)


def test_queued_faults_come_before_drawn_ones(corpus):
    sim = Simulator(corpus, PERSONAS, rules=OFFICIAL, fault_rates={"500": 1.0})
    sim.inject("hang")
    assert [sim.next_fault(request(0)), sim.next_fault(request(0))] == ["hang", "500"]


BAD_RATES = [
    # unknown kinds, rates outside [0, 1], and shares adding up past 1
    ({"418": 0.1}, "unknown faults"),
    ({"500": 1.5}, r"\[0, 1\]"),
    ({"500": -0.1}, r"\[0, 1\]"),
    ({"500": 0.6, "429": 0.6}, "more than 1"),
]


@pytest.mark.parametrize(("rates", "message"), BAD_RATES)
def test_bad_fault_rates_are_refused(corpus, rates, message):
    with pytest.raises(ValueError, match=message):
        Simulator(corpus, PERSONAS, rules=OFFICIAL, fault_rates=rates)


def test_a_client_rides_out_drawn_faults(corpus, make_client, sleeps):
    sim = Simulator(corpus, PERSONAS, rules=OFFICIAL, seed=1,
                    fault_rates={"500": 0.1, "429": 0.05, "finish-error": 0.05})
    with serve_simulator(sim) as url:
        async def go():
            async with make_client(base_url=url) as client:
                return await asyncio.gather(*(client.chat(QWEN, [{
                    "role": "user", "content": e.item.prompt}]) for e in corpus[:40]))

        completions = asyncio.run(go())
    assert all(c.text in (e.right, e.wrong) for c, e in zip(completions, corpus, strict=False))
    assert sim.requests == 40 + len(sleeps) > 40


# the corpus file and the command ---------------------------------------------------------


def write_corpus(path, entries) -> None:
    path.write_text("".join(json.dumps({**e.item.to_dict(), "responses": {
        "right": e.right, "wrong": e.wrong}}) + "\n" for e in entries))


def test_read_corpus_round_trips_and_names_a_bad_line(tmp_path, corpus):
    path = tmp_path / "math500.jsonl"
    write_corpus(path, corpus[:5])
    assert read_corpus(path) == corpus[:5]
    path.write_text(path.read_text() + '{"id": "x"}\n')
    with pytest.raises(CorpusError, match=r"math500\.jsonl:6"):
        read_corpus(path)


@pytest.mark.slow  # a subprocess importing the whole CLI
def test_the_simulate_command_serves_until_stopped(tmp_path, corpus):
    write_corpus(tmp_path / "corpus.jsonl", corpus[:10])
    (tmp_path / "personas.json").write_text(json.dumps(PERSONAS))
    process = subprocess.Popen(
        [sys.executable, "-m", "evaluator", "pool", "simulate", "--corpus",
         str(tmp_path / "corpus.jsonl"), "--personas", str(tmp_path / "personas.json"),
         "--seed", "5"], stdout=subprocess.PIPE, text=True,
        # as Ctrl-C finds a foreground command: a shell's background job (a CI script run
        # with `&`) ignores SIGINT, and its children inherit that
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        process.stdout.readline()
        url = process.stdout.readline().split()[2]
        body = {"model": QWEN, "messages": [{"role": "user", "content": corpus[2].item.prompt}]}
        reply = httpx.post(f"{url}/chat/completions", json=body, timeout=10).json()
        assert reply["choices"][0]["message"]["content"] in (corpus[2].right, corpus[2].wrong)
    finally:
        process.send_signal(signal.SIGINT)
        try:
            assert process.wait(timeout=10) == 0
        finally:
            process.kill()


FAULT_OPTIONS = [
    # repeatable KIND=RATE
    (["500=0.05"], {"500": 0.05}),
    (["500=0.05", "finish-length=0.01", "hang=0"], {"500": 0.05, "finish-length": 0.01,
                                                    "hang": 0.0}),
    ([], {}),
]


@pytest.mark.parametrize(("options", "rates"), FAULT_OPTIONS)
def test_fault_options_parse(options, rates):
    assert parse_fault_rates(options) == rates


BAD_FAULT_OPTIONS = [
    # not KIND=RATE
    ["500"], ["500=often"], ["=0.1"],
    # an unknown kind, a rate outside [0, 1], shares past 1
    ["teapot=0.1"], ["500=1.5"], ["500=nan"], ["500=0.6", "429=0.6"],
]


@pytest.mark.parametrize("options", BAD_FAULT_OPTIONS)
def test_bad_fault_options_are_usage_errors(options):
    with pytest.raises(UsageError, match="--fault"):
        parse_fault_rates(options)


class FakeServer:
    """Stands in for SimulatorServer: serves nothing, and is interrupted at once."""

    base_url = "http://127.0.0.1:1/v1"

    def serve_forever(self) -> None:
        raise KeyboardInterrupt

    def stop(self) -> None:
        pass


def test_the_simulate_command_takes_fault_rates(monkeypatch, tmp_path, corpus, capsys):
    from evaluator import cli
    from evaluator.commands import pool as command

    write_corpus(tmp_path / "corpus.jsonl", corpus[:5])
    (tmp_path / "personas.json").write_text(json.dumps(PERSONAS))
    made: list[Simulator] = []
    monkeypatch.setattr(command, "SimulatorServer",
                        lambda simulator, port: made.append(simulator) or FakeServer())
    args = ["pool", "simulate", "--corpus", str(tmp_path / "corpus.jsonl"), "--personas",
            str(tmp_path / "personas.json"), "--seed", "2"]
    assert cli.main([*args, "--fault", "500=0.05", "--fault", "403-moderation=0.01"]) == 0
    assert made[-1].fault_rates == {"500": 0.05, "403-moderation": 0.01}
    assert made[-1].seed == 2
    assert "fault rates: 403-moderation 0.01, 500 0.05" in capsys.readouterr().out
    assert cli.main([*args, "--fault", "500=2"]) == 2
    assert "--fault" in capsys.readouterr().err


def test_the_bundled_corpus_and_personas_are_the_default(monkeypatch, corpus):
    from evaluator.commands import pool as command
    from evaluator.pool import simulator

    for module in (command, simulator):
        monkeypatch.setattr(module, "load_corpus", lambda rules, benchmarks=None: corpus[:3])
        monkeypatch.setattr(module, "load_personas", lambda rules: PERSONAS)
    for module in (command, simulator):
        monkeypatch.setattr(module, "load_private_corpus", lambda rules: corpus[3:5])
    # the private items too: a rehearsal seals its audit and plays its live questions from them
    assert load_inputs(None, None, OFFICIAL) == (corpus[:5], PERSONAS)
    sim = bundled_simulator(OFFICIAL, seed=4)
    # the demo's simulator also answers the private items: the audit's cached answers, the live play
    assert sim.entries == corpus[:5] and sim.seed == 4
