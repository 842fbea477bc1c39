"""A fresh sandbox around each supervised program: its uid, cgroup, command line and rlimits,
for one run or for a runner serving many runs of one program; nothing of it outlives it."""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import math
import os
import random
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from evaluator.sandbox import cgroups, inside, process
from evaluator.sandbox.bubblewrap import bubblewrap_argv
from evaluator.sandbox.inside import PROGRAM_FILE, RUNNER_FILE
from evaluator.sandbox.limits import (
    BUBBLEWRAP,
    RLIMITS,
    Limits,
    Run,
    RunResult,
    as_pairs,
    beside_own_tasks,
    each_seconds,
    run_rlimits,
)

SANDBOX_UID_BASE = 1_900_000_000  # unprivileged uids with no account and no files
SLOTS = 1024


def run_one(files: dict[str, str], entry: str, stdin: str, limits: Limits, mode: str,
            as_root: bool) -> RunResult:
    """`entry` among `files` run once on `stdin` in a sandbox of its own."""
    def supervise(argv: list[str], cwd: str, fds: list[int], caps: str
                  ) -> tuple[RunResult, bool]:
        result = process.supervise(argv, cwd, stdin, limits, fds)
        ended_itself = not (result.timed_out or result.output_truncated)
        return result, mode == BUBBLEWRAP and ended_itself  # its pid namespace died before bwrap

    result, caps = sandboxed(files, entry, limits, mode, as_root, supervise)
    return dataclasses.replace(result, isolation=mode, caps=caps)


def run_many(source: str, runs: Sequence[Run], limits: Limits, mode: str, as_root: bool,
             stop: Callable[[RunResult], bool]) -> list[RunResult]:
    """`source` on each of `runs` in one sandbox, by the runner inside, up to `stop`."""
    files = {PROGRAM_FILE: source, inside.HARNESS_FILE: inside.HARNESS, RUNNER_FILE: inside.RUNNER}
    requests = [process.request(run) for run in runs]

    def supervise(argv: list[str], cwd: str, fds: list[int], caps: str
                  ) -> tuple[list[RunResult], bool]:
        sweep = mode == BUBBLEWRAP or os.geteuid() == 0  # a pid namespace, or a uid of its own
        run = beside_own_tasks(run_rlimits(limits, caps, runner_processes(mode, as_root)), mode)
        own = beside_own_tasks(_runner_rlimits(limits, caps, mode, as_root, len(runs)), mode)
        spec = f"{limits.wall_seconds!r} {limits.output_bytes} {int(sweep)} {as_pairs(run)} " \
               f"{as_pairs(own)}\n"
        results, ended_itself = process.supervise_each(argv, cwd, fds, spec.encode(), requests,
                                                       limits, stop,
                                                       each_seconds(limits, len(requests)))
        return results, ended_itself and sweep  # it reaped every run before it ended

    results, caps = sandboxed(files, RUNNER_FILE, limits, mode, as_root, supervise, len(runs))
    return [dataclasses.replace(result, isolation=mode, caps=caps) for result in results]


def runner_processes(mode: str, as_root: bool) -> int:
    """Processes the runner adds under the program's uid (unprivileged bwrap had its reaper)."""
    return 0 if mode == BUBBLEWRAP and not as_root else 1


def _runner_rlimits(limits: Limits, caps: str, mode: str, as_root: bool, runs: int
                    ) -> dict[str, int]:
    """The runner's own: a run's rlimits, with CPU time for all the runs and room for itself."""
    rlimits = run_rlimits(limits, caps, runner_processes(mode, as_root))
    return {**rlimits, "RLIMIT_CPU": math.ceil(each_seconds(limits, runs))}


def sandboxed(files: dict[str, str], entry: str, limits: Limits, mode: str, as_root: bool,
              supervise: Callable[..., tuple[Any, bool]], runs: int | None = None
              ) -> tuple[Any, str]:
    """`supervise(argv, cwd, fds, caps)` on `entry` started in a fresh sandbox, and (what it
    returned, the caps); nothing of the sandbox outlives it. `supervise` returns (its value,
    whether nothing of the run can be left: else a sweep).

    `runs` set: the entry is the runner, as pid 1 of its own pid namespace under bubblewrap,
    with CPU time for all the runs and room for itself beside each run's processes.
    `as_root`: whether bubblewrap runs as root (else unprivileged, in a user namespace).
    """
    if mode not in (BUBBLEWRAP, RLIMITS):
        raise ValueError(f"unknown isolation {mode!r}")
    as_root = as_root and mode == BUBBLEWRAP
    caps = cgroups.caps_available()
    rlimits = run_rlimits(limits, caps) if runs is None else \
        _runner_rlimits(limits, caps, mode, as_root, runs)
    extra = runs is not None and mode == RLIMITS  # under bwrap the runner takes its reaper's place
    pids = limits.processes + (runner_processes(mode, as_root) if extra else 0)
    # In a user namespace of its own RLIMIT_NPROC counts the run's tasks only, if set inside;
    # outside, it counts every task of this user, and bubblewrap could not even start
    userns = mode == BUBBLEWRAP and not as_root
    outside = {k: v for k, v in rlimits.items() if not (userns and k == "RLIMIT_NPROC")}
    rlimits, outside = beside_own_tasks(rlimits, mode), beside_own_tasks(outside, mode)
    inner = _launcher_argv(rlimits, None) if userns and runs is None else []
    with _Slot() as uid, cgroups.run_cgroup(limits, pids) as cgroup, \
            _command(mode, files, entry, limits, uid, as_pid_1=runs is not None,
                     inner=inner, as_root=as_root) as (argv, cwd, fds):
        # without a cgroup to join, the runner sets its own rlimits: a launcher less to start
        launcher = [] if runs is not None and cgroup is None else _launcher_argv(outside, cgroup)
        nothing_left = False
        try:
            value, nothing_left = supervise([*launcher, *argv], cwd, fds, caps)
        finally:
            if cgroup is None and not nothing_left:
                process.sweep(uid)
    return value, caps


@contextlib.contextmanager
def _command(mode: str, files: dict[str, str], entry: str, limits: Limits, uid: int,
             as_pid_1: bool, inner: Sequence[str] = (), as_root: bool = False
             ) -> Iterator[tuple[list[str], str, list[int]]]:
    """(argv, cwd, fds to pass) starting `entry` among `files` under `mode`, as `uid`;
    `inner` runs first inside bubblewrap's namespaces (a launcher setting rlimits there)."""
    if mode == BUBBLEWRAP:  # the files travel as memfds: nothing of a temp folder shows inside
        first = [*(process.drop_privileges(uid) if as_root else []), *inner]
        argv, fds = bubblewrap_argv(files, entry, limits, first, as_pid_1, as_root)
        if not as_root:  # bwrap itself runs unprivileged, in a user namespace
            argv = process.drop_privileges(uid) + argv
        try:
            yield argv, "/", fds
        finally:
            for fd in fds:
                os.close(fd)
        return
    with tempfile.TemporaryDirectory(prefix="tinyrouter-sandbox-") as work:
        code_dir, scratch = Path(work, "code"), Path(work, "tmp")
        code_dir.mkdir()
        scratch.mkdir()
        for name, text in files.items():
            (code_dir / name).write_text(text, encoding="utf-8")
        for path in (Path(work), code_dir, *code_dir.iterdir()):
            path.chmod(0o755 if path.is_dir() else 0o644)
        scratch.chmod(0o777)
        yield [*process.drop_privileges(uid), process.python(), *inside.flags(entry),
               str(code_dir / entry)], str(scratch), []


def _launcher_argv(rlimits: dict[str, int], cgroup: str | None) -> list[str]:
    """A tiny launcher joins the run's cgroup, sets the rlimits, then execs the rest."""
    return [process.python(), "-I", "-S", "-c", inside.LAUNCHER, cgroup or "", as_pairs(rlimits)]


class _Slot:
    """Claim an unprivileged uid that no other running sandbox uses, in any process.

    A lock file per uid (held with flock for the run) keeps concurrent graders apart;
    without root there is no uid to switch to and the claim is a formality.
    """

    def __enter__(self) -> int:
        if os.geteuid() != 0:
            self.fd = None
            return os.geteuid()
        folder = Path(tempfile.gettempdir(), "tinyrouter-sandbox-uids")
        folder.mkdir(mode=0o700, exist_ok=True)
        start = random.randrange(SLOTS)
        for step in range(SLOTS):
            uid = SANDBOX_UID_BASE + (start + step) % SLOTS
            fd = os.open(folder / str(uid), os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            self.fd = fd
            return uid
        raise OSError(f"all {SLOTS} sandbox uids are busy")

    def __exit__(self, *exc) -> None:
        if self.fd is not None:
            os.close(self.fd)  # closing releases the lock
