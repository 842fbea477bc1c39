"""`tinyrouter collect`: each pool model's graded Worker answers to public train items."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from tqdm import tqdm

from evaluator import isolation
from evaluator.benchmarks import runs_code
from evaluator.benchmarks.sealing import load_manifest
from evaluator.benchmarks.splits import public_items
from evaluator.collect import collect_training, pool_client_factory
from evaluator.errors import TrainingError, UsageError
from evaluator.rules import OFFICIAL, Competition
from evaluator.store import MANIFEST_PATH
from evaluator.train.data import LEDGER_FILE, data_path
from evaluator.types import Item

log = logging.getLogger(__name__)


def add_collect(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Ask every pool model for its single-turn Worker answer to the public train items of "
        "one benchmark, grade them and append them to OUT/<benchmark>.jsonl. Resumable: items "
        f"already there are skipped. Every paid call is recorded in OUT/{LEDGER_FILE}.")
    parser.add_argument("--benchmark", required=True, choices=OFFICIAL.benchmarks,
                        help="which benchmark's train items to collect")
    parser.add_argument("--split", default="train", choices=("train",),
                        help="only the public train split can be collected")
    parser.add_argument("--out", required=True, help="the training data folder")
    parser.add_argument("--limit", type=int, help="only the first N train items")
    parser.add_argument("--repo", default=".",
                        help=f"the TinyRouter checkout whose {MANIFEST_PATH} lists the train ids")
    parser.add_argument("--source", default="hub",
                        help="demo (bundled corpus), hub, or a local copy of the data")
    parser.add_argument("--pool-url", help="OpenAI-compatible base URL (default: OpenRouter)")
    isolation.add_flag(parser)
    parser.set_defaults(func=run)


PARSERS = {"collect": add_collect}


def train_items(benchmark: str, repo: Path, source: str, limit: int | None,
                rules: Competition) -> list[Item]:
    """The public train items of a benchmark, in the manifest's order."""
    path = repo / MANIFEST_PATH
    if not path.exists():
        raise TrainingError(f"no {MANIFEST_PATH} in {repo}: collect reads the public train ids "
                            f"from it; pass --repo with a TinyRouter checkout")
    return public_items(load_manifest(path), benchmark, source, rules, limit)


def run(args: argparse.Namespace) -> int:
    rules: Competition = args.rules
    if args.benchmark not in rules.benchmarks:
        raise UsageError(f"unknown benchmark {args.benchmark!r}; choose from "
                         f"{', '.join(rules.benchmarks)}")
    if args.limit is not None and args.limit < 1:
        raise UsageError("--limit must be at least 1")
    if runs_code([args.benchmark]):  # before the API key is read
        print(f"isolation: {isolation.require().describe()}")
    items = train_items(args.benchmark, Path(args.repo), args.source, args.limit, rules)
    out = Path(args.out)
    path = data_path(out, args.benchmark)
    make_client = pool_client_factory(args.pool_url, out / LEDGER_FILE, rules)
    bars: list[tqdm] = []  # opened at the first batch, after collect_training's first line

    def progress(done: int, total: int) -> None:
        if not bars:
            bars.append(tqdm(desc=f"answering {args.benchmark}", unit="item", leave=False,
                             total=total))
        bars[0].update(done - bars[0].n)

    try:
        new, rows = collect_training(items, path, make_client, rules, on_progress=progress)
    finally:
        for bar in bars:
            bar.close()
    cost = sum(a.cost_usd for row in new for a in row.answers.values())
    print(f"{args.benchmark}: {len(new)} new rows ({len(rows)} in {path}), ${cost:.4f} "
          f"this run, ledger {out / LEDGER_FILE}")
    if rows:
        accuracy = ", ".join(f"{m} {sum(r.answers[m].correct for r in rows) / len(rows):.3f}"
                             for m in rules.pool_names)
        print(f"per-model accuracy on the collected rows: {accuracy}")
    return 0
