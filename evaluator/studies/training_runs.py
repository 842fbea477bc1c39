"""How well a default training run routes held-out questions: the demo end to end, measured.

A tiny Qwen3 is built, the demo corpus is split as a sealed benchmark would be, every pool
model answers the train and eval items through the loopback simulator, a head is trained
on the train split and its argmax routing is scored on the eval split's cached answers
against the best single model and the oracle.
"""

from __future__ import annotations

import logging
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from evaluator.baselines import from_means, gap_closed
from evaluator.benchmarks.splits import draw_splits, load_items
from evaluator.collect import answer_items, pool_client_factory
from evaluator.coordinator.encoder import competition_for_encoder, load_encoder
from evaluator.coordinator.tiny import make_tiny
from evaluator.pool.simulator import bundled_simulator, serve_simulator
from evaluator.rules import POOL_SPLIT, Competition
from evaluator.submission.weights import read_weights
from evaluator.train.data import TrainingSet
from evaluator.train.fitness import argmax_accuracy, encoder_featurizer
from evaluator.train.run import BEST_FILE, TrainConfig, run_training
from evaluator.types import AnsweredItem

log = logging.getLogger(__name__)

SPLIT_SEED = "bench-training-split-seed-0001"  # fixed, so every run sees the same items
RUN_NAME = "bench"
TARGET_MARGIN, TARGET_SHARE = 0.05, 0.5  # beat the best single by 5 points, close half the gap


@dataclass(frozen=True)
class BenchOptions:
    """The training run's settings (None takes the rules' default), and the items to use."""

    training: dict[str, Any]
    seed: int = 0
    limit: int | None = None  # train and eval items per benchmark, for a quick look


def demo_rows(rules: Competition, make_client: Callable[[], Any], limit: int | None = None,
              held_out: bool = True) -> tuple[list[AnsweredItem], list[AnsweredItem]]:
    """Every pool model's graded Worker answer to each benchmark's train items and (with
    `held_out`) its scored pool's items."""
    train_items, eval_items = [], []
    for bench in rules.benchmarks:
        splits = draw_splits(load_items(bench, "demo", rules), SPLIT_SEED, rules)
        train_items += list(splits.train[:limit])
        if held_out:
            eval_items += list(splits.hidden[POOL_SPLIT][:limit])
    rows = answer_items(train_items + eval_items, make_client, rules)
    return rows[:len(train_items)], rows[len(train_items):]


def routing_report(head: np.ndarray, feats: np.ndarray, data: TrainingSet,
                   rules: Competition) -> dict[str, Any]:
    """Argmax cached accuracy per benchmark next to the best single model and the oracle."""
    per_bench = {}
    for b, name in enumerate(data.benchmarks):
        rows = data.benchmark_of == b
        base = from_means(data.correct[rows], rules.pool_names)
        accuracy = argmax_accuracy(head, feats[rows], data.correct[rows], rules)
        per_bench[name] = {"items": int(rows.sum()), "accuracy": accuracy,
                           "best_single": base["best_single"], "oracle": base["oracle"],
                           "random": base["random"],
                           "gap_closed": gap_closed(accuracy, base["best_single"]["accuracy"],
                                                    base["oracle"])}
    mean = {key: float(np.mean([e[key] for e in per_bench.values()]))
            for key in ("accuracy", "oracle", "random")}
    mean["best_single"] = float(np.mean([e["best_single"]["accuracy"]
                                         for e in per_bench.values()]))
    mean["gap_closed"] = gap_closed(mean["accuracy"], mean["best_single"], mean["oracle"])
    return {"per_benchmark": per_bench, "mean": mean}


def run_bench(options: BenchOptions, base: Competition,
              on_generation: Callable[[dict], None] | None = None) -> dict[str, Any]:
    """Build, answer, train and score; returns the report (JSON-ready)."""
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="tinyrouter-bench-") as tmp:
        work = Path(tmp)
        rules = competition_for_encoder(make_tiny(work / "encoder", seed=0), base)
        with serve_simulator(bundled_simulator(rules, seed=0)) as url:
            train_rows, eval_rows = demo_rows(rules, pool_client_factory(url, None, rules),
                                              options.limit)
        answered = time.monotonic()
        encoder = load_encoder(str(work / "encoder"), rules, device="cpu")
        data, held_out = TrainingSet.of(train_rows, rules), TrainingSet.of(eval_rows, rules)
        config = TrainConfig.resolve(rules, data.benchmarks, seed=options.seed,
                                     encoder=str(work / "encoder"), **options.training)
        featurizer = encoder_featurizer(encoder, data, rules)
        trained = time.monotonic()
        summary = run_training(work / RUN_NAME, config, data, featurizer, rules,
                               on_generation=on_generation)
        train_seconds = time.monotonic() - trained
        head, scales = read_weights(work / RUN_NAME / BEST_FILE, rules)
        eval_feats = encoder_featurizer(encoder, held_out, rules).features(
            np.arange(len(held_out.rows)), scales)
        report = routing_report(head, eval_feats, held_out, rules)
        train_feats = featurizer.features(np.arange(len(data.rows)), scales)
        report["train"] = routing_report(head, train_feats, data, rules)["mean"]
    report.update(
        settings={k: v for k, v in vars(config).items() if k not in ("encoder", "data", "live",
                                                                     "live_items")}
        | {"benchmarks": list(config.benchmarks), "n_params": rules.n_params},
        best_fitness=summary["best_fitness"],
        seconds={"answers": round(answered - started, 1), "training": round(train_seconds, 1),
                 "total": round(time.monotonic() - started, 1)})
    return report


def meets_target(report: dict[str, Any]) -> bool:
    """The training target: beat the best single model by a margin and close half the gap."""
    mean = report["mean"]
    return (mean["accuracy"] >= mean["best_single"] + TARGET_MARGIN
            and (mean["gap_closed"] or 0.0) >= TARGET_SHARE)
