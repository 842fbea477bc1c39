"""A served answer is the evaluator's live play: on the demo corpus's questions, the server
makes the decisions the evaluator's live runner makes with the same head, turn by turn, and
its reply is graded alike."""

from __future__ import annotations

import pytest

from evaluator.benchmarks import get_benchmark
from evaluator.benchmarks.corpus import load_corpus
from evaluator.pool.runner import pool_runner
from evaluator.types import Decision

QUESTIONS = 6  # a benchmark


@pytest.mark.parametrize("bench", ["math500", "mmlu", "livecodebench"])
def test_a_served_answer_makes_the_evaluators_decisions_and_is_graded_alike(
        bench, start_server, served_king, router, tiny_rules, pool_url, openai_client):
    items = [entry.item for entry in load_corpus(tiny_rules, [bench])[:QUESTIONS]]
    # the evaluator's live play of the king (evaluate and `score --live` run this runner)
    played = pool_runner(pool_url, tiny_rules)(bench, items, router.bind(served_king.head.theta))
    client = openai_client(start_server(served_king))
    benchmark = get_benchmark(bench)
    served = [client.chat.completions.create(
        model=served_king.model_id, messages=[{"role": "user", "content": item.prompt}])
        for item in items]
    for item, outcome, reply in zip(items, played, served, strict=True):
        turns = reply.model_extra["tinyrouter"]["turns"]
        assert tuple(Decision(t["model"], t["role"]) for t in turns) == outcome.decisions
        assert benchmark.grade(reply.choices[0].message.content, item.reference).correct == \
            outcome.correct
    # sessions of every length were compared, not one shape
    assert len({outcome.n_turns for outcome in played}) > 1
