"""`tinyrouter dev costs`: the encoder's time per unit of work on this machine, for the guides.

A random model with Qwen3-0.6B's shape is timed through the coordinator's own paths
(studies/forwards.py): a full forward, the frozen prefix, and one training generation's
batched tails, per item. The Submitting and Maintaining guides multiply these by the rules'
counts; the figures go to evaluator/data/costs.json, one entry per device measured.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

from evaluator.commands.output import write_json_out
from evaluator.errors import UsageError
from evaluator.files import format_time, utc_now
from evaluator.resources import COSTS, data_file

FORMAT = 1


def add_costs(p: argparse.ArgumentParser) -> None:
    p.description = ("Time the encoder's work per item and per training candidate with a random "
                     "model of Qwen3-0.6B's shape on this machine (cpu or cuda) and add the "
                     "figures to the file the Submitting and Maintaining guides render their "
                     "costs from. Takes minutes on a CPU.")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="torch device")
    p.add_argument("--questions", type=int, default=8, help="items timed per pass")
    p.add_argument("--candidates", type=int, default=4, help="θ timed per generation")
    p.add_argument("--tokens", type=int, default=256, help="tokens per item, about")
    p.add_argument("--repeats", type=int, default=3, help="repeats (medians are kept)")
    p.add_argument("--out", default=str(data_file(COSTS)),
                   help="the file to add this device's figures to (- for standard output)")
    p.set_defaults(func=run)


PARSERS = {"costs": add_costs}


def measure(device: str, questions: int, candidates: int, tokens: int,
            repeats: int) -> dict[str, Any]:
    """Seconds per full forward, per prefix item and per (candidate × item) tail."""
    from evaluator.studies.forwards import BenchConfig
    from evaluator.studies.forwards import run as bench

    found = bench(BenchConfig("qwen3-0.6b", questions, candidates, tokens, repeats, device))
    pairs = questions * candidates
    return {"device": device, "dtype": found["dtype"], "threads": found["threads"],
            "cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
            else os.cpu_count(), "load": round(os.getloadavg()[0], 2),
            "tokens": round(found["tokens_mean"]), "questions": questions,
            "candidates": candidates, "repeats": repeats,
            "forward_s": found["naive_s"] / pairs, "prefix_s": found["prefix_s"] / questions,
            "tail_s": found["batched_s"] / pairs, "measured_at": format_time(utc_now())}


def run(args: argparse.Namespace) -> int:
    for name in ("questions", "candidates", "tokens", "repeats"):
        if getattr(args, name) < 1:
            raise UsageError(f"--{name} must be at least 1")
    figures = measure(args.device, args.questions, args.candidates, args.tokens, args.repeats)
    print(f"{args.device}: a full forward {figures['forward_s']:.4f} s, the prefix "
          f"{figures['prefix_s']:.4f} s and a training tail {figures['tail_s']:.4f} s per item "
          f"of about {figures['tokens']} tokens ({figures['threads']} threads, load "
          f"{figures['load']})")
    if args.out == "-":
        write_json_out("-", {"format": FORMAT, "devices": {args.device: figures}})
        return 0
    path = Path(args.out)
    known = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    devices = {**known.get("devices", {}), args.device: figures}
    write_json_out(str(path), {"format": FORMAT, "devices": devices})
    return 0
