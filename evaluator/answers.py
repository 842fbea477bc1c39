"""Each pool model's single-turn Worker answer to items, graded once.

The one place cached answers (sealing) and training data (`tinyrouter collect`) come from,
so both are asked, graded and recorded the same way.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from evaluator.benchmarks import get_benchmark
from evaluator.errors import TrainingError
from evaluator.pool.client import OpenRouterClient
from evaluator.pool.ledger import Ledger
from evaluator.rules import OFFICIAL, Competition
from evaluator.session import worker_messages
from evaluator.types import AnsweredItem, Item, ModelAnswer

log = logging.getLogger(__name__)

BATCH_ITEMS = 16  # items asked together; also how often progress is saved
LEDGER_FILE = "ledger.jsonl"  # the cost ledger beside collected training data
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
    for outcome in outcomes:  # every call has finished (and been ledgered) before we give up
        if isinstance(outcome, BaseException):
            raise outcome
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


async def answer_items_async(items: Sequence[Item], client: ChatClient,
                             rules: Competition = OFFICIAL, *,
                             benchmarks: Mapping[str, Any] | None = None,
                             on_batch: OnBatch | None = None,
                             batch_items: int = BATCH_ITEMS) -> list[AnsweredItem]:
    """Ask every pool model for its Worker answer to each item and grade it; rows in item order.

    `on_batch` receives each finished batch in order, so a caller can save progress.
    """
    benchmarks = _benchmarks_for(items, benchmarks)
    rows: list[AnsweredItem] = []
    for start in range(0, len(items), batch_items):
        batch = await _answer_batch(items[start:start + batch_items], client, benchmarks, rules)
        rows.extend(batch)
        if on_batch is not None:
            on_batch(batch)
        log.info("answered %d/%d items", len(rows), len(items))
    return rows


def answer_items(items: Sequence[Item], make_client: Callable[[], Any],
                 rules: Competition = OFFICIAL, **options: Any) -> list[AnsweredItem]:
    """Synchronous `answer_items_async` with a client made (and closed) inside its event loop."""

    async def run() -> list[AnsweredItem]:
        async with make_client() as client:
            return await answer_items_async(items, client, rules, **options)

    return asyncio.run(run())


def pool_client_factory(pool_url: str | None, ledger_path: str | Path | None,
                        rules: Competition = OFFICIAL) -> Callable[[], Any]:
    """Makes OpenRouter clients for the pool (key from the environment), ledgered to a file."""
    ledger = Ledger(ledger_path) if ledger_path else None

    def make() -> OpenRouterClient:
        return OpenRouterClient(base_url=pool_url, rules=rules, ledger=ledger)

    return make



# Training data: DATA/<benchmark>.jsonl, one AnsweredItem per line, appended batch by batch.


def data_path(data_dir: str | Path, benchmark: str) -> Path:
    return Path(data_dir) / f"{benchmark}.jsonl"


def read_answered(path: str | Path, rules: Competition = OFFICIAL,
                  repair: bool = False) -> list[AnsweredItem]:
    """Rows of a training-data file; with `repair`, a torn last line (a crash) is cut off."""
    path = Path(path)
    if not path.exists():
        return []
    raw = path.read_bytes()
    lines = raw.split(b"\n")
    if lines[-1] and repair:  # no final newline: the last write did not finish
        log.warning("%s: dropping an unfinished last line", path)
        path.write_bytes(raw[:len(raw) - len(lines[-1])])
        lines[-1] = b""
    rows = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rows.append(AnsweredItem.from_dict(json.loads(line)))
        except (ValueError, KeyError, TypeError) as exc:
            raise TrainingError(f"{path} line {number} is not a training row ({exc}); "
                                f"remove that line or collect into another folder") from exc
        if sorted(rows[-1].answers) != sorted(rules.pool_names):
            raise TrainingError(f"{path} was collected for the pool "
                                f"{sorted(rows[-1].answers)}, not {list(rules.pool_names)}; "
                                f"collect into another folder")
    return rows


def append_answered(path: str | Path, rows: Sequence[AnsweredItem]) -> None:
    """Append rows with one write and an fsync, so an interrupted run loses at most a batch."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "".join(json.dumps(row.to_dict(), sort_keys=True) + "\n" for row in rows)
    with path.open("a", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())


def collect_training(items: Sequence[Item], path: str | Path, make_client: Callable[[], Any],
                     rules: Competition = OFFICIAL, **options: Any
                     ) -> tuple[list[AnsweredItem], list[AnsweredItem]]:
    """Answer the items not yet in `path` and append them; returns (new rows, all rows)."""
    done = read_answered(path, rules, repair=True)
    have = {row.item.id for row in done}
    todo = [item for item in items if item.id not in have]
    log.info("%s: %d rows already collected, %d to ask", Path(path).name, len(have), len(todo))
    new = answer_items(todo, make_client, rules,
                       on_batch=lambda batch: append_answered(path, batch), **options) if todo else []
    return new, done + new
