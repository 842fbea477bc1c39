"""Collecting answers: every model asked once per item, graded by the benchmark, ledgered, resumable."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evaluator.answered import read_answered
from evaluator.benchmarks.corpus import CorpusItem
from evaluator.benchmarks.mmlu import MMLU
from evaluator.collect import answer_items, collect_training
from evaluator.errors import InfrastructureError, OutOfCreditError, PoolError
from evaluator.pool.client import OpenRouterClient, RetryPolicy
from evaluator.pool.ledger import Ledger, verify_ledger
from evaluator.pool.simulator import Simulator, serve_simulator
from evaluator.rules import OFFICIAL
from evaluator.types import AnsweredItem, Item

POOL = OFFICIAL.pool_names
SKILL = dict(zip(POOL, (0.9, 0.5, 0.1), strict=True))


def mmlu_items(n: int) -> list[Item]:
    """n MMLU questions in the cais/mmlu schema, mapped by the real loader."""
    rows = [{"question": f"Question {i}: which option is listed as number {i % 4 + 1}?",
             "subject": "astronomy", "choices": ["one", "two", "three", "four"],
             "answer": i % 4} for i in range(n)]
    return MMLU().items_from_rows(rows)


def simulator(items: list[Item]) -> Simulator:
    """Personas of skill 0.9, 0.5 and 0.1 answering `Answer: <letter>`, right or wrong."""
    entries = [CorpusItem(item, f"Answer: {item.reference}",
                           f"Answer: {'B' if item.reference == 'A' else 'A'}")
               for item in items]
    personas = {m: {"mmlu": {"astronomy": p}} for m, p in SKILL.items()}
    return Simulator(entries, personas, rules=OFFICIAL)


@pytest.fixture
def pool():
    """(simulator, its 24 MMLU items, base URL): the pool simulator on loopback."""
    items = mmlu_items(24)
    sim = simulator(items)
    with serve_simulator(sim) as url:
        yield sim, items, url


def client_factory(url: str, ledger: Path | None = None, **options):
    return lambda: OpenRouterClient(OFFICIAL, base_url=url,
                                    ledger=Ledger(ledger) if ledger else None, **options)


@pytest.mark.slow
def test_every_model_answers_every_item_graded_and_ledgered(pool, tmp_path):
    sim, items, url = pool
    rows = answer_items(items, client_factory(url, tmp_path / "ledger.jsonl"), OFFICIAL,
                        benchmarks={"mmlu": MMLU()})
    assert [row.item for row in rows] == items
    for row in rows:
        assert sorted(row.answers) == sorted(POOL)
        for answer in row.answers.values():
            assert answer.correct == (answer.text == f"Answer: {row.item.reference}")
            assert answer.extracted == answer.text[-1]
            assert answer.cost_usd > 0
    summary = verify_ledger(tmp_path / "ledger.jsonl")
    assert summary.entries == 3 * len(items) == sim.requests
    spent = sum(a.cost_usd for row in rows for a in row.answers.values())
    assert summary.total_cost_usd == pytest.approx(spent)
    accuracy = {m: sum(row.answers[m].correct for row in rows) / len(rows) for m in POOL}
    assert accuracy[POOL[0]] > accuracy[POOL[1]] > accuracy[POOL[2]]


@pytest.mark.slow
def test_batches_arrive_in_order_and_a_failure_keeps_finished_ones(pool):
    sim, items, url = pool
    saved: list[AnsweredItem] = []

    def on_batch(batch):
        saved.extend(batch)
        sim.inject("401")  # the next call is refused for good

    with pytest.raises(PoolError, match="401"):
        answer_items(items, client_factory(url), OFFICIAL, benchmarks={"mmlu": MMLU()},
                     on_batch=on_batch, batch_items=5)
    assert [row.item for row in saved] == items[:5]


# fault -> ledger lines among the 12 calls of 4 items: the call still makes a graded row
ENDINGS = [
    # a moderation block: nothing billed
    ("403-moderation", 11),
    # billed refusals and truncations
    ("finish-content-filter", 12),
    ("finish-length", 12),
]


@pytest.mark.slow
@pytest.mark.parametrize(("fault", "lines"), ENDINGS)
def test_a_refused_or_truncated_answer_is_a_graded_row(pool, tmp_path, fault, lines):
    sim, items, url = pool
    sim.inject(fault)
    rows = answer_items(items[:4], client_factory(url, tmp_path / "ledger.jsonl"), OFFICIAL,
                        benchmarks={"mmlu": MMLU()})
    answers = [a for row in rows for a in row.answers.values()]
    assert len(rows) == 4 and len(answers) == 12
    blank = [a for a in answers if a.text == ""]  # content null, graded as returned
    assert len(blank) == 1 and not blank[0].correct and blank[0].extracted is None
    assert verify_ledger(tmp_path / "ledger.jsonl").entries == lines


# fault, client options -> the error, once every call of the batch has finished
BATCH_FAILURES = [
    # a call failing for good after its retries (here: one attempt)
    ("500", {"retry": RetryPolicy(attempts=1)}, InfrastructureError, "gave up after 1 attempts"),
    # out of credit names the fix
    ("402", {}, OutOfCreditError, "top up the key"),
]


@pytest.mark.parametrize(("fault", "options", "error", "message"), BATCH_FAILURES)
def test_a_failed_call_fails_its_batch_after_every_call_finished(pool, fault, options, error,
                                                                 message):
    sim, items, url = pool
    sim.inject(fault)
    with pytest.raises(error, match=message):
        answer_items(items[:4], client_factory(url, **options), OFFICIAL,
                     benchmarks={"mmlu": MMLU()})
    assert sim.requests == 3 * 4


# Training data files ----------------------------------------------------------------------


def test_collect_training_resumes_where_it_stopped(pool, tmp_path):
    sim, items, url = pool
    path = tmp_path / "data" / "mmlu.jsonl"
    new, rows = collect_training(items[:10], path, client_factory(url), OFFICIAL,
                                 benchmarks={"mmlu": MMLU()})
    assert len(new) == len(rows) == 10
    asked = sim.requests
    new, rows = collect_training(items, path, client_factory(url), OFFICIAL,
                                 benchmarks={"mmlu": MMLU()})
    assert len(new) == 14 and len(rows) == 24
    assert sim.requests == asked + 3 * 14  # only the missing items were asked
    assert [row.item.id for row in read_answered(path, OFFICIAL)] == [item.id for item in items]
    line = path.read_text().splitlines()[0]
    assert json.loads(line) == read_answered(path, OFFICIAL)[0].to_dict()


def test_identical_answers_are_graded_once(pool):
    _, items, url = pool
    graded: list[tuple[str, str]] = []

    class CountingMMLU(MMLU):
        def grade_many(self, pairs, workers=None):
            pairs = list(pairs)
            graded.extend(pairs)
            return super().grade_many(pairs, workers)

    rows = answer_items(items, client_factory(url), OFFICIAL,
                        benchmarks={"mmlu": CountingMMLU()}, batch_items=len(items))
    distinct = {(a.text, row.item.reference) for row in rows for a in row.answers.values()}
    assert len(graded) == len(distinct) < 3 * len(items)
    assert all(a.correct == (a.text == f"Answer: {row.item.reference}")
               for row in rows for a in row.answers.values())
