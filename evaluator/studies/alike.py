"""The evidence for the duplicate thresholds: how alike independent heads route and weigh.

Heads trained on the demo's public train items as miners would (default runs with their own
seeds, and the other starts a miner may choose) are compared pair by pair as the checks
compare them: gate 3's cosine on the feature basis and the behavioural check's figures
(`contenders.alike`), with every disguised copy (`evaluator.copies`) beside them. Each
threshold sits above the most alike independent pair by a margin (COSINE_MARGIN, OWN_MARGIN),
so an honest head is never flagged.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from evaluator.basis import FeatureBasis, directions_of
from evaluator.collect import pool_client_factory
from evaluator.commands.demo import DEMO_SIZES
from evaluator.contenders import alike
from evaluator.coordinator.encoder import competition_for_encoder, load_encoder
from evaluator.coordinator.router import Router
from evaluator.coordinator.tiny import make_tiny
from evaluator.copies import DISGUISES, disguise, evading
from evaluator.gates import fingerprint
from evaluator.loop import coordinator_transcript
from evaluator.pool.simulator import bundled_simulator, serve_simulator
from evaluator.rules import Competition
from evaluator.studies.training_runs import demo_rows
from evaluator.submission.weights import read_weights
from evaluator.train.data import TrainingSet, split_holdout
from evaluator.train.fitness import encoder_featurizer
from evaluator.train.run import BEST_FILE, TrainConfig, run_training

EVADING_COSINES = (0.9999, 0.999, 0.99, 0.98, 0.95, 0.9, 0.8)  # copies moved on purpose
OWN_MARGIN = 0.10  # of the own-choice threshold over the most alike independent pair
COSINE_MARGIN = 0.1  # gate 3's line: the most alike pair's distance from 1, times this
# the other starts a miner may train from: (name, train options)
OTHER_STARTS = (("from W = 0", {"start": "zero", "select": 0.0}),  # a zero head is no router
                ("fitted to each row (a memoriser's start)",
                 {"start": "rows", "shrink": 0.0, "select": 0.0}))


def theta_of(head: np.ndarray, scales: np.ndarray) -> np.ndarray:
    return np.concatenate([np.asarray(head, np.float32).reshape(-1),
                           np.asarray(scales, np.float32)])


def models_chosen(router: Router, transcripts: list[str], head: np.ndarray,
                  scales: np.ndarray) -> list[str]:
    return [d.model for d in router.decide(transcripts, theta_of(head, scales), reuse=True)]


def compare(items: list, basis: FeatureBasis, rules: Competition, earlier: tuple,
            later: tuple, chosen: tuple[list[str], list[str]]) -> dict[str, Any]:
    """Gate 3's cosine and the behavioural figures of `later` beside `earlier`."""
    found = alike("earlier", items, chosen[1], chosen[0])
    views = [basis.project(fingerprint(head, rules.n_models), rules.n_models)
             for head, _ in (earlier, later)]
    return {"cosine": float(views[0] @ views[1]), "agreement": found.agreement,
            "own": found.own, "followed": found.followed,
            "own_share": found.followed / found.own if found.own else None,
            "gate_3": bool(views[0] @ views[1] >= rules.duplicate_cosine),
            "behaviour": found.copied(rules)}


def measure(router: Router, items: list, heads: list[tuple[str, tuple]], basis: FeatureBasis,
            rules: Competition) -> dict[str, Any]:
    """Every ordered pair of independent heads, and every copy of each head, compared."""
    transcripts = [coordinator_transcript(item.prompt, []) for item in items]
    chosen = [models_chosen(router, transcripts, *pair) for _, pair in heads]
    pairs = [{"heads": [heads[i][0], heads[j][0]],
              **compare(items, basis, rules, heads[i][1], heads[j][1], (chosen[i], chosen[j]))}
             for i, j in itertools.permutations(range(len(heads)), 2)]
    copies: dict[str, list[dict[str, Any]]] = {}
    for index, (_, (head, scales)) in enumerate(heads):
        variants = {kind: disguise(kind, head, scales, rules.n_models, seed=index)
                    for kind in DISGUISES}
        variants |= {f"evading, cosine {c}": (evading(head, c, rules.n_models, seed=index), scales)
                     for c in EVADING_COSINES}
        for kind, copy in variants.items():
            copies.setdefault(kind, []).append(compare(
                items, basis, rules, (head, scales), copy,
                (chosen[index], models_chosen(router, transcripts, *copy))))
    return summarise(pairs, copies, rules)


def summarise(pairs: list[dict[str, Any]], copies: dict[str, list[dict[str, Any]]],
              rules: Competition) -> dict[str, Any]:
    cosines = [p["cosine"] for p in pairs]
    shares = [p["own_share"] for p in pairs if p["own"] >= rules.duplicate_own_items]
    flagged = [p["heads"] for p in pairs if p["gate_3"] or p["behaviour"]]
    return {
        "pairs": pairs,
        "independent": {"max_cosine": max(cosines), "max_agreement": max(p["agreement"]
                                                                          for p in pairs),
                        "max_own_share": max(shares, default=None), "flagged": flagged},
        "copies": {kind: {"min_agreement": min(c["agreement"] for c in rows),
                          "min_cosine": min(c["cosine"] for c in rows),
                          "min_own_share": min((c["own_share"] for c in rows
                                                if c["own_share"] is not None), default=None),
                          "caught_by_gate_3": sum(c["gate_3"] for c in rows),
                          "caught_by_behaviour": sum(c["behaviour"] and not c["gate_3"]
                                                     for c in rows),
                          "with_own_choices": sum(c["own"] >= rules.duplicate_own_items
                                                  for c in rows),
                          "of": len(rows)}
                   for kind, rows in copies.items()},
        "thresholds": {"duplicate_cosine": rules.duplicate_cosine,
                       "duplicate_agreement": rules.duplicate_agreement,
                       "duplicate_own_share": rules.duplicate_own_share,
                       "duplicate_own_items": rules.duplicate_own_items},
        "suggested": {
            "duplicate_cosine": math.ceil((1 - (1 - max(cosines)) * COSINE_MARGIN) * 1e4) / 1e4,
            "duplicate_own_share": None if not shares else round(max(shares) + OWN_MARGIN, 2)},
    }


def run_agreement(n_heads: int, generations: int, base: Competition,
                  limit: int | None = None,
                  progress: Callable[[str], None] = lambda _: None) -> dict[str, Any]:
    """Train `n_heads` default runs (seeds 1…n) and one head per other start on the demo's
    train items (split at the demo's sizes), and measure them."""
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="tinyrouter-agreement-") as tmp:
        work = Path(tmp)
        rules = dataclasses.replace(competition_for_encoder(make_tiny(work / "encoder", seed=0),
                                                            base), **DEMO_SIZES)
        progress("answering the demo's train items")
        with serve_simulator(bundled_simulator(rules, seed=0)) as url:
            train_rows, _ = demo_rows(rules, pool_client_factory(url, None, rules), limit,
                                      held_out=False)
        encoder = load_encoder(str(work / "encoder"), rules, device="cpu")
        data = TrainingSet.of(train_rows, rules)
        runs = [(f"default run, seed {seed}", seed, {}) for seed in range(1, n_heads + 1)]
        runs += [(name, n_heads + 1 + k, options) for k, (name, options)
                 in enumerate(OTHER_STARTS)]
        heads = []
        for name, seed, options in runs:
            progress(f"training {name}")
            kept, _ = split_holdout(data, rules.train_holdout, seed, rules)
            config = TrainConfig.resolve(rules, data.benchmarks, seed=seed, holdout=0.0,
                                         encoder=str(work / "encoder"), generations=generations,
                                         **options)
            run_training(work / f"head-{seed}", config, kept,
                         encoder_featurizer(encoder, kept, rules), rules)
            heads.append((name, read_weights(work / f"head-{seed}" / BEST_FILE, rules)))
        progress("comparing their routing")
        feats = encoder_featurizer(encoder, data, rules).features(
            np.arange(len(data.rows)), np.ones(rules.svf_scale_count))
        basis = FeatureBasis(directions_of(feats, rules), len(data.rows), "study")
        report = measure(Router(encoder, rules), [row.item for row in data.rows], heads, basis,
                         rules)
    report.update(heads=len(heads), generations=generations, items=len(data.rows),
                  seconds=round(time.monotonic() - started, 1))
    return report
