"""The coordinator: frozen Qwen3 encoder, SVF, routing head, the router and the prefix cache.

`encoder` is the only module that imports transformers; names load lazily from here so
commands that never encode stay quick to start.
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "Encoder": "encoder", "load_encoder": "encoder", "competition_for_encoder": "encoder",
    "make_tiny": "tiny", "Router": "router", "load_router": "router", "PrefixCache": "prefix",
    "CachedFeaturizer": "prefix", "features": "prefix", "prefix_of": "prefix",
}
__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
