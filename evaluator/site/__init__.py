"""The leaderboard site: pages generated from `leaderboard/` at MkDocs build time.

Names load lazily from here, so reading a board's state needs neither MkDocs nor matplotlib.
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {"build_site": "build", "LeaderboardState": "state", "load_state": "state"}
__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
