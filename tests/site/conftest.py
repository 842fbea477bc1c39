"""Leaderboard states the site is built from: empty, one king, and a long busy history."""

from __future__ import annotations

import hashlib
import json
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from evaluator.records import LOST, PUBLIC_FIELDS, REJECTED, UNSCORED
from evaluator.rules import OFFICIAL

REPO = Path(__file__).resolve().parents[2]
HOSTILE_NAME = "<img src=x onerror=alert(1)>"
HOSTILE_MARKDOWN = "[x](javascript:alert(1))"
START = datetime(2026, 9, 1, 12, 0, tzinfo=UTC)
SHA = "0123456789abcdef0123456789abcdef01234567"


def stamp(days: float) -> str:
    return (START + timedelta(days=days)).strftime("%Y-%m-%dT%H:%M:%SZ")


def _write(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def manifest() -> dict[str, Any]:
    benchmarks = {}
    for index, bench in enumerate(OFFICIAL.benchmarks):
        per_model = {name: round(0.5 + 0.07 * ((index + i) % 3), 3)
                     for i, name in enumerate(OFFICIAL.pool_names)}
        best = max(per_model, key=per_model.get)
        benchmarks[bench] = {
            "splits": {split: {"count": size, "commitment": hashlib.sha256(
                f"{bench}{split}".encode()).hexdigest()}
                for split, size in OFFICIAL.split_sizes.items()},
            "train_ids": [f"{bench}-{n}" for n in range(40)],
            "baselines": {"per_model": per_model,
                          "best_single": {"model": best, "accuracy": per_model[best]},
                          "random": round(sum(per_model.values()) / 3, 4), "oracle": 0.86}}
    return {"format": 1, "benchmarks": benchmarks, "sealed_at": stamp(-3),
            "manifest_hash": "f" * 64}


def breakdown(level: float) -> dict[str, dict[str, float]]:
    return {bench: {"cached_acc": round(level + 0.03 * i, 4), "audit_acc": round(level, 4),
                    "live_acc": round(level - 0.05, 4), "avg_turns": 2.5,
                    "efficiency": round(0.625 * (level - 0.05), 4), "novelty": 0.3,
                    "overfit_penalty": 1.0, "score": round(level - 0.02 + 0.01 * i, 4)}
            for i, bench in enumerate(OFFICIAL.benchmarks)}


class Board:
    """Builds a leaderboard folder through the public file contracts only."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.kings: list[dict[str, Any]] = []
        self.attempts: list[dict[str, Any]] = []
        self.pr = 0
        root.mkdir(parents=True, exist_ok=True)
        _write(root / "manifest.json", manifest())

    def submit(self, miner: str, generation: int, day: float, outcome: str,
               composite: float | None = None, reason: str | None = None) -> dict[str, Any]:
        self.pr += 1
        identity = {"miner": miner, "generation": generation, "pr": self.pr, "head_sha": SHA}
        self.attempts.append({**identity, "at": stamp(day - 0.1), "weights_sha256": "e" * 64,
                              "fingerprint": "AAAA", "gates": {"passed": True, "failed": None}})
        king = self.kings[-1] if self.kings else None
        record = {"format": 1, **identity, "evaluated_at": stamp(day), "outcome": outcome,
                  "composite": None, "king_composite": None, "delta": None, "reason": reason,
                  "benchmark_manifest": None, "partition_commitment": None}
        if outcome not in UNSCORED:
            king_composite = king["composite"] if king else None
            record.update(composite=composite, king_composite=king_composite,
                          delta=None if king is None else round(composite - king_composite, 4),
                          ci95=[0.004, 0.058] if king else None, benchmark_manifest="f" * 64,
                          partition_commitment="c" * 64)
        if outcome == "king":
            record.update(per_benchmark=breakdown(composite), live_cost_usd=0.42,
                          router_card=None)
            self.kings.append({**identity, "composite": composite, "crowned_at": stamp(day),
                               "delta": record["delta"], "ci95": record["ci95"],
                               "scores": {b: p["score"] for b, p in breakdown(composite).items()},
                               "per_benchmark": record["per_benchmark"], "previous": king})
        if outcome == "lost":  # the disclosure rule keeps only these, rounded, as evaluate does
            record.update(ci95=[-0.06, 0.01], composite=round(composite, 2),
                          delta=round(record["delta"], 2))
            record = {key: record[key] for key in PUBLIC_FIELDS[LOST]}
        name = f"{generation}.json"
        if outcome in UNSCORED:
            record = {key: record[key] for key in PUBLIC_FIELDS[REJECTED]}
            if outcome != REJECTED:  # a void or stale evaluation keeps a file of its own
                name = f"{generation}.{outcome}.{stamp(day).replace('-', '').replace(':', '')}.json"
        _write(self.root / "results" / miner / name, record)
        return record

    def fairness(self, data: dict[str, Any]) -> None:
        _write(self.root / "fairness.json", data)

    def save(self) -> Path:
        lines = "".join(json.dumps(a, sort_keys=True) + "\n" for a in self.attempts)
        (self.root / "attempts.jsonl").write_text(lines, encoding="utf-8")
        history = [{k: v for k, v in king.items() if k in (
            "miner", "generation", "pr", "head_sha", "composite", "crowned_at", "delta", "ci95",
            "scores")} for king in self.kings]
        _write(self.root / "history.json", {"format": 1, "kings": history})
        king = self.kings[-1] if self.kings else None
        if king is not None:
            previous = king["previous"]
            king = {**{k: king[k] for k in ("miner", "generation", "pr", "head_sha", "composite",
                                             "per_benchmark", "crowned_at", "ci95")},
                    "previous": previous and {k: previous[k] for k in (
                        "miner", "generation", "composite")}}
        _write(self.root / "king.json", {"format": 1, "king": king})
        return self.root


def one_king(root: Path) -> Path:
    board = Board(root)
    board.submit("alice", 1, 0, "king", 0.6123)
    return board.save()


def busy(root: Path, seed: int = 7) -> Path:
    """Six kings and dozens of evaluations, with lost and rejected ones and hostile text."""
    rng = random.Random(seed)
    board = Board(root)
    miners = ["alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi"]
    generations = dict.fromkeys(miners, 0)
    composite = 0.55
    for day in range(48):
        miner = miners[rng.randrange(len(miners))]
        generations[miner] += 1
        if day % 8 == 0:
            composite = round(composite + 0.025 + rng.random() * 0.01, 4)
            board.submit(miner, generations[miner], day, "king", composite)
        elif day % 5 == 0:
            board.submit(miner, generations[miner], day, "rejected",
                         reason="gate 5 (overfit): math500 gap 0.19 > 0.15")
        else:
            board.submit(miner, generations[miner], day, "lost",
                         round(composite - rng.random() * 0.05, 4))
    board.submit("ivan", 1, 47.5, "void", reason="void: the pool failed on 4 of 60 of your "
                 "head's live questions after retries (the limit is 5%)")
    board.submit("ivan", 1, 47.8, "lost", 0.5)
    board.submit(HOSTILE_NAME, 1, 48.2, "lost", 0.5)
    board.submit("mallory", 1, 48.5, "rejected", reason=HOSTILE_MARKDOWN + " <b>bold</b>")
    board.fairness(FAIRNESS)
    return board.save()


def _rates(penalty: float, reject: float) -> dict[str, Any]:
    return {"per_benchmark": {b: {"accuracy": 0.6, "penalty": penalty / 3, "reject": reject / 3}
                              for b in OFFICIAL.benchmarks},
            "any": {"penalty": penalty, "reject": reject}}


# figures in the shape `tinyrouter fairness` writes (the numbers are made up for the pages)
FAIRNESS = {
    "format": 1, "source": "the demo corpus", "seed": 0,
    "trials": {"honest": 2000, "crown": 1000, "climbers": 20},
    "benchmarks": list(OFFICIAL.benchmarks),
    "honest": {"reference_accuracy": 0.6, "reference": _rates(0.1913, 0.0121),
               "best_single": _rates(0.2034, 0.0155),
               "without": {"eval_size": 150, "audit_size": 50,
                           "reference": _rates(0.3771, 0.0868)}},
    "false_crown": [{"disagreement": d, "crowned": c, "margin_only": m}
                    for d, c, m in ((0.1, 0.0, 0.071), (0.3, 0.0043, 0.1617), (0.6, 0.013, 0.23))],
    "power": [{"disagreement": d, "advantage": a, "crowned": round(min(1, max(0, a * 18 - d)), 4),
               "margin_only": round(min(1, a * 20), 4)}
              for d in (0.0, 0.1, 0.3) for a in (0.01, 0.02, 0.03, 0.05)],
    "hill_climb": [{"submissions": n, "gain": g, "without": w}
                   for n, g, w in ((100, 0.0091, 0.0634), (300, 0.0104, 0.1331),
                                   (1000, 0.0147, 0.1472))],
}


STATES = {"empty": lambda root: root, "one_king": one_king, "busy": busy}


@pytest.fixture(scope="session")
def built_sites(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each fixture state built once with the official rules: state name → site folder."""
    from evaluator.site import build_site

    sites = {}
    for name, make in STATES.items():
        base = tmp_path_factory.mktemp(f"site-{name}")
        sites[name] = build_site(base / "public", make(base / "leaderboard"), OFFICIAL)
    return sites


@pytest.fixture
def make_state(tmp_path: Path):
    """make_state("busy") writes that fixture state and returns its leaderboard folder."""
    return lambda name: STATES[name](tmp_path / name / "leaderboard")


@pytest.fixture(scope="session")
def hostile() -> dict[str, str]:
    return {"name": HOSTILE_NAME, "markdown": HOSTILE_MARKDOWN}
