"""`tinyrouter dev sandbox`: what one sandboxed program costs, per isolation on this machine."""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

from evaluator import sandbox
from evaluator.commands.output import write_json_out
from evaluator.errors import TinyRouterError, UsageError


def add_sandbox(p: argparse.ArgumentParser) -> None:
    p.description = ("Run a trivial program and a call-based one R times in each isolation "
                     "this machine offers (bubblewrap where it works, and rlimits) and report "
                     "the median wall time per program, and whether a cgroup or per-process "
                     "limits capped the runs. With --programs and --tests, also time N programs "
                     "on T tests each with one sandbox per test and one per program; with "
                     "--demo-pairs, time LiveCodeBench.grade_many on the demo's answers both ways.")
    p.add_argument("--repeats", "-R", type=int, default=20, metavar="R",
                   help="runs per program and isolation (medians are reported)")
    p.add_argument("--programs", type=int, default=0, metavar="N",
                   help="programs for the per-test against per-program timing (0: skip it)")
    p.add_argument("--tests", type=int, default=8, metavar="T", help="tests per program there")
    p.add_argument("--demo-pairs", type=int, default=0, metavar="K",
                   help="the first K of the demo corpus's LiveCodeBench answers (right and "
                        "wrong per item) to grade both ways, R times each (0: skip it)")
    p.add_argument("--json", metavar="OUT", help="also write the numbers here (- for stdout)")
    p.set_defaults(func=run)


PARSERS = {"sandbox": add_sandbox}


def run(args: argparse.Namespace) -> int:
    if args.repeats < 1 or args.programs < 0 or args.tests < 1 or args.demo_pairs < 0:
        raise UsageError("--repeats and --tests must be at least 1, --programs and "
                         "--demo-pairs at least 0")
    result = bench(args.repeats)
    if args.programs:
        result |= bench_each(args.programs, args.tests, args.repeats)
    if args.demo_pairs:
        result |= bench_demo_grading(args.demo_pairs, args.repeats)
    for key, value in result.items():
        print(f"{key}: {value}")
    write_json_out(args.json, result)
    return 0


BENCH_SOLUTION = "class Solution:\n    def add(self, a, b):\n        return a + b\n"


def bench(repeats: int = 20, limits: sandbox.Limits = sandbox.DEFAULT_LIMITS) -> dict[str, Any]:
    """Median wall milliseconds per program, trivial and call-based, per isolation here."""
    programs = {"trivial": lambda mode: sandbox.run_program("print(1)", "", limits, mode),
                "call": lambda mode: sandbox.call_function(BENCH_SOLUTION, "add", "1\n2\n",
                                                           limits, mode)}
    result: dict[str, Any] = {"caps": sandbox.caps_available(), "repeats": repeats}
    for mode in sorted({sandbox.isolation_available(), sandbox.RLIMITS}):
        for name, run in programs.items():
            run(mode)  # the first run pays for the one-off probes
            times = []
            for _ in range(repeats):
                start = time.perf_counter()
                outcome = run(mode)
                times.append(time.perf_counter() - start)
                if not outcome.ok:
                    raise TinyRouterError(f"bench: the {name} program failed under {mode}: "
                                          f"{outcome.reason()}")
            result[f"{mode} {name} ms"] = round(statistics.median(times) * 1000, 1)
    return result


def bench_each(programs: int = 8, tests: int = 8, repeats: int = 5,
               limits: sandbox.Limits = sandbox.DEFAULT_LIMITS) -> dict[str, Any]:
    """Median wall milliseconds to run `programs` programs on `tests` inputs each, with one
    sandbox per test and one per program (the two alternating), per isolation here."""
    sources = [f"print(int(input()) + {n})" for n in range(programs)]
    inputs = [f"{t}\n" for t in range(tests)]
    paths = {"per test": lambda mode: [sandbox.run_program(s, i, limits, mode)
                                       for s in sources for i in inputs],
             "per program": lambda mode: [r for s in sources
                                          for r in sandbox.run_each(s, [sandbox.Run(i) for i in inputs],
                                                                    limits, mode)]}
    result: dict[str, Any] = {"caps": sandbox.caps_available(), "repeats": repeats,
                              "programs": programs, "tests": tests}
    for mode in sorted({sandbox.isolation_available(), sandbox.RLIMITS}):
        times: dict[str, list[float]] = {name: [] for name in paths}
        for _ in range(repeats):
            for name, run in paths.items():
                start = time.perf_counter()
                outcomes = run(mode)
                times[name].append(time.perf_counter() - start)
                if not all(outcome.ok for outcome in outcomes):
                    raise TinyRouterError(f"bench: a program failed {name} under {mode}")
        medians = {name: statistics.median(values) for name, values in times.items()}
        for name, median in medians.items():
            result[f"{mode} {name} ms"] = round(median * 1000, 1)
        result[f"{mode} per program speed-up"] = round(medians["per test"] / medians["per program"], 2)
    return result


def bench_demo_grading(count: int, repeats: int) -> dict[str, Any]:
    """Median seconds of grade_many on the demo's answers, a sandbox per test and per program."""
    from evaluator.benchmarks.corpus import load_corpus
    from evaluator.benchmarks.livecodebench import LiveCodeBench
    from evaluator.rules import OFFICIAL

    entries = load_corpus(OFFICIAL, ["livecodebench"])
    pairs = [(answer, e.item.reference) for e in entries for answer in (e.right, e.wrong)][:count]
    graders = {"per test": LiveCodeBench(sandbox_per_test=True), "per program": LiveCodeBench()}
    times: dict[str, list[float]] = {name: [] for name in graders}
    grades: dict[str, list[Any]] = {}
    for _ in range(repeats):
        for name, grader in graders.items():
            start = time.perf_counter()
            grades[name] = [(g.correct, g.error, g.detail) for g in grader.grade_many(pairs)]
            times[name].append(time.perf_counter() - start)
    if grades["per test"] != grades["per program"]:
        raise TinyRouterError("bench: the two ways graded the demo's answers differently")
    medians = {name: statistics.median(values) for name, values in times.items()}
    tests = sum(len(reference["tests"]) for _, reference in pairs)
    return {"demo pairs": len(pairs), "demo tests": tests,
            **{f"demo grade_many {name} s": round(m, 2) for name, m in medians.items()},
            "demo grade_many speed-up": round(medians["per test"] / medians["per program"], 2)}
