"""`tinyrouter ledger verify FILE`: check a cost ledger's hash chain and print its totals."""

from __future__ import annotations

import argparse

from evaluator.pool.ledger import verify_ledger


def add_ledger(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="ledger_command", metavar="ACTION", required=True)
    verify = actions.add_parser(
        "verify", help="check a ledger's hash chain; print entries, total cost and head hash "
                       "(exit 1 naming the first edited, deleted, inserted or reordered line)")
    verify.add_argument("file", metavar="FILE", help="the JSONL cost ledger")
    verify.add_argument("--head", metavar="HASH",
                        help="also require the chain to end at this hash (a receipt's "
                             "ledger_head), which catches lines removed from the end")
    verify.set_defaults(func=run_verify)


PARSERS = {"ledger": add_ledger}


def run_verify(args: argparse.Namespace) -> int:
    summary = verify_ledger(args.file, expected_head=args.head)
    print(f"entries: {summary.entries}")
    print(f"total_cost_usd: {summary.total_cost_usd:.6f}")
    print(f"head: {summary.head}")
    return 0
