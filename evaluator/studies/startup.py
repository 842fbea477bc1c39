"""`tinyrouter dev startup`: how long the light commands take to start, against a floor.

The floor is `python -c "import numpy, httpx, safetensors"`: what the light commands truly
need. Each command runs R times in a fresh interpreter on a throwaway repository holding one
valid submission; the report gives the median wall time and its ratio to the floor's median,
measured in the same run, so the ratios hold on a busy machine.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from evaluator.commands.output import write_json_out
from evaluator.errors import TinyRouterError, UsageError
from evaluator.rules import Competition

FLOOR = ("python -c 'import numpy, httpx, safetensors'",
         [sys.executable, "-c", "import numpy, httpx, safetensors"])


def add_startup(p: argparse.ArgumentParser) -> None:
    p.description = ("Time `tinyrouter --help`, `preflight`, `gates`, `leaderboard validate` and "
                     "`grade` from a cold interpreter, R times each, as ratios to importing "
                     "numpy, httpx and safetensors (medians, same run). A benchmark, not a test.")
    p.add_argument("--repeats", "-R", type=int, default=10, metavar="R",
                   help="runs per command (medians are reported)")
    p.add_argument("--json", metavar="OUT", help="also write the numbers here (- for stdout)")
    p.set_defaults(func=run)


PARSERS = {"startup": add_startup}


def fixture_repo(root: Path, rules: Competition) -> str:
    """A repository with one valid submission; its folder, relative to the root."""
    (root / "leaderboard").mkdir(parents=True)
    return fixture_submission(root, "alice", 0, rules)


def fixture_submission(root: Path, login: str, seed: int, rules: Competition) -> str:
    """A valid first-generation submission of `login` with a seeded random head."""
    from evaluator import __version__
    from evaluator.submission import write_submission

    rng = np.random.default_rng(seed)
    head = rng.normal(0, 0.1, rules.head_shape).astype(np.float32)
    scales = np.ones(rules.svf_scale_count, np.float32)
    fields = {"benchmarks": list(rules.benchmarks),
              "optimizer": {"name": "sep-cma-es", "popsize": 8, "sigma0": 0.1,
                            "generations": 3, "seed": 0},
              "fitness_history": [{"generation": g, "mean": 0.5, "max": 0.6, "best": 0.6}
                                  for g in range(3)],
              "total_cost_usd": 1.0, "ledger_head": "ab" * 32, "init_weights_sha256": None,
              "held_out": None, "tinyrouter_version": __version__, "created_at": "2026-11-28T10:00:00Z"}
    folder = write_submission(root, login, 1, head, scales, fields, rules)
    return folder.relative_to(root).as_posix()


def commands(root: Path, folder: str) -> dict[str, list[str]]:
    cli = [sys.executable, "-m", "evaluator"]
    response = root / "response.txt"
    response.write_text("Adding up gives \\boxed{4}.\n", encoding="utf-8")
    return {
        "tinyrouter --help": [*cli, "--help"],
        "tinyrouter preflight": [*cli, "preflight", folder, "--repo", str(root)],
        "tinyrouter gates": [*cli, "gates", "--repo", str(root), "--submission", folder,
                             "--author", "alice", "--json", str(root / "gates.json")],
        "tinyrouter leaderboard validate": [*cli, "leaderboard", "validate", "--repo", str(root)],
        "tinyrouter grade (math)": [*cli, "grade", "math500", "--reference", "4",
                                    "--response-file", str(response)],
    }


def timed(name: str, argv: list[str]) -> float:
    started = time.perf_counter()
    done = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
    seconds = time.perf_counter() - started
    if done.returncode != 0:  # the time of a command that failed measures nothing
        raise TinyRouterError(f"{name} exited {done.returncode}: "
                         f"{done.stderr.decode(errors='replace').strip()[-300:]}")
    return seconds


def run(args: argparse.Namespace) -> int:
    if args.repeats < 1:
        raise UsageError("--repeats must be at least 1")
    with tempfile.TemporaryDirectory(prefix="tinyrouter-startup-") as tmp:
        root = Path(tmp)
        table = {FLOOR[0]: FLOOR[1], **commands(root, fixture_repo(root, args.rules))}
        times: dict[str, list[float]] = {name: [] for name in table}
        for _ in range(args.repeats):  # interleaved, so drift hits every command alike
            for name, argv in table.items():
                times[name].append(timed(name, argv))
    floor = statistics.median(times[FLOOR[0]])
    report = {name: {"median_s": round(statistics.median(ts), 4),
                     "ratio": round(statistics.median(ts) / floor, 2)} for name, ts in times.items()}
    width = max(map(len, report))
    print(f"{'command':<{width}}  median   × floor   ({args.repeats} runs each)")
    for name, row in report.items():
        print(f"{name:<{width}}  {row['median_s']:.3f} s  {row['ratio']:>5.2f}")
    write_json_out(args.json, {"repeats": args.repeats, "commands": report})
    return 0
