"""How your head's turn-1 decisions differ from another's on public rows: `tinyrouter diff`.

For a miner's successive generations, or a head against the king: per benchmark and item
category, each head's model and role mix, how often they agree, and where accuracy differs
(each decision graded by the chosen model's collected answer, as cached accuracy is). Every
difference is yours minus theirs: positive means your head is better.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from evaluator.heads import Head
from evaluator.loop import coordinator_transcript
from evaluator.rules import ROLES, Competition
from evaluator.types import AnsweredItem, Decision


def _mix(decisions: Sequence[Decision], names: Sequence[str], part: str) -> dict[str, float]:
    return {n: sum(getattr(d, part) == n for d in decisions) / len(decisions) for n in names}


def _group(rows: Sequence[AnsweredItem], yours: Sequence[Decision],
           theirs: Sequence[Decision], rules: Competition) -> dict[str, Any]:
    right = [float(np.mean([r.answers[d.model].correct for r, d in zip(rows, ds, strict=True)]))
             for ds in (yours, theirs)]
    return {"rows": len(rows),
            "models": {side: _mix(ds, rules.pool_names, "model")
                       for side, ds in (("yours", yours), ("theirs", theirs))},
            "roles": {side: _mix(ds, ROLES, "role")
                      for side, ds in (("yours", yours), ("theirs", theirs))},
            "same_model": float(np.mean([a.model == b.model for a, b in zip(yours, theirs,
                                                                            strict=True)])),
            "same_decision": float(np.mean([a == b for a, b in zip(yours, theirs, strict=True)])),
            "accuracy": {"yours": right[0], "theirs": right[1]},
            "difference": right[0] - right[1]}


def compare_heads(yours: Head, theirs: Head, rows: Sequence[AnsweredItem], router: Any,
                  rules: Competition) -> dict[str, Any]:
    """Both heads' decisions on `rows`, compared per benchmark and per category. The overall
    difference is the mean of the benchmarks' (as the composite averages them), so
    `weight_cached` times it is the cached part of `score --king`'s delta on the same rows."""
    transcripts = [coordinator_transcript(row.item.prompt, []) for row in rows]
    a = router.decide(transcripts, yours.theta, reuse=True)
    b = router.decide(transcripts, theirs.theta, reuse=True)
    report: dict[str, Any] = {"yours": yours.label, "theirs": theirs.label, "per_benchmark": {}}
    for bench in rules.benchmarks:
        picked = [i for i, row in enumerate(rows) if row.item.benchmark == bench]
        if not picked:
            continue
        entry = _group([rows[i] for i in picked], [a[i] for i in picked], [b[i] for i in picked],
                       rules)
        categories: dict[str, list[int]] = {}
        for i in picked:
            categories.setdefault(str(rows[i].item.category), []).append(i)
        entry["by_category"] = {cat: _group([rows[i] for i in ix], [a[i] for i in ix],
                                            [b[i] for i in ix], rules)
                                for cat, ix in sorted(categories.items())}
        report["per_benchmark"][bench] = entry
    report["difference"] = float(np.mean([e["difference"]
                                          for e in report["per_benchmark"].values()]))
    return report
