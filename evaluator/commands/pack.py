"""`tinyrouter pack`: turn a training run into the next submission folder."""

from __future__ import annotations

import argparse
from pathlib import Path

from evaluator import train


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("pack", help="write a run's head as submissions/<login>/<next generation>/")
    p.add_argument("--run-dir", type=Path, required=True, help="experiments/<run>")
    p.add_argument("--miner-name", required=True, help="your GitHub login")
    p.add_argument("--repo", type=Path, default=Path("."), help="repository root (default .)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    folder = train.pack(args.run_dir, args.miner_name, args.repo, args.rules)
    shown = folder.relative_to(args.repo) if folder.is_relative_to(args.repo) else folder
    print(f"wrote {shown}")
    print(f"next: tinyrouter preflight {shown}")
    return 0
