"""The `tinyrouter` command: discovers the subcommand modules and decides exit codes."""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import pkgutil
import sys
from collections.abc import Sequence

from evaluator import __version__, commands
from evaluator.errors import TinyRouterError
from evaluator.rules import OFFICIAL, Competition

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tinyrouter", description="TinyRouter: the open benchmark for LLM routing.")
    parser.add_argument("--version", action="version", version=f"tinyrouter {__version__}")
    parser.add_argument("--competition", metavar="FILE",
                        default=os.environ.get("TINYROUTER_COMPETITION"),
                        help="JSON overrides of the rules (the demo's tiny encoder); "
                             "default: the official competition")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        importlib.import_module(f"{commands.__name__}.{info.name}").register(sub)
    return parser


def competition_from(args: argparse.Namespace) -> Competition:
    """The rules a command runs under: official unless --competition names overrides."""
    return Competition.load(args.competition) if args.competition else OFFICIAL


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(message)s", stream=sys.stderr)
    if not getattr(args, "func", None):
        parser.print_help()
        return EXIT_USAGE
    try:
        args.rules = competition_from(args)
        return int(args.func(args) or EXIT_OK)
    except TinyRouterError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except ValueError as exc:
        if args.competition:
            print(f"error: {exc}", file=sys.stderr)
            return EXIT_USAGE
        raise
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
