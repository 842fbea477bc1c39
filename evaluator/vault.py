"""Secrets held tightly: read once from the environment, then gone from it.

`take(name)` moves a secret out of `os.environ` into this module (so no child process
inherits it, whatever environment it is started with) and makes this process undumpable:
its own user can then neither read its /proc/<pid>/environ (which still shows the
environment it started with) nor its memory, nor ptrace it. Only root can.
"""

from __future__ import annotations

import ctypes
import logging
import os
import sys

log = logging.getLogger(__name__)

PR_SET_DUMPABLE, PR_GET_DUMPABLE = 4, 3
_held: dict[str, str] = {}


def take(name: str) -> str:
    """The secret `name` ("" when unset): moved out of the environment on first sight."""
    value = os.environ.pop(name, None)
    if value is not None:
        _held[name] = value
        if value:
            make_undumpable()
    return _held.get(name, "")


def forget() -> None:
    """Drop every secret held (the end of a command run in-process, and tests)."""
    _held.clear()


def make_undumpable() -> None:
    """PR_SET_DUMPABLE 0: no /proc/<pid>/environ, memory or ptrace for this process's own user."""
    if not sys.platform.startswith("linux"):
        return
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_DUMPABLE, ctypes.c_ulong(0), ctypes.c_ulong(0), ctypes.c_ulong(0),
                  ctypes.c_ulong(0)) != 0:
        log.warning("vault: cannot make this process undumpable (errno %d)", ctypes.get_errno())


def dumpable() -> bool:
    """Whether this process is dumpable (readable by its own user under /proc)."""
    if not sys.platform.startswith("linux"):
        return True
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.prctl(PR_GET_DUMPABLE, ctypes.c_ulong(0), ctypes.c_ulong(0), ctypes.c_ulong(0),
                      ctypes.c_ulong(0)) == 1
