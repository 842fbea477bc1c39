"""Running untrusted Python programs: the code a routed model writes may be an attack.

What it does. Each program runs in its own process tree with an empty environment
(no secret reaches it), under rlimits on CPU time, address space, processes, file size
and open files, a wall-clock limit and a cap on captured output; afterwards its process
group is killed. Memory and processes are capped for the whole run, not per process:
by a cgroup v2 child of its own where the grader may make one (root, on a host whose
root cgroup hands out the memory and pids controllers), otherwise by per-process limits
sized so that their product stays under the cap (at most `memory_mb // process_memory_mb`
processes, each with its share of the address space); `caps_available()` says which
one is in force, and each `RunResult.caps` which one ran. When the grader runs as root
the program runs under an unprivileged uid of its own (one per concurrent run, claimed
with a lock file, so `RLIMIT_NPROC`, which does not bind root, binds it and one
program's fork bomb cannot starve another's), and nothing of the run outlives it: its
cgroup is emptied, or bubblewrap's pid namespace dies with it, or every process left
under that uid is killed. Where bubblewrap works it adds: no network (a private,
unconfigured network namespace), a private pid namespace (every process, detached or
not, dies with the sandbox), a neutral hostname, no user namespaces of its own (a
seccomp filter refuses them, so the program cannot mount a file system of its own past
the tmpfs and file-size caps), a read-only view of the interpreter, its standard library
and the shared libraries they load, and nothing else of the host (no rest of /usr, no
site-packages, no repository, no home, no /etc), the program's files passed in through
file descriptors and bwrap's options through another (so /proc/1/cmdline and mountinfo
show no host temp path), a read-only root, a small private tmpfs for /tmp, and no new
privileges. Only the test input reaches the child; expected outputs stay in the grader,
which decides from captured stdout, never from a status the child reports.

Many runs of one program (`run_each`, one test each) share one sandbox, never two programs.
A runner starts first inside it: undumpable (no run may open its pipes under /proc, read its
memory or ptrace it), under bubblewrap pid 1 of the namespace (no run's signal reaches it).
It starts each run in a fresh interpreter, in a session of its own, under the rlimits, wall
clock and output cap of a run of its own, and hands back the run's capped stdout, stderr and
exit status over its own pipes; then it kills what is left of the run (as root or in the
namespace, every process but itself), reaps it and empties the working folder (what the run
locked away there stays, for its own program's later runs). The grader judges every run;
a runner that dies or stops answering fails the run it was on, and the whole is bounded by
the runs' wall clocks plus slack. The runner is one more process of the run, of one
process's share of memory. Under the rlimits fallback a run can kill the runner, failing
its own program's later runs.

What it does not protect against. Kernel exploits and side channels; CPU contention
with other work on the machine; mountinfo still names the host folders the interpreter
and its libraries live in, and their file system. The seccomp filter knows x86_64 and
aarch64 only (elsewhere user namespaces stay open, and the self-test finds isolation not in
force). Without a cgroup, a program's threads count against its process limit, and a
grader that is not root has no per-run process limit under rlimits alone (`RLIMIT_NPROC`
counts all of its user's processes; in bubblewrap's user namespace it is set inside, where
it counts the run's own).
Under rlimits alone the program can read what the file system lets any user read, write
to world-writable places, open network connections and create user namespaces; and when
the grader is not root, a process that leaves its session may outlive the run and
`kill(-1)` reaches the grader's own processes. So a run that names no isolation gets
bubblewrap only once `evaluator.isolation`'s self-test has proven it here, rlimits only
under the explicit `--unsandboxed` opt-in, and otherwise an `IsolationError`: it fails
closed (`isolation_available()` says what merely starts here).

The parts: `limits` (a run's limits and result), `runs` (a fresh sandbox around each
supervised program), `process` (supervising it), `bubblewrap`, `seccomp`, `cgroups`, `probe`
(what starts here), and `inside/` (the standalone programs a bare interpreter runs there).
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
