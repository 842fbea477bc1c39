"""Running untrusted Python programs: the code a routed model writes may be an attack.

What it does. Each program runs in its own process tree with an empty environment
(no secret reaches it), in a fresh working folder, under rlimits on CPU time, address
space, processes, file size and open files, a wall-clock limit and a cap on captured
output; afterwards its process group is killed. When the grader runs as root the
program runs under an unprivileged uid of its own (one per concurrent run, claimed
with a lock file, so `RLIMIT_NPROC`, which does not bind root, binds it and one
program's fork bomb cannot starve another's), and every process left under that uid
is killed after the run. Where bubblewrap works it adds: no network (a private,
unconfigured network namespace), a private pid namespace (every process, detached or
not, dies with the sandbox), a read-only view of /usr and the interpreter only (no
repository, no home, no /etc), a small private tmpfs for /tmp, and no new privileges.
Only the test input reaches the child; expected outputs stay in the grader, which
decides from captured stdout, never from a status the child reports.

What it does not protect against. Kernel exploits and side channels; CPU contention
with other work on the machine. Without bubblewrap (the fallback, logged once) the
program can read what the file system lets any user read, write to world-writable
places, and open network connections; and when the grader is not root, a process that
leaves its session may outlive the run and `kill(-1)` reaches the grader's own
processes. The fallback is for development machines: the evaluation runner must have
bubblewrap (`isolation_available()` says which one is in force).
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import json
import logging
import os
import random
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

BUBBLEWRAP = "bubblewrap"
RLIMITS = "rlimits"
SANDBOX_UID_BASE = 1_900_000_000  # unprivileged uids with no account and no files
SLOTS = 1024
HARNESS_FILE = "harness.py"
PROGRAM_FILE = "solution.py"
SYSTEM_PYTHON = "/usr/bin/python3"


@dataclass(frozen=True)
class Limits:
    """Resource limits for one run of an untrusted program."""

    cpu_seconds: int = 4
    wall_seconds: float = 10.0
    memory_mb: int = 1024
    processes: int = 32
    file_size_mb: int = 8
    open_files: int = 64
    tmpfs_mb: int = 32
    output_bytes: int = 1 << 20


DEFAULT_LIMITS = Limits()


@dataclass(frozen=True)
class RunResult:
    """What the grader sees of a run: capped output and how the run ended."""

    stdout: str
    stderr: str
    returncode: int | None
    timed_out: bool = False
    output_truncated: bool = False
    isolation: str = RLIMITS

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


def isolation_available() -> str:
    """The isolation this machine gives: bubblewrap when it works here, else rlimits."""
    return _probe()


# One run --------------------------------------------------------------------------------


def _run(files: dict[str, str], entry: str, stdin: str, limits: Limits,
         isolation: str | None) -> RunResult:
    mode = isolation or _probe()
    if mode not in (BUBBLEWRAP, RLIMITS):
        raise ValueError(f"unknown isolation {mode!r}")
    with _slot() as uid, tempfile.TemporaryDirectory(prefix="tinyrouter-sandbox-") as work:
        code_dir = Path(work, "code")
        code_dir.mkdir()
        for name, text in files.items():
            (code_dir / name).write_text(text, encoding="utf-8")
        scratch = Path(work, "tmp")
        scratch.mkdir()
        for path in (Path(work), code_dir, scratch, *code_dir.iterdir()):
            path.chmod(0o755 if path.is_dir() else 0o644)
        if mode == BUBBLEWRAP and _VARIANT["bwrap_as_root"]:
            # root's bwrap needs no user namespace; the program drops to `uid` inside it
            argv, cwd = _bubblewrap_argv(code_dir, entry, limits, _drop_privileges(uid)), "/"
        elif mode == BUBBLEWRAP:
            argv, cwd = _drop_privileges(uid) + _bubblewrap_argv(code_dir, entry, limits, []), "/"
        else:
            scratch.chmod(0o777)
            argv = [*_drop_privileges(uid), _python(), "-I", str(code_dir / entry)]
            cwd = str(scratch)
        argv = _launcher_argv(limits) + argv
        result = _supervise(argv, cwd, stdin, limits, mode)
        _sweep(uid)
        return result


def _supervise(argv: list[str], cwd: str, stdin: str, limits: Limits, mode: str) -> RunResult:
    """Start the tree in its own session, feed stdin, cap output, enforce wall time, kill."""
    proc = subprocess.Popen(argv, cwd=cwd, env=_clean_env(), stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
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
                     output_truncated=overflow.is_set(), isolation=mode)


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


# Command lines --------------------------------------------------------------------------


def _bubblewrap_argv(code_dir: Path, entry: str, limits: Limits, inner: list[str]
                     ) -> list[str]:
    """bwrap's command line; `inner` runs inside it before the program (the uid drop)."""
    namespaces = (["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts",
                   "--unshare-cgroup-try"] if inner else ["--unshare-all"])
    argv = ["bwrap", *namespaces, "--die-with-parent", "--new-session",
            "--ro-bind", "/usr", "/usr"]
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(top):
            argv += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            argv += ["--ro-bind", top, top]
    prefix = str(Path(_python()).parent.parent)
    if not prefix.startswith("/usr"):
        argv += ["--ro-bind", prefix, prefix]
    argv += ["--proc", "/proc", "--dev", "/dev",
             "--perms", "1777", "--size", str(limits.tmpfs_mb << 20), "--tmpfs", "/tmp",
             "--ro-bind", str(code_dir), "/sandbox", "--chdir", "/tmp",
             "--clearenv", "--setenv", "PATH", "/usr/bin:/bin", "--setenv", "HOME", "/tmp",
             "--setenv", "LANG", "C.UTF-8",
             "--", *inner, _python(), "-I", f"/sandbox/{entry}"]
    return argv


def _launcher_argv(limits: Limits) -> list[str]:
    """A tiny launcher sets the rlimits, then execs the rest (no preexec_fn with threads)."""
    caps = {"RLIMIT_CPU": limits.cpu_seconds, "RLIMIT_AS": limits.memory_mb << 20,
            "RLIMIT_NPROC": limits.processes, "RLIMIT_FSIZE": limits.file_size_mb << 20,
            "RLIMIT_NOFILE": limits.open_files, "RLIMIT_CORE": 0}
    return [_python(), "-I", "-S", "-c", LAUNCHER, json.dumps(caps)]


def _drop_privileges(uid: int) -> list[str]:
    if os.geteuid() != 0:
        return []
    return ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
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


def _world_readable(path: str) -> bool:
    parents = Path(path).parents
    return all(os.stat(p).st_mode & 0o001 for p in parents) and bool(os.stat(path).st_mode & 0o004)


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


_VARIANT = {"bwrap_as_root": os.geteuid() == 0}


@functools.lru_cache(maxsize=1)
def _probe() -> str:
    """bubblewrap when a trivial sandboxed run succeeds here; otherwise rlimits, said once."""
    reason = "bwrap is not installed"
    if shutil.which("bwrap") and (os.geteuid() != 0 or shutil.which("setpriv")):
        for as_root in (True, False) if os.geteuid() == 0 else (False,):
            _VARIANT["bwrap_as_root"] = as_root
            result = _run({PROGRAM_FILE: "print('ok')"}, PROGRAM_FILE, "", DEFAULT_LIMITS,
                          BUBBLEWRAP)
            if result.ok and result.stdout.strip() == "ok":
                return BUBBLEWRAP
            reason = f"bwrap failed here: {result.stderr.strip()[:200]}"
    log.warning("sandbox: %s; running code with rlimits and its own session only "
                "(no network or file-system isolation)", reason)
    return RLIMITS


LAUNCHER = """
import json, os, resource, sys
for name, value in json.loads(sys.argv[1]).items():
    resource.setrlimit(getattr(resource, name), (value, value))
os.execvp(sys.argv[2], sys.argv[2:])
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
