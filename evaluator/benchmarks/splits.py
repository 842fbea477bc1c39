"""The hidden splits, drawn per benchmark from a secret seed: the scored pool from the public
dataset, the audit and the live questions from the private source.

Each item's place is the HMAC-SHA256 of its id under the secret seed (keyed per
benchmark), so the draw does not depend on the source's row order and nobody without
the seed can rebuild it from the public dataset. The rest of the public dataset is where the
public train split is drawn from.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import json
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from evaluator import vault
from evaluator.benchmarks import get_benchmark
from evaluator.benchmarks.corpus import load_corpus, load_private_corpus, private_about
from evaluator.errors import BenchmarkError
from evaluator.rules import Competition
from evaluator.types import Item

log = logging.getLogger(__name__)

SEED_ENV = "BENCHMARK_SEED"
MIN_SEED_CHARS = 16  # a shorter secret is guessable by brute force
SOURCES = ("demo", "hub")  # or a directory holding a local copy of the upstream data


@dataclass(frozen=True)
class Splits:
    """One benchmark's drawn splits (hidden ones in draw order) and the public train ids."""

    benchmark: str
    hidden: dict[str, tuple[Item, ...]]
    train: tuple[Item, ...]

    @property
    def train_ids(self) -> list[str]:
        return [item.id for item in self.train]


@dataclass(frozen=True)
class Private:
    """A benchmark's private source: items never published, in the upstream schema, that the
    audit and the live questions are drawn from, and the public sentence that says what they
    are (e.g. "120 problems written for season 2")."""

    items: Sequence[Item]
    about: str


ABOUT_FILE = "about.json"  # beside a directory source's benchmark folders: {benchmark: sentence}


def load_private(benchmark: str, source: str, rules: Competition) -> Private:
    """A benchmark's private source: the demo's bundled private items, or DIR/<benchmark>/ in
    the upstream schema with DIR/about.json saying, per benchmark, what the items are."""
    if source == "demo":
        return Private([row.item for row in load_private_corpus(rules, [benchmark])],
                       private_about()[benchmark])
    about_path = Path(source) / ABOUT_FILE
    try:
        about = json.loads(about_path.read_text(encoding="utf-8"))[benchmark]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise BenchmarkError(f"{about_path} must say, per benchmark, what its private items are "
                             f"(published in the manifest); no {benchmark} entry: {exc}") from exc
    if not isinstance(about, str) or not about.strip():
        raise BenchmarkError(f"{about_path}: the {benchmark} entry must be a sentence")
    # ids of their own, so a private item never shares one with the public dataset's
    return Private([dataclasses.replace(item, id=f"private/{item.id}")
                    for item in load_items(benchmark, source, rules)], about.strip())


def seed_from_env() -> str:
    """The secret split seed, from the environment only (never the repository)."""
    seed = vault.take(SEED_ENV)
    if len(seed) < MIN_SEED_CHARS:
        raise BenchmarkError(f"set {SEED_ENV} to a secret of at least {MIN_SEED_CHARS} "
                             f"characters (e.g. the output of `openssl rand -hex 32`); "
                             f"keep it with the password and never publish it")
    return seed


def _rank(seed: str, benchmark: str, item_id: str) -> bytes:
    key = hmac.new(seed.encode(), benchmark.encode(), hashlib.sha256).digest()
    return hmac.new(key, item_id.encode(), hashlib.sha256).digest()


def draw_splits(items: Sequence[Item], seed: str, rules: Competition,
                exclude: Iterable[str] = ()) -> Splits:
    """The pool split of one benchmark (the public hidden split), and the public train split.

    Train is a secret-seeded share (`rules.train_fraction`) of the rest: the withheld
    remainder keeps the hidden items from being the complement of the published ids.
    """
    if not items:
        raise BenchmarkError("no items to split")
    benchmark = items[0].benchmark
    ids = [item.id for item in items]
    if len(set(ids)) != len(ids):
        dupes = sorted({i for i in ids if ids.count(i) > 1})[:5]
        raise BenchmarkError(f"{benchmark}: duplicate item ids {dupes}; ids must be unique")
    if any(item.benchmark != benchmark for item in items):
        raise BenchmarkError(f"items of several benchmarks passed to one draw ({benchmark}, ...)")
    excluded = set(exclude)
    pool = [item for item in items if item.id not in excluded]
    sizes = rules.split_sizes
    needed = sum(sizes.values())
    if len(pool) < needed:
        raise BenchmarkError(f"{benchmark} has {len(pool)} usable items; the hidden splits "
                             f"need {needed} ({_sizes(sizes)})")
    order = sorted(pool, key=lambda item: _rank(seed, benchmark, item.id))
    hidden = {split: tuple(run) for split, run in _take(order, sizes).items()}
    rest = order[needed:]
    published = {item.id for item in rest[:round(rules.train_fraction * len(rest))]}
    train = tuple(item for item in pool if item.id in published)
    log.info("%s: %s, train %d", benchmark,
             _sizes({s: len(v) for s, v in hidden.items()}), len(train))
    return Splits(benchmark=benchmark, hidden=hidden, train=train)


def _sizes(sizes: dict[str, int]) -> str:
    return ", ".join(f"{split} {size}" for split, size in sizes.items())


def _take(order: Sequence[Item], sizes: dict[str, int]) -> dict[str, list[Item]]:
    """Consecutive runs of `order`, one per split in `sizes`' order."""
    taken, start = {}, 0
    for split, size in sizes.items():
        taken[split], start = list(order[start:start + size]), start + size
    return taken


def draw_private(items: Sequence[Item], public: Sequence[Item], benchmark: str, seed: str,
                 rules: Competition) -> dict[str, list[Item]]:
    """The audit and live splits of one benchmark, disjoint, from its private source, in the
    secret seed's order. Refused when an item is of another benchmark, repeats an id or a
    prompt, or shares an id or a prompt with the `public` dataset: both splits must be items no
    miner can have collected answers for."""
    ids, prompts = [item.id for item in items], [item.prompt.strip() for item in items]
    if any(item.benchmark != benchmark for item in items) or len(set(ids)) != len(ids):
        raise BenchmarkError(f"the {benchmark} private source holds items of another benchmark "
                             "or repeated ids")
    if len(set(prompts)) != len(prompts):
        raise BenchmarkError(f"the {benchmark} private source holds the same question twice")
    shared = (sorted(set(ids) & {item.id for item in public})
              or sorted(set(prompts) & {item.prompt.strip() for item in public}))
    if shared:
        raise BenchmarkError(f"the {benchmark} private source holds {len(shared)} item(s) of the "
                             f"public dataset (e.g. {shared[0][:80]!r}); the audit and live "
                             "questions must be items that were never published")
    sizes = rules.private_sizes
    needed = sum(sizes.values())
    if len(items) < needed:
        raise BenchmarkError(f"the {benchmark} private source holds {len(items)} items; the rules "
                             f"draw {needed} from it ({_sizes(sizes)})")
    return _take(sorted(items, key=lambda item: _rank(seed, f"{benchmark}.private", item.id)),
                 sizes)


def public_items(manifest: dict, benchmark: str, source: str, rules: Competition,
                 limit: int | None = None) -> list[Item]:
    """The public train items of a benchmark, in the manifest's order, from `source`."""
    entry = (manifest.get("benchmarks") or {}).get(benchmark)
    if entry is None:
        raise BenchmarkError(f"the manifest lists no {benchmark} benchmark")
    ids = entry["train_ids"][:limit] if limit is not None else entry["train_ids"]
    by_id = {item.id: item for item in load_items(benchmark, source, rules)}
    items = [by_id[i] for i in ids if i in by_id]
    if not items:
        raise BenchmarkError(f"none of the {len(ids)} train ids of {benchmark} is in the source "
                             f"{source!r}; use the source the manifest was sealed from")
    if len(items) < len(ids):
        log.warning("%d of %d train ids of %s are not in the source %r", len(ids) - len(items),
                    len(ids), benchmark, source)
    return items


def load_items(benchmark: str, source: str, rules: Competition) -> list[Item]:
    """A benchmark's items: the bundled demo corpus, the hub, or DIR/<benchmark>/ (a local
    copy of the upstream files, e.g. DIR/mmlu/all/test-00000-of-00001.parquet)."""
    if source == "demo":
        return [row.item for row in load_corpus(rules, [benchmark])]
    if source == "hub":
        return get_benchmark(benchmark).load_upstream(None)
    folder = Path(source) / benchmark
    if not folder.is_dir():
        raise BenchmarkError(f"no folder {folder}: a source is demo, hub, or a directory with "
                             f"one folder per benchmark holding its upstream files")
    return get_benchmark(benchmark).load_upstream(str(folder))
