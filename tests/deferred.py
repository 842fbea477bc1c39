"""Modules a test module names at its top but loads when a test first reads them, so that
collecting the suite never imports torch or transformers: `torch = deferred("torch")`."""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any


class _Deferred(ModuleType):
    def __getattr__(self, name: str) -> Any:
        if name.startswith(("__", "_mock")) or name == "pytestmark":  # pytest's own probes
            raise AttributeError(name)
        return getattr(importlib.import_module(self.__name__), name)


def deferred(name: str) -> Any:
    """The module `name`, imported at its first attribute read."""
    return _Deferred(name)
