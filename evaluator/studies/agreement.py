"""`tinyrouter dev agreement`: the evidence for the behavioural duplicate threshold."""

from __future__ import annotations

import argparse
import sys

from evaluator.commands.demo import GENERATIONS as DEMO_GENERATIONS
from evaluator.commands.output import write_json_out
from evaluator.errors import UsageError


def add_agreement(p: argparse.ArgumentParser) -> None:
    p.description = ("Train several heads on the demo's public train items with different "
                     "seeds and report how often each pair picks the same turn-1 model, next to "
                     "every disguised copy of a head and gate 3's weight cosine: the evidence "
                     "the behavioural duplicate threshold is chosen from. Takes minutes.")
    p.add_argument("--heads", type=int, default=6, help="independent heads to train")
    p.add_argument("--generations", type=int, default=DEMO_GENERATIONS,
                   help="training generations per head (the demo's miners train as many)")
    p.add_argument("--limit", type=int, help="train items per benchmark (default all)")
    p.add_argument("--json", metavar="OUT", help="also write the report here (- for stdout)")
    p.set_defaults(func=run)


PARSERS = {"agreement": add_agreement}


def summary(report: dict) -> list[str]:
    low, mid, high = (report["independent"][k] for k in ("min", "median", "max"))
    lines = [f"{report['heads']} heads trained {report['generations']} generations each, "
             f"compared on {report['items']} public train items ({report['seconds']} s)",
             f"independent pairs agree on {low:.3f} … {high:.3f} (median {mid:.3f}) of items",
             "copies (lowest agreement with their original; highest gate 3 cosine):"]
    threshold = report["threshold"]
    for kind, row in report["copies"].items():
        caught = ("caught by gate 3" if row["caught_by_gate_3"]
                  else "caught by the behavioural check" if row["caught_by_behaviour"]
                  else "passes both: routes differently on "
                       f"{1 - row['min_agreement']:.0%} of items")
        lines.append(f"  {kind:<24} {row['min_agreement']:.3f}   cosine {row['max_cosine']:.4f}"
                     f"   {caught}")
    flagged = "never flags" if high < threshold else "FLAGS"
    lines.append(f"the behavioural threshold {threshold} {flagged} an independent pair (the most "
                 f"alike agree on {high:.3f}); chosen as that plus the margin: "
                 f"{report['suggested_threshold']}")
    return lines


def run(args: argparse.Namespace) -> int:
    from evaluator.studies.alike import run_agreement

    if args.heads < 2 or args.generations < 1 or (args.limit is not None and args.limit < 1):
        raise UsageError("--heads must be at least 2, --generations and --limit positive")
    report = run_agreement(args.heads, args.generations, args.rules, args.limit,
                           progress=lambda step: print(f"{step} …", file=sys.stderr, flush=True))
    print("\n".join(summary(report)))
    write_json_out(args.json, report)
    return 0
