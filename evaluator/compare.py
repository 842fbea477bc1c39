"""How two heads' turn-1 decisions differ on public rows: `tinyrouter diff`.

For a miner's successive generations, or a head against the king: per benchmark and item
category, each head's model and role mix, how often they agree, and where accuracy moved
(each decision graded by the chosen model's collected answer, as cached accuracy is).
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


def _group(rows: Sequence[AnsweredItem], first: Sequence[Decision],
           second: Sequence[Decision], rules: Competition) -> dict[str, Any]:
    right = [np.mean([r.answers[d.model].correct for r, d in zip(rows, ds, strict=True)])
             for ds in (first, second)]
    return {"rows": len(rows),
            "models": [_mix(ds, rules.pool_names, "model") for ds in (first, second)],
            "roles": [_mix(ds, ROLES, "role") for ds in (first, second)],
            "same_model": float(np.mean([a.model == b.model for a, b in zip(first, second,
                                                                            strict=True)])),
            "same_decision": float(np.mean([a == b for a, b in zip(first, second, strict=True)])),
            "accuracy": [float(v) for v in right], "accuracy_change": float(right[1] - right[0])}


def compare_heads(first: Head, second: Head, rows: Sequence[AnsweredItem], router: Any,
                  rules: Competition) -> dict[str, Any]:
    """Both heads' decisions on `rows`, compared per benchmark and per category."""
    transcripts = [coordinator_transcript(row.item.prompt, []) for row in rows]
    a = router.decide(transcripts, first.theta, reuse=True)
    b = router.decide(transcripts, second.theta, reuse=True)
    report: dict[str, Any] = {"heads": [first.label, second.label], "per_benchmark": {}}
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
    return report
