"""`tinyrouter dev agreement`: the evidence for the duplicate thresholds (gate 3's cosine and
the behavioural check's own-choice share)."""

from __future__ import annotations

import argparse
import sys

from evaluator.commands.demo import GENERATIONS as DEMO_GENERATIONS
from evaluator.commands.output import write_json_out
from evaluator.errors import UsageError


def add_agreement(p: argparse.ArgumentParser) -> None:
    p.description = ("Train default runs with their own seeds and heads from the other starts "
                     "on the demo's public train items, and report how alike each pair routes "
                     "(gate 3's cosine, the share of items with the same turn-1 model, the share "
                     "of the earlier head's own choices the later one makes) next to every "
                     "disguised copy of a head: the evidence the duplicate thresholds are chosen "
                     "from. Takes minutes.")
    p.add_argument("--heads", type=int, default=4, help="default runs to train (seeds 1…N)")
    p.add_argument("--generations", type=int, default=DEMO_GENERATIONS,
                   help="training generations per head (the demo's miners train as many)")
    p.add_argument("--limit", type=int, help="train items per benchmark (default all)")
    p.add_argument("--json", metavar="OUT", help="also write the report here (- for stdout)")
    p.set_defaults(func=run)


PARSERS = {"agreement": add_agreement}


def _share(value: float | None) -> str:
    return "—" if value is None else f"{value:.3f}"


def summary(report: dict) -> list[str]:
    ind, limits, suggested = report["independent"], report["thresholds"], report["suggested"]
    lines = [f"{report['heads']} heads trained {report['generations']} generations each, "
             f"compared on {report['items']} public train items ({report['seconds']} s)",
             f"independent pairs: gate 3 cosine up to {ind['max_cosine']:.4f}, same model on "
             f"up to {ind['max_agreement']:.3f} of the items, own choices made up to "
             f"{_share(ind['max_own_share'])} (where the earlier head has "
             f"{limits['duplicate_own_items']} or more)",
             "copies (lowest gate 3 cosine, same model, own choices made; who catches them):"]
    for kind, row in report["copies"].items():
        missed = row["of"] - row["caught_by_gate_3"] - row["caught_by_behaviour"]
        caught = (f"gate 3 {row['caught_by_gate_3']}, behaviour {row['caught_by_behaviour']}"
                  f", neither {missed} of {row['of']}")
        if missed:
            caught += (f" ({row['of'] - row['with_own_choices']} of the originals make no own "
                       "choices)")
        lines.append(f"  {kind:<24} cosine {row['min_cosine']:.4f}  same "
                     f"{row['min_agreement']:.3f}  own {_share(row['min_own_share'])}  {caught}")
    flagged = "flags no independent pair" if not ind["flagged"] else \
        f"FLAGS {len(ind['flagged'])} independent pair(s)"
    lines.append(f"the thresholds in force (cosine {limits['duplicate_cosine']}, same model "
                 f"{limits['duplicate_agreement']}, own choices {limits['duplicate_own_share']}) "
                 f"{flagged}; the most alike pair plus its margin suggests cosine "
                 f"{suggested['duplicate_cosine']} and own choices "
                 f"{_share(suggested['duplicate_own_share'])}")
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
