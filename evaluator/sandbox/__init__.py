"""Running untrusted Python programs: the code a routed model writes may be an attack.

Each program runs in a process tree of its own with an empty environment, under rlimits, a
wall clock and an output cap, its memory and processes capped for the whole run (`cgroups`
where the grader may make one, else per-process shares), as a uid of its own when the grader
is root. Where bubblewrap works it adds no network, a private pid namespace, no user
namespaces (`seccomp`) and a read-only view of the interpreter and nothing else of the host.
Many runs of one program share one sandbox through a runner inside it (`run_each`). The
grader decides from captured stdout, never from a status the child reports.

Not protected against: kernel exploits and side channels, CPU contention, mountinfo naming
the interpreter's host folders; the seccomp filter knows x86_64 and aarch64 only. Under
rlimits alone a program can read world-readable files, use the network and create user
namespaces, so a run that names no isolation gets bubblewrap only once `evaluator.isolation`'s
self-test proved it here, rlimits only under `--unsandboxed`, otherwise an `IsolationError`.
"""

from __future__ import annotations

import functools
import json
import logging
import subprocess
from collections.abc import Callable, Sequence

from evaluator.sandbox.bubblewrap import SANDBOX_HOSTNAME
from evaluator.sandbox.cgroups import caps_available
from evaluator.sandbox.inside import HARNESS, HARNESS_FILE, PROGRAM_FILE
from evaluator.sandbox.limits import (
    BUBBLEWRAP,
    CGROUP,
    DEFAULT_LIMITS,
    PER_PROCESS,
    RLIMITS,
    Limits,
    Run,
    RunResult,
    process_cap,
)
from evaluator.sandbox.probe import (
    NOT_IN_FORCE,
    Probe,
    bwrap_as_root,
    default_mode,
    probe,
    probe_failure,
)
from evaluator.sandbox.runs import run_many, run_one

__all__ = [
    "BUBBLEWRAP", "CGROUP", "DEFAULT_LIMITS", "NOT_IN_FORCE", "PER_PROCESS", "RLIMITS",
    "SANDBOX_HOSTNAME", "Limits", "Probe", "Run", "RunResult", "bwrap_as_root", "call_function",
    "caps_available", "isolation_available", "probe", "probe_failure", "process_cap",
    "run_each", "run_program", "runs_share_a_sandbox",
]

log = logging.getLogger(__name__)


def run_program(source: str, stdin: str, limits: Limits = DEFAULT_LIMITS,
                isolation: str | None = None) -> RunResult:
    """Run `source` as a Python script with `stdin` as its input."""
    return run_one({PROGRAM_FILE: source}, PROGRAM_FILE, stdin, limits, *_mode(isolation))


def call_function(source: str, fn_name: str, stdin: str, limits: Limits = DEFAULT_LIMITS,
                  isolation: str | None = None) -> RunResult:
    """Call `fn_name` (a `Solution` method or a top-level function) of `source`.

    `stdin` holds one JSON value per line, the arguments; the return value comes back
    as one JSON line on stdout (anything the program prints itself is discarded).
    """
    files = {PROGRAM_FILE: source, HARNESS_FILE: HARNESS}
    return run_one(files, HARNESS_FILE, json.dumps(fn_name) + "\n" + stdin, limits,
                   *_mode(isolation))


def run_each(source: str, runs: Sequence[Run], limits: Limits = DEFAULT_LIMITS,
             isolation: str | None = None,
             stop: Callable[[RunResult], bool] = lambda result: False) -> list[RunResult]:
    """`source` on each of `runs` in turn, in one sandbox: results as `run_program` or
    `call_function` would give, one per run, up to the first one `stop` accepts.

    A runner inside starts each run in a fresh interpreter under the same limits and
    hands back its pipes' contents and exit status; the caller judges them (see
    `inside/program_runner.py`).
    """
    if not runs:
        return []
    return run_many(source, runs, limits, *_mode(isolation), stop)


def runs_share_a_sandbox(isolation: str | None = None) -> bool:
    """Whether `run_each` works here under `isolation` (default: bubblewrap): its runner needs
    bubblewrap's `--as-pid-1`, which older releases lack. When it does not, graders start a
    sandbox per run instead (said once)."""
    return _runs_share(isolation or default_mode())


@functools.lru_cache(maxsize=2)
def _runs_share(mode: str) -> bool:
    try:
        result = run_each("print(input())", [Run("ok")], isolation=mode)[0]
        if result.ok and result.stdout.strip() == "ok":
            return True
        why = result.reason()
    except (OSError, subprocess.SubprocessError) as exc:
        why = str(exc)
    log.warning("sandbox: the per-program runner does not start here under %s (%s); grading "
                "starts a sandbox per test instead", mode, why)
    return False


def isolation_available() -> str:
    """The isolation this machine gives: bubblewrap when it works here, else rlimits."""
    return probe().mode


def _mode(isolation: str | None) -> tuple[str, bool]:
    """The isolation a run gets (by default bubblewrap where it starts, else IsolationError)
    and whether bubblewrap runs as root for it, as the probe found."""
    mode = isolation or default_mode()
    return mode, mode == BUBBLEWRAP and bwrap_as_root()
