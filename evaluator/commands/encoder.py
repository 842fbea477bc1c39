"""`tinyrouter encoder make-tiny`: a tiny Qwen3 checkpoint for tests and the demo."""

from __future__ import annotations

import argparse
from pathlib import Path

from evaluator.errors import UsageError
from evaluator.files import write_json


def add_encoder(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="encoder_action", metavar="ACTION", required=True)
    p = actions.add_parser("make-tiny", help="write a tiny Qwen3 whose embeddings are learned "
                                             "from the demo corpus's words, its tokenizer and "
                                             "the matching rule overrides for --competition")
    p.add_argument("out_dir", metavar="OUT_DIR")
    p.add_argument("--seed", type=int, default=0, help="seed of the random weights")
    p.add_argument("--hidden-size", type=int, metavar="N",
                   help="width of the features (default 128; the real encoder's is 1024), "
                        "to measure what a head of that width can fit")
    p.add_argument("--competition-out", metavar="FILE",
                   help="where to write the --competition overrides "
                        "(default OUT_DIR/competition.json)")
    p.set_defaults(func=make_tiny)


PARSERS = {"encoder": add_encoder}


def make_tiny(args: argparse.Namespace) -> int:
    # torch loads only when a checkpoint is made, so --help works on the core install
    from evaluator.coordinator.encoder import encoder_overrides
    from evaluator.coordinator.tiny import make_tiny as build

    if args.hidden_size is not None and not 8 <= args.hidden_size <= 4096:
        raise UsageError("--hidden-size must be between 8 and 4096")
    path = build(args.out_dir, seed=args.seed, hidden_size=args.hidden_size)
    overrides = encoder_overrides(path)
    target = Path(args.competition_out or path / "competition.json")
    write_json(target, overrides)
    print(f"tiny encoder written to {path} (hidden {overrides['hidden_size']}, "
          f"{overrides['num_layers']} layers, {overrides['svf_scale_count']} SVF scales)")
    print(f"use it with: tinyrouter --competition {target} ...")
    return 0
