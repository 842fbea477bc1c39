"""`tinyrouter bench coordinator`: time the naive and the cached coordinator side by side."""

from __future__ import annotations

import argparse
import json


def register(sub: argparse._SubParsersAction) -> None:
    bench = sub.add_parser("bench", help="performance benchmarks (not tests)")
    kinds = bench.add_subparsers(dest="bench", metavar="WHAT", required=True)
    p = kinds.add_parser(
        "coordinator", help="full forward per θ against the frozen-prefix cache",
        description="Score K random θ on N transcripts of about T tokens, naive (a full "
                    "forward per θ) and cached (prefix once, tail per θ); medians over repeats.")
    p.add_argument("--shape", choices=("tiny", "qwen3-0.6b"), default="tiny",
                   help="tiny checkpoint, or a random model with Qwen3-0.6B's shape (default tiny)")
    p.add_argument("--questions", "-N", type=int, default=4, metavar="N", help="default 4")
    p.add_argument("--candidates", "-K", type=int, default=8, metavar="K", help="default 8")
    p.add_argument("--tokens", "-T", type=int, default=128, metavar="T", help="default 128")
    p.add_argument("--repeats", "-R", type=int, default=3, metavar="R", help="default 3")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="default cpu")
    p.add_argument("--seed", type=int, default=0, help="default 0")
    p.add_argument("--threads", type=int, metavar="N",
                   help="CPU threads for torch (default: 1 for tiny, whose matrices are too "
                        "small to share; torch's choice otherwise)")
    p.add_argument("--json", metavar="OUT", help="also write the numbers to this JSON file")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from evaluator.coordinator.bench import BenchConfig
    from evaluator.coordinator.bench import run as bench
    from evaluator.errors import TinyRouterError
    from evaluator.files import write_json

    for name in ("questions", "candidates", "tokens", "repeats"):
        if getattr(args, name) < 1:
            raise TinyRouterError(f"--{name} must be at least 1")
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
    if args.json:
        write_json(args.json, result)
    return 0
