"""`tinyrouter bench-sandbox`: what one sandboxed program costs, per isolation on this machine."""

from __future__ import annotations

import argparse

from evaluator import sandbox
from evaluator.commands.output import write_json_out
from evaluator.errors import UsageError


def add_bench_sandbox(p: argparse.ArgumentParser) -> None:
    p.description = ("Run a trivial program and a call-based one R times in each isolation "
                     "this machine offers (bubblewrap where it works, and rlimits) and report "
                     "the median wall time per program, and whether a cgroup or per-process "
                     "limits capped the runs.")
    p.add_argument("--repeats", "-R", type=int, default=20, metavar="R",
                   help="runs per program and isolation (medians are reported)")
    p.add_argument("--json", metavar="OUT", help="also write the numbers here (- for stdout)")
    p.set_defaults(func=run)


PARSERS = {"bench-sandbox": add_bench_sandbox}


def run(args: argparse.Namespace) -> int:
    if args.repeats < 1:
        raise UsageError("--repeats must be at least 1")
    result = sandbox.bench(args.repeats)
    for key, value in result.items():
        print(f"{key}: {value}")
    write_json_out(args.json, result)
    return 0
