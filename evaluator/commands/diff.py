"""`tinyrouter diff YOURS THEIRS`: where your head routes differently from another, and where
accuracy differs, on the rows `score --king` compares them on."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from evaluator.commands.output import write_json_out
from evaluator.rules import OFFICIAL


def add_diff(p: argparse.ArgumentParser) -> None:
    p.description = ("Compare your head's turn-1 decisions with another's on your collected "
                     "public rows (the rows `score --king` compares on: a run's held-out rows, "
                     "narrowed to those the other head's receipt also declares held out): per "
                     "benchmark and category, each head's model and role mix, how often they "
                     "agree, and the accuracy difference, yours minus theirs (positive: yours "
                     "is better).")
    p.add_argument("yours", metavar="YOURS",
                   help="your head: a run folder, a submission folder, a weights file, or king")
    p.add_argument("theirs", metavar="THEIRS",
                   help="the head to compare with, in the same forms (e.g. king)")
    p.add_argument("--data", type=Path,
                   help="collected rows (<benchmark>.jsonl from `tinyrouter collect`; default: "
                        "the run's --data)")
    p.add_argument("--repo", type=Path, default=Path("."), help="main checkout (for king)")
    p.add_argument("--encoder", help="hub id or local folder (default: the run's, else "
                   f"{OFFICIAL.encoder_id} or the --competition file's)")
    p.add_argument("--json", dest="json_out", metavar="OUT",
                   help="also write the comparison as JSON (- for standard output)")
    p.set_defaults(func=run)


PARSERS = {"diff": add_diff}


def _models(mix: dict[str, float]) -> str:
    return " ".join(f"{name.split('-')[0]} {share:.0%}" for name, share in mix.items())


def lines(report: dict[str, Any], rules: Any) -> list[str]:
    out = [f"yours  = {report['yours']}", f"theirs = {report['theirs']}",
           f"compared on {report['rows']['said']}; every difference is yours − theirs "
           "(positive: yours is better)"]
    for bench, entry in report["per_benchmark"].items():
        acc = entry["accuracy"]
        out.append(f"{bench}: {entry['rows']} rows, same model on {entry['same_model']:.0%}, "
                   f"accuracy yours {acc['yours']:.3f}, theirs {acc['theirs']:.3f} "
                   f"({entry['difference']:+.3f})")
        for cat, group in entry["by_category"].items():
            out.append(f"  {cat:<28} {group['rows']:>4} rows  same {group['same_model']:>4.0%}"
                       f"  acc {group['difference']:+.3f}  yours: "
                       f"{_models(group['models']['yours'])}  theirs: "
                       f"{_models(group['models']['theirs'])}")
    out.append(f"overall (the benchmarks' mean): {report['difference']:+.3f} accuracy, "
               f"{rules.weight_cached * report['difference']:+.4f} in composite points at the "
               f"cached weight {rules.weight_cached} (what `score --king` reports on these rows, "
               "before live play)")
    return out


def run(args: argparse.Namespace) -> int:
    from evaluator.commands.score import compared_rows
    from evaluator.compare import compare_heads
    from evaluator.coordinator.router import load_router
    from evaluator.heads import resolve_head
    from evaluator.train.run import read_run

    rules = args.rules
    yours, theirs = (resolve_head(spec, args.repo, rules) for spec in (args.yours, args.theirs))
    rows = compared_rows(args, yours, theirs, rules)
    encoder = args.encoder or (read_run(yours.run_dir)[0].get("encoder") if yours.run_dir
                               else None) or rules.encoder_id
    paired = [row for bench_rows in rows.paired.values() for row in bench_rows]
    report = compare_heads(yours, theirs, paired, load_router(encoder, rules), rules)
    report["rows"] = {"which": rows.which, "said": rows.said(theirs.label)}
    print("\n".join(lines(report, rules)))
    write_json_out(args.json_out, report)
    return 0
