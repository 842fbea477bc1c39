"""Collecting each pool model's single-turn Worker answer to items, graded once.

The one place cached answers (sealing) and training data (`tinyrouter collect`) come from,
so both are asked, graded and recorded the same way. A refused or truncated answer is a row
like any other, graded as returned; a call that fails for good fails its batch once every
call of the batch has finished, out of credit first, since that is the one to fix.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from evaluator.answered import append_answered, read_answered
from evaluator.benchmarks import get_benchmark
from evaluator.errors import OutOfCreditError
from evaluator.loop import worker_messages
from evaluator.pool.client import OpenRouterClient
from evaluator.pool.ledger import Ledger
from evaluator.rules import Competition
from evaluator.types import AnsweredItem, Item, ModelAnswer

log = logging.getLogger(__name__)

BATCH_ITEMS = 16  # items asked together; also how often progress is saved
OnBatch = Callable[[list[AnsweredItem]], None]


class ChatClient(Protocol):
    async def chat(self, model_name: str, messages: list[dict]) -> Any: ...


def _benchmarks_for(items: Sequence[Item], given: Mapping[str, Any] | None) -> dict[str, Any]:
    if given is not None:
        return dict(given)
    return {name: get_benchmark(name) for name in {item.benchmark for item in items}}


def _grade_unique(bench: Any, pairs: list[tuple[str, Any]]) -> list[Any]:
    """Grades in order, each distinct (response, reference) once: identical answers are common."""
    keys = [json.dumps(pair, sort_keys=True, default=str) for pair in pairs]
    unique = dict(zip(keys, pairs, strict=True))
    graded = dict(zip(unique, bench.grade_many(list(unique.values())), strict=True))
    return [graded[key] for key in keys]


async def _answer_batch(batch: Sequence[Item], client: ChatClient, benchmarks: Mapping[str, Any],
                        rules: Competition) -> list[AnsweredItem]:
    asks = [(item, model) for item in batch for model in rules.pool_names]
    outcomes = await asyncio.gather(
        *(client.chat(model, worker_messages(item, benchmarks[item.benchmark]))
          for item, model in asks), return_exceptions=True)
    # every call has finished (and been ledgered) before we give up
    errors = sorted((o for o in outcomes if isinstance(o, BaseException)),
                    key=lambda error: not isinstance(error, OutOfCreditError))
    if errors:
        raise errors[0]
    _log_endings(outcomes)
    answers: dict[str, dict[str, ModelAnswer]] = {item.id: {} for item in batch}
    for name, bench in benchmarks.items():
        picked = [(item, model, done) for (item, model), done in zip(asks, outcomes, strict=True)
                  if item.benchmark == name]
        grades = _grade_unique(bench, [(done.text, item.reference) for item, _, done in picked])
        for (item, model, done), grade in zip(picked, grades, strict=True):
            if grade.error:
                log.debug("%s %s %s: %s", item.benchmark, item.id, model, grade.error)
            answers[item.id][model] = ModelAnswer(text=done.text, correct=bool(grade.correct),
                                                  extracted=grade.extracted,
                                                  cost_usd=float(done.cost_usd))
    return [AnsweredItem(item=item, answers=answers[item.id]) for item in batch]


def _log_endings(completions: Sequence[Any]) -> None:
    refused = sum(bool(getattr(c, "refused", False)) for c in completions)
    truncated = sum(bool(getattr(c, "truncated", False)) for c in completions)
    if refused or truncated:
        log.info("%d answers refused and %d truncated by the provider, graded as returned",
                 refused, truncated)


async def answer_items_async(items: Sequence[Item], client: ChatClient,
                             rules: Competition, *,
                             benchmarks: Mapping[str, Any] | None = None,
                             on_batch: OnBatch | None = None,
                             on_progress: Callable[[int, int], None] | None = None,
                             batch_items: int = BATCH_ITEMS) -> list[AnsweredItem]:
    """Ask every pool model for its Worker answer to each item and grade it; rows in item order.

    `on_batch` receives each finished batch in order, so a caller can save progress;
    `on_progress(done, total)` is told after each batch (a progress bar's update).
    """
    benchmarks = _benchmarks_for(items, benchmarks)
    rows: list[AnsweredItem] = []
    for start in range(0, len(items), batch_items):
        batch = await _answer_batch(items[start:start + batch_items], client, benchmarks, rules)
        rows.extend(batch)
        if on_batch is not None:
            on_batch(batch)
        if on_progress is not None:
            on_progress(len(rows), len(items))
        log.debug("answered %d/%d items", len(rows), len(items))
    return rows


def answer_items(items: Sequence[Item], make_client: Callable[[], Any],
                 rules: Competition, **options: Any) -> list[AnsweredItem]:
    """Synchronous `answer_items_async` with a client made (and closed) inside its event loop."""

    async def run() -> list[AnsweredItem]:
        async with make_client() as client:
            return await answer_items_async(items, client, rules, **options)

    return asyncio.run(run())


def pool_client_factory(pool_url: str | None, ledger_path: str | Path | None,
                        rules: Competition) -> Callable[[], Any]:
    """Makes OpenRouter clients for the pool (key from the environment), ledgered to a file."""
    ledger = Ledger(ledger_path) if ledger_path else None

    def make() -> OpenRouterClient:
        return OpenRouterClient(rules, base_url=pool_url, ledger=ledger)

    return make



def collect_training(items: Sequence[Item], path: str | Path, make_client: Callable[[], Any],
                     rules: Competition, **options: Any
                     ) -> tuple[list[AnsweredItem], list[AnsweredItem]]:
    """Answer the items not yet in `path` and append them; returns (new rows, all rows)."""
    done = read_answered(path, rules, repair=True)
    have = {row.item.id for row in done}
    todo = [item for item in items if item.id not in have]
    log.info("%s: %d rows already collected, %d to ask", Path(path).name, len(have), len(todo))
    new = answer_items(todo, make_client, rules,
                       on_batch=lambda batch: append_answered(path, batch), **options) if todo else []
    return new, done + new
