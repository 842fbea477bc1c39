"""The loop end to end over HTTP: the session runs against the simulator through the client."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest
from pool_fakes import DEEPSEEK, GEMINI, QWEN

from evaluator.loop import ANSWERED, FAILED, REFUSED, failure_share, play, run_session, run_sessions
from evaluator.pool.ledger import Ledger, verify_ledger
from evaluator.pool.runner import pool_runner
from evaluator.rules import OFFICIAL
from evaluator.types import Decision


def fixed(*plan: tuple[str, str]):
    """A policy playing the same (model, role) sequence for every transcript."""

    def policy(transcripts: list[str]) -> list[Decision]:
        return [Decision(*plan[text.count("\n[Turn ")]) for text in transcripts]

    return policy


def run(make_client, benchmark, entries, policy, ledger=None, rules=OFFICIAL):
    async def go():
        async with make_client(ledger=ledger, rules=rules) as client:
            return await run_sessions([e.item for e in entries], benchmark, policy, client,
                                      rules)
    return asyncio.run(go())


def test_a_turn_1_verifier_cannot_accept_and_the_loop_stops_on_a_later_accept(
        make_client, benchmark, corpus):
    # qwen judges algebra well, so on correct algebra answers it accepts
    entries = [e for e in corpus if e.item.category == "algebra"][:20]
    policy = fixed((QWEN, "Verifier"), (QWEN, "Worker"), (QWEN, "Verifier"),
                   (QWEN, "Worker"), (QWEN, "Verifier"))
    trajectories = run(make_client, benchmark, entries, policy)
    for trajectory in trajectories:
        first = trajectory.turns[0]
        assert first.role == "Verifier" and first.verdict == "REVISE"
        assert trajectory.n_turns in (3, 5)
        accepted = [turn.verdict for turn in trajectory.turns].count("ACCEPT")
        assert (trajectory.stop == "accept") == (trajectory.turns[-1].verdict == "ACCEPT")
        assert accepted <= 1
    assert sum(tr.stop == "accept" and tr.n_turns == 3 for tr in trajectories) >= 10


def test_the_answer_is_the_latest_worker_output(make_client, benchmark, corpus):
    entries = corpus[:20]
    policy = fixed((GEMINI, "Worker"), (DEEPSEEK, "Worker"), (QWEN, "Thinker"),
                   (QWEN, "Thinker"), (QWEN, "Thinker"))
    trajectories = run(make_client, benchmark, entries, policy)
    for entry, trajectory in zip(entries, trajectories, strict=True):
        assert trajectory.n_turns == 5 and trajectory.stop == "max_turns"
        assert trajectory.answer_turn == 1
        assert trajectory.answer == trajectory.turns[1].text
        assert trajectory.answer in (entry.right, entry.wrong)


@pytest.mark.slow
def test_a_thinker_first_lifts_live_accuracy(make_client, benchmark, corpus):
    geometry = [e for e in corpus if e.item.category == "geometry"]
    two_turns = dataclasses.replace(OFFICIAL, max_turns=2)
    alone = run(make_client, benchmark, geometry, fixed(*[(DEEPSEEK, "Worker")] * 2),
                rules=two_turns)
    planned = run(make_client, benchmark, geometry,
                  fixed((GEMINI, "Thinker"), (DEEPSEEK, "Worker")), rules=two_turns)

    def accuracy(trajectories):
        return sum(benchmark.grade(tr.turns[-1].text, tr.item.reference)
                   for tr in trajectories) / len(trajectories)

    assert accuracy(planned) > accuracy(alone)


@pytest.mark.slow
def test_token_and_cost_totals_match_the_ledger(make_client, benchmark, corpus, tmp_path):
    path = tmp_path / "ledger.jsonl"
    policy = fixed((QWEN, "Thinker"), (GEMINI, "Worker"), (DEEPSEEK, "Verifier"),
                   (QWEN, "Worker"), (QWEN, "Verifier"))
    trajectories = run(make_client, benchmark, corpus[:30], policy, Ledger(path))
    summary = verify_ledger(path)
    assert summary.entries == sum(tr.n_turns for tr in trajectories)
    assert summary.total_cost_usd == pytest.approx(sum(tr.cost_usd for tr in trajectories))
    for trajectory in trajectories:
        assert trajectory.prompt_tokens == sum(t.prompt_tokens for t in trajectory.turns) > 0
        assert all(turn.cost_usd > 0 for turn in trajectory.turns)


def test_one_session_survives_faults_mid_loop(make_client, benchmark, corpus, simulator):
    simulator.inject("500", "429", "empty")

    async def go():
        async with make_client() as client:
            return await run_session(corpus[0].item, benchmark,
                                     fixed((QWEN, "Worker"), (QWEN, "Verifier")), client,
                                     OFFICIAL)

    trajectory = asyncio.run(go())
    assert trajectory.turns[0].text in (corpus[0].right, corpus[0].wrong)
    assert trajectory.turns[1].verdict in ("ACCEPT", "REVISE")


def play_over_http(make_client, benchmark, entries, policy, ledger=None):
    async def go():
        async with make_client(ledger=ledger) as client:
            return await play([e.item for e in entries], benchmark, policy, client, OFFICIAL)
    return asyncio.run(go())


def test_drawn_refusals_end_only_their_own_sessions(make_client, benchmark, corpus, simulator,
                                                    tmp_path):
    simulator.fault_rates = {"403-moderation": 0.2}
    path = tmp_path / "ledger.jsonl"
    outcomes = play_over_http(make_client, benchmark, corpus[:30],
                              fixed(*[(QWEN, "Worker"), (QWEN, "Verifier")] * 3), Ledger(path))
    assert [o.item_id for o in outcomes] == [e.item.id for e in corpus[:30]]
    statuses = {o.status for o in outcomes}
    assert statuses == {ANSWERED, REFUSED}
    assert all(not o.correct for o in outcomes if o.status == REFUSED)
    assert any(o.correct for o in outcomes if o.status == ANSWERED)
    assert failure_share(outcomes) == 0.0
    # refused calls were not billed: the ledger holds the answered turns only
    assert verify_ledger(path).entries == sum(o.n_turns for o in outcomes) - sum(
        o.status == REFUSED for o in outcomes)


def test_when_every_call_fails_every_item_still_has_an_outcome(make_client, benchmark, corpus,
                                                               simulator):
    simulator.fault_rates = {"500": 1.0}
    outcomes = play_over_http(make_client, benchmark, corpus[:5], fixed((QWEN, "Worker")))
    assert [o.status for o in outcomes] == [FAILED] * 5
    assert all("gave up after 4 attempts" in o.reason and not o.correct for o in outcomes)
    assert failure_share(outcomes) == 1.0


def test_the_runner_shares_one_retry_budget(base_url, simulator, corpus):
    # a spent budget: the first failure of any call is final, with no wait
    run = pool_runner(base_url, OFFICIAL, retry_budget_seconds=0.0)
    simulator.fault_rates = {"500": 1.0}
    policy = fixed((QWEN, "Worker"))
    for entries in (corpus[:2], corpus[2:4]):
        outcomes = run("math500", [e.item for e in entries], policy)
        assert [o.status for o in outcomes] == [FAILED] * 2
        assert all("retry budget of 0s is spent after 1 attempts" in o.reason for o in outcomes)
    assert simulator.requests == 4


def test_within_an_evaluation_the_same_call_is_answered_once(base_url, simulator, corpus):
    """Both heads making the same call on the same transcript get the same reply; the replay
    bills nothing, and a head that decides otherwise still calls the pool."""
    def plan(model):
        return fixed(*[(model, "Worker"), (model, "Verifier")] * 3)

    run = pool_runner(base_url, OFFICIAL, share_responses=True)
    items = [e.item for e in corpus[:3]]
    first = run("math500", items, plan(QWEN))
    calls = simulator.requests
    again = run("math500", items, plan(QWEN))
    assert simulator.requests == calls  # every call replayed
    assert [(o.correct, o.n_turns) for o in again] == [(o.correct, o.n_turns) for o in first]
    assert sum(o.cost_usd for o in again) == 0 < sum(o.cost_usd for o in first)
    # each session says whether every call was a replay: what makes a tie certain
    assert [o.replayed for o in first] == [False] * 3 and [o.replayed for o in again] == [True] * 3
    other = run("math500", items, plan(GEMINI))
    assert simulator.requests > calls and not any(o.replayed for o in other)
    # without sharing (live training, a miner's preview) every run calls the pool
    alone = pool_runner(base_url, OFFICIAL)
    before = simulator.requests
    alone("math500", items, plan(QWEN))
    assert simulator.requests > before
