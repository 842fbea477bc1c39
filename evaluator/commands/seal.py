"""`tinyrouter seal`, `verify-benchmark` and `reveal`: the maintainer's hidden benchmark."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from tqdm import tqdm

from evaluator import isolation
from evaluator.benchmarks import runs_code
from evaluator.benchmarks.sealing import (
    DIR_ENV,
    OFFICIAL_KDF,
    SEALED_SUFFIX,
    KdfParams,
    check_revealed,
    load_manifest,
    password_from_env,
    reveal_split,
    seal_benchmarks,
    sealed_path,
    verify_benchmark,
)
from evaluator.benchmarks.splits import load_items, load_private, seed_from_env
from evaluator.collect import answer_items, pool_client_factory
from evaluator.commands.evaluate import PRIVATE_DIR_ENV
from evaluator.errors import BenchmarkError, UsageError
from evaluator.files import write_json
from evaluator.rules import SEALED_SPLITS, Competition
from evaluator.store import MANIFEST_PATH, REVEALED_DIR, Store, read_json, validate
from evaluator.train.data import LEDGER_FILE
from evaluator.types import AnsweredItem, Item

DEFAULT_MANIFEST = str(MANIFEST_PATH)


def add_seal(seal: argparse.ArgumentParser) -> None:
    seal.description = ("Draw the hidden splits with the secret BENCHMARK_SEED (the pool from "
                        "the public dataset, the audit and the live questions from the private "
                        "source), collect each pool model's cached "
                        "answers, seal every split with BENCHMARK_PASSWORD into OUT_DIR and "
                        "write the public manifest. Both secrets come from the "
                        "environment only.")
    seal.add_argument("--source", default="hub",
                      help="demo (bundled corpus), hub, or a local copy of the data")
    seal.add_argument("--private-source", required=True,
                      help="items that were never published, the audit and the live questions "
                           "are drawn from: demo (the demo's own), or a folder with one folder "
                           "per benchmark in the upstream schema and about.json saying what "
                           "they are")
    seal.add_argument("--out-dir", default=os.environ.get(DIR_ENV),
                      help=f"where the sealed files go, outside the repository "
                           f"(default: ${DIR_ENV})")
    seal.add_argument("--manifest", default=DEFAULT_MANIFEST, help="the public manifest to write")
    seal.add_argument("--benchmarks", help="comma-separated subset (default: all)")
    seal.add_argument("--pool-url", help="OpenAI-compatible base URL (default: OpenRouter)")
    seal.add_argument("--ledger", help=f"cost ledger (default: OUT_DIR/{LEDGER_FILE})")
    seal.add_argument("--force", action="store_true", help="replace existing sealed files")
    seal.add_argument("--kdf-log2n", type=int, default=OFFICIAL_KDF.log2_n,
                      help="scrypt cost as log2(N); lower only for tests and demos")
    seal.set_defaults(func=run_seal)


def add_verify(verify: argparse.ArgumentParser) -> None:
    verify.description = ("Decrypt every sealed split (password from BENCHMARK_PASSWORD) and "
                          "check its count against the rules and its count and commitment "
                          "against the manifest. Prints counts only, never an item.")
    verify.add_argument("--dir", default=os.environ.get(DIR_ENV),
                        help=f"the sealed benchmark (default: ${DIR_ENV})")
    verify.add_argument("--manifest", default=DEFAULT_MANIFEST, help="the public manifest")
    verify.add_argument("--revealed", nargs="+", metavar="FILE",
                        help="instead, check revealed splits (from `tinyrouter reveal`) against "
                             "the manifest; needs no password")
    verify.set_defaults(func=run_verify)


def add_reveal(reveal: argparse.ArgumentParser) -> None:
    reveal.description = ("Decrypt one split and write its rows with the salt of its manifest "
                          "commitment, so anyone can check it with `verify-benchmark "
                          "--revealed`; or, with --season, every split and the private record "
                          "of each verdict decided on them, so anyone can replay the season's "
                          "verdicts (`tinyrouter replay`). Only for what is being retired: its "
                          "items become public.")
    reveal.add_argument("--dir", default=os.environ.get(DIR_ENV),
                        help=f"the sealed benchmark (default: ${DIR_ENV})")
    what = reveal.add_mutually_exclusive_group(required=True)
    what.add_argument("--split", metavar="BENCHMARK.SPLIT", help="one split, e.g. math500.pool")
    what.add_argument("--season", action="store_true",
                      help=f"the whole season, into the leaderboard's {REVEALED_DIR}/ folder")
    reveal.add_argument("--out", help="with --split: the JSON file to write (a file only: "
                        "hidden items printed to standard output would reach the job's log)")
    reveal.add_argument("--records", default=os.environ.get(PRIVATE_DIR_ENV),
                        help="with --season: the season's private records, every evaluation "
                             f"runner's ${PRIVATE_DIR_ENV} gathered in one folder (default: "
                             f"${PRIVATE_DIR_ENV})")
    reveal.add_argument("--repo", type=Path, default=Path("."),
                        help="with --season: the repository whose leaderboard/ holds the season")
    reveal.set_defaults(func=run_reveal)


PARSERS = {"seal": add_seal, "verify-benchmark": add_verify, "reveal": add_reveal}


def _directory(value: str | None, flag: str) -> Path:
    if not value:
        raise UsageError(f"pass {flag} or set {DIR_ENV}")
    return Path(value)


def _benchmarks(value: str | None, rules: Competition) -> list[str]:
    names = [b.strip() for b in value.split(",") if b.strip()] if value else list(rules.benchmarks)
    unknown = [b for b in names if b not in rules.benchmarks]
    if unknown or not names:
        raise BenchmarkError(f"unknown benchmark(s) {', '.join(unknown) or '(none)'}; "
                             f"choose from {', '.join(rules.benchmarks)}")
    return names


def run_seal(args: argparse.Namespace) -> int:
    rules: Competition = args.rules
    out_dir = _directory(args.out_dir, "--out-dir")
    benchmarks = _benchmarks(args.benchmarks, rules)
    if runs_code(benchmarks):  # before any secret is read
        print(f"isolation: {isolation.require(flag=None).describe()}")
    password, seed = password_from_env(new=True), seed_from_env()
    existing = [sealed_path(out_dir, b, s) for b in benchmarks for s in SEALED_SPLITS
                if sealed_path(out_dir, b, s).exists()]
    if existing and not args.force:
        raise BenchmarkError(f"{out_dir} already holds sealed files (e.g. {existing[0].name}); "
                             f"pass --force to replace them")
    kdf = KdfParams(args.kdf_log2n, OFFICIAL_KDF.r, OFFICIAL_KDF.p)
    kdf.check()
    items = {b: load_items(b, args.source, rules) for b in benchmarks}
    privates = {b: load_private(b, args.private_source, rules) for b in benchmarks}
    ledger = Path(args.ledger) if args.ledger else out_dir / LEDGER_FILE
    make_client = pool_client_factory(args.pool_url, ledger, rules)
    answered: list[AnsweredItem] = []

    def answer(todo: list[Item]) -> list[AnsweredItem]:
        bench = todo[0].benchmark if todo else ""
        with tqdm(total=len(todo), desc=f"answering {bench}", unit="item", leave=False) as bar:
            rows = answer_items(todo, make_client, rules,
                                on_progress=lambda done, _: bar.update(done - bar.n))
        answered.extend(rows)
        return rows

    manifest = seal_benchmarks(items, answer, out_dir, args.manifest, password, seed, rules,
                               privates, kdf)
    for benchmark in benchmarks:
        entry = manifest["benchmarks"][benchmark]
        counts = ", ".join(f"{s} {entry['splits'][s]['count']}" for s in SEALED_SPLITS)
        best = entry["baselines"]["best_single"]
        print(f"{benchmark}: {counts}, train {len(entry['train_ids'])}; best single "
              f"{best['model']} {best['accuracy']:.3f}, oracle "
              f"{entry['baselines']['oracle']:.3f}")
    cost = sum(a.cost_usd for row in answered for a in row.answers.values())
    print(f"cached answers: {len(answered) * rules.n_models} calls, ${cost:.4f} (ledger {ledger})")
    print(f"sealed into {out_dir} (*{SEALED_SUFFIX}); manifest written to {args.manifest}")
    return 0


def run_verify(args: argparse.Namespace) -> int:
    manifest = load_manifest(args.manifest)
    if args.revealed:
        for path in args.revealed:
            try:
                record = json.loads(Path(path).read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                raise BenchmarkError(f"cannot read {path}: {exc}") from exc
            count = check_revealed(record, manifest)
            print(f"{path}: {record['benchmark']} {record['split']}, {count} items — "
                  f"matches the manifest's commitment")
        return 0
    directory = _directory(args.dir, "--dir")
    counts = verify_benchmark(directory, password_from_env(), manifest, args.rules)
    for benchmark, splits in counts.items():
        print(f"{benchmark}: " + ", ".join(f"{s} {n}" for s, n in splits.items())
              + " — counts and commitments match")
    print(f"verified {directory} against {args.manifest}")
    return 0


def run_reveal(args: argparse.Namespace) -> int:
    if args.season:
        return reveal_season_command(args)
    benchmark, _, split = args.split.partition(".")
    if benchmark not in args.rules.benchmarks or split not in SEALED_SPLITS:
        raise UsageError(f"--split must be BENCHMARK.SPLIT, e.g. math500.pool; "
                         f"got {args.split!r}")
    if args.out in (None, "-"):
        raise UsageError("reveal --split writes to a file only (--out PATH): hidden items on "
                         "standard output would reach the job's log")
    record = reveal_split(_directory(args.dir, "--dir"), benchmark, split, password_from_env())
    write_json(args.out, record)
    print(f"wrote {args.out}: {benchmark} {split}, {len(record['rows'])} items in the open")
    return 0


def reveal_season_command(args: argparse.Namespace) -> int:
    from evaluator.replay import reveal_season

    if not args.records:
        raise UsageError(f"pass --records (the season's private records) or set "
                         f"{PRIVATE_DIR_ENV}")
    if args.out is not None:
        raise UsageError(f"reveal --season writes into leaderboard/{REVEALED_DIR}/, not --out")
    store = Store(args.repo)
    manifest = store.manifest()
    if manifest is None:
        raise UsageError(f"{args.repo} has no {MANIFEST_PATH}: the season's manifest")
    paths = store.result_files()
    published = [read_json(path) for path in paths]
    for path, data in zip(paths, published, strict=True):
        validate("result", data, store.relative(path))  # names from a file become paths
    out = store.file(REVEALED_DIR)
    splits, records = reveal_season(out, _directory(args.dir, "--dir"), password_from_env(),
                                    args.records, published, manifest, args.rules)
    print(f"wrote {store.relative(out)}/: {splits} splits and the private records of {records} "
          f"verdict(s) in the open; check them with `tinyrouter replay --repo {args.repo}`")
    return 0
