"""Leaderboard states the site is built from: empty, one king, and a long busy history."""

from __future__ import annotations

import hashlib
import json
import random
from datetime import UTC, datetime, timedelta
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from evaluator.records import LOST, PUBLIC_FIELDS, REJECTED, UNSCORED
from evaluator.rules import OFFICIAL

REPO = Path(__file__).resolve().parents[2]
HOSTILE_NAME = "<img src=x onerror=alert(1)>"
HOSTILE_MARKDOWN = "[x](javascript:alert(1))"
LONG_NAME = "a-login-as-long-as-github-allows-39chars"[:39]
START = datetime(2026, 9, 1, 12, 0, tzinfo=UTC)
NOW = START + timedelta(days=49)  # the busy board's build time: just after its last records
CATEGORIES = {  # per benchmark, in the style of the datasets' own (MMLU has many subjects)
    "math500": ("Algebra", "Geometry", "Number Theory", "Precalculus"),
    "mmlu": tuple(f"subject_{n:02d}" for n in range(14)),
    "livecodebench": ("easy", "medium", "hard"),
}
COST_PER_1K = {"qwen3.5-35b-a3b": 0.9, "gemini-3.1-flash-lite": 0.31, "deepseek-v4-flash": 0.26}


def stamp(days: float) -> str:
    return (START + timedelta(days=days)).strftime("%Y-%m-%dT%H:%M:%SZ")


def _write(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def head_sha(*parts: Any) -> str:
    return hashlib.sha1("/".join(map(str, parts)).encode()).hexdigest()


def _best(per_model: dict[str, float]) -> dict[str, Any]:
    best = max(per_model, key=per_model.get)
    return {"model": best, "accuracy": per_model[best]}


def manifest(costs: bool = True) -> dict[str, Any]:
    benchmarks = {}
    for index, bench in enumerate(OFFICIAL.benchmarks):
        per_model = {name: round(0.5 + 0.07 * ((index + i) % 3), 3)
                     for i, name in enumerate(OFFICIAL.pool_names)}
        by_category = {}
        for c, category in enumerate(CATEGORIES[bench]):
            shares = {name: round(0.35 + 0.1 * ((c + i) % 4), 3)
                      for i, name in enumerate(OFFICIAL.pool_names)}
            by_category[category] = {"items": 10 + c, "per_model": shares, "best_single":
                                     _best(shares), "oracle": round(max(shares.values()) + 0.3, 3)}
        baselines = {"per_model": per_model, "best_single": _best(per_model),
                     "random": round(sum(per_model.values()) / 3, 4), "oracle": 0.86}
        if costs:  # records written before per-category baselines and costs lack both
            baselines.update(by_category=by_category, cost_per_1k_usd={
                model: round(cost * (1 + 0.2 * index), 4) for model, cost in COST_PER_1K.items()})
        benchmarks[bench] = {
            "splits": {split: {"count": size, "commitment": hashlib.sha256(
                f"{bench}{split}".encode()).hexdigest()}
                for split, size in OFFICIAL.sealed_sizes.items()},
            "train_ids": [f"{bench}-{n}" for n in range(40)],
            "baselines": baselines}
    return {"format": 1, "benchmarks": benchmarks, "sealed_at": stamp(-3),
            "manifest_hash": "f" * 64}


def router_card(level: float, tilt: int, previous: bool) -> dict[str, Any]:
    """A king's card in the shape evaluate writes: `tilt` moves its routing mix around."""
    models, roles = OFFICIAL.pool_names, ("Thinker", "Worker", "Verifier")
    public = {}
    for bench, categories in CATEGORIES.items():
        groups = {}
        for c, category in enumerate(categories):
            weights = [1 + (c + tilt + i) % 3 for i in range(len(models))]
            groups[category] = {"items": 4 + c % 3,
                                "models": {m: w / sum(weights)
                                           for m, w in zip(models, weights, strict=True)},
                                "roles": dict(zip(roles, (0.25, 0.5, 0.25), strict=True))}
        public[bench] = {"items": sum(g["items"] for g in groups.values()), "by_category": groups}
    return {"public_items": public,
            "live_questions": OFFICIAL.live_size * len(OFFICIAL.benchmarks),
            "cost_per_1k_usd": round(0.35 + 0.05 * tilt, 4),
            "agreement_with_previous": round(0.6 + 0.03 * tilt, 4) if previous else None,
            "live_seconds": {"median": round(4.2 + 0.1 * tilt, 3), "p95": 11.75}}


def breakdown(level: float) -> dict[str, dict[str, float]]:
    return {bench: {"cached_acc": round(level + 0.03 * i, 4), "audit_acc": round(level, 4),
                    "live_acc": round(level - 0.05, 4), "avg_turns": 2.5,
                    "efficiency": round(0.625 * (level - 0.05), 4), "novelty": 0.3,
                    "overfit_penalty": 1.0, "score": round(level - 0.02 + 0.01 * i, 4)}
            for i, bench in enumerate(OFFICIAL.benchmarks)}


class Board:
    """Builds a leaderboard folder through the public file contracts only."""

    def __init__(self, root: Path, costs: bool = True) -> None:
        self.root = root
        self.kings: list[dict[str, Any]] = []
        self.attempts: list[dict[str, Any]] = []
        self.pr = 0
        self.cards = costs
        self.events: list[dict[str, Any]] = []
        root.mkdir(parents=True, exist_ok=True)
        _write(root / "manifest.json", manifest(costs))

    def attempt(self, miner: str, generation: int, day: float, failed: int | None = None,
                pr: int | None = None) -> dict[str, Any]:
        """An attempt-log line: a new PR, or a new head on `pr`."""
        if pr is None:
            self.pr += 1
        pr = pr or self.pr
        identity = {"miner": miner, "generation": generation, "pr": pr,
                    "head_sha": head_sha(miner, generation, pr, day)}
        self.attempts.append({**identity, "at": stamp(day), "weights_sha256": "e" * 64,
                              "fingerprint": "q7:AAAA",
                              "gates": {"passed": failed is None, "failed": failed}})
        return identity

    def submit(self, miner: str, generation: int, day: float, outcome: str,
               composite: float | None = None, reason: str | None = None,
               card: bool | None = None, identity: dict[str, Any] | None = None) -> dict[str, Any]:
        identity = identity or self.attempt(miner, generation, day - 0.1)
        king = self.kings[-1] if self.kings else None
        record = {"format": 1, **identity, "evaluated_at": stamp(day), "outcome": outcome,
                  "against": king and {k: king[k] for k in ("miner", "generation", "pr",
                                                           "head_sha")},
                  "composite": None, "king_composite": None, "delta": None, "reason": reason,
                  "benchmark_manifest": None, "partition_commitment": None,
                  "isolation": "bubblewrap: own pid, network, mount and ipc namespaces",
                  "not_compared": None}
        if outcome not in UNSCORED:
            king_composite = king["composite"] if king else None
            record.update(composite=composite, king_composite=king_composite,
                          delta=None if king is None else round(composite - king_composite, 4),
                          ci95=[0.004, 0.058] if king else None, benchmark_manifest="f" * 64,
                          partition_commitment="c" * 64,
                          crown_test={"stage": 1, "difference": 0.035, "weighted": 0.035,
                                      "se": 0.0105, "z": 3.33, "live_items": 20,
                                      "live_sessions": 120} if king else None)
        if outcome == "king":
            with_card = self.cards if card is None else card
            record.update(per_benchmark=breakdown(composite), live_cost_usd=0.42,
                          router_card=router_card(composite, len(self.kings), king is not None)
                          if with_card else None)
            self.kings.append({**identity, "composite": composite, "crowned_at": stamp(day),
                               "delta": record["delta"], "ci95": record["ci95"],
                               "scores": {b: p["score"] for b, p in breakdown(composite).items()},
                               "per_benchmark": record["per_benchmark"], "previous": king})
        if outcome == "lost":  # the disclosure rule keeps only these, rounded, as evaluate does
            record.update(ci95=None, composite=round(composite, 2),
                          delta=round(record["delta"], 2),
                          crown_test={"stage": 1, "live_items": 20, "live_sessions": 120})
            record = {key: record[key] for key in PUBLIC_FIELDS[LOST]}
        name = f"{generation}.json"
        if outcome in UNSCORED:
            record = {key: record[key] for key in PUBLIC_FIELDS[REJECTED]}
            if outcome != REJECTED:  # a void or stale evaluation keeps a file of its own
                name = f"{generation}.{outcome}.{stamp(day).replace('-', '').replace(':', '')}.json"
        _write(self.root / "results" / miner / name, record)
        return record

    def evaluating(self, identity: dict[str, Any], day: float) -> None:
        """A queue event: the evaluation of this head started."""
        self.events.append({"event": "evaluating", **identity, "at": stamp(day)})

    def fairness(self, data: dict[str, Any]) -> None:
        _write(self.root / "fairness.json", data)

    def save(self) -> Path:
        lines = "".join(json.dumps(a, sort_keys=True) + "\n" for a in self.attempts)
        (self.root / "attempts.jsonl").write_text(lines, encoding="utf-8")
        if self.events:
            (self.root / "queue.jsonl").write_text("".join(
                json.dumps(e, sort_keys=True) + "\n" for e in self.events), encoding="utf-8")
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
    """A first king, recorded before router cards and costs were published."""
    board = Board(root, costs=False)
    board.submit("alice", 1, 0, "king", 0.6123)
    return board.save()


def busy(root: Path, seed: int = 7) -> Path:
    """Six kings and dozens of evaluations, with lost and rejected ones and hostile text, and a
    queue: heads waiting, stale, replaced or stopped at a gate."""
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
            board.submit(miner, generations[miner], day, "king", composite, card=day > 0)
        elif day % 5 == 0:
            board.submit(miner, generations[miner], day, "rejected",
                         reason="gate 5 (overfit): math500 gap 0.19 > 0.15")
        else:
            board.submit(miner, generations[miner], day, "lost",
                         round(composite - rng.random() * 0.05, 4))
    ivan = board.attempt("ivan", 1, 47.4)
    board.submit("ivan", 1, 47.5, "void", reason="void: the pool failed on 4 of 60 of your "
                 "head's live questions after retries (the limit is 5%)", identity=ivan)
    board.submit("ivan", 1, 47.8, "lost", 0.5, identity=ivan)  # run again: the same head
    board.submit(HOSTILE_NAME, 1, 48.2, "lost", 0.5)
    board.submit("mallory", 1, 48.5, "rejected", reason=HOSTILE_MARKDOWN + " <b>bold</b>")
    board.submit(LONG_NAME, 1, 48.6, "lost", 0.51)
    board.attempt("oscar", 1, 48.7, failed=3)  # a copy, stopped at the duplicate gate
    kate = board.attempt("kate", 1, 48.1)
    board.submit("kate", 1, 48.4, "stale", reason="stale: the king changed while it ran",
                 identity=kate)
    board.attempt("judy", 1, 46.5)  # a head, then a new one on the same pull request: waiting
    board.attempt("judy", 1, 48.8, pr=board.pr)
    board.evaluating(board.attempt("leo", 1, 48.85), 48.9)
    board.fairness(FAIRNESS)
    return board.save()


def _rates(penalty: float, reject: float) -> dict[str, Any]:
    return {"per_benchmark": {b: {"accuracy": 0.6, "penalty": penalty / 3, "reject": reject / 3}
                              for b in OFFICIAL.benchmarks},
            "any": {"penalty": penalty, "reject": reject}}


# figures in the shape `tinyrouter fairness` writes (the numbers are made up for the pages)
FAIRNESS = {
    "format": 3, "source": "the demo corpus", "seed": 0,
    "trials": {"honest": 2000, "crown": 1000, "campaign": 6000, "memoriser": 2000,
               "climbers": 20, "climb": 1000},
    "benchmarks": list(OFFICIAL.benchmarks), "rerun_flip": 0.15,
    "duplicate_agreement": OFFICIAL.duplicate_agreement, "left_out": [0.1],
    "honest": {"reference_accuracy": 0.6, "reference": _rates(0.1913, 0.0121),
               "best_single": _rates(0.2034, 0.0155),
               "without": {"eval_size": 150, "audit_size": 50,
                           "reference": _rates(0.3771, 0.0868)}},
    "false_crown": [{"disagreement": d, "trials": n, "differ": d, "crowned": c,
                     "crowned_se": se, "shared": sh, "shared_se": 0.0011, "live_items": 23.5}
                    for d, n, c, se, sh in ((0.12, 6000, 0.0013, 0.00047, 0.0),
                                            (0.3, 1000, 0.0043, 0.0021, 0.0011),
                                            (0.6, 1000, 0.013, 0.0036, 0.0052))],
    "campaign": {"disagreement": 0.12, "trials": 6000, "per_evaluation": 0.0013,
                 "per_evaluation_se": 0.00047, "shared": 0.0, "shared_se": 0.0,
                 "independent_rows": [{"submissions": n, "any": a, "se": 0.02, "upper": u}
                                      for n, a, u in ((100, 0.1219, 0.21), (300, 0.3234, 0.51),
                                                      (1000, 0.7276, 0.91))],
                 "shared_rows": [{"submissions": n, "any": 0.0, "se": 0.0, "upper": u}
                                 for n, u in ((100, 0.0619), (300, 0.1748), (1000, 0.4724))],
                 "other_bar": {"crown_z_final": 2.326, "per_evaluation": 0.0022,
                               "per_evaluation_se": 0.0006, "trials": 6000,
                               "independent_rows": [{"submissions": n, "any": a, "se": 0.03,
                                                     "upper": a + 0.1}
                                                    for n, a in ((100, 0.1975), (300, 0.4832),
                                                                 (1000, 0.889))],
                               "advantage": 0.03, "disagreement": 0.3, "crowned": 0.507,
                               "crowned_se": 0.016}},
    "power": [{"disagreement": d, "advantage": a, "trials": 1000, "differ": d + a,
               "crowned": round(min(1, max(0, a * 18 - d)), 4), "crowned_se": 0.01,
               "shared": round(min(1, a * 20), 4), "shared_se": 0.01, "live_items": 41.0}
              for d in (0.12, 0.3) for a in (0.01, 0.02, 0.03)]
    + [{"disagreement": 0.12, "advantage": 0.05, "left_out": "duplicate", "crowned": None,
        "crowned_se": None, "shared": None, "shared_se": None},
       {"disagreement": 0.3, "advantage": 0.05, "left_out": "headroom", "crowned": None,
        "crowned_se": None, "shared": None, "shared_se": None}],
    "live_sessions": {"first_stage": 120, "near_equal": 141.0, "costliest": 246.0, "worst": 360},
    "memorisation": {
        "audit_size": OFFICIAL.audit_size, "lead": OFFICIAL.overfit_penalty_gap,
        "router": {"penalty": 0.002, "reject": 0.0, "pool_lead": 0.305, "audit_lead": 0.305},
        "memoriser": {"penalty": 0.531, "reject": 0.007, "pool_lead": 0.386,
                      "audit_lead": 0.305},
        "crowns": [{"advantage": a, "disagreement": 0.3, "trials": 2000,
                    "honest": {"crowned": c, "crowned_se": 0.001, "shared": c, "shared_se": 0.001},
                    "memoriser": {"crowned": c, "crowned_se": 0.001, "shared": c,
                                  "shared_se": 0.001}}
                   for a, c in ((0.0, 0.0021), (0.02, 0.2287))]},
    "climber": {"mutation": 0.18, "climbers": 20,
                "rows": [{"submissions": n, "crowned": 0.0, "crowned_se": 0.0, "board_gain": 0.0,
                          "true_gain": 0.0, "beyond": 0.0} for n in (100, 300, 1000)],
                "without": [{"submissions": n, "crowned": c, "crowned_se": 0.09,
                             "board_gain": b - 0.01, "true_gain": -0.01, "beyond": b}
                            for n, c, b in ((100, 0.25, 0.0021), (300, 0.55, 0.0043),
                                            (1000, 0.85, 0.0065))]},
}


class _Text(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []
        self.hidden = 0

    def handle_starttag(self, tag: str, attrs: list) -> None:
        self.hidden += tag in ("script", "style")

    def handle_endtag(self, tag: str) -> None:
        self.hidden -= tag in ("script", "style")

    def handle_data(self, data: str) -> None:
        if not self.hidden:
            self.parts.append(data)


def text_of(path: Path) -> str:
    """What a reader sees: the page's text with entities decoded and tags dropped."""
    parser = _Text()
    parser.feed(path.read_text(encoding="utf-8"))
    return " ".join("".join(parser.parts).split())


def article_of(path: Path) -> str:
    """The text of the page's own content, without the navigation and table of contents."""
    source = path.read_text(encoding="utf-8")
    start = source.index('<article class="md-content__inner')
    parser = _Text()
    parser.feed(source[start:source.index("</article>", start)])
    return " ".join("".join(parser.parts).split())


def html_files(site: Path) -> list[Path]:
    return sorted(site.rglob("*.html"))


STATES = {"empty": lambda root: root, "one_king": one_king, "busy": busy}


def build_site(*args: Any, **kwargs: Any) -> Path:
    """`evaluator.site.build_site`, loaded when a test first builds (MkDocs is slow to import)."""
    from evaluator.site import build_site as build

    return build(*args, **kwargs)


@pytest.fixture(scope="session")
def built_sites(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each fixture state built once with the official rules: state name → site folder."""
    sites = {}
    for name, make in STATES.items():
        base = tmp_path_factory.mktemp(f"site-{name}")
        sites[name] = build_site(base / "public", make(base / "leaderboard"), OFFICIAL, now=NOW)
    return sites


@pytest.fixture
def make_state(tmp_path: Path):
    """make_state("busy") writes that fixture state and returns its leaderboard folder."""
    return lambda name: STATES[name](tmp_path / name / "leaderboard")


@pytest.fixture(scope="session")
def hostile() -> dict[str, str]:
    return {"name": HOSTILE_NAME, "markdown": HOSTILE_MARKDOWN}
