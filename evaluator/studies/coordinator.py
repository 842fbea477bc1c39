"""`tinyrouter dev coordinator`: time the naive, cached and batched coordinator side by side."""

from __future__ import annotations

import argparse
import json

from evaluator.commands.output import write_json_out
from evaluator.errors import UsageError


def add_coordinator(p: argparse.ArgumentParser) -> None:
    p.description = ("Times K full forwards (naive), K per-candidate cached calls and one "
                     "batched call for the whole generation. generation_ratio = naive over "
                     "batched, the prefix build excluded (training builds it once for all "
                     "generations); generation_ratio_with_prefix adds one prefix build.")
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
    p.add_argument("--activation-mib", type=float, metavar="MIB",
                   help="activation budget of a batched pass, MiB (default: the device's; "
                        "0 is one candidate a pass)")
    p.add_argument("--threads", type=int, metavar="N",
                   help="CPU threads for torch (default: 1 for tiny, whose matrices are too "
                        "small to share; torch's choice otherwise)")
    p.add_argument("--json", metavar="OUT", help="also write the numbers here (- for stdout)")
    p.set_defaults(func=run)


PARSERS = {"coordinator": add_coordinator}


def run(args: argparse.Namespace) -> int:
    for name in ("questions", "candidates", "tokens", "repeats"):
        if getattr(args, name) < 1:
            raise UsageError(f"--{name} must be at least 1")
    if args.activation_mib is not None and args.activation_mib < 0:
        raise UsageError("--activation-mib must not be negative")
    # torch loads only when a benchmark runs, so --help and a refusal work on the core install
    from evaluator.studies.forwards import BenchConfig
    from evaluator.studies.forwards import run as bench

    budget = None if args.activation_mib is None else int(args.activation_mib * 1024**2)
    threads = args.threads or (1 if args.shape == "tiny" else None)
    if threads:
        import torch

        torch.set_num_threads(threads)
    result = bench(BenchConfig(args.shape, args.questions, args.candidates, args.tokens,
                               args.repeats, args.device, args.seed, budget))
    for key, value in result.items():
        shown = json.dumps(value, ensure_ascii=False) if isinstance(value, (dict, bool)) else value
        if isinstance(value, float):
            shown = f"{value:.4g}"
        print(f"{key}: {shown}")
    write_json_out(args.json, result)
    return 0
