"""`tinyrouter pack`: turn a training run into the next submission folder."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path


def add_pack(p: argparse.ArgumentParser) -> None:
    p.add_argument("--run-dir", type=Path, required=True, help="experiments/<run>")
    p.add_argument("--miner-name", required=True, help="your GitHub login")
    p.add_argument("--repo", type=Path, default=Path("."), help="repository root")
    p.set_defaults(func=run)


PARSERS = {"pack": add_pack}


def run(args: argparse.Namespace) -> int:
    from evaluator.train.pack import pack  # the trainer's run files: only when packing

    folder = pack(args.run_dir, args.miner_name, args.repo, args.rules)
    shown = folder.relative_to(args.repo) if folder.is_relative_to(args.repo) else folder
    print(f"wrote {shown}")
    print(f"the pull request must be opened by the GitHub account {args.miner_name}: gate 0 "
          "refuses a folder named for anyone but the PR's author")
    print(f"next: {next_step(args, shown)}")
    return 0


def next_step(args: argparse.Namespace, folder: Path) -> str:
    """The preflight command to run next, exactly as it must be typed from here."""
    from evaluator.cli import invocation

    repo = "" if args.repo == Path(".") else f" --repo {shlex.quote(str(args.repo))}"
    return (f"{invocation(args)} preflight {shlex.quote(folder.as_posix())}{repo} "
            f"--author {shlex.quote(args.miner_name)}")
