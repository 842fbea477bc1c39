"""math-verify behind a wall-clock limit that holds on any thread: a worker process, killed if late.

math-verify's own timeout is an alarm signal, which only a main thread can set (its issues #50
and #55), and sympy can spend minutes inside one step (a tower of powers). So parsing and
verifying happen in one long-lived worker process (`verify_worker.py`) per grading process:
each comparison waits at most `VERIFY_SECONDS` for the worker's reply, and a late worker is
killed and replaced; that comparison is graded wrong, with the reason. The worker starts once,
so grading hundreds of answers pays one process start, not one per comparison.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import json
import os
import selectors
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evaluator.errors import GraderError

VERIFY_SECONDS = 5.0  # one comparison: parsing both answers and verifying them
START_SECONDS = 120.0  # the worker's start: an interpreter importing sympy and the parsers
WORKER = Path(__file__).with_name("verify_worker.py")
# what the worker's environment keeps: where Python finds its packages, nothing secret
WORKER_ENV = ("PATH", "PYTHONPATH", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR", "SYSTEMROOT")


@dataclass(frozen=True)
class Comparison:
    """math-verify's comparison: `same` is None when either side did not parse as math;
    `error` says why no decision was reached (then `same` is False)."""

    same: bool | None
    error: str | None = None


class Verifier:
    """One worker process, shared by the threads of this process one comparison at a time."""

    def __init__(self, seconds: float = VERIFY_SECONDS, start_seconds: float = START_SECONDS):
        self.seconds, self.start_seconds = seconds, start_seconds
        self._lock = threading.Lock()
        self._worker: subprocess.Popen[bytes] | None = None
        self._owner = os.getpid()
        self._pending = b""

    def compare(self, answer: str, reference: str) -> Comparison:
        """Whether `answer` equals `reference`, both LaTeX, within `seconds` of wall clock."""
        with self._lock:
            worker = self._running()
            try:
                worker.stdin.write(json.dumps([answer, reference]).encode() + b"\n")  # type: ignore[union-attr]
                worker.stdin.flush()  # type: ignore[union-attr]
                reply = self._read(time.monotonic() + self.seconds)
            except (OSError, EOFError, ValueError):  # it died, or wrote something else
                return Comparison(False, f"the math-verify worker died (exit code {self._stop()})")
            if reply is None:
                self._stop()
                return Comparison(False, f"math-verify took longer than {self.seconds:g} s")
            if "failed" in reply:
                return Comparison(False, f"math-verify failed: {reply['failed']}")
            return Comparison(reply["same"])

    def close(self) -> None:
        with self._lock:
            self._stop()

    def _running(self) -> subprocess.Popen[bytes]:
        if self._worker is not None and self._owner == os.getpid() and self._worker.poll() is None:
            return self._worker
        if self._owner != os.getpid():  # a forked child: the worker is its parent's
            self._worker, self._owner = None, os.getpid()
        self._stop()
        env = {name: os.environ[name] for name in WORKER_ENV if name in os.environ}
        self._worker = subprocess.Popen(  # -P: the script's folder is not put on sys.path
            [sys.executable, "-P", str(WORKER)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL, env=env)
        self._pending = b""
        try:
            hello = self._read(time.monotonic() + self.start_seconds)
        except (EOFError, ValueError):
            hello = {"exited": self._worker.wait()}
        if hello is not None and "ready" in hello:
            return self._worker
        self._stop()
        if hello is not None and "missing" in hello:
            raise ModuleNotFoundError(f"No module named {hello['missing']!r}", name=hello["missing"])
        raise GraderError(f"the math-verify worker did not start within {self.start_seconds:g} s "
                          f"({hello or 'no reply'}); `{sys.executable} {WORKER}` shows why")

    def _read(self, deadline: float) -> dict[str, Any] | None:
        """The worker's next reply, or None once `deadline` passes; EOFError when it exits."""
        assert self._worker is not None and self._worker.stdout is not None
        fd = self._worker.stdout.fileno()
        with selectors.DefaultSelector() as selector:
            selector.register(fd, selectors.EVENT_READ)
            while b"\n" not in self._pending:
                left = deadline - time.monotonic()
                if left <= 0 or not selector.select(left):
                    return None
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    raise EOFError
                self._pending += chunk
        line, _, self._pending = self._pending.partition(b"\n")
        return json.loads(line)

    def _stop(self) -> int | None:
        """Kill the worker (if any) and reap it: its exit code."""
        worker, self._worker = self._worker, None
        if worker is None:
            return None
        worker.kill()
        for pipe in (worker.stdin, worker.stdout):
            with contextlib.suppress(OSError):  # a dead worker's stdin cannot be flushed
                pipe.close()  # type: ignore[union-attr]
        return worker.wait()


@functools.cache
def shared() -> Verifier:
    """This process's verifier: its worker starts on the first comparison and stops at exit."""
    verifier = Verifier()
    atexit.register(verifier.close)
    return verifier
