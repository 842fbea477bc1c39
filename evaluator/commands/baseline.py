"""`tinyrouter baseline always-model|random|oracle`: the floors and the ceiling to beat."""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path
from typing import Any

from evaluator import baselines
from evaluator.benchmarks.sealing import PASSWORD_ENV, open_benchmark, password_from_env
from evaluator.commands.output import write_json_out
from evaluator.errors import UsageError
from evaluator.rules import POOL_SPLIT, Competition
from evaluator.train.data import data_path, read_training_rows
from evaluator.types import AnsweredItem


def add_baseline(parser: argparse.ArgumentParser) -> None:
    kinds = parser.add_subparsers(dest="kind", metavar="KIND", required=True)
    always = kinds.add_parser("always-model", help="cached accuracy of always picking one model")
    always.add_argument("--model", required=True, help="a pool model name")
    rand = kinds.add_parser("random", help="cached accuracy of a uniform random router")
    rand.add_argument("--seeds", type=int, default=10, help="random routers to average")
    oracle = kinds.add_parser("oracle", help="per-model, random, oracle and cross-fitted ceiling")
    oracle.add_argument("--matrix", type=Path, help="correctness matrix JSON "
                        "(tasks[].id, tasks[].per_model{model: [0|1 per sample]})")
    for kind, func in ((always, run_always), (rand, run_random), (oracle, run_oracle)):
        source = kind.add_argument_group("answered items (training data or a sealed benchmark)")
        source.add_argument("--data", type=Path, help="training data folder (<benchmark>.jsonl)")
        source.add_argument("--sealed", type=Path, metavar="DIR",
                            help=f"sealed benchmark folder (password from ${PASSWORD_ENV})")
        source.add_argument("--benchmarks", help="comma-separated (default: all)")
        kind.add_argument("--json", dest="json_out", metavar="OUT",
                          help="also write JSON here (- for standard output)")
        kind.set_defaults(func=func)


PARSERS = {"baseline": add_baseline}


def answered_sets(args: argparse.Namespace) -> dict[str, list[AnsweredItem]]:
    """Per benchmark, the answered items named by --data or --sealed."""
    rules: Competition = args.rules
    names = args.benchmarks.split(",") if args.benchmarks else list(rules.benchmarks)
    unknown = sorted(set(names) - set(rules.benchmarks))
    if unknown:
        raise UsageError(f"unknown benchmark(s) {unknown}; choose from "
                              f"{list(rules.benchmarks)}")
    if (args.data is None) == (args.sealed is None):
        raise UsageError("name exactly one source: --data DIR or --sealed DIR")
    if args.data is not None:
        # Without --benchmarks, whichever benchmarks the folder holds.
        present = names if args.benchmarks else [
            n for n in names if data_path(args.data, n).is_file()]
        if not present:
            raise UsageError(f"{args.data} holds no <benchmark>.jsonl training data")
        return {n: read_training_rows(data_path(args.data, n), rules) for n in present}
    opened = open_benchmark(args.sealed, password_from_env(), rules, names)
    return {n: [AnsweredItem.from_dict(row) if isinstance(row, dict) else row
                for row in opened[n][POOL_SPLIT]] for n in names if n in opened}


def _finish(args: argparse.Namespace, lines: list[str], data: Any) -> int:
    print("\n".join(lines))
    write_json_out(args.json_out, data)
    return 0


def run_always(args: argparse.Namespace) -> int:
    if args.model not in args.rules.pool_names:
        raise UsageError(f"{args.model!r} is not a pool model; choose from "
                              f"{list(args.rules.pool_names)}")
    result = {n: baselines.always_model_accuracy(rows, args.model)
              for n, rows in answered_sets(args).items()}
    lines = [f"always {args.model}:"] + [f"  {n:<14} {acc:.4f}" for n, acc in result.items()]
    lines.append(f"  {'mean':<14} {statistics.fmean(result.values()):.4f}")
    return _finish(args, lines, {"model": args.model, "accuracy": result})


def run_random(args: argparse.Namespace) -> int:
    if args.seeds < 1:
        raise UsageError("--seeds must be at least 1")
    result, lines = {}, [f"uniform random router ({args.seeds} seeds):"]
    for name, rows in answered_sets(args).items():
        accs = baselines.random_router_accuracies(rows, args.rules.pool_names, args.seeds)
        expected = baselines.from_answered(rows, args.rules.pool_names)["random"]
        spread = statistics.stdev(accs) if len(accs) > 1 else 0.0
        result[name] = {"mean": statistics.fmean(accs), "std": spread, "expected": expected,
                        "per_seed": accs}
        lines.append(f"  {name:<14} {result[name]['mean']:.4f} ± {spread:.4f} "
                     f"(expected {expected:.4f})")
    return _finish(args, lines, result)


def format_report(name: str, report: dict[str, Any]) -> list[str]:
    ci = report["ci95"]

    def row(label: str, value: float | None, interval: list[float] | None) -> str:
        if value is None:
            return f"  {label:<32} n/a (needs at least 2 samples per item and model)"
        return f"  {label:<32} {value:.4f}  [{interval[0]:.4f}, {interval[1]:.4f}]"

    lines = [f"{name}: {report['n_items']} items, "
             f"{report['samples_per_item']}+ sample(s) per item and model"]
    lines += [row(f"always {m}", acc, ci["per_model_accuracy"][m])
              for m, acc in report["per_model_accuracy"].items()]
    best = report["best_single"]
    lines += [row(f"best single ({best['model']})", best["accuracy"], ci["best_single"]),
              row("random", report["random"], ci["random"]),
              row("oracle (naive)", report["oracle_naive"], ci["oracle_naive"]),
              row("oracle (cross-fitted)", report["oracle_crossfit"], ci["oracle_crossfit"]),
              row("headroom", report["headroom"], ci["headroom"])]
    return lines


def run_oracle(args: argparse.Namespace) -> int:
    if args.matrix is not None:
        if args.data is not None or args.sealed is not None:
            raise UsageError("give --matrix or a data source, not both")
        matrices = {args.matrix.name: baselines.load_matrix(args.matrix)}
    else:
        matrices = {n: baselines.matrix_from_answered(rows, args.rules.pool_names)
                    for n, rows in answered_sets(args).items()}
    reports = {n: baselines.oracle_report(m, args.rules) for n, m in matrices.items()}
    lines = [line for n, r in reports.items() for line in format_report(n, r)]
    return _finish(args, lines, reports if args.matrix is None else next(iter(reports.values())))
