"""`tinyrouter dev sandbox`: the timings of a program per sandbox, per test and per program."""

from __future__ import annotations

import dataclasses

from evaluator import sandbox
from evaluator.studies import sandbox as study

QUICK = dataclasses.replace(sandbox.DEFAULT_LIMITS, memory_mb=256, processes=16, file_size_mb=1,
                            open_files=32, tmpfs_mb=8, process_memory_mb=64)


def test_the_bench_times_both_ways_per_isolation():
    result = study.bench_each(programs=1, tests=2, repeats=1, limits=QUICK)
    for mode in {sandbox.isolation_available(), sandbox.RLIMITS}:
        assert result[f"{mode} per test ms"] > 0 and result[f"{mode} per program ms"] > 0
        assert result[f"{mode} per program speed-up"] > 0
