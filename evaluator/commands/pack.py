"""`tinyrouter pack`: turn a training run into the next submission folder."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_pack(p: argparse.ArgumentParser) -> None:
    p.add_argument("--run-dir", type=Path, required=True, help="experiments/<run>")
    p.add_argument("--miner-name", required=True, help="your GitHub login")
    p.add_argument("--repo", type=Path, default=Path("."), help="repository root")
    p.set_defaults(func=run)


PARSERS = {"pack": add_pack}


def run(args: argparse.Namespace) -> int:
    from evaluator.submission.pack import pack  # the trainer's run files: only when packing

    folder = pack(args.run_dir, args.miner_name, args.repo, args.rules)
    shown = folder.relative_to(args.repo) if folder.is_relative_to(args.repo) else folder
    print(f"wrote {shown}")
    print(f"next: tinyrouter preflight {shown}")
    return 0
