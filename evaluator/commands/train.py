"""`tinyrouter train`: one routing head for the chosen benchmarks, by separable CMA-ES."""

from __future__ import annotations

import argparse
from pathlib import Path

from tqdm import tqdm

from evaluator import train
from evaluator.answers import LEDGER_FILE as DATA_LEDGER
from evaluator.errors import TrainingError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("train", help="train a routing head with separable CMA-ES")
    p.add_argument("--benchmarks", required=True, help="comma-separated, e.g. "
                   "math500,mmlu,livecodebench")
    p.add_argument("--run-name", required=True, help="the run's folder under --experiments")
    p.add_argument("--data", type=Path, default=Path("data"),
                   help="training data from `tinyrouter collect` (default ./data)")
    p.add_argument("--encoder", help="hub id or local directory (default: the rules' encoder)")
    p.add_argument("--experiments", type=Path, default=Path("experiments"),
                   help="where runs live (default ./experiments)")
    p.add_argument("--generations", type=int, help="generations to reach (default: the rules')")
    p.add_argument("--popsize", type=int, help="population (default 4 + ⌊3 ln n⌋)")
    p.add_argument("--sigma0", type=float, help="initial step size (default: the rules')")
    p.add_argument("--minibatch", type=int, help="items per generation, shared by the "
                   "population and split evenly across benchmarks (default: the rules')")
    p.add_argument("--scales-step", type=float, help="the SVF scales' initial step as a "
                   "multiple of σ0 (default: the rules')")
    p.add_argument("--shrink", type=float, help="weight, 0 to 1, of the model's rate on the "
                   "question's category in each answer's correctness; 0 scores each cached answer "
                   "alone (default: the rules')")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--live", action="store_true",
                   help="add multi-turn fitness through the pool (ledgered, costs money)")
    p.add_argument("--live-items", type=int, default=2,
                   help="with --live: questions per benchmark and generation (default 2)")
    p.add_argument("--pool-url", help="with --live: the pool's base URL (default OpenRouter, "
                   "or $OPENROUTER_BASE_URL)")
    p.add_argument("--resume", action="store_true", help="continue the run from its checkpoint")
    p.add_argument("--threads", type=int, help="CPU threads for torch (default: torch's "
                   "choice; 1 is often fastest for a tiny encoder on a busy CPU)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=run)


def config_from(args: argparse.Namespace) -> train.TrainConfig:
    rules = args.rules
    config = train.TrainConfig(
        benchmarks=tuple(b for b in args.benchmarks.split(",") if b),
        generations=args.generations or rules.train_generations,
        popsize=args.popsize or rules.train_popsize,
        sigma0=args.sigma0 or rules.train_sigma0,
        minibatch=args.minibatch or rules.train_minibatch,
        seed=args.seed, encoder=args.encoder or rules.encoder_id,
        scales_step=args.scales_step or rules.train_scales_step,
        shrink=rules.train_shrink if args.shrink is None else args.shrink,
        data=str(args.data), live=args.live, live_items=args.live_items if args.live else 0)
    if (config.generations < 1 or config.popsize < 2 or config.minibatch < 1
            or config.sigma0 <= 0 or config.scales_step <= 0
            or (args.live and args.live_items < 1)):
        raise TrainingError("--generations, --popsize (≥ 2), --minibatch, --sigma0, "
                            "--scales-step and --live-items must be positive")
    train.check_shrink(config.shrink)
    return config


def run(args: argparse.Namespace) -> int:
    rules = args.rules
    config = config_from(args)
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    data = train.load_training_set(args.data, config.benchmarks, rules)
    run_dir = args.experiments / args.run_name
    encoder, live = config.encoder, None
    if config.live:
        from evaluator.coordinator import load_encoder

        encoder = load_encoder(config.encoder, rules=rules)
        live = train.pool_live_fitness(data, encoder, args.pool_url, run_dir / train.LEDGER_FILE,
                                       rules, config.seed, config.live_items)
    featurizer = train.encoder_featurizer(encoder, data, rules)
    bar = tqdm(total=config.generations, desc=args.run_name, unit="gen",
               disable=args.no_progress)

    def progress(entry: dict) -> None:
        bar.n = entry["generation"] + 1
        bar.set_postfix(best=f"{entry['best']:.4f}", mean=f"{entry['mean']:.4f}")

    try:
        summary = train.run_training(run_dir, config, data, featurizer, rules,
                                     resume=args.resume, ledger_source=args.data / DATA_LEDGER,
                                     on_generation=progress, live=live)
    finally:
        bar.close()
    print(f"{run_dir}: {summary['optimizer']['generations']} generations, "
          f"best fitness {summary['best_fitness']:.4f}")
    for name, t in summary["train"].items():
        print(f"  {name:<14} train argmax accuracy {t['argmax_acc']:.4f} "
              f"(expected {t['expected_acc']:.4f}, {t['items']} items)")
    print(f"next: tinyrouter pack --run-dir {run_dir} --miner-name <your GitHub login>")
    return 0
