"""The runner: inside one sandbox, each run of one program in a fresh interpreter.

Started as `python -I -S runner.py` beside the program's files (stdlib only; no json, which
costs 5 ms to import). The grader writes one line, `WALL CAP SWEEP RUN_RLIMITS OWN_RLIMITS`
(rlimits as NAME=VALUE,…), then per run `ENTRY LENGTH` and that many bytes of stdin; per run
the runner answers `RETURNCODE|- TIMED_OUT TRUNCATED OUT_LENGTH ERR_LENGTH`, then the output.
"""

import ctypes
import os
import resource
import select
import signal
import sys
import time

ENTRIES = ("solution.py", "harness.py")
PR_SET_PDEATHSIG, PR_GET_DUMPABLE, PR_SET_DUMPABLE, PR_SET_CHILD_SUBREAPER = 1, 3, 4, 36
CHUNK = 65536
libc = ctypes.CDLL(None, use_errno=True)


def prctl(option, value=0):
    return libc.prctl(ctypes.c_int(option), ctypes.c_ulong(value), ctypes.c_ulong(0),
                      ctypes.c_ulong(0), ctypes.c_ulong(0))


def parse(pairs):
    """(resource, value) pairs from b"NAME=VALUE,…"."""
    return [(getattr(resource, name), int(value))
            for name, value in (pair.split("=") for pair in pairs.decode().split(","))]


class Spec:
    """The grader's first line: each run's wall clock, output cap and rlimits, whether to
    sweep (as root or in a pid namespace: every process but the runner), the runner's own
    rlimits."""

    def __init__(self, line):
        wall, cap, sweep, pairs, own = line.split()
        self.wall, self.cap, self.sweep = float(wall), int(cap), sweep == b"1"
        self.rlimits, self.own = parse(pairs), parse(own)


def answer(returncode, timed_out, overflow, out, err):
    """One run's result as the grader reads it; no return code when it timed out."""
    code = b"-" if timed_out else str(returncode).encode()
    return b"%s %d %d %d %d\n" % (code, timed_out, overflow, len(out), len(err)) + out + err


def start(path, rlimits):
    """A fresh interpreter on `path` in a session of its own, under the run's rlimits."""
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
            prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # it dies with the runner
            os.execv(sys.executable, [sys.executable, "-I", path])
        finally:
            os._exit(127)
    for fd in (in_r, out_w, err_w):
        os.close(fd)
    return pid, in_w, out_r, err_r


def kill(pid, sweep):
    for target in (-pid, pid):
        try:  # noqa: SIM105 (contextlib costs an import per program)
            os.kill(target, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    for _ in range(3 if sweep else 0):  # all of this uid or pid namespace but the runner
        try:
            os.kill(-1, signal.SIGKILL)
        except ProcessLookupError:
            break


def read(fd, reading, cap):
    """Read into reading[fd] up to the cap; True past it (the pipe is then closed, as at its end)."""
    buffer = reading[fd]
    chunk = os.read(fd, CHUNK)
    room = cap - len(buffer)
    buffer.extend(chunk[:max(room, 0)])
    if not chunk or len(chunk) > room:
        del reading[fd]
        os.close(fd)
    return len(chunk) > room


def run(path, data, spec):
    """Run `path` on `data` under the spec's limits; its answer."""
    pid, feed, out_fd, err_fd = start(path, spec.rlimits)
    try:
        exit_fd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        exit_fd = None  # then the exit is polled
    out, err, pending = bytearray(), bytearray(), memoryview(data)
    reading = {out_fd: out, err_fd: err}
    os.set_blocking(feed, False)
    exited = overflow = False
    deadline = time.monotonic() + spec.wall
    while not (exited or overflow) and (left := deadline - time.monotonic()) > 0:
        if not pending and feed is not None:
            os.close(feed)
            feed = None
        waits = [*reading, *([] if exit_fd is None else [exit_fd])]
        ready, writable, _ = select.select(waits, [] if feed is None else [feed], [],
                                           left if exit_fd is not None else min(left, 0.01))
        if writable:
            try:
                pending = pending[os.write(feed, pending[:CHUNK]):]
            except BlockingIOError:
                pass
            except OSError:  # the program stopped reading: its loss
                pending = pending[:0]
        for fd in ready:
            if fd == exit_fd:
                exited = True
            elif fd in reading:
                overflow = read(fd, reading, spec.cap) or overflow
        if exit_fd is None:
            exited = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    timed_out = not exited and not overflow
    kill(pid, spec.sweep)
    returncode = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    deadline = time.monotonic() + spec.wall
    while reading and (left := deadline - time.monotonic()) > 0:  # the tree is dead: EOF soon
        for fd in select.select(list(reading), [], [], left)[0]:
            overflow = read(fd, reading, spec.cap) or overflow
    for fd in (feed, exit_fd, *reading):
        if fd is not None:
            os.close(fd)
    return answer(returncode, timed_out, overflow, out, err)


def clean(sweep):
    """Reap the run's orphans; empty the working folder for the next run."""
    while True:
        try:
            if os.waitpid(-1, 0 if sweep else os.WNOHANG)[0] == 0:
                break
        except ChildProcessError:
            break
    for entry in os.scandir("."):
        import shutil  # only once there is something to remove

        try:
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path)
            else:
                os.unlink(entry.path)
        except OSError:
            pass  # what the run locked away stays, for its own program's later runs


def main():
    # Not dumpable: no run may open this runner's pipes under /proc, read its memory or
    # ptrace it; a subreaper: a run's orphans come back here to be reaped
    if prctl(PR_SET_DUMPABLE, 0) != 0 or prctl(PR_GET_DUMPABLE) != 0 or \
            prctl(PR_SET_CHILD_SUBREAPER, 1) != 0:
        sys.exit("runner: cannot make itself undumpable")
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # as pid 1: no run's signal reaches it
    here = os.path.dirname(os.path.abspath(__file__))
    requests, results = sys.stdin.buffer, sys.stdout.buffer
    spec = Spec(requests.readline())
    for resource_id, value in spec.own:  # before any run starts
        resource.setrlimit(resource_id, (value, value))
    while header := requests.readline():
        entry, length = header.decode().split()
        data = requests.read(int(length))
        if entry not in ENTRIES or len(data) != int(length):
            sys.exit("runner: a malformed request")
        result = run(os.path.join(here, entry), data, spec)
        clean(spec.sweep)
        results.write(result)
        results.flush()
    os._exit(0)  # nothing to tear down: every run is reaped


if __name__ == "__main__":
    main()
