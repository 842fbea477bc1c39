"""An evaluation through the real pool client and the loopback simulator, one fault at a time.

Each provider fault is injected at a rate into the live calls of both contenders. A fault the
client retries leaves the result exactly as a clean run's; a refusal or a truncation is graded
and counted; a failure the client cannot ride out voids the evaluation with its reason, and
applying that void record changes nothing on the board but its own file.
"""

from __future__ import annotations

import dataclasses
import functools
from datetime import UTC, datetime
from types import SimpleNamespace

import pytest
from evaluation_fakes import ALWAYS_0, CATEGORIES, DRAWN, RULES, SMART, LinearRouter, contender
from evaluation_fakes import make_sets as fake_sets

from evaluator.evaluate import evaluate
from evaluator.leaderboard import apply_result
from evaluator.loop import FAILED, REFUSED, TRUNCATED
from evaluator.pool import client
from evaluator.pool.runner import pool_runner
from evaluator.pool.simulator import Simulator, serve_simulator
from evaluator.records import VOID
from evaluator.types import Item

pytestmark = pytest.mark.slow

PRECISION = RULES.disclosure_precision
NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
# only what the live loop needs to tell a right answer from a wrong one, per benchmark
RESPONSES = {
    "math500": ("7", "So the total is \\boxed{7}.", "So the total is \\boxed{8}."),
    "mmlu": ("B", "The second option fits.\nAnswer: B", "The third option fits.\nAnswer: C"),
    "livecodebench": (
        {"tests": [{"input": "2 3\n", "output": "5\n", "testtype": "stdin"}], "fn_name": None},
        "```python\na, b = map(int, input().split())\nprint(a + b)\n```",
        "```python\na, b = map(int, input().split())\nprint(a - b)\n```"),
}


def live_items(bench: str) -> list[Item]:
    reference = RESPONSES[bench][0]
    return [Item(bench, f"{bench}-live-{i}", reference=reference, category=CATEGORIES[i % 2],
                 prompt=f"Live question {bench} {i} topic:{CATEGORIES[i % 2]}: solve it.")
            for i in range(RULES.live_size)]


@pytest.fixture(autouse=True)
def quick_backoff(monkeypatch):
    """A retry here waits milliseconds, not the policy's seconds: what these tests check is
    what the retries leave behind (the policy's waits are tests/pool/test_client.py's)."""
    monkeypatch.setattr(client, "RetryPolicy",
                        functools.partial(client.RetryPolicy, base_delay=0.001))


@pytest.fixture(scope="module")
def world():
    sets = fake_sets()
    for bench in RULES.benchmarks:
        sets[bench]["live"] = live_items(bench)
    corpus = [SimpleNamespace(item=item, right=RESPONSES[bench][1], wrong=RESPONSES[bench][2])
              for bench in RULES.benchmarks for item in sets[bench]["live"]]
    # model k is good at category k, model 2 at nothing
    personas = {m: {b: {c: 0.9 if k == j else 0.1 for j, c in enumerate(CATEGORIES)}
                    for b in RULES.benchmarks} for k, m in enumerate(RULES.pool_names)}
    return SimpleNamespace(sets=sets, corpus=corpus, personas=personas)


def play(world, rates, budget=None):
    sim = Simulator(world.corpus, world.personas, RULES, seed=3, retry_after=0.0,
                    fault_rates=rates)
    with serve_simulator(sim) as url:
        return evaluate(contender(SMART), contender(ALWAYS_0, miner="bob", pr=3), world.sets,
                        LinearRouter(), pool_runner(url, RULES, retry_budget_seconds=budget),
                        RULES, now=NOW, manifest_hash="f" * 64, drawn=DRAWN)


def live(result):
    """Every live question of both heads as played (what it cost aside)."""
    heads = (result.challenger_run, result.king_run)
    return [{k: v for k, v in item.items() if k != "cost_usd"}
            for head in heads if head for bench in head.items.values() for item in bench["live"]]


def statuses(result):
    return [item["status"] for item in live(result)]


def without_cost(public):
    """The record minus what a billed, retried attempt adds: the live cost (and per question)
    and the time its sessions took."""
    card = public.get("router_card") and {k: v for k, v in public["router_card"].items()
                                          if k not in ("cost_per_1k_usd", "live_seconds")}
    return {k: v for k, v in public.items() if k != "live_cost_usd"} | {"router_card": card}


@pytest.fixture(scope="module")
def clean(world):
    return play(world, {})


RIDDEN_OUT = ["429", "500", "502", "503", "402-in-flight", "error-body", "finish-error",
              "malformed", "drop", "empty"]


@pytest.mark.parametrize("fault", RIDDEN_OUT)
def test_a_retried_fault_at_5_percent_leaves_the_result_of_a_clean_run(world, clean, fault):
    result = play(world, {fault: 0.05})
    assert live(result) == live(clean)  # the same decisions, turns and grades, item by item
    assert without_cost(result.public(PRECISION)) == without_cost(clean.public(PRECISION))
    assert FAILED not in statuses(result)


@pytest.mark.parametrize(("fault", "status"), [
    ("403-moderation", REFUSED), ("finish-content-filter", REFUSED), ("finish-length", TRUNCATED)])
def test_refusals_and_truncations_are_graded_and_counted(world, clean, fault, status):
    result = play(world, {fault: 0.2})
    assert result.outcome != VOID
    assert status in statuses(result) and FAILED not in statuses(result)
    assert result.public(PRECISION)["composite"] is not None


@pytest.mark.parametrize(("rates", "budget", "reason"), [
    ({"402": 0.05}, None, "ran out of credit"),
    ({"401": 0.05}, None, "refused the evaluator's calls"),
    # a retry budget already spent: every 500 fails its item, far past the void share
    ({"500": 0.5}, 0.0, "the pool failed on"),
])
def test_a_failure_the_client_cannot_ride_out_voids_the_evaluation(world, repo, rates, budget,
                                                                    reason):
    result = play(world, rates, budget)
    public = result.public(PRECISION)
    assert public["outcome"] == VOID and reason in public["reason"]
    assert public["composite"] is None and "refunded" in public["reason"]
    before = sorted(p.relative_to(repo) for p in (repo / "leaderboard").rglob("*"))
    applied = apply_result(repo, public, RULES)
    after = sorted(p.relative_to(repo) for p in (repo / "leaderboard").rglob("*"))
    assert [str(p) for p in set(after) - set(before) if p.suffix == ".json"] == applied.changed
    assert not applied.crowned and not (repo / "leaderboard/king.json").exists()


def test_failures_within_the_void_share_are_scored_as_wrong_answers_at_full_turns(world):
    rules = dataclasses.replace(RULES, void_failure_share=1.0)
    sim = Simulator(world.corpus, world.personas, rules, seed=3, retry_after=0.0,
                    fault_rates={"500": 0.3})
    with serve_simulator(sim) as url:
        result = evaluate(contender(SMART), None, world.sets, LinearRouter(),
                          pool_runner(url, rules, retry_budget_seconds=0.0), rules,
                          manifest_hash="f" * 64, drawn=DRAWN)
    failed = [x for x in live(result) if x["status"] == FAILED]
    assert failed and all(not x["correct"] for x in failed)
    turns = {b: s.avg_turns for b, s in result.per_benchmark.items()}
    for bench, items in result.challenger_run.items.items():
        expected = [rules.max_turns if x["status"] == FAILED else x["n_turns"]
                    for x in items["live"]]
        assert turns[bench] == pytest.approx(sum(expected) / len(expected))
