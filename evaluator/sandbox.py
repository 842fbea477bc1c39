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
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import fcntl
import functools
import json
import logging
import math
import os
import platform
import random
import re
import select
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from evaluator.errors import IsolationError, TinyRouterError

log = logging.getLogger(__name__)

BUBBLEWRAP = "bubblewrap"
RLIMITS = "rlimits"
CGROUP = "cgroup"
PER_PROCESS = "per-process"
SANDBOX_UID_BASE = 1_900_000_000  # unprivileged uids with no account and no files
SLOTS = 1024
HARNESS_FILE = "harness.py"
PROGRAM_FILE = "solution.py"
RUNNER_FILE = "runner.py"
EACH_START_SECONDS = 2.0  # run_each's whole-run bound: the sandbox and its runner starting,
EACH_TEST_SECONDS = 0.25  # and per test its start, sweep and clean-up, past the test's own limit
SYSTEM_PYTHON = "/usr/bin/python3"
SANDBOX_DIR = "/sandbox"
SANDBOX_HOSTNAME = "sandbox"
CGROUP_NAME = "tinyrouter-sandbox"
CGROUP_DRAIN_SECONDS = 2.0
NOT_IN_FORCE = "runner isolation not in force"


@dataclasses.dataclass(frozen=True)
class Limits:
    """Resource limits for one run of an untrusted program.

    `memory_mb` and `processes` cap the whole run. Without a cgroup they become
    per-process limits: at most `memory_mb // process_memory_mb` processes, each with
    `memory_mb` divided among them.
    """

    cpu_seconds: int = 4
    wall_seconds: float = 10.0
    memory_mb: int = 1024
    processes: int = 32
    file_size_mb: int = 8
    open_files: int = 64
    tmpfs_mb: int = 32
    output_bytes: int = 1 << 20
    process_memory_mb: int = 256


DEFAULT_LIMITS = Limits()


@dataclasses.dataclass(frozen=True)
class RunResult:
    """What the grader sees of a run: capped output and how the run ended."""

    stdout: str
    stderr: str
    returncode: int | None
    timed_out: bool = False
    output_truncated: bool = False
    isolation: str = RLIMITS
    caps: str = PER_PROCESS

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out and not self.output_truncated

    def reason(self) -> str | None:
        """Why the run failed, in words a miner can act on; None when it exited cleanly."""
        if self.timed_out:
            return "time limit exceeded"
        if self.output_truncated:
            return "output limit exceeded"
        signum = -self.returncode if self.returncode and self.returncode < 0 else (
            self.returncode - 128 if self.returncode and self.returncode > 128 else 0)
        if signum in set(signal.Signals):
            return f"killed by {signal.Signals(signum).name} (a resource limit or a crash)"
        if self.returncode:
            tail = self.stderr.strip().splitlines()[-1:] or [""]
            return f"exit status {self.returncode}: {tail[0][:200]}".rstrip(": ")
        return None


def run_program(source: str, stdin: str, limits: Limits = DEFAULT_LIMITS,
                isolation: str | None = None) -> RunResult:
    """Run `source` as a Python script with `stdin` as its input."""
    return _run({PROGRAM_FILE: source}, PROGRAM_FILE, stdin, limits, isolation)


def call_function(source: str, fn_name: str, stdin: str, limits: Limits = DEFAULT_LIMITS,
                  isolation: str | None = None) -> RunResult:
    """Call `fn_name` (a `Solution` method or a top-level function) of `source`.

    `stdin` holds one JSON value per line, the arguments; the return value comes back
    as one JSON line on stdout (anything the program prints itself is discarded).
    """
    files = {PROGRAM_FILE: source, HARNESS_FILE: HARNESS}
    return _run(files, HARNESS_FILE, json.dumps(fn_name) + "\n" + stdin, limits, isolation)


@dataclasses.dataclass(frozen=True)
class Run:
    """One test of a program for `run_each`: its input, and the function to call (None: the
    program runs as a script, as `run_program`; else as `call_function`)."""

    stdin: str
    fn_name: str | None = None


def run_each(source: str, runs: Sequence[Run], limits: Limits = DEFAULT_LIMITS,
             isolation: str | None = None,
             stop: Callable[[RunResult], bool] = lambda result: False) -> list[RunResult]:
    """`source` on each of `runs` in turn, in one sandbox: results as `run_program` or
    `call_function` would give, one per run, up to the first one `stop` accepts.

    A runner inside starts each run in a fresh interpreter under the same limits and
    hands back its pipes' contents and exit status; the caller judges them (see RUNNER).
    """
    if not runs:
        return []
    files = {PROGRAM_FILE: source, HARNESS_FILE: HARNESS, RUNNER_FILE: RUNNER}
    requests = [_request(run) for run in runs]

    def supervise(argv: list[str], cwd: str, fds: list[int], mode: str, caps: str
                  ) -> tuple[list[RunResult], bool]:
        sweep = mode == BUBBLEWRAP or os.geteuid() == 0  # a pid namespace, or a uid of its own
        run = _beside_own_tasks(_rlimits(limits, caps, _runner_processes(mode)), mode)
        own = _beside_own_tasks(_runner_rlimits(limits, caps, mode, len(runs)), mode)
        spec = f"{limits.wall_seconds!r} {limits.output_bytes} {int(sweep)} {_pairs(run)} " \
               f"{_pairs(own)}\n"
        results, ended_itself = _supervise_each(argv, cwd, fds, spec.encode(), requests, limits,
                                                stop)
        return results, ended_itself and sweep  # it reaped every run before it ended

    results, mode, caps = _sandboxed(files, RUNNER_FILE, limits, isolation, supervise, len(runs))
    return [dataclasses.replace(result, isolation=mode, caps=caps) for result in results]


def runs_share_a_sandbox(isolation: str | None = None) -> bool:
    """Whether `run_each` works here under `isolation` (default: bubblewrap): its runner needs
    bubblewrap's `--as-pid-1`, which older releases lack. When it does not, graders start a
    sandbox per run instead (said once)."""
    return _runs_share(isolation or _default_mode())


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
    return _probe()


def caps_available() -> str:
    """How memory and processes are capped for a whole run here: a cgroup, or per process."""
    return CGROUP if _cgroup_base() else PER_PROCESS


# One run --------------------------------------------------------------------------------


def _run(files: dict[str, str], entry: str, stdin: str, limits: Limits,
         isolation: str | None, as_root: bool | None = None) -> RunResult:
    def supervise(argv: list[str], cwd: str, fds: list[int], mode: str, caps: str
                  ) -> tuple[RunResult, bool]:
        result = _supervise(argv, cwd, stdin, limits, fds)
        ended_itself = not (result.timed_out or result.output_truncated)
        return result, mode == BUBBLEWRAP and ended_itself  # its pid namespace died before bwrap

    result, mode, caps = _sandboxed(files, entry, limits, isolation, supervise, as_root=as_root)
    return dataclasses.replace(result, isolation=mode, caps=caps)


def _sandboxed(files: dict[str, str], entry: str, limits: Limits, isolation: str | None,
               supervise: Callable[..., tuple[Any, bool]], runs: int | None = None,
               as_root: bool | None = None) -> tuple[Any, str, str]:
    """`supervise(argv, cwd, fds, mode, caps)` on `entry` started in a fresh sandbox, and
    (what it returned, the isolation, the caps); nothing of the sandbox outlives it.
    `supervise` returns (its value, whether nothing of the run can be left: else a sweep).

    `runs` set: the entry is the runner, as pid 1 of its own pid namespace under bubblewrap,
    with CPU time for all the runs and room for itself beside each run's processes.
    `as_root`: how bubblewrap runs (default: as the probe found; the probe tries both).
    """
    mode = isolation or _default_mode()
    if mode not in (BUBBLEWRAP, RLIMITS):
        raise ValueError(f"unknown isolation {mode!r}")
    as_root = bwrap_as_root() if as_root is None and mode == BUBBLEWRAP else bool(as_root)
    caps = caps_available()
    rlimits = _rlimits(limits, caps) if runs is None else _runner_rlimits(limits, caps, mode, runs)
    extra = runs is not None and mode == RLIMITS  # under bwrap the runner takes its reaper's place
    pids = limits.processes + (_runner_processes(mode) if extra else 0)
    # In a user namespace of its own RLIMIT_NPROC counts the run's tasks only, if set inside;
    # outside, it counts every task of this user, and bubblewrap could not even start
    userns = mode == BUBBLEWRAP and not as_root
    outside = {k: v for k, v in rlimits.items() if not (userns and k == "RLIMIT_NPROC")}
    rlimits, outside = _beside_own_tasks(rlimits, mode), _beside_own_tasks(outside, mode)
    inside = _launcher_argv(rlimits, None) if userns and runs is None else []
    with _slot() as uid, _run_cgroup(limits, pids) as cgroup, \
            _command(mode, files, entry, limits, uid, as_pid_1=runs is not None,
                     inside=inside, as_root=as_root) as (argv, cwd, fds):
        # without a cgroup to join, the runner sets its own rlimits: a launcher less to start
        launcher = [] if runs is not None and cgroup is None else _launcher_argv(outside, cgroup)
        nothing_left = False
        try:
            value, nothing_left = supervise([*launcher, *argv], cwd, fds, mode, caps)
        finally:
            if cgroup is None and not nothing_left:
                _sweep(uid)
    return value, mode, caps


@contextlib.contextmanager
def _command(mode: str, files: dict[str, str], entry: str, limits: Limits, uid: int,
             as_pid_1: bool, inside: Sequence[str] = (), as_root: bool = False
             ) -> Iterator[tuple[list[str], str, list[int]]]:
    """(argv, cwd, fds to pass) starting `entry` among `files` under `mode`, as `uid`;
    `inside` runs first inside bubblewrap's namespaces (a launcher setting rlimits there)."""
    if mode == BUBBLEWRAP:  # the files travel as memfds: nothing of a temp folder shows inside
        inner = [*(_drop_privileges(uid) if as_root else []), *inside]
        argv, fds = _bubblewrap_argv(files, entry, limits, inner, as_pid_1, as_root)
        if not as_root:
            argv = _drop_privileges(uid) + argv  # bwrap itself runs unprivileged, in a user namespace
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
        yield [*_drop_privileges(uid), _python(), *_flags(entry), str(code_dir / entry)], \
            str(scratch), []


def _supervise(argv: list[str], cwd: str, stdin: str, limits: Limits, fds: list[int]
               ) -> RunResult:
    """Start the tree in its own session, feed stdin, cap output, enforce wall time, kill."""
    proc = subprocess.Popen(argv, cwd=cwd, env=_clean_env(), stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True, pass_fds=fds)
    overflow = threading.Event()
    out, err = bytearray(), bytearray()
    threads = [threading.Thread(target=_feed, args=(proc.stdin, stdin), daemon=True),
               *(threading.Thread(target=_drain, args=(proc, pipe, buffer, limits, overflow),
                                  daemon=True)
                 for pipe, buffer in ((proc.stdout, out), (proc.stderr, err)))]
    for thread in threads:
        thread.start()
    try:
        timed_out = not _wait_unreaped(proc.pid, limits.wall_seconds) and not overflow.is_set()
    finally:
        _kill_tree(proc)
    for thread in threads:  # the tree is dead: the pipes reach EOF once drained
        thread.join(timeout=limits.wall_seconds)
    return RunResult(stdout=out.decode("utf-8", "replace"), stderr=err.decode("utf-8", "replace"),
                     returncode=None if timed_out else proc.returncode, timed_out=timed_out,
                     output_truncated=overflow.is_set())


def _wait_unreaped(pid: int, timeout: float) -> bool:
    """Wait for the exit without reaping, so the group id cannot be reused before the kill."""
    try:
        fd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT):
                return True
            time.sleep(0.01)
        return False
    try:
        return bool(select.select([fd], [], [], timeout)[0])
    finally:
        os.close(fd)


def _feed(pipe, text: str) -> None:
    try:
        pipe.write(text.encode("utf-8"))
    except (BrokenPipeError, OSError):
        pass  # the program stopped reading: its loss
    finally:
        with contextlib.suppress(OSError):
            pipe.close()


def _drain(proc: subprocess.Popen, pipe, buffer: bytearray, limits: Limits,
           overflow: threading.Event) -> None:
    """Read up to the cap; past it, flag the overflow and stop the program."""
    while chunk := pipe.read1(65536):
        room = limits.output_bytes - len(buffer)
        buffer.extend(chunk[:max(room, 0)])
        if len(chunk) > room:
            overflow.set()
            _signal_group(proc)
            break
    pipe.close()


def _kill_tree(proc: subprocess.Popen) -> None:
    """SIGKILL the session's process group; bubblewrap's pid namespace takes the rest."""
    _signal_group(proc)
    proc.wait()


def _sweep(uid: int) -> None:
    """As root, kill every process left under the slot's own uid (one that left the session)."""
    if os.geteuid() == 0:
        subprocess.run([*_drop_privileges(uid), _python(), "-I", "-S", "-c", SWEEPER],
                       env=_clean_env(), cwd="/", stdin=subprocess.DEVNULL,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)


def _signal_group(proc: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


# Many runs in one sandbox: the grader's end of the runner --------------------------------


class _Lost(Exception):
    """The runner stopped answering: it ended, or the whole run's time ran out."""

    def __init__(self, timed_out: bool) -> None:
        super().__init__("out of time" if timed_out else "the runner ended")
        self.timed_out = timed_out


def _request(run: Run) -> bytes:
    """`ENTRY LENGTH` and the run's stdin: the runner reads no JSON (json costs 5 ms to import)."""
    entry, stdin = (PROGRAM_FILE, run.stdin) if run.fn_name is None else \
        (HARNESS_FILE, json.dumps(run.fn_name) + "\n" + run.stdin)
    data = stdin.encode("utf-8")
    return f"{entry} {len(data)}\n".encode() + data


def _runner_processes(mode: str) -> int:
    """Processes the runner adds under the program's uid (unprivileged bwrap had its reaper)."""
    return 0 if mode == BUBBLEWRAP and not bwrap_as_root() else 1


def _runner_rlimits(limits: Limits, caps: str, mode: str, runs: int) -> dict[str, int]:
    """The runner's own: a run's rlimits, with CPU time for all the runs and room for itself."""
    rlimits = _rlimits(limits, caps, _runner_processes(mode))
    return {**rlimits, "RLIMIT_CPU": math.ceil(_each_seconds(limits, runs))}


def _each_seconds(limits: Limits, runs: int) -> float:
    return runs * (limits.wall_seconds + EACH_TEST_SECONDS) + EACH_START_SECONDS


def _supervise_each(argv: list[str], cwd: str, fds: list[int], spec: bytes,
                    requests: list[bytes], limits: Limits, stop: Callable[[RunResult], bool]
                    ) -> tuple[list[RunResult], bool]:
    """Hand the runner one request at a time and read its result back, until `stop` or the end.

    A runner that dies or overruns the whole run's bound fails the run it was on (and any left).
    """
    proc = subprocess.Popen(argv, cwd=cwd, env=_clean_env(), stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True, pass_fds=fds)
    channel = _Channel(proc, time.monotonic() + _each_seconds(limits, len(requests)), limits)
    results: list[RunResult] = []
    lost: _Lost | None = None
    try:
        channel.send(spec)
        for request in requests:
            channel.send(request)
            results.append(channel.receive())
            if stop(results[-1]):
                break
        proc.stdin.close()  # the runner's cue to end
        ended_itself = _wait_unreaped(proc.pid, max(0.0, channel.deadline - time.monotonic()))
    except _Lost as exc:
        lost, ended_itself = exc, False
    finally:
        _kill_tree(proc)
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            pipe.close()
    if lost is not None:
        failed = RunResult("", channel.stderr.decode("utf-8", "replace"),
                           None if lost.timed_out else proc.returncode or -signal.SIGKILL,
                           timed_out=lost.timed_out)
        results.append(failed)
        if not stop(failed):
            results += [failed] * (len(requests) - len(results))
    return results, ended_itself


class _Channel:
    """The grader's end of the runner's pipes; every wait ends by the whole run's deadline."""

    def __init__(self, proc: subprocess.Popen, deadline: float, limits: Limits) -> None:
        self.proc, self.deadline, self.cap = proc, deadline, limits.output_bytes
        self.inbox, self.stderr = bytearray(), bytearray()
        self.out, self.reading = proc.stdout.fileno(), {proc.stdout.fileno(), proc.stderr.fileno()}
        os.set_blocking(proc.stdin.fileno(), False)

    def send(self, data: bytes) -> None:
        view, fd = memoryview(data), self.proc.stdin.fileno()
        while view:
            if fd in self._pump(fd):
                try:
                    view = view[os.write(fd, view):]
                except BlockingIOError:
                    continue
                except OSError as exc:  # EPIPE: the runner is gone
                    raise _Lost(timed_out=False) from exc

    def receive(self) -> RunResult:
        """One run's result: `RETURNCODE|- TIMED_OUT TRUNCATED OUT ERR`, then the output."""
        try:
            code, timed_out, truncated, *lengths = self._take(self._line_length()).split()
            out, err = (self._take(n) for n in map(int, lengths))
            return RunResult(stdout=out.decode("utf-8", "replace"),
                             stderr=err.decode("utf-8", "replace"),
                             returncode=None if code == b"-" else int(code),
                             timed_out=timed_out == b"1", output_truncated=truncated == b"1")
        except ValueError as exc:  # not the runner's writing: fail the run
            raise _Lost(timed_out=False) from exc

    def _line_length(self) -> int:
        while (end := self.inbox.find(b"\n")) < 0:
            self._pump()
        return end + 1

    def _take(self, count: int) -> bytes:
        while len(self.inbox) < count:
            self._pump()
        data = bytes(self.inbox[:count])
        del self.inbox[:count]
        return data

    def _pump(self, write_fd: int | None = None) -> list[int]:
        """Read what the runner wrote (its stderr capped); the fds now writable."""
        left = self.deadline - time.monotonic()
        if self.out not in self.reading or left <= 0:
            raise _Lost(timed_out=left <= 0)
        readable, writable, _ = select.select(list(self.reading),
                                              [] if write_fd is None else [write_fd], [], left)
        for fd in readable:
            chunk = os.read(fd, 65536)
            if not chunk:
                self.reading.discard(fd)
            elif fd == self.out:
                self.inbox += chunk
            else:
                self.stderr += chunk[:max(0, self.cap - len(self.stderr))]
        return writable


# Whole-run caps: a cgroup v2 child per run ----------------------------------------------


@functools.lru_cache(maxsize=1)
def _cgroup_base() -> Path | None:
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
def _run_cgroup(limits: Limits, pids: int) -> Iterator[str | None]:
    """A fresh cgroup capping one run's memory and tasks, emptied and removed afterwards."""
    base = _cgroup_base()
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


# Command lines --------------------------------------------------------------------------


def _bubblewrap_argv(files: dict[str, str], entry: str, limits: Limits, inner: list[str],
                     as_pid_1: bool = False, as_root: bool = False
                     ) -> tuple[list[str], list[int]]:
    """bwrap's command line and the fds it reads: options, the program's files, the filter.

    Options travel in `--args` so /proc/1/cmdline inside shows none of them; `inner`
    runs inside before the program (the uid drop).
    """
    fds: list[int] = []

    def fd(data: bytes) -> str:
        fds.append(_memfd(data))
        return str(fds[-1])

    namespaces = (["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts",
                   "--unshare-cgroup-try"] if as_root else ["--unshare-all"])
    namespaces += ["--as-pid-1"] if as_pid_1 else []  # the runner: no run can signal it
    options = [*namespaces, "--die-with-parent", "--new-session", "--hostname", SANDBOX_HOSTNAME,
               "--clearenv", "--setenv", "PATH", "/usr/bin:/bin", "--setenv", "HOME", "/tmp",
               "--setenv", "LANG", "C.UTF-8",
               *_system_view(_python()), "--proc", "/proc", "--dev", "/dev",
               "--perms", "1777", "--size", str(limits.tmpfs_mb << 20), "--tmpfs", "/tmp",
               "--dir", SANDBOX_DIR]
    for name, text in files.items():
        options += ["--perms", "0444", "--file", fd(text.encode("utf-8")), f"{SANDBOX_DIR}/{name}"]
    options += ["--remount-ro", "/", "--chdir", "/tmp"]
    seccomp = _seccomp_filter()
    if seccomp:
        options += ["--seccomp", fd(seccomp)]
    packed = b"".join(option.encode("utf-8") + b"\0" for option in options)
    argv = ["bwrap", "--args", fd(packed), "--", *inner, _python(), *_flags(entry),
            f"{SANDBOX_DIR}/{entry}"]
    return argv, fds


def _memfd(data: bytes) -> int:
    """An anonymous in-memory file holding `data`, rewound: bwrap reads it like a pipe."""
    fd = os.memfd_create("sandbox")
    os.write(fd, data)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def _rlimits(limits: Limits, caps: str, extra_processes: int = 0) -> dict[str, int]:
    """The rlimits of one run; `extra_processes` make room for a runner under the same uid."""
    processes, memory_mb = process_cap(limits, caps), limits.memory_mb
    if caps == PER_PROCESS:  # n processes of memory_mb / n each: together under the cap
        memory_mb //= processes
    return {"RLIMIT_CPU": limits.cpu_seconds, "RLIMIT_AS": memory_mb << 20,
            "RLIMIT_NPROC": processes + extra_processes, "RLIMIT_FSIZE": limits.file_size_mb << 20,
            "RLIMIT_NOFILE": limits.open_files, "RLIMIT_CORE": 0}


def process_cap(limits: Limits, caps: str) -> int:
    """How many processes one run may have at once (beyond what its user already runs)."""
    if caps == CGROUP:
        return limits.processes
    return max(1, min(limits.processes, limits.memory_mb // limits.process_memory_mb))


def _beside_own_tasks(rlimits: dict[str, int], mode: str) -> dict[str, int]:
    """Under rlimits alone a grader that is not root shares RLIMIT_NPROC with all of its
    user's tasks: the run's processes come on top of those running now."""
    if mode != RLIMITS or os.geteuid() == 0 or "RLIMIT_NPROC" not in rlimits:
        return rlimits
    return {**rlimits, "RLIMIT_NPROC": rlimits["RLIMIT_NPROC"] + _own_tasks()}


def _own_tasks() -> int:
    """Tasks (threads included, as RLIMIT_NPROC counts them) whose real uid is this process's."""
    uid, count = os.getuid(), 0
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                with open(f"/proc/{entry.name}/status", encoding="utf-8") as status:
                    fields = dict(line.split(":", 1) for line in status if ":" in line)
                if int(fields["Uid"].split()[0]) == uid:
                    count += int(fields["Threads"])
            except (OSError, ValueError, KeyError, IndexError):
                continue
    return count


def _launcher_argv(rlimits: dict[str, int], cgroup: str | None) -> list[str]:
    """A tiny launcher joins the run's cgroup, sets the rlimits, then execs the rest."""
    return [_python(), "-I", "-S", "-c", LAUNCHER, cgroup or "", _pairs(rlimits)]


def _pairs(rlimits: dict[str, int]) -> str:
    """NAME=VALUE,…: what the launcher and the runner read without importing json."""
    return ",".join(f"{name}={value}" for name, value in rlimits.items())


def _flags(entry: str) -> list[str]:
    """Isolated mode; the runner, our own code, also skips site (a few ms per program)."""
    return ["-I", "-S"] if entry == RUNNER_FILE else ["-I"]


def _drop_privileges(uid: int) -> list[str]:
    if os.geteuid() != 0:
        return []
    return [_setpriv(), f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
            "--no-new-privs", "--inh-caps=-all", "--"]


def _clean_env() -> dict[str, str]:
    return {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}


@functools.lru_cache(maxsize=1)
def _python() -> str:
    """An interpreter every uid can reach: the base one (not a venv's), else the system's."""
    base = os.path.realpath(sys.executable)
    if _world_readable(base) or not os.path.exists(SYSTEM_PYTHON):
        return base
    return SYSTEM_PYTHON


@functools.lru_cache(maxsize=1)
def _setpriv() -> str:
    return os.path.realpath(shutil.which("setpriv") or "/usr/bin/setpriv")


def _world_readable(path: str) -> bool:
    parents = Path(path).parents
    return all(os.stat(p).st_mode & 0o001 for p in parents) and bool(os.stat(path).st_mode & 0o004)


# What the sandbox sees of the host: the interpreter and what it loads ------------------


@functools.lru_cache(maxsize=4)
def _system_view(python: str) -> tuple[str, ...]:
    """bwrap options showing `python`, its standard library and their shared libraries.

    Everything sits read-only at its host path (symlinks on the way recreated); the
    interpreter's own site-packages, if it lies inside the standard library, is hidden.
    """
    paths = json.loads(subprocess.run([python, "-I", "-S", "-c", INTERPRETER_PATHS],
                                      capture_output=True, text=True, check=True,
                                      env=_clean_env()).stdout)
    folders = [os.path.realpath(p) for p in paths["path"] if os.path.isdir(p)]
    folders = [f for f in dict.fromkeys(folders) if not _inside(f, [g for g in folders if g != f])]
    programs = [python, *([_setpriv()] if os.geteuid() == 0 else [])]
    extensions = [str(so) for p in paths["path"] if os.path.isdir(p) for so in Path(p).glob("*.so")]
    libraries = _shared_libraries([*programs, *extensions])
    entries: dict[str, tuple[str, str, str]] = {}
    for path in [*folders, *programs, *libraries]:
        for option, source, dest in _path_entries(path):
            shown = _inside(dest, folders) and not (option == "--ro-bind" and dest in folders)
            if not shown:  # what a bound folder already shows needs no entry of its own
                entries.setdefault(dest, (option, source, dest))
    parents = sorted({str(p) for dest in entries for p in Path(dest).parents if str(p) != "/"},
                     key=lambda p: p.count("/"))
    options = [part for p in parents for part in ("--dir", p)]  # 0755: bwrap's own are 0700
    options += [part for entry in entries.values() for part in entry]
    for hidden in paths["site"]:
        if os.path.isdir(hidden) and _inside(os.path.realpath(hidden), folders):
            options += ["--tmpfs", os.path.realpath(hidden), "--remount-ro", os.path.realpath(hidden)]
    library_dirs = dict.fromkeys(os.path.dirname(os.path.realpath(lib)) for lib in libraries)
    return (*options, "--setenv", "LD_LIBRARY_PATH", ":".join(library_dirs))


def _inside(path: str, folders: list[str]) -> bool:
    return any(path == f or path.startswith(f.rstrip("/") + "/") for f in folders)


def _path_entries(path: str) -> list[tuple[str, str, str]]:
    """bwrap entries making `path` resolve inside as here: each symlink on the way, then it."""
    entries = []
    for _ in range(40):  # the kernel's own limit on symlinks in one lookup
        parts = Path(path).parts
        for i in range(2, len(parts) + 1):
            prefix = os.path.join(*parts[:i])
            if os.path.islink(prefix):
                target = os.readlink(prefix)
                entries.append(("--symlink", target, prefix))
                path = os.path.normpath(os.path.join(os.path.dirname(prefix), target, *parts[i:]))
                break
        else:
            return [*entries, ("--ro-bind", path, path)]
    raise OSError(errno.ELOOP, f"too many symlinks resolving {path}")


def _shared_libraries(binaries: list[str]) -> list[str]:
    """The shared libraries `binaries` load (the dynamic loader included), as ldd finds them."""
    ldd = shutil.which("ldd")
    if not ldd:  # without ldd the library folders go in whole
        log.warning("sandbox: ldd is not installed; showing the system library folders whole")
        return [d for d in ("/lib", "/lib64", "/usr/lib", "/usr/lib64") if os.path.isdir(d)]
    listing = subprocess.run([ldd, *binaries], capture_output=True, text=True, check=False,
                             env=_clean_env()).stdout
    return sorted(set(LDD_PATH.findall(listing)))


LDD_PATH = re.compile(r"^\s+(?:\S+ => )?(/\S+) \(0x", re.M)


# seccomp: no user namespaces inside (and so no mounts of the program's own) ------------

# machine: (AUDIT_ARCH, unshare, clone, clone3, setns, has the x32 ABI)
SECCOMP_ARCHES = {
    "x86_64": (0xC000003E, 272, 56, 435, 308, True),
    "aarch64": (0xC00000B7, 97, 220, 435, 268, False),
}
CLONE_NEWUSER = 0x10000000
X32_SYSCALL_BIT = 0x40000000
BPF_LD_ABS, BPF_JEQ, BPF_JGE, BPF_AND, BPF_RET = 0x20, 0x15, 0x35, 0x54, 0x06
SECCOMP_ALLOW, SECCOMP_ERRNO = 0x7FFF0000, 0x00050000


@functools.lru_cache(maxsize=1)
def _seccomp_filter() -> bytes | None:
    """unshare/clone asking for a user namespace fail with EPERM; so do setns and foreign
    ABIs; clone3 fails with ENOSYS (its flags are out of a filter's reach, libc falls back
    to clone). None, said once, on a machine the table does not know."""
    arch = SECCOMP_ARCHES.get(platform.machine())
    if arch is None:
        log.warning("sandbox: no seccomp filter for %s; programs may create user namespaces",
                    platform.machine())
        return None
    audit, unshare, clone, clone3, setns, x32 = arch
    program = [(BPF_LD_ABS, 4), (BPF_JEQ, audit, 0, "deny"), (BPF_LD_ABS, 0),
               *([(BPF_JGE, X32_SYSCALL_BIT, "deny", 0)] if x32 else []),
               (BPF_JEQ, clone3, "enosys", 0), (BPF_JEQ, setns, "deny", 0),
               (BPF_JEQ, unshare, "flags", 0), (BPF_JEQ, clone, "flags", "allow"),
               "flags", (BPF_LD_ABS, 16), (BPF_AND, CLONE_NEWUSER), (BPF_JEQ, 0, "allow", "deny"),
               "allow", (BPF_RET, SECCOMP_ALLOW), "deny", (BPF_RET, SECCOMP_ERRNO | errno.EPERM),
               "enosys", (BPF_RET, SECCOMP_ERRNO | errno.ENOSYS)]
    return _assemble(program)


def _assemble(program: list) -> bytes:
    """Classic BPF from (code, k[, jump if true, jump if false]) rows; jumps name labels."""
    labels, rows = {}, []
    for row in program:
        if isinstance(row, str):
            labels[row] = len(rows)
        else:
            rows.append(row)
    out = b""
    for index, (code, k, *jumps) in enumerate(rows):
        jt, jf = (labels[j] - index - 1 if isinstance(j, str) else j for j in (*jumps, 0, 0)[:2])
        out += struct.pack("=HBBI", code, jt, jf, k)
    return out


# Slots and the probe --------------------------------------------------------------------


class _slot:
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


@dataclasses.dataclass(frozen=True)
class Probe:
    """What starting bubblewrap here found: the isolation it gives, whether bwrap runs as root
    (the program then drops to a uid of its own) or unprivileged in a user namespace of its
    own, and why it does not start ("" when it does)."""

    mode: str
    as_root: bool = False
    failure: str = ""


@functools.lru_cache(maxsize=1)
def probe() -> Probe:
    """bubblewrap when a trivial sandboxed run succeeds here (as root first, when root);
    otherwise rlimits and why not, said once."""
    reason = "bwrap is not installed"
    if shutil.which("bwrap") and (os.geteuid() != 0 or shutil.which("setpriv")):
        for as_root in (True, False) if os.geteuid() == 0 else (False,):
            try:
                result = _run({PROGRAM_FILE: "print('ok')"}, PROGRAM_FILE, "", DEFAULT_LIMITS,
                              BUBBLEWRAP, as_root=as_root)
            except (OSError, subprocess.CalledProcessError, TinyRouterError) as exc:
                reason = f"bwrap could not be set up here: {exc}"
                continue
            if result.ok and result.stdout.strip() == "ok":
                return Probe(BUBBLEWRAP, as_root)
            reason = f"bwrap failed here: {result.stderr.strip()[:200] or result.reason()}"
    log.warning("sandbox: %s", reason)
    return Probe(RLIMITS, failure=reason)


def _probe() -> str:
    return probe().mode


def probe_failure() -> str:
    """Why bubblewrap does not start here ("" when it does)."""
    return probe().failure


def bwrap_as_root() -> bool:
    """Whether bubblewrap runs as root here rather than unprivileged in a user namespace."""
    return probe().as_root


def _default_mode() -> str:
    """The isolation of a run whose caller names none: bubblewrap where it starts, else
    IsolationError (rlimits alone only when asked for by name; `evaluator.isolation` proves
    bubblewrap with hostile probes and decides what grading asks for)."""
    if _probe() == BUBBLEWRAP:
        return BUBBLEWRAP
    raise IsolationError(f"{NOT_IN_FORCE}: {probe_failure()}")


INTERPRETER_PATHS = """
import json, sys, sysconfig
site = {sysconfig.get_path(name) for name in ("purelib", "platlib")}
print(json.dumps({"path": sys.path[1:], "site": sorted(site)}))
"""

LAUNCHER = """
import os, resource, sys
if sys.argv[1]:
    with open(os.path.join(sys.argv[1], "cgroup.procs"), "w") as procs:
        procs.write(str(os.getpid()))
for name, value in (pair.split("=") for pair in sys.argv[2].split(",")):
    resource.setrlimit(getattr(resource, name), (int(value), int(value)))
os.execvp(sys.argv[3], sys.argv[3:])
"""

SWEEPER = """
import os, signal
for _ in range(3):
    try:
        os.kill(-1, signal.SIGKILL)
    except ProcessLookupError:
        break
"""

HARNESS = r'''
import json, os, sys
fn_name = json.loads(sys.stdin.readline())
args = [json.loads(line) for line in sys.stdin.read().splitlines() if line.strip()]
out = os.fdopen(os.dup(1), "w")
os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
sys.stdout = open(os.devnull, "w")
namespace = {"__name__": "solution"}
exec("from typing import *\nimport collections, heapq, bisect, math, itertools, functools\n"
     "from collections import *\nfrom heapq import *\nfrom bisect import *\n"
     "from itertools import *\nfrom functools import *\n", namespace)
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "solution.py")) as f:
    exec(compile(f.read(), "solution.py", "exec"), namespace)
owner = namespace.get("Solution")
fn = getattr(owner(), fn_name, None) if isinstance(owner, type) else None
fn = fn or namespace.get(fn_name)
if not callable(fn):
    sys.stderr.write(f"no function or Solution method named {fn_name!r}\n")
    sys.exit(3)
result = fn(*args)
def plain(value):
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    raise TypeError(f"cannot compare a {type(value).__name__}")
out.write(json.dumps(result, default=plain) + "\n")
out.flush()
'''

RUNNER = r'''
import ctypes, os, resource, select, signal, sys, time
libc = ctypes.CDLL(None, use_errno=True)
def prctl(option, value=0):
    return libc.prctl(ctypes.c_int(option), ctypes.c_ulong(value), ctypes.c_ulong(0),
                      ctypes.c_ulong(0), ctypes.c_ulong(0))
# Not dumpable: no run may open this runner's pipes under /proc, read its memory or ptrace it;
# a subreaper: a run's orphans come back here to be reaped
if prctl(4, 0) != 0 or prctl(3) != 0 or prctl(36, 1) != 0:
    sys.exit("runner: cannot make itself undumpable")
signal.signal(signal.SIGINT, signal.SIG_DFL)  # as pid 1: no run's signal reaches it
here = os.path.dirname(os.path.abspath(__file__))
requests, results = sys.stdin.buffer, sys.stdout.buffer
wall, cap, sweep, pairs, own = requests.readline().split()
wall, cap, sweep = float(wall), int(cap), sweep == b"1"
def parse(pairs):
    return [(getattr(resource, name), int(value))
            for name, value in (pair.split("=") for pair in pairs.decode().split(","))]
rlimits = parse(pairs)
for resource_id, value in parse(own):  # before any run starts
    resource.setrlimit(resource_id, (value, value))

def start(entry):
    # A fresh interpreter on the program in a session of its own, under the run's rlimits
    (in_r, in_w), (out_r, out_w), (err_r, err_w) = os.pipe(), os.pipe(), os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            for fd, target in ((in_r, 0), (out_w, 1), (err_w, 2)):
                os.dup2(fd, target)
            os.setsid()
            for resource_id, value in rlimits:
                resource.setrlimit(resource_id, (value, value))
            for signum in (signal.SIGPIPE, signal.SIGXFSZ):
                signal.signal(signum, signal.SIG_DFL)
            prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: it dies with the runner
            os.execv(sys.executable, [sys.executable, "-I", os.path.join(here, entry)])
        finally:
            os._exit(127)
    for fd in (in_r, out_w, err_w):
        os.close(fd)
    return pid, in_w, out_r, err_r

def kill(pid):
    for target in (-pid, pid):
        try:
            os.kill(target, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    for _ in range(3 if sweep else 0):  # all of this uid or pid namespace but the runner
        try:
            os.kill(-1, signal.SIGKILL)
        except ProcessLookupError:
            break

def read(fd, buffer):
    # Read up to the cap; True past it (the pipe is then closed, as at its end)
    chunk = os.read(fd, 65536)
    room = cap - len(buffer)
    buffer.extend(chunk[:max(room, 0)])
    if not chunk or len(chunk) > room:
        del reading[fd]
        os.close(fd)
    return len(chunk) > room

def run(entry, data):
    global reading
    pid, feed, out_fd, err_fd = start(entry)
    try:
        exit_fd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        exit_fd = None  # then the exit is polled
    out, err, pending = bytearray(), bytearray(), memoryview(data)
    reading = {out_fd: out, err_fd: err}
    os.set_blocking(feed, False)
    exited = overflow = False
    deadline = time.monotonic() + wall
    while not (exited or overflow) and (left := deadline - time.monotonic()) > 0:
        if not pending and feed is not None:
            os.close(feed)
            feed = None
        waits = [*reading, *([] if exit_fd is None else [exit_fd])]
        ready, writable, _ = select.select(waits, [] if feed is None else [feed], [],
                                           left if exit_fd is not None else min(left, 0.01))
        if writable:
            try:
                pending = pending[os.write(feed, pending[:65536]):]
            except BlockingIOError:
                pass
            except OSError:  # the program stopped reading: its loss
                pending = pending[:0]
        for fd in ready:
            if fd == exit_fd:
                exited = True
            elif fd in reading:
                overflow = read(fd, reading[fd]) or overflow
        if exit_fd is None:
            exited = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    timed_out = not exited and not overflow
    kill(pid)
    returncode = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    deadline = time.monotonic() + wall
    while reading and (left := deadline - time.monotonic()) > 0:  # the tree is dead: EOF soon
        for fd in select.select(list(reading), [], [], left)[0]:
            overflow = read(fd, reading[fd]) or overflow
    for fd in (feed, exit_fd, *reading):
        if fd is not None:
            os.close(fd)
    code = b"-" if timed_out else str(returncode).encode()
    return b"%s %d %d %d %d\n" % (code, timed_out, overflow, len(out), len(err)) + out + err

def clean():
    # Reap the run's orphans; empty the working folder for the next run
    while True:
        try:
            if os.waitpid(-1, 0 if sweep else os.WNOHANG)[0] == 0:
                break
        except ChildProcessError:
            break
    for entry in os.scandir("."):
        import shutil
        try:
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path)
            else:
                os.unlink(entry.path)
        except OSError:
            pass  # what the run locked away stays, for its own program's later runs

while header := requests.readline():
    entry, length = header.decode().split()
    data = requests.read(int(length))
    if entry not in ("solution.py", "harness.py") or len(data) != int(length):
        sys.exit("runner: a malformed request")
    result = run(entry, data)
    clean()
    results.write(result)
    results.flush()
os._exit(0)  # nothing to tear down: every run is reaped
'''
