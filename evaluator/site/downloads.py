"""The leaderboard as downloadable files: CSV tables (pandas) and one JSON document."""

from __future__ import annotations

import json
from typing import Any

import pandas as pd

from evaluator.files import dumps
from evaluator.site.state import LeaderboardState

EVALUATION_COLUMNS = ("evaluated_at", "miner", "generation", "pr", "head_sha", "outcome",
                      "composite", "king_composite", "delta", "reason")
KING_COLUMNS = ("crowned_at", "miner", "generation", "pr", "head_sha", "composite", "delta",
                "ci95_low", "ci95_high")
ATTEMPT_COLUMNS = ("at", "miner", "generation", "pr", "head_sha")
BREAKDOWN_COLUMNS = ("miner", "generation", "benchmark", "cached_acc", "audit_acc", "live_acc",
                     "avg_turns", "efficiency", "novelty", "overfit_penalty", "score")
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _cell(value: Any) -> Any:
    """Text a spreadsheet would run as a formula gets a leading quote (CSV injection)."""
    if isinstance(value, str) and value.startswith(_FORMULA_START):
        return "'" + value
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True)
    return value


def _csv(rows: list[dict[str, Any]], columns: tuple[str, ...]) -> str:
    frame = pd.DataFrame([{c: _cell(row.get(c)) for c in columns} for row in rows],
                         columns=list(columns))
    return frame.to_csv(index=False, lineterminator="\n")


def _king_rows(state: LeaderboardState, benchmarks: list[str]) -> list[dict[str, Any]]:
    rows = []
    for king in state.kings:
        interval = king.get("ci95") if isinstance(king.get("ci95"), list) else [None, None]
        row = {**king, "ci95_low": interval[0], "ci95_high": interval[-1]}
        row.update({f"score_{b}": (king.get("scores") or {}).get(b) for b in benchmarks})
        rows.append(row)
    return rows


def _breakdown_rows(state: LeaderboardState) -> list[dict[str, Any]]:
    """Per-benchmark components, public only for results that crowned a king."""
    rows = []
    for result in state.results:
        if result.get("outcome") != "king":
            continue
        for bench, parts in sorted((result.get("per_benchmark") or {}).items()):
            rows.append({"miner": result.get("miner"), "generation": result.get("generation"),
                         "benchmark": bench, **(parts if isinstance(parts, dict) else {})})
    return rows


def download_files(state: LeaderboardState, benchmarks: list[str]) -> dict[str, str]:
    """File name → content, for the downloads folder of the site."""
    king_columns = KING_COLUMNS + tuple(f"score_{b}" for b in benchmarks)
    everything = {"format": 1, "king": state.king, "history": state.kings,
                  "results": state.results, "attempts": state.attempts,
                  "manifest": state.manifest}
    return {
        "evaluations.csv": _csv(state.results, EVALUATION_COLUMNS),
        "kings.csv": _csv(_king_rows(state, benchmarks), king_columns),
        "breakdowns.csv": _csv(_breakdown_rows(state), BREAKDOWN_COLUMNS),
        "attempts.csv": _csv(list(state.attempts), ATTEMPT_COLUMNS),
        "leaderboard.json": dumps(everything),
    }
