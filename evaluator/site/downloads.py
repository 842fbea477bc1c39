"""The leaderboard as downloadable files: CSV tables (pandas) and one JSON document.

Columns come from the records' own fields, so a new field appears in the downloads too.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from typing import Any

import pandas as pd

from evaluator.explain import Explanation
from evaluator.records import KING, PUBLIC_FIELDS, Attempt, Crowning
from evaluator.rules import Competition
from evaluator.scoring import BenchmarkScore
from evaluator.site.board import BoardRow
from evaluator.site.cards import CostPoint
from evaluator.site.state import LeaderboardState
from evaluator.site.verdicts import entries

# Every public record carries these (the disclosure rule's common core), plus its reason, then
# the verdict as every page shows it (explain.Explanation): a head a gate stopped is a row too.
EVALUATION_COLUMNS = (*(f for f in PUBLIC_FIELDS[KING] if f != "format"
                         and all(f in fields for fields in PUBLIC_FIELDS.values())), "reason",
                      "gated_at", "failed_gate", *Explanation.COLUMNS)
ATTEMPT_COLUMNS = tuple(f.name for f in dataclasses.fields(Attempt) if f.name != "fingerprint")
COST_COLUMNS = tuple(f.name for f in dataclasses.fields(CostPoint))
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _cell(value: Any) -> Any:
    """Text a spreadsheet would run as a formula gets a leading quote (CSV injection)."""
    if isinstance(value, str) and value.startswith(_FORMULA_START):
        return "'" + value
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True)
    return value


def _csv(rows: list[dict[str, Any]], columns: tuple[str, ...],
         integers: tuple[str, ...] = ()) -> str:
    """`integers`: columns of whole numbers, written as such where some rows have none."""
    frame = pd.DataFrame([{c: _cell(row.get(c)) for c in columns} for row in rows],
                         columns=list(columns))
    for column in integers:
        frame[column] = frame[column].astype("Int64")
    return frame.to_csv(index=False, lineterminator="\n")


def _king_rows(state: LeaderboardState, benchmarks: list[str]) -> tuple[list[dict], tuple]:
    columns = (*(f.name for f in dataclasses.fields(Crowning) if f.name not in ("ci95", "scores")),
               "ci95_low", "ci95_high", *(f"score_{b}" for b in benchmarks))
    rows = []
    for king in state.kings:
        low, high = king.ci95 or (None, None)
        rows.append({**king.to_dict(), "ci95_low": low, "ci95_high": high,
                     **{f"score_{b}": king.scores.get(b) for b in benchmarks}})
    return rows, columns


def _breakdown_rows(state: LeaderboardState) -> list[dict[str, Any]]:
    """Per-benchmark components, public only for results that crowned a king."""
    return [{"miner": r.miner, "generation": r.generation, "benchmark": bench, **score.to_dict()}
            for r in state.results if r.outcome == KING
            for bench, score in sorted((r.per_benchmark or {}).items())]


def download_files(state: LeaderboardState, rules: Competition,
                   cost: Sequence[CostPoint] = (), board: Sequence[BoardRow] = ()
                   ) -> dict[str, str]:
    """File name → content, for the downloads folder of the site; `cost` is the points of
    the cost–accuracy chart, `board` the Leaderboard page's rows."""
    benchmarks, precision = list(rules.benchmarks), rules.disclosure_precision
    kings, king_columns = _king_rows(state, benchmarks)
    cost_rows = [dataclasses.asdict(point) for point in cost]
    board_rows = [row.to_dict() for row in board]
    verdicts = [entry.row(precision) for entry in entries(state, rules)]
    everything = {"format": 1, "king": state.king and state.king.to_dict(),
                  "history": [k.to_dict() for k in state.kings],
                  "results": [r.public(precision) for r in state.results],
                  "verdicts": verdicts,
                  "attempts": [a.to_dict() for a in state.attempts],
                  "cost": cost_rows, "board": board_rows, "manifest": state.manifest}
    return {
        "evaluations.csv": _csv(verdicts, EVALUATION_COLUMNS),
        "kings.csv": _csv(kings, king_columns),
        "breakdowns.csv": _csv(_breakdown_rows(state),
                               ("miner", "generation", "benchmark", *BenchmarkScore.FIELDS)),
        "attempts.csv": _csv([a.to_dict() for a in state.attempts], ATTEMPT_COLUMNS),
        "cost.csv": _csv(cost_rows, COST_COLUMNS, ("generation",)),
        "board.csv": _csv(board_rows, BoardRow.COLUMNS, BoardRow.INTEGERS),
        # compact: a season's document is megabytes, and indented JSON is encoded in Python
        "leaderboard.json": json.dumps(everything, sort_keys=True, separators=(",", ":")) + "\n",
    }
