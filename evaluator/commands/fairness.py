"""`tinyrouter fairness`: the Monte Carlo of the crown rule, the overfit gate and disclosure."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from evaluator.commands.output import write_json_out
from evaluator.errors import UsageError


def add_fairness(p: argparse.ArgumentParser) -> None:
    p.description = ("Simulate evaluations under the current rules with the evaluator's own "
                     "verdict function: how often an honest head is penalised or rejected, how "
                     "often an equal challenger is crowned by chance, in one evaluation and over "
                     "a campaign of near-equal submissions, how often a better one is, a "
                     "memoriser's crowns, how many live sessions an evaluation plays, and how "
                     "often a climber is crowned and what it gains on the board. The king's "
                     "live sessions are re-run independently (the shared case beside it); every "
                     "rate comes with its Monte Carlo standard error.")
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


def _pct(value: float | None, se: float | None = None) -> str:
    if value is None:
        return "  –  "
    digits = 2 if se is not None and 0 < se < 0.001 else 1
    return f"{value:6.{digits}%}" + ("" if se is None else f" ±{se:.{digits}%}")


def _of(value: float, trials: int) -> str:
    """A rate seen in `trials` trials, with its standard error."""
    from evaluator.fairness import standard_error

    return _pct(value, standard_error(value, trials))


def summary(data: dict[str, Any]) -> list[str]:
    """The figures as a few lines of text; ± is each rate's Monte Carlo standard error."""
    honest, ref = data["honest"], data["honest"]["reference"]
    old, n = honest["without"]["reference"], data["trials"]["honest"]
    lines = [f"fairness under the current rules, from {data['source']} "
             f"(benchmarks: {', '.join(data['benchmarks'])}); ± is the Monte Carlo standard error",
             f"honest head at accuracy {honest['reference_accuracy']}: overfit penalty on any "
             f"benchmark {_of(ref['any']['penalty'], n)}, rejected "
             f"{_of(ref['any']['reject'], n)}"
             f"   (a fixed {honest['without']['eval_size']}/{honest['without']['audit_size']} "
             f"split: {_of(old['any']['penalty'], n)}, "
             f"{_of(old['any']['reject'], n)})",
             *memorisation_lines(data["memorisation"], data["trials"]["crown"]),
             f"equal challenger crowned (independent live re-runs, two runs of a call graded "
             f"differently with chance {data['rerun_flip']} / shared live play):"]
    lines += [f"  decisions differ on {row['disagreement']:.0%} of items: "
              f"{_pct(row['crowned'], row['crowned_se'])} / "
              f"{_pct(row['shared'], row['shared_se'])}" for row in data["false_crown"]]
    if data["left_out"]:
        lines.append(f"  (left out: {', '.join(f'{d:.0%}' for d in data['left_out'])}; the "
                     f"behavioural check may reject a head agreeing with the king on "
                     f"{data['duplicate_agreement']:.0%} of items or more: it does when the "
                     "head also makes the king's own choices)")
    camp = data["campaign"]
    lines.append(f"campaign of near-equal submissions (decisions differ on "
                 f"{camp['disagreement']:.0%}): P(at least one false crown), independent / "
                 "shared (upper end of its 95% interval)")
    lines += [f"  after {ind['submissions']:>5} submissions: {_pct(ind['any'], ind['se'])} "
              f"(≤ {ind['upper']:.1%}) / {_pct(sha['any'], sha['se'])} (≤ {sha['upper']:.1%})"
              for ind, sha in zip(camp["independent_rows"], camp["shared_rows"], strict=True)]
    lines.append("better challenger crowned (independent / shared):")
    lines += [f"  true advantage {row['advantage']:+.2f}, decisions differ on "
              f"{row['disagreement']:.0%} besides: "
              + (f"left out ({LEFT_OUT[row['left_out']]})" if row.get("left_out") else
                 f"{_pct(row['crowned'], row['crowned_se'])} / "
                 f"{_pct(row['shared'], row['shared_se'])}") for row in data["power"]]
    live = data["live_sessions"]
    lines.append(f"live sessions per evaluation: {live['first_stage']} when the first stage "
                 f"decides, {live['near_equal']:.0f} expected for a near-equal challenger, "
                 f"{live['costliest']:.0f} in the costliest scenario, {live['worst']} at worst")
    climb = data["climber"]
    lines.append(f"climber ({climb['climbers']} sybil campaigns keeping what a loss publishes, "
                 "going on from any crown): crowned at least once, and the king's gain on the "
                 "board beyond its true gain / the same when a loss publishes its crown test's z:")
    lines += [f"  after {row['submissions']:>5} submissions: "
              f"{_of(row['crowned'], climb['climbers'])}, {row['beyond']:+.4f} / "
              f"{_of(other['crowned'], climb['climbers'])}, {other['beyond']:+.4f}"
              for row, other in zip(climb["rows"], climb["without"], strict=True)]
    return lines


LEFT_OUT = {"headroom": "the matrix has no room for that advantage",
            "duplicate": "the behavioural check would reject it as a copy"}


def memorisation_lines(memo: dict[str, Any] | None, trials: int) -> list[str]:
    if not memo:
        return []
    lines = [f"the audit ({memo['audit_size']} never-published items per benchmark), penalised / "
             "rejected on any benchmark, lead over the best single model on pool / audit items:"]
    for name, who in (("router", "a head that learnt the task"),
                      ("memoriser", "the same head fitted to every public pool item")):
        row = memo[name]
        lines.append(f"  {who}: {_of(row['penalty'], trials)} / "
                     f"{_of(row['reject'], trials)}, lead "
                     f"{row['pool_lead']:+.3f} / {row['audit_lead']:+.3f}")
    lines.append(f"crowned with live play (independent / shared), the same challenger honest and "
                 f"having memorised the pool up to a lead of {memo['lead']}:")
    for row in memo["crowns"]:
        honest, fitted = row["honest"], row["memoriser"]
        lines.append(f"  true advantage {row['advantage']:+.2f}, other decisions differ on "
                     f"{row['disagreement']:.0%}: honest "
                     f"{_pct(honest['crowned'], honest['crowned_se'])} / "
                     f"{_pct(honest['shared'], honest['shared_se'])}, memoriser "
                     f"{_pct(fitted['crowned'], fitted['crowned_se'])} / "
                     f"{_pct(fitted['shared'], fitted['shared_se'])}")
    return lines


def run(args: argparse.Namespace) -> int:
    from evaluator.fairness import Budget, figures
    from evaluator.simulation import demo_matrix, read_matrix

    if args.scale <= 0:
        raise UsageError("--scale must be above 0")
    matrix = read_matrix(args.matrix, args.rules) if args.matrix else demo_matrix(args.rules)
    data = figures(matrix, args.rules, Budget().scaled(args.scale), args.seed,
                   progress=lambda step: print(f"simulating {step} …", file=sys.stderr,
                                               flush=True))
    print("\n".join(summary(data)))
    write_json_out(args.json_out, data)
    return 0
