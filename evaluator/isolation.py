"""Whether the sandbox's isolation is in force on this machine, proven by hostile probes.

Every command that can hold a secret calls `require` before it reads one; it runs the
self-test once per process (a canary holding a fake secret, a listener on 127.0.0.1, and a
probe program in the sandbox that tries to reach them, the host and past every cap). Isolation
is in force only when bubblewrap started and every probe failed. Without it grading is refused
(`IsolationError`) unless the command was given `--unsandboxed`; the workflows never pass it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import logging
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

from evaluator import sandbox
from evaluator.errors import IsolationError

log = logging.getLogger(__name__)

UNSANDBOXED_FLAG = "--unsandboxed"
NOT_IN_FORCE = sandbox.NOT_IN_FORCE
SELF_TEST_SECONDS = 60.0  # the whole self-test; past it, isolation is not in force
PROBE_LIMITS = sandbox.Limits(cpu_seconds=2, wall_seconds=5.0, memory_mb=512, processes=8,
                              file_size_mb=1, open_files=32, tmpfs_mb=8, output_bytes=256 * 1024,
                              process_memory_mb=128)
STILL_PROCESSES = 4  # what the probe may see of its own sandbox: bwrap's reaper, a launcher, itself
APPARMOR_SYSCTL = "/proc/sys/kernel/apparmor_restrict_unprivileged_userns"
MAX_USERNS_SYSCTL = "/proc/sys/user/max_user_namespaces"


@dataclasses.dataclass(frozen=True)
class Check:
    """One hostile probe: what it tried, whether the sandbox held, and what it saw."""

    name: str
    held: bool
    detail: str = ""


@dataclasses.dataclass(frozen=True)
class Isolation:
    """What the self-test found on this machine; `in_force` only when every check held."""

    sandbox: str  # bubblewrap, or rlimits where bubblewrap did not start
    caps: str  # cgroup or per-process
    checks: tuple[Check, ...] = ()
    failure: str = ""  # why bubblewrap did not start, or the self-test did not finish
    fix: str = ""
    unsandboxed: bool = False  # grading was allowed anyway, by the explicit opt-in

    @property
    def in_force(self) -> bool:
        return (self.sandbox == sandbox.BUBBLEWRAP and not self.failure and bool(self.checks)
                and all(check.held for check in self.checks))

    @property
    def reason(self) -> str:
        """Why isolation is not in force ("" when it is)."""
        if self.failure:
            return self.failure
        broken = [f"{c.name} ({c.detail})" if c.detail else c.name
                  for c in self.checks if not c.held]
        return ("the sandbox let a probe through: " + "; ".join(broken)) if broken else ""

    def describe(self) -> str:
        """One line for the public result and the logs: how code was graded."""
        if self.in_force:
            who = "a uid of its own" if sandbox.bwrap_as_root() else "a user namespace of its own"
            return (f"bubblewrap: own pid, network, mount and ipc namespaces, {who}, seccomp, "
                    f"caps {self.caps}; self-test {len(self.checks)}/{len(self.checks)} held")
        if self.unsandboxed:
            return f"unsandboxed ({UNSANDBOXED_FLAG}: rlimits only, caps {self.caps})"
        return f"not in force: {self.reason}"


# ---------------------------------------------------------------- the policy


@dataclasses.dataclass
class _Policy:
    unsandboxed: bool = False


_POLICY = _Policy()


def add_flag(parser) -> None:
    """The opt-in flag, on the commands a miner runs on their own machine."""
    parser.add_argument(UNSANDBOXED_FLAG, action="store_true",
                        help="grade code with rlimits only where bubblewrap's isolation is not "
                             "in force (a machine holding no secret worth keeping): the graded "
                             "code can read your files and environment and use your network")


@contextlib.contextmanager
def unsandboxed(allowed: bool = True) -> Iterator[None]:
    """The explicit opt-in (`--unsandboxed`): within, grade with rlimits only where
    bubblewrap's isolation is not in force. Never passed by a workflow."""
    before = _POLICY.unsandboxed
    _POLICY.unsandboxed = before or allowed
    try:
        yield
    finally:
        _POLICY.unsandboxed = before


@functools.lru_cache(maxsize=1)
def verified() -> Isolation:
    """The self-test's finding on this machine, run once per process."""
    return self_test()


def current() -> Isolation:
    """What grading in this process uses (the self-test's finding, and the opt-in)."""
    found = verified()
    if not found.in_force and _POLICY.unsandboxed:
        return dataclasses.replace(found, sandbox=sandbox.RLIMITS, unsandboxed=True)
    return found


def require(flag: str | None = UNSANDBOXED_FLAG) -> Isolation:
    """The isolation in force here, before any secret is read; else IsolationError with the
    fix (and, where the command offers it, the opt-in `flag` and the risk it accepts)."""
    found = current()
    if found.in_force or found.unsandboxed:
        log.info("isolation: %s", found.describe())
        return found
    raise IsolationError(refusal(found, flag))


def grading_mode() -> str:
    """The sandbox code a model wrote is graded in: bubblewrap where the self-test proved it,
    rlimits under the opt-in, else IsolationError (the refusal names the opt-in)."""
    found = current()
    if found.in_force:
        return sandbox.BUBBLEWRAP
    if found.unsandboxed:
        return sandbox.RLIMITS
    raise IsolationError(refusal(found, UNSANDBOXED_FLAG))


def refusal(found: Isolation, flag: str | None) -> str:
    message = (f"{NOT_IN_FORCE}: {found.reason}. Code a routed model wrote would run beside "
               f"this process's secrets, so it is not graded. Fix: {found.fix}; "
               f"`tinyrouter runner check` shows each check")
    if flag:
        message += (f". Where you accept the risk (a machine holding no secret worth keeping), "
                    f"pass {flag}: the graded code can then read every file and process "
                    f"environment you can, use your network and outlive the grading")
    return message


def fix_for(failure: str) -> str:
    """The exact step that makes bubblewrap start here."""
    if not shutil.which("bwrap"):
        return "install bubblewrap (sudo apt-get install bubblewrap)"
    if _read(APPARMOR_SYSCTL) == "1":
        return ("AppArmor refuses unprivileged user namespaces: install the bwrap AppArmor "
                "profile from the maintaining guide (or run `sudo sysctl -w "
                "kernel.apparmor_restrict_unprivileged_userns=0`)")
    if _read(MAX_USERNS_SYSCTL) == "0":
        return "allow user namespaces: sudo sysctl -w user.max_user_namespaces=15000"
    if "namespace" in failure.lower():
        return ("let this user create user namespaces (kernel.unprivileged_userns_clone=1, "
                "user.max_user_namespaces > 0, no container policy refusing them), or run the "
                "grader as root")
    return "see the bwrap error above; the maintaining guide's runner section lists the settings"


def _read(path: str) -> str:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return ""


# ---------------------------------------------------------------- the self-test


RUNNER_CHECK_FIX = "make the sandbox start as `tinyrouter runner check` shows"


def self_test(run: Callable[..., sandbox.RunResult] = sandbox.run_program,
              timeout: float = SELF_TEST_SECONDS) -> Isolation:
    """Prove the sandbox here with hostile probes; a self-test that does not finish within
    `timeout` seconds is a failure. `run(source, stdin, limits, isolation)` runs a program."""
    found: list[Isolation] = []

    def work() -> None:
        try:
            found.append(_self_test(run))
        except Exception as exc:  # a probe that broke: the self-test failed, and says how
            failure = f"the sandbox self-test broke: {type(exc).__name__}: {exc}"
            found.append(Isolation(sandbox.RLIMITS, _caps(), failure=failure,
                                   fix=RUNNER_CHECK_FIX))

    worker = threading.Thread(target=work, daemon=True, name="isolation self-test")
    worker.start()
    worker.join(timeout)
    if found:
        return found[0]
    failure = f"the sandbox self-test did not finish in {timeout:.0f} s (a probe hangs)"
    return Isolation(sandbox.RLIMITS, _caps(), failure=failure, fix=fix_for(failure))


def _caps() -> str:
    try:
        return sandbox.caps_available()
    except IsolationError:
        return "none"


def _self_test(run: Callable[..., sandbox.RunResult]) -> Isolation:
    try:
        caps = sandbox.caps_available()
        if sandbox.isolation_available() != sandbox.BUBBLEWRAP:
            failure = sandbox.probe_failure()
            return Isolation(sandbox.RLIMITS, caps, failure=failure, fix=fix_for(failure))
        checks = _probe_checks(run, caps)
    except (OSError, subprocess.SubprocessError, IsolationError, ValueError) as exc:
        failure = f"the sandbox self-test could not run: {exc}"
        return Isolation(sandbox.RLIMITS, _caps(), failure=failure,
                         fix=RUNNER_CHECK_FIX)
    held = all(check.held for check in checks)
    fix = "" if held else ("run the evaluation on x86_64 or aarch64 Linux with bubblewrap "
                           "0.8 or newer, as the maintaining guide's runner section says")
    return Isolation(sandbox.BUBBLEWRAP, caps, tuple(checks), fix=fix)


def _probe_checks(run: Callable[..., sandbox.RunResult], caps: str) -> list[Check]:
    limits = PROBE_LIMITS
    cap = sandbox.process_cap(limits, caps)
    with _canary() as (token, marker, proc), _listener() as (port, heard), \
            tempfile.TemporaryDirectory(prefix="tinyrouter-selftest-") as folder:
        host_file = Path(folder, "host-file")
        host_file.write_text(token)
        Path(folder).chmod(0o755)
        host_file.chmod(0o644)
        paths = [str(host_file), "/etc/passwd", __file__, str(Path(sandbox.__file__).parents[1])]
        stdin = json.dumps({"port": port, "paths": paths, "forks": cap + 2})
        result = run(PROBE, stdin, limits, sandbox.BUBBLEWRAP)
        hog = run(MEMORY_HOG.replace("MB", str(limits.memory_mb + 64)), "", limits,
                  sandbox.BUBBLEWRAP)
        sleeper = run("import time\ntime.sleep(60)\nprint('awake')", "",
                      dataclasses.replace(limits, wall_seconds=0.5), sandbox.BUBBLEWRAP)
        alive = proc.poll() is None
    try:
        seen = json.loads(result.stdout) if result.ok else None
    except ValueError:
        seen = None
    if not isinstance(seen, dict):
        why = result.reason() or "no report"
        return [Check("the probe ran and reported", False, f"{why}: {result.stderr[-200:]}")]
    leaked = token in result.stdout or token in result.stderr
    foreign = [c for c in seen.get("cmdlines", []) if marker in c]
    status = seen.get("status", {})
    return [
        Check("no other process's environment", alive and not leaked,
              "" if alive else "the canary process ended early"),
        Check("no other process visible", not foreign and seen.get("pids", 99) <= STILL_PROCESSES,
              f"saw {seen.get('pids')} processes"),
        Check("no network", not heard and seen.get("connect") != "connected",
              "" if not heard else "the listener on 127.0.0.1 was reached"),
        Check("no host files", not seen.get("visible"), ", ".join(seen.get("visible", []))),
        Check("no capabilities, no new privileges",
              status.get("CapEff", "").strip("0") == "" and status.get("NoNewPrivs") == "1",
              f"CapEff {status.get('CapEff')}, NoNewPrivs {status.get('NoNewPrivs')}"),
        Check("seccomp filter: no user namespaces",
              status.get("Seccomp") == "2" and seen.get("unshare") != 0,
              f"Seccomp {status.get('Seccomp')}, unshare {seen.get('unshare')}"),
        Check("process cap", seen.get("forked", cap + 2) <= cap,
              f"forked {seen.get('forked')} of at most {cap}"),
        Check("memory cap", "allocated" not in hog.stdout, hog.reason() or "allocated past it"),
        Check("wall clock", sleeper.timed_out and "awake" not in sleeper.stdout,
              sleeper.reason() or "outlived its wall clock"),
    ]


@contextlib.contextmanager
def _canary() -> Iterator[tuple[str, str, subprocess.Popen]]:
    """A process of this user holding a fake secret, as a shell holding the real one would."""
    token, marker = secrets.token_hex(16), f"tinyrouter-canary-{secrets.token_hex(8)}"
    wait = f"import time; time.sleep({SELF_TEST_SECONDS})"  # gone by then even if abandoned
    proc = subprocess.Popen([sys.executable, "-I", "-S", "-c", wait, marker],
                            env={"PATH": "/usr/bin:/bin", "TINYROUTER_CANARY": token},
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        yield token, marker, proc
    finally:
        proc.kill()
        proc.wait()


@contextlib.contextmanager
def _listener() -> Iterator[tuple[int, list[bytes]]]:
    """A TCP listener on 127.0.0.1 recording whatever reaches it."""
    heard: list[bytes] = []
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except (TimeoutError, OSError):
                continue
            with conn:
                conn.settimeout(1)
                with contextlib.suppress(OSError):
                    heard.append(conn.recv(4096) or b"(connected)")

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1], heard
    finally:
        stop.set()
        thread.join(2)
        server.close()


PROBE = r'''
import ctypes, json, os, socket, sys, time
asked = json.loads(sys.stdin.read())
me, seen = os.getpid(), {"cmdlines": [], "environs": []}
pids = [p for p in os.listdir("/proc") if p.isdigit()]
seen["pids"] = len(pids)
for pid in pids:
    for name in ("cmdline", "environ"):
        try:
            with open(f"/proc/{pid}/{name}", "rb") as f:
                data = f.read().replace(b"\0", b" ").decode("utf-8", "replace")
        except OSError:
            continue
        if int(pid) != me:
            seen[name + "s"].append(data)
try:
    socket.create_connection(("127.0.0.1", asked["port"]), timeout=1).sendall(b"probe")
    seen["connect"] = "connected"
except OSError as exc:
    seen["connect"] = str(exc)
seen["visible"] = [p for p in asked["paths"] if os.path.exists(p)]
with open("/proc/self/status") as f:
    seen["status"] = dict(line.split(":\t", 1) for line in f.read().splitlines() if ":\t" in line)
seen["status"] = {k: v.strip() for k, v in seen["status"].items()
                  if k in ("CapEff", "NoNewPrivs", "Seccomp")}
libc = ctypes.CDLL(None, use_errno=True)
seen["unshare"] = libc.unshare(0x10000000)
children = []
for _ in range(asked["forks"]):
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        time.sleep(30)
        os._exit(0)
    children.append(pid)
seen["forked"] = len(children)
for pid in children:
    os.kill(pid, 9)
    os.waitpid(pid, 0)
print(json.dumps(seen))
'''

MEMORY_HOG = "block = bytearray(MB << 20)\nprint('allocated')\n"
