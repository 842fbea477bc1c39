"""The loopback simulator: personas, determinism, plans and verdicts, the HTTP shape, the CLI."""

from __future__ import annotations

import json
import signal
import subprocess
import sys

import httpx
import pytest
from pool_fakes import DEEPSEEK, GEMINI, PERSONAS, QWEN, FakeMath, make_corpus

from evaluator.benchmarks.math500 import extract_answer
from evaluator.benchmarks.mmlu import extract_letter
from evaluator.commands.pool import load_inputs
from evaluator.errors import CorpusError
from evaluator.loop import Turn, model_messages, truncate_output
from evaluator.pool.corpus import read_corpus
from evaluator.pool.simulator import JUDGED, NO_WORK, PLANS, Simulator, bundled_simulator
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


def test_models_are_listed_by_slug(base_url):
    data = httpx.get(f"{base_url}/models").json()["data"]
    assert [m["id"] for m in data] == [m.slug for m in OFFICIAL.pool]


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
         "--seed", "5"], stdout=subprocess.PIPE, text=True)
    try:
        process.stdout.readline()
        url = process.stdout.readline().split()[2]
        body = {"model": QWEN, "messages": [{"role": "user", "content": corpus[2].item.prompt}]}
        reply = httpx.post(f"{url}/chat/completions", json=body, timeout=10).json()
        assert reply["choices"][0]["message"]["content"] in (corpus[2].right, corpus[2].wrong)
    finally:
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=10) == 0


def test_the_bundled_corpus_and_personas_are_the_default(monkeypatch, corpus):
    from evaluator.commands import pool as command
    from evaluator.pool import simulator

    for module in (command, simulator):
        monkeypatch.setattr(module, "load_corpus", lambda rules, benchmarks=None: corpus[:3])
        monkeypatch.setattr(module, "load_personas", lambda rules: PERSONAS)
    assert load_inputs(None, None, OFFICIAL) == (corpus[:3], PERSONAS)
    sim = bundled_simulator(OFFICIAL, seed=4)
    assert sim.entries == corpus[:3] and sim.seed == 4
