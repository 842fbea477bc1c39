"""Process control for a sandbox: the interpreter, uid and environment a child starts with;
supervising it (stdin fed, output capped, wall clock, the tree killed); talking to a runner."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from evaluator.sandbox import inside
from evaluator.sandbox.inside import HARNESS_FILE, PROGRAM_FILE
from evaluator.sandbox.limits import Limits, Run, RunResult

SYSTEM_PYTHON = "/usr/bin/python3"


# How a child starts -------------------------------------------------------------------


@functools.lru_cache(maxsize=1)
def python() -> str:
    """An interpreter every uid can reach: the base one (not a venv's), else the system's."""
    base = os.path.realpath(sys.executable)
    if _world_readable(base) or not os.path.exists(SYSTEM_PYTHON):
        return base
    return SYSTEM_PYTHON


@functools.lru_cache(maxsize=1)
def setpriv() -> str:
    return os.path.realpath(shutil.which("setpriv") or "/usr/bin/setpriv")


def _world_readable(path: str) -> bool:
    parents = Path(path).parents
    return all(os.stat(p).st_mode & 0o001 for p in parents) and bool(os.stat(path).st_mode & 0o004)


def drop_privileges(uid: int) -> list[str]:
    if os.geteuid() != 0:
        return []
    return [setpriv(), f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
            "--no-new-privs", "--inh-caps=-all", "--"]


def clean_env() -> dict[str, str]:
    return {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}


def sweep(uid: int) -> None:
    """As root, kill every process left under the slot's own uid (one that left the session)."""
    if os.geteuid() == 0:
        subprocess.run([*drop_privileges(uid), python(), "-I", "-S", "-c", inside.SWEEPER],
                       env=clean_env(), cwd="/", stdin=subprocess.DEVNULL,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)


# One run ------------------------------------------------------------------------------


def supervise(argv: list[str], cwd: str, stdin: str, limits: Limits, fds: list[int]
              ) -> RunResult:
    """Start the tree in its own session, feed stdin, cap output, enforce wall time, kill."""
    proc = subprocess.Popen(argv, cwd=cwd, env=clean_env(), stdin=subprocess.PIPE,
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
        timed_out = not wait_unreaped(proc.pid, limits.wall_seconds) and not overflow.is_set()
    finally:
        _kill_tree(proc)
    for thread in threads:  # the tree is dead: the pipes reach EOF once drained
        thread.join(timeout=limits.wall_seconds)
    return RunResult(stdout=out.decode("utf-8", "replace"), stderr=err.decode("utf-8", "replace"),
                     returncode=None if timed_out else proc.returncode, timed_out=timed_out,
                     output_truncated=overflow.is_set())


def wait_unreaped(pid: int, timeout: float) -> bool:
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


def _signal_group(proc: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


# Many runs in one sandbox: the grader's end of the runner ------------------------------


class _Lost(Exception):
    """The runner stopped answering: it ended, or the whole run's time ran out."""

    def __init__(self, timed_out: bool) -> None:
        super().__init__("out of time" if timed_out else "the runner ended")
        self.timed_out = timed_out


def request(run: Run) -> bytes:
    """`ENTRY LENGTH` and the run's stdin: the runner reads no JSON (json costs 5 ms to import)."""
    entry, stdin = (PROGRAM_FILE, run.stdin) if run.fn_name is None else \
        (HARNESS_FILE, json.dumps(run.fn_name) + "\n" + run.stdin)
    data = stdin.encode("utf-8")
    return f"{entry} {len(data)}\n".encode() + data


def supervise_each(argv: list[str], cwd: str, fds: list[int], spec: bytes,
                   requests: list[bytes], limits: Limits, stop: Callable[[RunResult], bool],
                   seconds: float) -> tuple[list[RunResult], bool]:
    """Hand the runner one request at a time and read its result back, until `stop` or the end.

    A runner that dies or overruns the whole run's bound (`seconds`) fails the run it was on
    (and any left).
    """
    proc = subprocess.Popen(argv, cwd=cwd, env=clean_env(), stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True, pass_fds=fds)
    channel = _Channel(proc, time.monotonic() + seconds, limits)
    results: list[RunResult] = []
    lost: _Lost | None = None
    try:
        channel.send(spec)
        for one in requests:
            channel.send(one)
            results.append(channel.receive())
            if stop(results[-1]):
                break
        proc.stdin.close()  # the runner's cue to end
        ended_itself = wait_unreaped(proc.pid, max(0.0, channel.deadline - time.monotonic()))
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
