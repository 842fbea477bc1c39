"""`tinyrouter dev demo`: how long `tinyrouter demo` takes, stage by stage, on this machine.

The demo runs `--repeats` times in fresh temporary workspaces; each stage's wall-clock and
CPU seconds (this process and the sandboxed programs it waited for) are kept, with the
machine's cores and its load average before and after each run, since a shared machine
stretches the wall clock and not the CPU time. The medians go to the file the Reference
guide renders (evaluator/data/demo-times.json by default), so the guide's times come from a
run, never typed.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from evaluator.commands.output import write_json_out
from evaluator.errors import UsageError
from evaluator.files import format_time, utc_now
from evaluator.resources import DEMO_TIMES, data_file

FORMAT = 1


def add_demo(p: argparse.ArgumentParser) -> None:
    p.description = ("Run `tinyrouter demo` N times in fresh temporary workspaces and write "
                     "each stage's median wall-clock and CPU seconds, with the machine's cores "
                     "and load, to the file the Reference guide renders. Takes minutes.")
    p.add_argument("--repeats", type=int, default=3, help="demo runs (the medians are over them)")
    p.add_argument("--out", default=str(data_file(DEMO_TIMES)),
                   help="where to write the figures (- for standard output; default: the file "
                        "the Reference guide renders)")
    p.set_defaults(func=run)


PARSERS = {"demo": add_demo}


def _cpu() -> float:
    own, children = (resource.getrusage(who) for who in (resource.RUSAGE_SELF,
                                                         resource.RUSAGE_CHILDREN))
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def one_run() -> dict[str, Any]:
    """One demo in a fresh workspace: each stage's wall and CPU seconds, and the load."""
    from evaluator.commands.demo import run_demo

    stages: list[dict[str, Any]] = []
    marks: dict[str, float] = {}

    def progress(number: int, total: int, title: str) -> None:
        marks.update(cpu=_cpu())

    def done(title: str, seconds: float) -> None:
        stages.append({"title": title, "wall_s": seconds, "cpu_s": _cpu() - marks["cpu"]})

    load = os.getloadavg()[0]
    started, cpu = time.perf_counter(), _cpu()
    with tempfile.TemporaryDirectory(prefix="tinyrouter-demo-times-") as tmp:
        run_demo(Path(tmp) / "demo", progress=progress, done=done)
    return {"stages": stages, "wall_s": time.perf_counter() - started, "cpu_s": _cpu() - cpu,
            "load": [load, os.getloadavg()[0]]}


def medians(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Per stage (in the demo's order) and in all, the median wall and CPU seconds."""
    titles = [stage["title"] for stage in runs[0]["stages"]]

    def median(values: list[float]) -> float:
        return round(statistics.median(values), 1)

    return {
        "stages": [{"title": title,
                    **{key: median([next(s[key] for s in run["stages"] if s["title"] == title)
                                    for run in runs]) for key in ("wall_s", "cpu_s")}}
                   for title in titles],
        "total": {key: median([run[key] for run in runs]) for key in ("wall_s", "cpu_s")},
        "load": [[round(value, 2) for value in run["load"]] for run in runs],
    }


def run(args: argparse.Namespace) -> int:
    if args.repeats < 1:
        raise UsageError("--repeats must be at least 1")
    runs = []
    for number in range(1, args.repeats + 1):
        print(f"demo run {number} of {args.repeats} …", flush=True)
        runs.append(one_run())
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    report = {"format": FORMAT, "repeats": args.repeats, "cores": cores,
              "measured_at": format_time(utc_now()), **medians(runs)}
    total = report["total"]
    print(f"median over {args.repeats} run(s) on {cores} core(s): {total['wall_s']} s wall, "
          f"{total['cpu_s']} s CPU (load average before/after each run: {report['load']})")
    for stage in report["stages"]:
        print(f"  {stage['title']:<78} {stage['wall_s']:>6} s  {stage['cpu_s']:>6} s CPU")
    write_json_out(args.out, report)
    return 0
