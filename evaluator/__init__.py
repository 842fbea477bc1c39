"""TinyRouter: the incentivized open benchmark for LLM routing.

The public surface, one name per stage of the data flow (submission → gates → policy →
scoring → leaderboard → site). Names load on first use, so `tinyrouter` starts quickly.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_PUBLIC = {
    # rules and shared nouns
    "Competition": "rules", "OFFICIAL": "rules",
    "Item": "types", "ModelAnswer": "types", "AnsweredItem": "types", "Decision": "types",
    "TinyRouterError": "errors",
    # submission and gates
    "Submission": "submission", "read_weights": "submission", "write_submission": "submission",
    "GATES": "gates", "run_gates": "gates",
    # coordinator, benchmarks, pool, the loop
    "load_encoder": "coordinator", "Router": "coordinator", "get_benchmark": "benchmarks",
    "open_benchmark": "benchmarks.sealing", "OpenRouterClient": "pool.client",
    "verify_ledger": "pool.ledger", "run_sessions": "loop",
    # verdicts and state
    "evaluate_submission": "evaluate", "Result": "records", "Store": "store",
    "apply_result": "leaderboard", "run_training": "train.run", "oracle_report": "baselines",
    "build_site": "site",
}
__all__ = ["__version__", *sorted(_PUBLIC)]


def __getattr__(name: str) -> Any:
    if name not in _PUBLIC:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_PUBLIC[name]}"), name)
