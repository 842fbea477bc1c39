"""Collected rows on disk: one `AnsweredItem` per line of DATA/<benchmark>.jsonl.

`tinyrouter collect` appends them batch by batch (one write and an fsync each), so an
interrupted collection loses at most a batch and resumes where it stopped; training, `score`,
`diff` and `baseline` read them back (evaluator.train.data).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Sequence
from pathlib import Path

from evaluator.errors import TrainingError
from evaluator.files import dumps_line
from evaluator.rules import Competition
from evaluator.types import AnsweredItem

log = logging.getLogger(__name__)


def read_answered(path: str | Path, rules: Competition, repair: bool = False) -> list[AnsweredItem]:
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
    text = "".join(dumps_line(row.to_dict()) + "\n" for row in rows)
    with path.open("a", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
