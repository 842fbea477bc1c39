"""`tinyrouter fairness`: the Monte Carlo of the crown rule, the overfit gate and disclosure."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from evaluator.commands.output import write_json_out
from evaluator.errors import UsageError


def add_fairness(p: argparse.ArgumentParser) -> None:
    p.description = ("Simulate evaluations under the current rules with the competition's own "
                     "scoring code: how often an honest head is penalised or rejected, how often "
                     "an equal challenger is crowned by chance, how often a better one is, and "
                     "what a hill-climber gains on the board. Each figure is also computed with "
                     "one rule taken away.")
    p.add_argument("--matrix", type=Path, action="append", metavar="FILE",
                   help="a correctness matrix, one per benchmark ({benchmark, tasks[].per_model"
                        "{model: [0|1, ...]}}); repeat for several (default: the demo corpus)")
    p.add_argument("--json", dest="json_out", metavar="OUT",
                   help="write the figures here (the site reads leaderboard/fairness.json; "
                        "- for standard output)")
    p.add_argument("--seed", type=int, default=0, help="the simulation's seed")
    p.add_argument("--scale", type=float, default=1.0,
                   help="multiply every figure's trial count (0.1 for a quick look)")
    p.set_defaults(func=run)


PARSERS = {"fairness": add_fairness}


def _pct(value: float | None) -> str:
    return "  –  " if value is None else f"{value:6.1%}"


def summary(data: dict[str, Any]) -> list[str]:
    """The figures as a few lines of text."""
    honest, ref = data["honest"], data["honest"]["reference"]
    old = honest["without"]["reference"]
    lines = [f"fairness under the current rules, from {data['source']} "
             f"(benchmarks: {', '.join(data['benchmarks'])})",
             f"honest head at accuracy {honest['reference_accuracy']}: overfit penalty on any "
             f"benchmark {_pct(ref['any']['penalty'])}, rejected {_pct(ref['any']['reject'])}"
             f"   (a fixed {honest['without']['eval_size']}/{honest['without']['audit_size']} "
             f"split: {_pct(old['any']['penalty'])}, "
             f"{_pct(old['any']['reject'])})",
             *memorisation_lines(data.get("memorisation")),
             "equal challenger crowned (with the interval rule / the margin alone):"]
    lines += [f"  decisions differ on {row['disagreement']:.0%} of items: "
              f"{_pct(row['crowned'])} / {_pct(row['margin_only'])}"
              for row in data["false_crown"]]
    lines.append("better challenger crowned (with the interval rule / the margin alone):")
    lines += [f"  true advantage {row['advantage']:+.2f}, decisions differ on "
              f"{row['disagreement']:.0%} besides: {_pct(row['crowned'])} / "
              f"{_pct(row['margin_only'])}" for row in data["power"]]
    lines.append("hill-climber's gain on the board (fresh partitions, rounded deltas / "
                 "a fixed split, exact deltas):")
    lines += [f"  after {row['submissions']:>5} submissions: {row['gain']:+.3f} / "
              f"{row['without']:+.3f}" for row in data["hill_climb"]]
    return lines


def memorisation_lines(memo: dict[str, Any] | None) -> list[str]:
    if not memo:
        return []
    lines = [f"the audit ({memo['audit_size']} never-published items per benchmark), penalised / "
             "rejected on any benchmark, lead over the best single model on eval / audit items:"]
    for name, who in (("router", "a head that learnt the task"),
                      ("memoriser", "a head fitted to every public item")):
        row = memo[name]
        lines.append(f"  {who}: {_pct(row['penalty'])} / {_pct(row['reject'])}, lead "
                     f"{row['eval_lead']:+.3f} / {row['audit_lead']:+.3f}")
    if "crowned" in memo["memoriser"]:
        lines.append(f"  the memoriser crowned over a king as good on what it could not "
                     f"collect: {_pct(memo['memoriser']['crowned'])}")
    return lines


def run(args: argparse.Namespace) -> int:
    from evaluator.fairness import Budget, demo_matrix, figures, read_matrix

    if args.scale <= 0:
        raise UsageError("--scale must be above 0")
    matrix = read_matrix(args.matrix, args.rules) if args.matrix else demo_matrix(args.rules)
    data = figures(matrix, args.rules, Budget().scaled(args.scale), args.seed,
                   progress=lambda step: print(f"simulating {step} …", file=sys.stderr,
                                               flush=True))
    print("\n".join(summary(data)))
    write_json_out(args.json_out, data)
    return 0
