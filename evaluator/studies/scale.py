"""`tinyrouter dev scale`: how the light commands' cost grows with a season's records.

For each size N it builds a synthetic board through the real record types (a sealed season's
manifest and feature basis, a seeded king, N miners with one attempt and one lost result each)
and times, in a fresh interpreter each, what the workflows run per event: `gates`, `leaderboard
apply`, `leaderboard validate` and `site build`. Runs interleave over sizes and commands, so a
busy machine's drift hits every cell alike.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

from evaluator import attempts_index
from evaluator.basis import BASIS_FILE, FeatureBasis, read_basis, write_basis
from evaluator.benchmarks.sealing import build_manifest
from evaluator.commands.output import write_json_out
from evaluator.errors import UsageError
from evaluator.files import dumps, format_time
from evaluator.fingerprints import cosines, encode_projected
from evaluator.records import KING, LOST, Attempt, Crowning, King, Result, Seen
from evaluator.rules import Competition
from evaluator.scoring import BenchmarkScore
from evaluator.store import ATTEMPTS_FILE, DIGESTS_FILE, MANIFEST_FILE, Store, digest_line
from evaluator.studies.startup import fixture_repo, fixture_submission, timed

DEFAULT_SIZES = (100, 1000)
START = datetime(2026, 1, 5, tzinfo=UTC)  # the synthetic season's first evaluation
KING_LOGIN = "alice"  # the king's folder (the start-up study's fixture)
NEWCOMER, NEWCOMER_SHA = "newcomer", "e" * 40  # the head the gates and apply are timed on


def add_scale(p: argparse.ArgumentParser) -> None:
    p.description = ("Build synthetic boards of N attempts and results (official head shape) "
                     "and time `gates` on one new head, `leaderboard apply`, `leaderboard "
                     "validate` and `site build` on each, R times, in fresh interpreters: "
                     "medians against N and each one's growth from the smallest N to the "
                     "largest. A benchmark, not a test: the site build takes minutes at 10,000.")
    p.add_argument("--sizes", default=",".join(map(str, DEFAULT_SIZES)), metavar="N,N,…",
                   help="board sizes (attempts = results = miners), e.g. 100,1000,10000")
    p.add_argument("--repeats", "-R", type=int, default=3, metavar="R",
                   help="runs per command and size (medians are reported)")
    p.add_argument("--heads", type=int, default=20, metavar="H",
                   help="random heads whose disguised copies test the stored fingerprints")
    p.add_argument("--json", metavar="OUT", help="also write the numbers here (- for stdout)")
    p.set_defaults(func=run)


PARSERS = {"scale": add_scale}


def _sha(rng: np.random.Generator, nbytes: int = 20) -> str:
    return rng.bytes(nbytes).hex()


def _lost(miner: str, pr: int, sha: str, at: datetime, rng: np.random.Generator,
          rules: Competition) -> dict:
    delta = -float(rng.uniform(0.01, 0.2))
    result = Result(miner=miner, generation=1, pr=pr, head_sha=sha, evaluated_at=format_time(at),
                    outcome=LOST, benchmark_manifest="f" * 64, partition_commitment=_sha(rng, 32),
                    composite=0.6 + delta, king_composite=0.6, delta=delta,
                    ci95=(delta - 0.05, delta + 0.05),
                    crown_test={"stage": 1, "difference": delta, "weighted": delta, "se": 0.02,
                                "z": delta / 0.02, "live_items": rules.live_stages[0],
                                "live_sessions": 2 * len(rules.benchmarks) * rules.live_stages[0]})
    return result.public(rules.disclosure_precision)


def _crown(rules: Competition) -> dict:
    parts = BenchmarkScore(cached_acc=0.8, audit_acc=0.78, live_acc=0.7, avg_turns=2.0,
                           efficiency=0.525, novelty=0.5, overfit_penalty=1.0, score=0.6)
    result = Result(miner=KING_LOGIN, generation=1, pr=1, head_sha="a" * 40,
                    evaluated_at=format_time(START - timedelta(days=1)), outcome=KING,
                    benchmark_manifest="f" * 64, partition_commitment="9" * 64, composite=0.6,
                    per_benchmark={b: parts for b in rules.benchmarks}, live_cost_usd=0.41)
    return result.public(rules.disclosure_precision)


def build_board(root: Path, n: int, rules: Competition) -> Path:
    """A repository whose leaderboard holds a king and N miners' attempts and lost results;
    returns the result file `leaderboard apply` is timed on (the newcomer's loss)."""
    from evaluator.gates import fingerprint

    fixture_repo(root, rules)  # the king's merged folder
    fixture_submission(root, NEWCOMER, 99, rules)  # the new head the gates run on
    store, rng = Store(root), np.random.default_rng(n)
    basis = _season(store, rules, rng)
    crown = _crown(rules)
    store.write_king(King.crowned(crown, None))
    store.write_history([Crowning.of(crown)])
    store.write_result(crown)
    lines, digests = [], []
    for i in range(n):
        miner, at, sha = f"miner-{i:05d}", START + timedelta(minutes=10 * i), _sha(rng)
        head = rng.normal(0, 0.1, rules.head_shape)
        view = encode_projected(fingerprint(head, rules.n_models), rules.n_models,
                                basis.directions)
        attempt = Attempt(miner=miner, generation=1, pr=100 + i, head_sha=sha,
                          at=format_time(at), weights_sha256=_sha(rng, 32), gates_passed=True,
                          fingerprint=view,
                          seen=Seen(basis.digest))
        lines.append(json.dumps(attempt.to_dict(), sort_keys=True) + "\n")
        path = store.result_path(miner, 1)
        path.parent.mkdir(parents=True)
        text = dumps(_lost(miner, 100 + i, sha, at + timedelta(hours=1), rng, rules))
        path.write_text(text, encoding="utf-8")
        digests.append(digest_line(path.relative_to(store.root).as_posix(), text.encode()))
    store.file(ATTEMPTS_FILE).write_text("".join(lines), encoding="utf-8")
    with open(store.file(DIGESTS_FILE), "a", encoding="utf-8") as handle:  # as apply leaves it
        handle.write("".join(digests))
    attempts_index.update(store.root, rules, basis)  # as the record step leaves it
    out = root / "newcomer-result.json"
    at = START + timedelta(minutes=10 * n + 90)
    out.write_text(dumps(_lost(NEWCOMER, 100 + n, NEWCOMER_SHA, at, rng, rules)),
                   encoding="utf-8")
    return out


def _season(store: Store, rules: Competition, rng: np.random.Generator) -> FeatureBasis:
    """A sealed season's public files as gate 3 reads them: a manifest (its train ids are what
    the basis is tied to) and a feature basis of as many directions as the rules allow."""
    pool = {"count": 300, "commitment": _sha(rng, 32)}
    baselines = {"per_model": dict.fromkeys(rules.pool_names, 0.5),
                 "best_single": {"model": rules.pool_names[0], "accuracy": 0.5},
                 "random": 0.5, "oracle": 0.7}
    manifest = build_manifest({b: {"splits": {"pool": pool}, "baselines": baselines,
                                   "train_ids": [f"{b}-{i}" for i in range(250)]}
                               for b in rules.benchmarks}, format_time(START))
    store.file(MANIFEST_FILE).write_text(dumps(manifest), encoding="utf-8")
    k = rules.fingerprint_directions
    directions = rng.normal(0, 1, (k, rules.hidden_size)) * np.geomspace(1, 1e-3, k)[:, None]
    write_basis(store.file(BASIS_FILE), directions, 1000, manifest, rules)
    found = read_basis(store.file(BASIS_FILE), manifest, rules)
    assert found is not None
    return found


@dataclass(frozen=True)
class Timed:
    """One command as the benchmark runs it; `reset` undoes what a run wrote, so every run
    does the same work."""

    argv: list[str]
    reset: Callable[[], None] = lambda: None


def commands(root: Path, result: Path, n: int) -> dict[str, Timed]:
    cli = [sys.executable, "-m", "evaluator"]
    store = Store(root)
    kept = {path: path.read_bytes() for path in (store.file(ATTEMPTS_FILE),
                                                  store.file(attempts_index.INDEX_FILE))}
    applied, digests = store.result_path(NEWCOMER, 1), store.file(DIGESTS_FILE)
    recorded = digests.read_bytes()
    site = root.parent / f"{root.name}-site"
    return {
        "gates (one new head)": Timed(
            [*cli, "gates", "--repo", str(root), "--submission", f"submissions/{NEWCOMER}/1",
             "--author", NEWCOMER, "--pr", str(100 + n), "--head-sha", NEWCOMER_SHA,
             "--now", format_time(START + timedelta(minutes=10 * n)), "--record-attempt",
             "--json", str(root / "gates.json")],
            lambda: [path.write_bytes(data) for path, data in kept.items()]),
        "leaderboard apply": Timed([*cli, "leaderboard", "apply", str(result), "--repo",
                                    str(root)],
                                   lambda: (applied.unlink(missing_ok=True),
                                            digests.write_bytes(recorded))),
        "leaderboard validate": Timed([*cli, "leaderboard", "validate", "--repo", str(root)]),
        "site build": Timed([*cli, "site", "build", "--repo", str(root), "--out", str(site)]),
    }


CUTS = (0.995, 0.9905, 0.9895, 0.985, 0.98, 0.95, 0.9, 0.8)  # copies moved to these cosines


def duplicate_agreement(heads: int, rules: Competition) -> dict:
    """Gate 3's decision on every disguised copy of H random heads (evaluator.copies, and
    copies moved to each of CUTS), against the head as the log stores it compactly and at full
    precision: how many decisions agree, and the largest cosine shift among copies within 0.01
    of the gate's line (the shift grows with the distance from 1, where it decides nothing).
    Then the same on a season's feature basis, against the projection boards with a basis
    keep (`on_basis`)."""
    from evaluator.copies import DISGUISES, disguise, evading
    from evaluator.gates import decode_fingerprint, encode_fingerprint, fingerprint

    agree = total = 0
    shift = 0.0
    with tempfile.TemporaryDirectory(prefix="tinyrouter-scale-") as tmp:
        (Path(tmp) / "leaderboard").mkdir()
        basis = _season(Store(Path(tmp)), rules, np.random.default_rng(7))
    on_basis = {"copies": 0, "same_decision": 0, "largest_shift_near_the_line": 0.0}
    line = rules.duplicate_cosine
    for seed in range(heads):
        rng = np.random.default_rng(1000 + seed)
        head = rng.normal(0, 0.1, rules.head_shape)
        original = fingerprint(head, rules.n_models)
        compact = decode_fingerprint(encode_fingerprint(original, rules.n_models), rules)
        copies = [disguise(kind, head, np.ones(rules.svf_scale_count), rules.n_models,
                           seed)[0] for kind in DISGUISES]
        copies += [evading(head, cut, rules.n_models, seed) for cut in CUTS]
        for copy in copies:
            mine = fingerprint(copy, rules.n_models)
            full, stored = float(mine @ original), float(mine @ compact)
            agree += (full >= line) == (stored >= line)
            total += 1
            if abs(full - line) <= 0.01:
                shift = max(shift, abs(stored - full))
        _agree_on_basis(on_basis, original, copies, basis, rules)
    return {"copies": total, "same_decision": agree, "largest_shift_near_the_line": shift,
            "on_basis": on_basis}


def _agree_on_basis(tally: dict, original: np.ndarray, copies: list[np.ndarray],
                    basis: FeatureBasis, rules: Competition) -> None:
    """Adds to `tally` gate 3's decisions on the basis for `copies` of the head whose
    fingerprint is `original`, as stored projected, against the full-precision projection."""
    from evaluator.gates import fingerprint

    n, directions = rules.n_models, basis.directions
    stored = encode_projected(original, n, directions)
    exact = basis.project(original, n)
    for copy in copies:
        mine = fingerprint(copy, n)
        full = float(basis.project(mine, n) @ exact)
        projected = float(cosines(mine, [stored], rules, directions)[0])
        line = rules.duplicate_cosine
        tally["copies"] += 1
        tally["same_decision"] += int((projected >= line) == (full >= line))
        if abs(full - line) <= 0.01:
            tally["largest_shift_near_the_line"] = max(tally["largest_shift_near_the_line"],
                                                       abs(projected - full))


def _sizes(text: str) -> list[int]:
    try:
        sizes = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError as exc:
        raise UsageError(f"--sizes takes whole numbers separated by commas, not {text!r}") from exc
    if not sizes or sizes[0] < 1:
        raise UsageError("--sizes needs at least one board size of 1 or more")
    return sizes


def measure(sizes: list[int], repeats: int, rules: Competition, tmp: Path) -> dict:
    boards = {}
    for n in sizes:
        root = tmp / f"board-{n}"
        started = time.perf_counter()
        result = build_board(root, n, rules)
        boards[n] = commands(root, result, n)
        print(f"built the board of {n:,} in {time.perf_counter() - started:.1f} s", flush=True)
    times: dict[str, dict[int, list[float]]] = {}
    for _ in range(repeats):  # interleaved, so drift hits every cell alike
        for n, table in boards.items():
            for name, command in table.items():
                times.setdefault(name, {}).setdefault(n, []).append(timed(name, command.argv))
                command.reset()
    def per_line(name: str) -> dict[str, int]:
        return {str(n): round((tmp / f"board-{n}" / "leaderboard" / name).stat().st_size / n)
                for n in sizes}

    return {"sizes": sizes, "repeats": repeats,
            "attempts_bytes_per_line": per_line(ATTEMPTS_FILE),
            "index_bytes_per_line": per_line(attempts_index.INDEX_FILE),
            "commands": {name: {"median_s": {str(n): round(statistics.median(ts), 3)
                                             for n, ts in by_size.items()},
                                "growth": round(statistics.median(by_size[sizes[-1]])
                                                / statistics.median(by_size[sizes[0]]), 2)}
                         for name, by_size in times.items()}}


def print_report(report: dict) -> None:
    sizes = report["sizes"]
    width = max(map(len, report["commands"]))
    head = "".join(f"{f'N={n:,}':>12}" for n in sizes)
    print(f"{'command':<{width}}{head}   ×{sizes[-1]:,}/{sizes[0]:,}   "
          f"(medians of {report['repeats']} runs)")
    for name, row in report["commands"].items():
        cells = "".join(f"{row['median_s'][str(n)]:>10.2f} s" for n in sizes)
        print(f"{name:<{width}}{cells}   {row['growth']:>6.2f}")
    for name, key in (("attempts.jsonl", "attempts_bytes_per_line"),
                      (attempts_index.INDEX_FILE, "index_bytes_per_line")):
        per_line = "".join(f"{report[key][str(n)]:>10,} B" for n in sizes)
        print(f"{name + ' per line':<{width}}{per_line}")
    dup = report["duplicates"]
    print(f"gate 3 on {dup['copies']} disguised copies: {dup['same_decision']} decisions as from "
          f"the full-precision fingerprints from the compact ones; near the line, cosines "
          f"within {dup['largest_shift_near_the_line']:.1e} of the full-precision ones")
    on = dup["on_basis"]
    print(f"on a season's feature basis, as gate 3 compares there, of {on['copies']} "
          f"decisions: as from the full-precision fingerprint {on['same_decision']} from the "
          f"projected one the log keeps (within {on['largest_shift_near_the_line']:.1e} near "
          f"the line)")


def run(args: argparse.Namespace) -> int:
    if args.repeats < 1:
        raise UsageError("--repeats must be at least 1")
    sizes = _sizes(args.sizes)
    if args.heads < 0:
        raise UsageError("--heads must be 0 or more")
    with tempfile.TemporaryDirectory(prefix="tinyrouter-scale-") as tmp:
        report = measure(sizes, args.repeats, args.rules, Path(tmp))
    report["duplicates"] = duplicate_agreement(args.heads, args.rules)
    print_report(report)
    write_json_out(args.json, report)
    return 0
