"""Training data files: appended batch by batch, a torn line repaired, bad data named."""

from __future__ import annotations

import json

import pytest

from evaluator.answered import append_answered, read_answered
from evaluator.errors import TrainingError
from evaluator.rules import OFFICIAL
from evaluator.types import AnsweredItem, Item, ModelAnswer

POOL = OFFICIAL.pool_names


def _row(item_id: str, pool=POOL) -> AnsweredItem:
    return AnsweredItem(Item("mmlu", item_id, "p", "A"),
                        {m: ModelAnswer("Answer: A", True, "A", 0.0) for m in pool})


def test_a_torn_last_line_is_dropped_on_resume(tmp_path):
    path = tmp_path / "mmlu.jsonl"
    append_answered(path, [_row("a"), _row("b")])
    path.write_bytes(path.read_bytes() + b'{"item": {"benchm')  # killed mid-write
    assert [row.item.id for row in read_answered(path, OFFICIAL, repair=True)] == ["a", "b"]
    append_answered(path, [_row("c")])
    assert [row.item.id for row in read_answered(path, OFFICIAL)] == ["a", "b", "c"]


@pytest.mark.parametrize("content, message", [
    # a damaged line in the middle is not silently skipped
    (b'{"item": 1}\n', "line 1 is not a training row"),
    # data from another pool must not be mixed in
    (json.dumps(_row("a", ("gpt-x", "claude-y", "llama-z")).to_dict()).encode() + b"\n",
     "collected for the pool"),
])
def test_unusable_training_data_is_a_clear_error(tmp_path, content, message):
    path = tmp_path / "mmlu.jsonl"
    path.write_bytes(content)
    with pytest.raises(TrainingError, match=message):
        read_answered(path, OFFICIAL, repair=True)
