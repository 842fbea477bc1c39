"""`tinyrouter basis`: the public items' feature basis gate 3 weighs model rows by (maintainer)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from evaluator.basis import BASIS_FILE
from evaluator.benchmarks.sealing import DIR_ENV
from evaluator.errors import UsageError
from evaluator.rules import OFFICIAL


def add_basis(p: argparse.ArgumentParser) -> None:
    p.description = ("After sealing a season: encode its public train items with the encoder "
                     "(SVF scales of 1) and write the leading directions of their features, "
                     f"leaderboard/{BASIS_FILE}, for gate 3 to compare model rows as routing "
                     "uses them. Commit the file with the manifest. Needs the model extra; no "
                     "secret is read (the train items are public).")
    p.add_argument("--benchmark-dir", default=os.environ.get(DIR_ENV),
                   help=f"the sealed benchmark folder holding the train items (default: ${DIR_ENV})")
    p.add_argument("--repo", type=Path, default=Path("."),
                   help="the competition checkout: its manifest is read, the basis written")
    p.add_argument("--encoder", help="hub id or local folder (default: "
                   f"{OFFICIAL.encoder_id}, or the --competition file's)")
    p.set_defaults(func=run)


PARSERS = {"basis": add_basis}


def run(args: argparse.Namespace) -> int:
    import numpy as np

    from evaluator.basis import directions_of, read_basis, write_basis
    from evaluator.benchmarks.sealing import open_train_items
    from evaluator.coordinator.router import load_router
    from evaluator.loop import coordinator_transcript
    from evaluator.store import Store

    rules = args.rules
    if args.benchmark_dir is None:
        raise UsageError(f"give --benchmark-dir or set {DIR_ENV}")
    store = Store(args.repo, lenient=True)  # its train ids are checked against the files below
    manifest = store.manifest()
    if manifest is None:
        raise UsageError(f"{args.repo} has no leaderboard/manifest.json: seal the season first")
    found = open_train_items(args.benchmark_dir, manifest, rules)
    items = [item for bench in rules.benchmarks for item in found[bench]]
    router = load_router(args.encoder or rules.encoder_id, rules)
    features = router.features([coordinator_transcript(item.prompt, []) for item in items],
                               np.ones(rules.svf_scale_count, dtype=np.float32))
    directions = directions_of(features, rules)
    path = store.root / BASIS_FILE
    write_basis(path, directions, len(items), manifest, rules)
    read_basis(path, manifest, rules)  # what the gates will read
    print(f"feature basis: {directions.shape[0]} directions of {rules.hidden_size} from "
          f"{len(items)} public train items → {path}")
    return 0
