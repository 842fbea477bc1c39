"""The evidence for the behavioural duplicate threshold: how alike independent heads route.

Several heads are trained on the demo's public train items with different seeds, the way
miners would train them; each pair's turn-1 model agreement on those items (what the
behavioural check compares) is set beside the agreement of every disguised copy of a head
with its original (see `evaluator.copies`), and beside gate 3's weight cosine of each.

How the threshold is chosen: above the most alike independent pair by MARGIN (heads trained
longer than the measurement's agree more), so an honest head is never flagged. Every copy
that keeps the model rows is caught by gate 3 first; a copier who moves them past gate 3 on
purpose is caught while the copy still routes like its original. One moved far enough to pass
both routes differently on as many items as an independent head does: a different head, which
symmetric novelty gives nothing and the interval rule must crown on its merits.
"""

from __future__ import annotations

import itertools
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from evaluator.collect import pool_client_factory
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
from evaluator.train.data import TrainingSet
from evaluator.train.fitness import encoder_featurizer
from evaluator.train.run import BEST_FILE, TrainConfig, run_training

EVADING_COSINES = (0.98, 0.95, 0.9, 0.8)  # copies moved past gate 3's cosine on purpose
MARGIN = 0.10  # of the threshold over the most alike independent pair


def theta_of(head: np.ndarray, scales: np.ndarray) -> np.ndarray:
    return np.concatenate([np.asarray(head, np.float32).reshape(-1),
                           np.asarray(scales, np.float32)])


def models_chosen(router: Router, transcripts: list[str], head: np.ndarray,
                  scales: np.ndarray) -> np.ndarray:
    return np.array([d.model for d in router.decide(transcripts, theta_of(head, scales),
                                                   reuse=True)])


def measure(router: Router, transcripts: list[str], heads: list[tuple[np.ndarray, np.ndarray]],
            rules: Competition) -> dict[str, Any]:
    """Agreement and weight cosine of every independent pair, and of every copy."""
    chosen = [models_chosen(router, transcripts, h, s) for h, s in heads]
    views = [fingerprint(h, rules.n_models) for h, _ in heads]
    pairs = [{"heads": [i, j], "agreement": float(np.mean(chosen[i] == chosen[j])),
              "cosine": float(views[i] @ views[j])}
             for i, j in itertools.combinations(range(len(heads)), 2)]
    copies: dict[str, list[dict[str, float]]] = {}
    for index, (head, scales) in enumerate(heads):
        variants = {kind: disguise(kind, head, scales, rules.n_models, seed=index)
                    for kind in DISGUISES}
        variants |= {f"evading, cosine {c}": (evading(head, c, rules.n_models, seed=index), scales)
                     for c in EVADING_COSINES}
        for kind, (copy_head, copy_scales) in variants.items():
            copies.setdefault(kind, []).append({
                "agreement": float(np.mean(models_chosen(router, transcripts, copy_head,
                                                         copy_scales) == chosen[index])),
                "cosine": float(fingerprint(copy_head, rules.n_models) @ views[index])})
    independent = [p["agreement"] for p in pairs]
    through_gate_3 = [c["agreement"] for rows in copies.values() for c in rows
                      if c["cosine"] < rules.duplicate_cosine]
    return {
        "items": len(transcripts), "pairs": pairs,
        "independent": {"min": min(independent), "median": float(np.median(independent)),
                        "max": max(independent)},
        "copies": {kind: {"min_agreement": min(c["agreement"] for c in rows),
                          "max_cosine": max(c["cosine"] for c in rows),
                          "caught_by_gate_3": all(c["cosine"] >= rules.duplicate_cosine
                                                  for c in rows),
                          "caught_by_behaviour": all(c["cosine"] >= rules.duplicate_cosine
                                                     or c["agreement"] >= rules.duplicate_agreement
                                                     for c in rows)}
                   for kind, rows in copies.items()},
        "lowest_copy_past_gate_3": min(through_gate_3) if through_gate_3 else None,
        "threshold": rules.duplicate_agreement,
        "suggested_threshold": round(max(independent) + MARGIN, 2),
    }


def run_agreement(n_heads: int, generations: int, base: Competition,
                  limit: int | None = None,
                  progress: Callable[[str], None] = lambda _: None) -> dict[str, Any]:
    """Train `n_heads` heads (seeds 1…n) on the demo's train items and measure them."""
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="tinyrouter-agreement-") as tmp:
        work = Path(tmp)
        rules = competition_for_encoder(make_tiny(work / "encoder", seed=0), base)
        progress("answering the demo's train items")
        with serve_simulator(bundled_simulator(rules, seed=0)) as url:
            train_rows, _ = demo_rows(rules, pool_client_factory(url, None, rules), limit,
                                      held_out=False)
        encoder = load_encoder(str(work / "encoder"), rules, device="cpu")
        data = TrainingSet.of(train_rows, rules)
        featurizer = encoder_featurizer(encoder, data, rules)
        heads = []
        for seed in range(1, n_heads + 1):
            progress(f"training head {seed} of {n_heads}")
            config = TrainConfig.resolve(rules, data.benchmarks, seed=seed,
                                         encoder=str(work / "encoder"), generations=generations)
            run_training(work / f"head-{seed}", config, data, featurizer, rules)
            heads.append(read_weights(work / f"head-{seed}" / BEST_FILE, rules))
        progress("comparing their routing")
        router = Router(encoder, rules)
        transcripts = [coordinator_transcript(row.item.prompt, []) for row in train_rows]
        report = measure(router, transcripts, heads, rules)
    report.update(heads=n_heads, generations=generations,
                  seconds=round(time.monotonic() - started, 1))
    return report
