"""Advisories: warnings a miner can act on, which never block a submission.

The gates decide; advisories only explain. Each has an id, one sentence about this head and a
fix, from what is at hand where it runs: the weights and the receipt (preflight and the PR
bot), the miner's ledger (preflight with `--ledger`), and decisions on public items (the
evaluation runner and `tinyrouter score`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from evaluator.errors import LedgerError
from evaluator.rules import Competition

COLLAPSE_SHARE = 0.95  # one model for this share of the public items: routing collapsed
# An SVF scale more than this from 1 (below −2 or above 4). Near zero or negative is not far:
# the trainer sends a sixth of a demo head's scales through zero, silencing or flipping a
# direction, and an honest head keeps well under a percent beyond this.
SCALES_FAR = 3.0
SCALES_FAR_SHARE = 0.05  # … for more than this share of the scales
COST_TOLERANCE_USD = 1e-6


@dataclass(frozen=True)
class Advisory:
    id: str
    message: str
    fix: str

    def to_dict(self) -> dict[str, str]:
        return asdict(self)


def _spread(rows: np.ndarray) -> float:
    """How far apart the rows are once each column is centred (0: every row the same)."""
    return float(np.linalg.norm(rows - rows.mean(axis=0, keepdims=True)))


def weight_advisories(head: np.ndarray, scales: np.ndarray, rules: Competition) -> list[Advisory]:
    found = []
    if _spread(np.asarray(head, np.float64)[rules.n_models:]) == 0:
        found.append(Advisory(
            "roles-fixed", "the role rows are all alike, so every turn takes the same role "
            "and the loop never plans or verifies",
            "train with the role fit on (`tinyrouter train --role-rows N`, on by default), or "
            "start from a head whose role rows differ"))
    if _spread(np.asarray(head, np.float64)[:rules.n_models]) == 0:
        found.append(Advisory(
            "models-fixed", "the model rows are all alike, so every question goes to the first "
            "pool model", "train the head; a head at W = 0 routes nowhere"))
    far = float(np.mean(np.abs(np.asarray(scales, np.float64) - 1) > SCALES_FAR))
    if far > SCALES_FAR_SHARE:
        found.append(Advisory(
            "scales-drifted", f"{far:.0%} of the SVF scales lie below {1 - SCALES_FAR:g} or "
            f"above {1 + SCALES_FAR:g}, which moves the encoder far from the one the router was "
            "checked on", "train with a smaller --scales-step, or check the run for divergence"))
    return found


def receipt_advisories(receipt: Mapping[str, Any]) -> list[Advisory]:
    """What the receipt's fitness history says against its own settings."""
    history = receipt.get("fitness_history") or []
    optimizer = receipt.get("optimizer") or {}
    found = []
    if optimizer.get("generations") != len(history):
        found.append(Advisory(
            "history-length", f"the receipt says {optimizer.get('generations')} generations but "
            f"its fitness history has {len(history)} entries",
            "pack the run again with `tinyrouter pack`, which writes both from the run"))
    numbers = [h.get("generation") for h in history]
    if numbers != list(range(len(history))):
        found.append(Advisory(
            "history-order", "the fitness history's generations are not 0, 1, 2, … in order",
            "pack the run again with `tinyrouter pack`"))
    best, seen = -np.inf, []
    for entry in history:
        best = max(best, float(entry.get("max", -np.inf)))
        seen.append(float(entry.get("best", np.nan)) + 1e-9 >= best
                    and float(entry.get("max", np.inf)) + 1e-9 >= float(entry.get("mean", 0)))
    if not all(seen):
        found.append(Advisory(
            "history-values", "the fitness history is not what one run writes (a 'best' below "
            "an earlier 'max', or a 'max' below its 'mean')",
            "pack the run again with `tinyrouter pack`; a hand-edited receipt reads as one"))
    return found


def ledger_advisories(receipt: Mapping[str, Any], ledger: Path) -> list[Advisory]:
    """The receipt's cost and ledger head against the miner's ledger file."""
    from evaluator.pool.ledger import verify_ledger

    try:
        checked = verify_ledger(ledger)
    except (LedgerError, OSError) as exc:
        return [Advisory("ledger-unreadable", f"the ledger {ledger.name} does not verify: {exc}",
                         "point --ledger at the run's ledger.jsonl, unedited")]
    found = []
    if checked.head != receipt.get("ledger_head"):
        found.append(Advisory(
            "ledger-head", f"the receipt names ledger head {str(receipt.get('ledger_head'))[:12]}… "
            f"but {ledger.name} ends at {checked.head[:12]}…",
            "pack from the run whose ledger this is, after its last paid call"))
    cost = receipt.get("total_cost_usd")
    if not isinstance(cost, (int, float)) or abs(cost - checked.total_cost_usd) > COST_TOLERANCE_USD:
        found.append(Advisory(
            "ledger-cost", f"the receipt's cost ${cost} is not the ledger's "
            f"${checked.total_cost_usd:.6f}", "pack the run again; pack reads the cost from "
                                              "the ledger"))
    return found


def routing_advisories(models: Mapping[str, Sequence[str]]) -> list[Advisory]:
    """From each benchmark's turn-1 model choices on public items."""
    found = []
    for bench, picks in models.items():
        if not picks:
            continue
        top = max(sorted(set(picks)), key=list(picks).count)
        share = list(picks).count(top) / len(picks)
        if share >= COLLAPSE_SHARE:
            found.append(Advisory(
                "routing-collapse", f"on {bench} the head sends {share:.0%} of the public items "
                f"to {top}: it routes like a single model", "train longer or on more data, and "
                "compare `tinyrouter score` with the best single model's accuracy"))
    return found
