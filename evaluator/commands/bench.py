"""`tinyrouter bench coordinator`: time the naive and the cached coordinator side by side."""

from __future__ import annotations

import argparse
import json

from evaluator.commands.output import write_json_out
from evaluator.errors import UsageError


def add_bench(parser: argparse.ArgumentParser) -> None:
    kinds = parser.add_subparsers(dest="bench", metavar="WHAT", required=True)
    p = kinds.add_parser(
        "coordinator", help="full forward per θ against the frozen-prefix cache, side by side")
    p.add_argument("--shape", choices=("tiny", "qwen3-0.6b"), default="tiny",
                   help="tiny checkpoint, or a random model with Qwen3-0.6B's shape")
    p.add_argument("--questions", "-N", type=int, default=4, metavar="N", help="transcripts")
    p.add_argument("--candidates", "-K", type=int, default=8, metavar="K", help="random θ")
    p.add_argument("--tokens", "-T", type=int, default=128, metavar="T",
                   help="tokens per transcript, about")
    p.add_argument("--repeats", "-R", type=int, default=3, metavar="R",
                   help="repeats (medians are reported)")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="torch device")
    p.add_argument("--seed", type=int, default=0, help="seed of the model, inputs and θ")
    p.add_argument("--threads", type=int, metavar="N",
                   help="CPU threads for torch (default: 1 for tiny, whose matrices are too "
                        "small to share; torch's choice otherwise)")
    p.add_argument("--json", metavar="OUT", help="also write the numbers here (- for stdout)")
    p.set_defaults(func=run)


PARSERS = {"bench": add_bench}


def run(args: argparse.Namespace) -> int:
    # torch loads only when a benchmark runs, so --help works on the core install
    from evaluator.coordinator.bench import BenchConfig
    from evaluator.coordinator.bench import run as bench

    for name in ("questions", "candidates", "tokens", "repeats"):
        if getattr(args, name) < 1:
            raise UsageError(f"--{name} must be at least 1")
    threads = args.threads or (1 if args.shape == "tiny" else None)
    if threads:
        import torch

        torch.set_num_threads(threads)
    result = bench(BenchConfig(args.shape, args.questions, args.candidates, args.tokens,
                               args.repeats, args.device, args.seed))
    for key, value in result.items():
        shown = json.dumps(value, ensure_ascii=False) if isinstance(value, (dict, bool)) else value
        if isinstance(value, float):
            shown = f"{value:.4g}"
        print(f"{key}: {shown}")
    write_json_out(args.json, result)
    return 0
