"""`tinyrouter diff A B`: where two heads route differently, and where accuracy moved."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from evaluator.commands.output import write_json_out
from evaluator.errors import UsageError
from evaluator.rules import OFFICIAL


def add_diff(p: argparse.ArgumentParser) -> None:
    p.description = ("Compare two heads' turn-1 decisions on your collected public rows: per "
                     "benchmark and category, each head's model and role mix, how often they "
                     "agree, and how accuracy moved from A to B.")
    for name in ("a", "b"):
        p.add_argument(name, metavar=name.upper(),
                       help="a run folder, a submission folder, a weights file, or king")
    p.add_argument("--data", type=Path, default=Path("data"),
                   help="collected rows (<benchmark>.jsonl from `tinyrouter collect`)")
    p.add_argument("--repo", type=Path, default=Path("."), help="main checkout (for king)")
    p.add_argument("--encoder", help="hub id or local folder (default: "
                   f"{OFFICIAL.encoder_id}, or the --competition file's)")
    p.add_argument("--json", dest="json_out", metavar="OUT",
                   help="also write the comparison as JSON (- for standard output)")
    p.set_defaults(func=run)


PARSERS = {"diff": add_diff}


def _models(mix: dict[str, float]) -> str:
    return " ".join(f"{name.split('-')[0]} {share:.0%}" for name, share in mix.items())


def lines(report: dict[str, Any]) -> list[str]:
    first, second = report["heads"]
    out = [f"A = {first}", f"B = {second}"]
    for bench, entry in report["per_benchmark"].items():
        out.append(f"{bench}: {entry['rows']} rows, same model on {entry['same_model']:.0%}, "
                   f"accuracy {entry['accuracy'][0]:.3f} → {entry['accuracy'][1]:.3f} "
                   f"({entry['accuracy_change']:+.3f})")
        for cat, group in entry["by_category"].items():
            out.append(f"  {cat[:28]:<28} {group['rows']:>4} rows  same {group['same_model']:>4.0%}"
                       f"  acc {group['accuracy_change']:+.3f}  A: {_models(group['models'][0])}"
                       f"  B: {_models(group['models'][1])}")
    return out


def run(args: argparse.Namespace) -> int:
    from evaluator.compare import compare_heads
    from evaluator.coordinator.router import load_router
    from evaluator.heads import resolve_head
    from evaluator.train.data import data_path, read_training_rows

    rules = args.rules
    first, second = (resolve_head(spec, args.repo, rules) for spec in (args.a, args.b))
    rows = [row for bench in rules.benchmarks if data_path(args.data, bench).is_file()
            for row in read_training_rows(data_path(args.data, bench), rules)]
    if not rows:
        raise UsageError(f"{args.data} holds no <benchmark>.jsonl rows; run `tinyrouter collect`")
    report = compare_heads(first, second, rows, load_router(args.encoder or rules.encoder_id,
                                                            rules), rules)
    print("\n".join(lines(report)))
    write_json_out(args.json_out, report)
    return 0
