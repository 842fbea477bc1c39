"""`tinyrouter runner check`: can this machine be the evaluation runner? One line per check."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from evaluator.readiness import CHECKS, Setup, run_checks
from evaluator.store import MANIFEST_PATH


def add_runner(p: argparse.ArgumentParser) -> None:
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    check = actions.add_parser(
        "check", help="the sandbox self-test, CUDA torch and the device, the encoder's pinned "
                      "revision offline, the sealed files against the manifest, the pool, "
                      "disk and memory: each passed or failed, with the fix")
    check.add_argument("--repo", type=Path, default=Path("."),
                       help=f"the checkout whose {MANIFEST_PATH} the sealed files must match")
    check.add_argument("--benchmark-dir", type=Path,
                       default=os.environ.get("TINYROUTER_BENCHMARK_DIR"),
                       help="the sealed benchmark (default $TINYROUTER_BENCHMARK_DIR); the "
                            "password comes from $BENCHMARK_PASSWORD")
    check.add_argument("--pool-url", help="pool base URL (default $OPENROUTER_BASE_URL or "
                                          "OpenRouter; the key from $OPENROUTER_API_KEY)")
    check.add_argument("--only", nargs="+", choices=list(CHECKS), metavar="CHECK",
                       help=f"only these checks ({', '.join(CHECKS)})")
    check.set_defaults(func=run_check)


PARSERS = {"runner": add_runner}


def run_check(args: argparse.Namespace) -> int:
    setup = Setup(args.rules, args.benchmark_dir, args.repo / MANIFEST_PATH, args.pool_url)
    failed = 0
    for finding in run_checks(setup, args.only):
        print(finding.line(), flush=True)
        failed += finding.ok is False
    print(f"{failed} check(s) failed" if failed else "this machine can be the evaluation runner")
    return 1 if failed else 0
