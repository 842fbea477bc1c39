"""`tinyrouter dev training`: a default training run on the demo, scored on held-out items."""

from __future__ import annotations

import argparse
import json

from evaluator import isolation
from evaluator.commands.output import write_json_out
from evaluator.errors import UsageError

TRAINING_OPTIONS = ("generations", "popsize", "sigma0", "minibatch", "scales_step", "shrink")


def add_training(p: argparse.ArgumentParser) -> None:
    p.description = ("Build the tiny encoder, answer the demo's train and eval items through the "
                     "loopback simulator, train a head with the default settings and report its "
                     "cached accuracy on the eval split next to the best single model and the "
                     "oracle. Takes minutes.")
    p.add_argument("--generations", type=int, help="default: the rules' training default")
    p.add_argument("--seed", type=int, default=0, help="training seed")
    p.add_argument("--popsize", type=int, help="default 4 + ⌊3 ln n⌋")
    p.add_argument("--sigma0", type=float, help="default: the rules'")
    p.add_argument("--minibatch", type=int, help="default: the rules'")
    p.add_argument("--scales-step", type=float, help="default: the rules'")
    p.add_argument("--shrink", type=float, help="default: the rules' (0 scores each answer alone)")
    p.add_argument("--limit", type=int, help="train and eval items per benchmark (default all)")
    p.add_argument("--threads", type=int, help="CPU threads for torch (default: torch's choice)")
    p.add_argument("--json", metavar="OUT", help="also write the report here (- for stdout)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    isolation.add_flag(p)
    p.set_defaults(func=run)


PARSERS = {"training": add_training}


def run(args: argparse.Namespace) -> int:
    # torch and the trainer load only when the benchmark runs, so --help works without them
    from tqdm import tqdm

    from evaluator.studies.training_runs import TARGET_MARGIN, BenchOptions, meets_target, run_bench

    for name in ("limit", "threads"):
        if getattr(args, name) is not None and getattr(args, name) <= 0:
            raise UsageError(f"--{name} must be positive")
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    options = BenchOptions(training={k: getattr(args, k) for k in TRAINING_OPTIONS},
                           seed=args.seed, limit=args.limit)
    bar = tqdm(desc="training", unit="gen", disable=args.no_progress)

    def progress(entry: dict) -> None:
        bar.update(1)
        bar.set_postfix(best=f"{entry['best']:.4f}", mean=f"{entry['mean']:.4f}")

    try:
        report = run_bench(options, args.rules, on_generation=progress)
    finally:
        bar.close()
    print_report(report)
    print(f"target (best single + {100 * TARGET_MARGIN:.0f} points, half the gap): "
          f"{'met' if meets_target(report) else 'not met'}")
    write_json_out(args.json, report)
    return 0


def print_report(report: dict) -> None:
    print(f"{'benchmark':<14} {'items':>5} {'router':>7} {'best':>7} {'oracle':>7} "
          f"{'random':>7} {'gap':>6}  best model")
    rows = [*report["per_benchmark"].items(), ("mean", report["mean"])]
    for name, e in rows:
        best = e["best_single"]
        best_acc = best["accuracy"] if isinstance(best, dict) else best
        gap = "" if e["gap_closed"] is None else f"{e['gap_closed']:.2f}"
        print(f"{name:<14} {e.get('items', ''):>5} {e['accuracy']:7.4f} {best_acc:7.4f} "
              f"{e['oracle']:7.4f} {e['random']:7.4f} {gap:>6}  "
              f"{best['model'] if isinstance(best, dict) else ''}")
    t = report["train"]
    print(f"train split: router {t['accuracy']:.4f}, best single {t['best_single']:.4f}, "
          f"oracle {t['oracle']:.4f}")
    print(f"settings: {json.dumps(report['settings'], sort_keys=True)}")
    print(f"seconds: {json.dumps(report['seconds'], sort_keys=True)}")
