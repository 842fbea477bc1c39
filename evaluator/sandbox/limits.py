"""A run's limits and its result, the nouns every part of the sandbox shares, and the rlimits
that enforce the limits."""

from __future__ import annotations

import dataclasses
import os
import signal

BUBBLEWRAP = "bubblewrap"
RLIMITS = "rlimits"
CGROUP = "cgroup"
PER_PROCESS = "per-process"
EACH_START_SECONDS = 2.0  # run_each's whole-run bound: the sandbox and its runner starting,
EACH_TEST_SECONDS = 0.25  # and per test its start, sweep and clean-up, past the test's own limit


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


@dataclasses.dataclass(frozen=True)
class Run:
    """One test of a program for `run_each`: its input, and the function to call (None: the
    program runs as a script, as `run_program`; else as `call_function`)."""

    stdin: str
    fn_name: str | None = None


def each_seconds(limits: Limits, runs: int) -> float:
    """The whole of `run_each`'s bound on `runs` runs: their wall clocks plus slack."""
    return runs * (limits.wall_seconds + EACH_TEST_SECONDS) + EACH_START_SECONDS


def process_cap(limits: Limits, caps: str) -> int:
    """How many processes one run may have at once (beyond what its user already runs)."""
    if caps == CGROUP:
        return limits.processes
    return max(1, min(limits.processes, limits.memory_mb // limits.process_memory_mb))


def run_rlimits(limits: Limits, caps: str, extra_processes: int = 0) -> dict[str, int]:
    """The rlimits of one run; `extra_processes` make room for a runner under the same uid."""
    processes, memory_mb = process_cap(limits, caps), limits.memory_mb
    if caps == PER_PROCESS:  # n processes of memory_mb / n each: together under the cap
        memory_mb //= processes
    return {"RLIMIT_CPU": limits.cpu_seconds, "RLIMIT_AS": memory_mb << 20,
            "RLIMIT_NPROC": processes + extra_processes, "RLIMIT_FSIZE": limits.file_size_mb << 20,
            "RLIMIT_NOFILE": limits.open_files, "RLIMIT_CORE": 0}


def beside_own_tasks(rlimits: dict[str, int], mode: str) -> dict[str, int]:
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


def as_pairs(rlimits: dict[str, int]) -> str:
    """NAME=VALUE,…: what the launcher and the runner read without importing json."""
    return ",".join(f"{name}={value}" for name, value in rlimits.items())
