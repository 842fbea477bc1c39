"""Whole-run caps: a cgroup v2 child per run, capping its memory and tasks together."""

from __future__ import annotations

import contextlib
import errno
import functools
import logging
import os
import signal
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

from evaluator.errors import IsolationError
from evaluator.sandbox.limits import CGROUP, PER_PROCESS, Limits

log = logging.getLogger(__name__)

CGROUP_NAME = "tinyrouter-sandbox"
CGROUP_DRAIN_SECONDS = 2.0


def caps_available() -> str:
    """How memory and processes are capped for a whole run here: a cgroup, or per process."""
    return CGROUP if cgroup_base() else PER_PROCESS


@functools.lru_cache(maxsize=1)
def cgroup_base() -> Path | None:
    """Our folder under a cgroup v2 root that hands out memory and pids; None without one."""
    mount = _cgroup2_mount()
    try:
        if mount is None or not {"memory", "pids"} <= set(
                (mount / "cgroup.subtree_control").read_text().split()):
            return None
        base = mount / CGROUP_NAME
        base.mkdir(exist_ok=True)
        (base / "cgroup.subtree_control").write_text("+memory +pids")
        return base
    except OSError as exc:
        if os.geteuid() == 0:  # root on a host that offers one: a cgroup that fails is no cap
            raise IsolationError(f"cannot set up the sandbox's cgroup under {mount}: {exc}") from exc
        log.info("sandbox: no cgroup for the runs (%s); capping memory per process", exc)
        return None


def _cgroup2_mount() -> Path | None:
    """Where the cgroup v2 hierarchy is mounted at its root, from mountinfo."""
    with open("/proc/self/mountinfo", encoding="utf-8") as handle:
        for line in handle:
            fields = line.split()
            kind = fields[fields.index("-") + 1]
            if kind == "cgroup2" and fields[3] == "/":
                return Path(fields[4])
    return None


@contextlib.contextmanager
def run_cgroup(limits: Limits, pids: int) -> Iterator[str | None]:
    """A fresh cgroup capping one run's memory and tasks, emptied and removed afterwards."""
    base = cgroup_base()
    if base is None:
        yield None
        return
    group = base / f"run-{uuid.uuid4().hex}"
    try:
        group.mkdir()
    except OSError as exc:
        raise IsolationError(f"cannot create the run's cgroup under {base}: {exc}") from exc
    try:
        (group / "memory.max").write_text(str(limits.memory_mb << 20))
        (group / "pids.max").write_text(str(pids))
        for name, value in {"memory.swap.max": "0", "memory.oom.group": "1"}.items():
            if (group / name).exists():  # with swap accounting, on newer kernels
                (group / name).write_text(value)
    except OSError as exc:
        _remove_cgroup(group)
        raise IsolationError(f"cannot cap the run's cgroup {group}: {exc}") from exc
    try:
        yield str(group)
    finally:
        _remove_cgroup(group)


def _remove_cgroup(group: Path) -> None:
    """Kill what is left in it (cgroup.kill, else each pid), wait until it is empty, remove it."""
    deadline = time.monotonic() + CGROUP_DRAIN_SECONDS
    while True:
        try:
            (group / "cgroup.kill").write_text("1")
        except OSError:
            with contextlib.suppress(OSError):
                for pid in (group / "cgroup.procs").read_text().split():
                    os.kill(int(pid), signal.SIGKILL)
        try:
            group.rmdir()
            return
        except OSError as exc:
            if exc.errno != errno.EBUSY or time.monotonic() > deadline:
                log.warning("sandbox: cannot remove cgroup %s: %s", group, exc)
                return
        time.sleep(0.005)  # busy until its last task is reaped
