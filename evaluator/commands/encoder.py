"""`tinyrouter encoder make-tiny`: a tiny random Qwen3 checkpoint for tests and the demo."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    encoder = sub.add_parser("encoder", help="encoder checkpoints")
    actions = encoder.add_subparsers(dest="encoder_action", metavar="ACTION", required=True)
    p = actions.add_parser(
        "make-tiny", help="write a tiny random Qwen3 and its tokenizer",
        description="Write a small randomly initialised Qwen3 (safetensors) and a byte-level "
                    "BPE tokenizer to OUT_DIR, deterministic for a seed, plus the matching "
                    "rule overrides for --competition.")
    p.add_argument("out_dir", metavar="OUT_DIR")
    p.add_argument("--seed", type=int, default=0, help="default 0")
    p.add_argument("--competition-out", metavar="FILE",
                   help="where to write the --competition overrides "
                        "(default OUT_DIR/competition.json)")
    p.set_defaults(func=make_tiny)


def make_tiny(args: argparse.Namespace) -> int:
    from pathlib import Path

    from evaluator.coordinator.encoder import encoder_overrides
    from evaluator.coordinator.tiny import make_tiny as build
    from evaluator.files import write_json

    path = build(args.out_dir, seed=args.seed)
    overrides = encoder_overrides(path)
    target = Path(args.competition_out or path / "competition.json")
    write_json(target, overrides)
    print(f"tiny encoder written to {path} (hidden {overrides['hidden_size']}, "
          f"{overrides['num_layers']} layers, {overrides['svf_scale_count']} SVF scales)")
    print(f"use it with: tinyrouter --competition {target} ...")
    return 0
