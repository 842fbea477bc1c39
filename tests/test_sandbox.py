"""The sandbox: limits bite, hostile programs are contained, nothing outlives a run."""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import socket
import struct
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from evaluator import isolation, sandbox
from evaluator.errors import IsolationError
from evaluator.sandbox import (
    BUBBLEWRAP,
    CGROUP,
    PER_PROCESS,
    RLIMITS,
    SANDBOX_HOSTNAME,
    Limits,
    Run,
    call_function,
    run_each,
    run_program,
)
from evaluator.sandbox.limits import EACH_START_SECONDS, EACH_TEST_SECONDS, each_seconds
from evaluator.sandbox.runs import runner_processes

FAST = Limits(cpu_seconds=2, wall_seconds=5.0, memory_mb=256, processes=16,
              file_size_mb=1, open_files=32, tmpfs_mb=8, output_bytes=64 * 1024, process_memory_mb=64)
# Under CI bubblewrap must work: its tests then fail rather than skip or drop out
IN_CI = bool(os.environ.get("CI"))
MODES = sorted({BUBBLEWRAP if IN_CI else sandbox.isolation_available(), RLIMITS})
needs_bubblewrap = pytest.mark.skipif(sandbox.isolation_available() != BUBBLEWRAP and not IN_CI,
                                      reason="bubblewrap does not work on this machine")


def survivors(marker: str) -> list[int]:
    """Pids of processes whose command line carries `marker`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if marker.encode() in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


# Ordinary programs ------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_a_program_reads_stdin_and_writes_stdout(mode):
    result = run_program("print(sum(map(int, input().split())))", "2 3\n", FAST, mode)
    assert result.ok and result.stdout == "5\n" and result.isolation == mode
    assert result.caps == sandbox.caps_available() in (CGROUP, PER_PROCESS)


@pytest.mark.parametrize("mode", MODES)
def test_a_function_call_returns_json_and_discards_prints(mode):
    source = "class Solution:\n    def f(self, a, b):\n        print('noise')\n        return (a, b)\n"
    result = call_function(source, "f", "[1, 2]\n\"x\"\n", FAST, mode)
    assert result.ok and result.stdout == '[[1, 2], "x"]\n'


@pytest.mark.parametrize("mode", MODES)
def test_output_under_the_cap_arrives_whole(mode):
    result = run_program("import sys\nsys.stdout.write('7' * 60000)\n", "", FAST, mode)
    assert result.ok and result.stdout == "7" * 60000


def test_a_missing_function_is_an_error_not_a_result():
    result = call_function("def g():\n    return 1\n", "f", "", FAST)
    assert not result.ok and "no function" in result.stderr


@pytest.mark.parametrize("mode", MODES)
def test_the_environment_is_empty(mode, monkeypatch):
    monkeypatch.setenv("TINYROUTER_SECRET_PROBE", "s3cr3t-value")
    source = ("import os\nprint(dict(os.environ))\n"
              "for p in ('/proc/self/environ', f'/proc/{os.getppid()}/environ', '/proc/1/environ'):\n"
              "    try:\n        print(open(p, 'rb').read())\n    except OSError as e:\n"
              "        print('denied', p)\n")
    result = run_program(source, "", FAST, mode)
    assert "s3cr3t-value" not in result.stdout + result.stderr


# Limits bite (the child is unprivileged even when the grader runs as root) --------------


@pytest.mark.parametrize("mode", MODES)
def test_the_process_limit_binds(mode):
    source = ("import os, time\nn = 0\nfor _ in range(100):\n    try:\n"
              "        if os.fork() == 0:\n            time.sleep(5)\n            os._exit(0)\n"
              "        n += 1\n    except OSError:\n        break\nprint(n, flush=True)\n"
              "os._exit(0)\n")
    result = run_program(source, "", FAST, mode)
    assert int(result.stdout) < FAST.processes


@pytest.mark.parametrize("mode", MODES)
def test_the_memory_limit_binds(mode):
    source = "try:\n    x = bytearray(1 << 30)\n    print('allocated')\nexcept MemoryError:\n" \
             "    print('refused')\n"
    assert run_program(source, "", FAST, mode).stdout == "refused\n"


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
def test_the_memory_limit_binds_the_whole_run_not_each_process(mode):
    share = (FAST.memory_mb * 2 // 5) << 20  # three of these do not fit under the cap
    source = (f"import os, select, time\nr, w = os.pipe()\nkids = []\nfor _ in range(3):\n"
              f"    pid = os.fork()\n    if pid == 0:\n        try:\n"
              f"            block = bytearray({share})\n"
              f"            block[::4096] = b'x' * len(range(0, {share}, 4096))\n"
              f"            os.write(w, b'+')\n            time.sleep(3)\n"
              f"        finally:\n            os._exit(0)\n    kids.append(pid)\n"
              f"tokens, deadline = 0, time.monotonic() + 2\n"
              f"while tokens < 3 and select.select([r], [], [], max(0, deadline - time.monotonic()))[0]:\n"
              f"    tokens += len(os.read(r, 3))\n"
              f"alive = sum(os.waitpid(pid, os.WNOHANG) == (0, 0) for pid in kids)\n"
              f"print(min(tokens, alive) == 3, flush=True)\n")
    assert run_program(source, "", FAST, mode).stdout != "True\n"


@pytest.mark.parametrize(("run", "pids"), [
    (lambda: run_program("print(1)", "", FAST, RLIMITS), FAST.processes),
    (lambda: run_each("print(1)", [Run("")], FAST, RLIMITS)[0], FAST.processes + 1),  # its runner
])
def test_with_a_cgroup_the_launcher_joins_it_before_the_program_runs(tmp_path, monkeypatch, run,
                                                                      pids):
    monkeypatch.setattr(sandbox.cgroups, "cgroup_base", lambda: tmp_path)  # a stand-in cgroup folder
    result = run()
    (group,) = tmp_path.iterdir()
    assert (result.stdout, result.caps) == ("1\n", CGROUP)
    assert (group / "memory.max").read_text() == str(FAST.memory_mb << 20)
    assert (group / "pids.max").read_text() == str(pids)
    assert (group / "cgroup.procs").read_text().isdigit()
    assert (group / "cgroup.kill").read_text() == "1"  # whatever was left is killed


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
def test_the_cpu_limit_binds_before_the_wall_clock(mode):
    limits = dataclasses.replace(FAST, cpu_seconds=1, wall_seconds=20.0)
    result = run_program("while True:\n    pass\n", "", limits, mode)
    assert not result.ok and not result.timed_out and result.returncode is not None


@pytest.mark.parametrize("mode", MODES)
def test_the_file_size_and_open_file_limits_bind(mode):
    source = ("import os, tempfile\nd = tempfile.mkdtemp()\ntry:\n"
              "    open(os.path.join(d, 'big'), 'wb').write(b'x' * (4 << 20))\n"
              "    print('wrote')\nexcept OSError:\n    print('fsize')\nfiles = []\ntry:\n"
              "    for i in range(1000):\n        files.append(open(os.devnull))\n"
              "except OSError:\n    print('nofile', len(files))\n")
    lines = run_program(source, "", FAST, mode).stdout.split("\n")
    assert lines[0] == "fsize" and lines[1].startswith("nofile")


# Hostile programs -----------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
def test_an_infinite_loop_is_stopped_by_the_wall_clock(mode):
    limits = dataclasses.replace(FAST, wall_seconds=1.0)
    result = run_program("import time\nwhile True:\n    time.sleep(0.01)\n", "", limits, mode)
    assert result.timed_out and not result.ok


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
def test_a_fork_bomb_is_contained_and_leaves_nothing(mode):
    marker = f"bomb-{uuid.uuid4().hex}"
    source = (f"# {marker}\nimport os, sys\nwhile True:\n    try:\n        os.fork()\n"
              "    except OSError:\n        pass\n")
    limits = dataclasses.replace(FAST, wall_seconds=2.0)
    result = run_program(source, "", limits, mode)
    assert not result.ok
    assert survivors(marker) == []


@pytest.mark.parametrize("mode", MODES)
def test_an_output_flood_is_capped(mode):
    result = run_program("while True:\n    print('x' * 4096)\n", "", FAST, mode)
    assert result.output_truncated and not result.ok
    assert len(result.stdout) <= FAST.output_bytes


@needs_bubblewrap
def test_the_network_is_unreachable():
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(3.0)
    port = server.getsockname()[1]
    accepted = []
    threading.Thread(target=lambda: accepted.append(_accept(server)), daemon=True).start()
    source = (f"import socket\ntry:\n    socket.create_connection(('127.0.0.1', {port}), 2)\n"
              "    print('connected')\nexcept OSError as e:\n    print('blocked', e)\n")
    result = run_program(source, "", FAST)
    time.sleep(0.2)
    server.close()
    assert result.stdout.startswith("blocked") and accepted in ([], [None])


def _accept(server: socket.socket):
    try:
        return server.accept()
    except OSError:
        return None


@needs_bubblewrap
def test_writing_outside_the_sandbox_fails(tmp_path):
    target_dir = tmp_path / "open"
    target_dir.mkdir()
    target_dir.chmod(0o777)
    marker = f"/tmp/tinyrouter-escape-{uuid.uuid4().hex}"
    source = ("import os\nfor p in ({!r}, {!r}, {!r}):\n    try:\n"
              "        open(p, 'w').write('pwned')\n    except OSError:\n        pass\n"
              ).format(str(target_dir / "x"), marker, str(Path.cwd() / "pwned.txt"))
    run_program(source, "", FAST)
    assert not (target_dir / "x").exists() and not Path(marker).exists()
    assert not (Path.cwd() / "pwned.txt").exists()


@needs_bubblewrap
def test_the_repository_and_home_are_invisible():
    source = ("import os\nfor p in ({!r}, {!r}):\n    print(os.path.exists(p))\n"
              ).format(str(Path(__file__).resolve()), os.path.expanduser("~"))
    assert run_program(source, "", FAST).stdout.split() == ["False", "False"]


USERNS = "import ctypes, os, platform\nlibc = ctypes.CDLL(None, use_errno=True)\n"
CLONE = "if pid == 0:\n    os._exit(0)\nprint(pid > 0)\n"


@needs_bubblewrap
@pytest.mark.parametrize(("source", "expected"), [
    # a user namespace of its own, by every door
    (USERNS + "print(libc.unshare(0x10000000) == 0)", "False"),
    ("import os\ntry:\n    os.unshare(os.CLONE_NEWUSER)\n    print(True)\n"
     "except (AttributeError, OSError):\n    print(False)", "False"),
    (USERNS + "nr = {'x86_64': 56, 'aarch64': 220}[platform.machine()]\n"
     "pid = libc.syscall(nr, 0x10000000 | 17, 0, 0, 0, 0)\n" + CLONE, "False"),
    (USERNS + "args = (ctypes.c_uint64 * 11)()\nargs[0], args[4] = 0x10000000, 17\n"
     "pid = libc.syscall(435, ctypes.byref(args), 88)\n" + CLONE, "False"),
    ("import subprocess\ntry:\n    print(subprocess.run(['unshare', '-U', 'true']).returncode == 0)\n"
     "except OSError:\n    print(False)", "False"),
    # and with it a tmpfs of its own, past the sandbox's tmpfs and file caps
    (USERNS + "target, uid, gid = '/tmp', os.getuid(), os.getgid()\nos.mkdir('/tmp/own')\n"
     "if libc.unshare(0x10000000 | 0x20000) == 0:\n"
     "    for name, line in (('uid_map', f'0 {uid} 1'), ('setgroups', 'deny'), ('gid_map', f'0 {gid} 1')):\n"
     "        open(f'/proc/self/{name}', 'w').write(line)\n"
     "    if libc.mount(b'none', b'/tmp/own', b'tmpfs', 0, None) == 0:\n        target = '/tmp/own'\n"
     "written = 0\ntry:\n    for i in range(64):\n"
     "        with open(f'{target}/f{i}', 'wb') as f:\n            f.write(b'x' * (512 << 10))\n"
     "        written += 512 << 10\nexcept OSError:\n    pass\n"
     f"print(written > {FAST.tmpfs_mb << 20})", "False"),
    # the host: its name and its files outside the interpreter
    ("import socket\nprint(socket.gethostname())", SANDBOX_HOSTNAME),
    ("import os\nprint([os.path.exists(p) for p in ('/usr/local/etc', '/usr/local', '/usr/share',"
     " '/etc', '/usr/bin/unshare')])", "[False, False, False, False, False]"),
])
def test_a_hostile_program_gets_nothing(source, expected):
    result = run_program(source, "", FAST)
    assert result.stdout.strip() == expected, result.stderr


@needs_bubblewrap
@pytest.mark.parametrize("source", [
    "print(open('/proc/self/mountinfo').read())",
    "print(open('/proc/1/cmdline', 'rb').read())",
    "print(open('/proc/self/cmdline', 'rb').read())",
    "import os\nprint(open('/proc/sys/kernel/hostname').read(), os.uname().nodename)",
    "import os\nfor fd in os.listdir('/proc/self/fd'):\n    try:\n"
    "        print(fd, os.readlink(f'/proc/self/fd/{fd}'))\n    except OSError:\n        pass",
])
def test_what_the_program_can_read_shows_no_host_name_or_temp_path(source):
    result = run_program(source, "", FAST)
    assert result.ok, result.stderr
    assert "tinyrouter-sandbox-" not in result.stdout  # the grader's temp folders
    assert socket.gethostname() == SANDBOX_HOSTNAME or \
        socket.gethostname() not in re.findall(r"[\w.-]+", result.stdout.replace("\\x00", " "))


@needs_bubblewrap
def test_an_interpreter_outside_usr_brings_only_its_own_files(monkeypatch):
    base = os.path.realpath(sys.executable)
    if base.startswith("/usr/"):
        pytest.skip("the test interpreter lives under /usr")
    monkeypatch.setattr(sandbox.process, "python", lambda: base)
    source = ("import os, platform\nprint(platform.python_version())\n"
              "print(os.path.exists('/usr/lib/python3'), os.path.exists(os.path.dirname(os.__file__)"
              " + '/site-packages/pytest'))\n")
    result = run_program(source, "", FAST)
    assert result.stdout.split() == [sys.version.split()[0], "False", "False"], result.stderr


@pytest.mark.slow
@pytest.mark.parametrize("mode", [m for m in MODES if m == BUBBLEWRAP or os.geteuid() == 0])
def test_detached_children_do_not_survive(mode):
    marker = f"detached-{uuid.uuid4().hex}"
    source = ("import os, sys\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n"
              f"        os.execv(sys.executable, [sys.executable, '-c', "
              f"'import time; time.sleep(30)', '{marker}'])\n    os._exit(0)\n"
              "print('parent done')\n")
    # the grandchild keeps the output open until the wall limit ends the run: a short one
    result = run_program(source, "", dataclasses.replace(FAST, wall_seconds=2.0), mode)
    assert result.stdout == "parent done\n"
    time.sleep(0.3)
    assert survivors(marker) == []


@pytest.mark.parametrize("mode", [m for m in MODES if m == BUBBLEWRAP or os.geteuid() == 0])
@pytest.mark.parametrize("attack", [
    "os.kill(os.getppid(), signal.SIGKILL)",
    "os.kill(-1, signal.SIGKILL)",
    "os.killpg(0, signal.SIGKILL)",
    "os.kill(1, signal.SIGKILL)",
])
def test_killing_the_parent_harms_only_the_program(mode, attack):
    before = os.getppid()
    run_program(f"import os, signal\n{attack}\nprint('still here')\n", "", FAST, mode)
    assert os.getppid() == before  # neither the grader nor its parent was killed
    assert run_program("print(1)", "", FAST, mode).stdout == "1\n"


def test_without_bubblewrap_grading_refuses_unless_asked_and_says_why_once(monkeypatch, caplog):
    real_which = shutil.which
    monkeypatch.setattr(shutil, "which", lambda name: None if name == "bwrap" else real_which(name))
    sandbox.probe.cache_clear()
    isolation.verified.cache_clear()
    try:
        with caplog.at_level("WARNING", logger="evaluator.sandbox"):
            with pytest.raises(IsolationError, match="not in force: bwrap is not installed"):
                run_program("print(1)", "", FAST)  # no isolation named: never rlimits
            with pytest.raises(IsolationError, match=r"bwrap is not installed.*Fix: install "
                                                     r"bubblewrap"):
                isolation.grading_mode()
            with isolation.unsandboxed():
                first = run_program("print(2)", "", FAST, isolation.grading_mode())
                second = run_program("print(3)", "", FAST, isolation.grading_mode())
    finally:
        sandbox.probe.cache_clear()
        isolation.verified.cache_clear()
    assert (first.isolation, second.isolation) == (RLIMITS, RLIMITS)
    assert second.stdout == "3\n"
    assert [r.message for r in caplog.records].count(caplog.records[0].message) == 1
    assert "bwrap is not installed" in caplog.records[0].message


def test_the_probe_is_found_once_and_kept_as_a_frozen_value():
    found = sandbox.probe()
    assert sandbox.probe() is found and found.mode == sandbox.isolation_available()
    assert (found.failure == "") == (found.mode == BUBBLEWRAP)
    with pytest.raises(dataclasses.FrozenInstanceError):
        found.mode = RLIMITS


def test_the_seccomp_assembler_turns_labels_into_relative_jumps():
    seccomp = sandbox.seccomp
    program = [(seccomp.BPF_LD_ABS, 0), (seccomp.BPF_JEQ, 7, "deny", "allow"), "allow",
               (seccomp.BPF_RET, seccomp.SECCOMP_ALLOW), "deny", (seccomp.BPF_RET, 1)]
    code = seccomp.assemble(program)
    assert [struct.unpack("=HBBI", code[i:i + 8]) for i in range(0, len(code), 8)] == [
        (seccomp.BPF_LD_ABS, 0, 0, 0), (seccomp.BPF_JEQ, 1, 0, 7),
        (seccomp.BPF_RET, 0, 0, seccomp.SECCOMP_ALLOW), (seccomp.BPF_RET, 0, 0, 1)]


# Many runs of one program in one sandbox ------------------------------------------------

RUNS_ALIKE = [
    # exits: clean, with a status and a message, by a signal; call-based, and a missing function
    ("print(int(input()) * 2)", [Run("1\n"), Run("2\n")]),
    ("import sys\nsys.stderr.write('oops\\n')\nraise SystemExit(int(input()))",
     [Run("0\n"), Run("3\n")]),
    ("import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)", [Run("")]),
    ("class Solution:\n    def f(self, a):\n        print('noise')\n        return [a, a]\n",
     [Run("1\n", "f"), Run('"x"\n', "f")]),
    ("def g():\n    return 1\n", [Run("", "f")]),
    # limits: memory, output, the wall clock, file size
    ("x = bytearray(1 << 30)", [Run("")]),
    ("while True:\n    print('x' * 4096)", [Run("")]),
    ("import time\ntime.sleep(int(input()))\nprint('woke')", [Run("0\n"), Run("30\n")]),
    ("open('big', 'wb').write(b'x' * (4 << 20))", [Run("")]),
]


def seen(result: sandbox.RunResult) -> tuple:
    """What grading reads of a result: a traceback's last line (paths differ per sandbox),
    none after an overflow (the program races its own kill to say it lost its pipe)."""
    stderr = [] if result.output_truncated else result.stderr.splitlines()[-1:]
    return (result.ok, result.reason(), result.stdout, stderr, result.timed_out,
            result.output_truncated, result.isolation, result.caps)


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("source", "runs"), RUNS_ALIKE)
def test_runs_in_one_sandbox_end_as_each_in_its_own(mode, source, runs):
    limits = dataclasses.replace(FAST, wall_seconds=1.0)
    alone = [run_program(source, r.stdin, limits, mode) if r.fn_name is None else
             call_function(source, r.fn_name, r.stdin, limits, mode) for r in runs]
    assert [seen(r) for r in run_each(source, runs, limits, mode)] == [seen(r) for r in alone]


LIMITS_READ = "import os\nprint(open(f'/proc/{os.getpid()}/limits').read())"


@pytest.mark.parametrize("mode", MODES)
def test_a_run_has_the_limits_of_a_run_of_its_own_and_its_runner_its_own(mode):
    def limits_of(text: str) -> dict[str, list[str]]:
        return {line[:26].strip(): line[26:].split()[:2] for line in text.splitlines()[1:]
                if line.strip()}

    alone = limits_of(run_program(LIMITS_READ, "", FAST, mode).stdout)
    (inside,) = run_each(LIMITS_READ.replace("getpid", "getppid") + "\n" + LIMITS_READ, [Run("")],
                         FAST, mode)
    runner, run = (limits_of(text) for text in inside.stdout.split("\n\n")[:2])
    room = runner_processes(mode, sandbox.bwrap_as_root())  # the runner is a process of the run's uid too
    if mode == RLIMITS and os.geteuid() != 0:  # on top of the user's tasks, counted at each start
        for limits in (alone, run, runner):
            limits.pop("Max processes")
        room = 0
    assert {**run, **({"Max processes": [str(int(n) - room) for n in run["Max processes"]]}
                      if "Max processes" in run else {})} == alone
    cpu = int(each_seconds(FAST, 1) + 0.999)
    assert runner == {**run, "Max cpu time": [str(cpu)] * 2}


def test_runs_stop_after_the_first_result_stop_accepts():
    results = run_each("print(input())", [Run(f"{n}\n") for n in range(4)], FAST,
                       stop=lambda result: result.stdout == "1\n")
    assert [r.stdout for r in results] == ["0\n", "1\n"]
    assert run_each("print(1)", [], FAST) == []


@pytest.mark.parametrize("mode", [m for m in MODES if m == BUBBLEWRAP or os.geteuid() == 0])
def test_each_run_starts_in_an_empty_folder_with_nothing_of_the_last_left(mode):
    marker = f"left-{uuid.uuid4().hex}"
    source = ("import os, subprocess, sys\n"
              "def alive():\n    for pid in filter(str.isdigit, os.listdir('/proc')):\n"
              "        try:\n"
              f"            if b'{marker}' in open(f'/proc/{{pid}}/cmdline', 'rb').read():\n"
              "                return True\n        except OSError:\n            pass\n"
              "    return False\n"
              "print(sorted(os.listdir('.')), alive(), flush=True)\n"
              "open('note', 'w').write('x')\nos.makedirs('d/e')\n"
              f"subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)', '{marker}'],"
              " start_new_session=True)\n")
    results = run_each(source, [Run(""), Run("")], FAST, mode)
    assert [r.stdout for r in results] == ["[] False\n", "[] False\n"], results
    time.sleep(0.3)
    assert survivors(marker) == []


REACH_THE_RUNNER = """import ctypes, os
found, runner = [], os.getppid()
for path, how in ((f'/proc/{runner}/fd/0', 'wb'), (f'/proc/{runner}/fd/1', 'wb'),
                  (f'/proc/{runner}/mem', 'rb'), (f'/proc/{runner}/environ', 'rb')):
    try:
        open(path, how).close()
        found.append(path)
    except OSError:
        pass
if ctypes.CDLL(None).ptrace(16, runner, 0, 0) == 0:  # PTRACE_ATTACH
    found.append('ptrace')
print(found)
"""

FORGE_AND_KILL = """import os, signal, time
if input() == 'attack':
    for pid in {os.getppid(), 1}:
        for fd in (0, 1):  # a passing result, as the runner writes one, or a request
            try:
                with open(f'/proc/{pid}/fd/{fd}', 'wb') as channel:
                    channel.write(b'0 0 0 6 0\\nhello\\n')
            except OSError:
                pass
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGKILL):
            try:
                os.kill(pid, signum)
            except OSError:
                pass
    time.sleep(30)
print('hello')
"""


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
def test_a_run_cannot_open_trace_or_forge_the_runner(mode):
    (result,) = run_each(REACH_THE_RUNNER, [Run("")], FAST, mode)
    assert result.stdout == "[]\n", result.stderr
    limits = dataclasses.replace(FAST, wall_seconds=1.0)
    attacked, after = run_each(FORGE_AND_KILL, [Run("attack\n"), Run("\n")], limits, mode)
    assert not attacked.ok  # it slept past its time or took the runner down with it
    if mode == BUBBLEWRAP:  # as pid 1 the runner gets no signal from a run: it carries on
        assert attacked.timed_out and after.ok and after.stdout == "hello\n"


@pytest.mark.slow
@pytest.mark.parametrize(("runner", "timed_out", "reason"), [
    ("import time\ntime.sleep(60)\n", True, "time limit exceeded"),  # never answers
    ("import sys\nsys.exit('runner broke')\n", False, "exit status 1: runner broke"),
    ("import sys, time\nsys.stdin.readline()\nprint('garbage', flush=True)\ntime.sleep(60)\n",
     False, "killed by SIGKILL (a resource limit or a crash)"),
])
def test_a_runner_that_stops_answering_fails_every_run_left(monkeypatch, runner, timed_out,
                                                            reason):
    monkeypatch.setattr(sandbox.inside, "RUNNER", runner)
    limits = dataclasses.replace(FAST, wall_seconds=0.5)
    bound = 2 * (limits.wall_seconds + EACH_TEST_SECONDS) + EACH_START_SECONDS
    start = time.monotonic()
    results = run_each("print(1)", [Run(""), Run("")], limits)
    assert time.monotonic() - start < bound + 1.0
    assert [(r.ok, r.timed_out, r.reason()) for r in results] == [(False, timed_out, reason)] * 2
