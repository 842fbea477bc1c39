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
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from evaluator import train
from evaluator.rules import OFFICIAL, Competition
from evaluator.submission import read_weights
from evaluator.types import AnsweredItem

log = logging.getLogger(__name__)

SPLIT_SEED = "bench-training-split-seed-0001"  # fixed, so every run sees the same items
RUN_NAME = "bench"


@dataclass(frozen=True)
class BenchOptions:
    """The training run's settings; None takes the rules' default."""

    generations: int | None = None
    seed: int = 0
    popsize: int | None = None
    sigma0: float | None = None
    minibatch: int | None = None
    scales_step: float | None = None
    shrink: float | None = None
    limit: int | None = None  # train and eval items per benchmark, for a quick look


def demo_rows(rules: Competition, make_client: Callable[[], Any],
              limit: int | None = None) -> tuple[list[AnsweredItem], list[AnsweredItem]]:
    """Every pool model's graded Worker answer to each benchmark's train and eval items."""
    from evaluator.answers import answer_items
    from evaluator.benchmarks.splits import draw_splits, load_items

    train_items, eval_items = [], []
    for bench in rules.benchmarks:
        splits = draw_splits(load_items(bench, "demo"), SPLIT_SEED, rules)
        train_items += list(splits.train[:limit])
        eval_items += list(splits.hidden["eval"][:limit])
    rows = answer_items(train_items + eval_items, make_client, rules)
    return rows[:len(train_items)], rows[len(train_items):]


def training_set(rows: Sequence[AnsweredItem], rules: Competition) -> train.TrainingSet:
    """Rows in benchmark order as a TrainingSet, without a round trip through files."""
    benchmarks = tuple(b for b in rules.benchmarks if any(r.item.benchmark == b for r in rows))
    ordered = sorted(rows, key=lambda r: benchmarks.index(r.item.benchmark))
    owner = np.array([benchmarks.index(r.item.benchmark) for r in ordered])
    correct = np.array([r.correct_vector(rules.pool_names) for r in ordered])
    return train.TrainingSet(ordered, owner, correct, benchmarks)


def routing_report(head: np.ndarray, feats: np.ndarray, data: train.TrainingSet,
                   rules: Competition) -> dict[str, Any]:
    """Argmax cached accuracy per benchmark next to the best single model and the oracle."""
    per_bench = {}
    for b, name in enumerate(data.benchmarks):
        rows = data.benchmark_of == b
        correct = data.correct[rows]
        per_model = correct.mean(axis=0)
        best = int(per_model.argmax())
        per_bench[name] = {
            "items": int(rows.sum()),
            "accuracy": train.argmax_accuracy(head, feats[rows], correct),
            "best_single": {"model": rules.pool_names[best], "accuracy": float(per_model[best])},
            "oracle": float(correct.max(axis=1).mean()),
            "random": float(per_model.mean())}
    for entry in per_bench.values():
        entry["gap_closed"] = gap_closed(entry["accuracy"], entry["best_single"]["accuracy"],
                                         entry["oracle"])
    mean = {key: float(np.mean([e[key] for e in per_bench.values()]))
            for key in ("accuracy", "oracle", "random")}
    mean["best_single"] = float(np.mean([e["best_single"]["accuracy"]
                                         for e in per_bench.values()]))
    mean["gap_closed"] = gap_closed(mean["accuracy"], mean["best_single"], mean["oracle"])
    return {"per_benchmark": per_bench, "mean": mean}


def gap_closed(accuracy: float, best_single: float, oracle: float) -> float | None:
    """The share of the best-single-to-oracle gap the router closes (None without a gap)."""
    gap = oracle - best_single
    return (accuracy - best_single) / gap if gap > 0 else None


def config_for(options: BenchOptions, data: train.TrainingSet, encoder: str,
               rules: Competition) -> train.TrainConfig:
    def pick(value: Any, default: Any) -> Any:
        return default if value is None else value

    return train.TrainConfig(
        benchmarks=data.benchmarks, seed=options.seed, encoder=encoder,
        generations=pick(options.generations, rules.train_generations),
        popsize=pick(options.popsize, rules.train_popsize),
        sigma0=pick(options.sigma0, rules.train_sigma0),
        minibatch=pick(options.minibatch, rules.train_minibatch),
        scales_step=pick(options.scales_step, rules.train_scales_step),
        shrink=pick(options.shrink, rules.train_shrink))


def run_bench(options: BenchOptions = BenchOptions(), base: Competition = OFFICIAL,
              on_generation: Callable[[dict], None] | None = None) -> dict[str, Any]:
    """Build, answer, train and score; returns the report (JSON-ready)."""
    from evaluator.answers import pool_client_factory
    from evaluator.coordinator import competition_for_encoder, load_encoder, make_tiny
    from evaluator.pool.simulator import bundled_simulator, serve_simulator

    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="tinyrouter-bench-") as tmp:
        work = Path(tmp)
        rules = competition_for_encoder(make_tiny(work / "encoder", seed=0), base)
        with serve_simulator(bundled_simulator(seed=0, rules=rules)) as url:
            train_rows, eval_rows = demo_rows(rules, pool_client_factory(url, None, rules),
                                              options.limit)
        answered = time.monotonic()
        encoder = load_encoder(str(work / "encoder"), device="cpu", rules=rules)
        data, held_out = training_set(train_rows, rules), training_set(eval_rows, rules)
        config = config_for(options, data, str(work / "encoder"), rules)
        featurizer = train.encoder_featurizer(encoder, data, rules)
        trained = time.monotonic()
        summary = train.run_training(work / RUN_NAME, config, data, featurizer, rules,
                                     on_generation=on_generation)
        train_seconds = time.monotonic() - trained
        head, scales = read_weights(work / RUN_NAME / train.BEST_FILE, rules)
        eval_feats = train.encoder_featurizer(encoder, held_out, rules).features(
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


def meets_target(report: dict[str, Any], margin: float = 0.05, share: float = 0.5) -> bool:
    """Issue 7's training target: beat the best single by `margin`, close `share` of the gap."""
    mean = report["mean"]
    return (mean["accuracy"] >= mean["best_single"] + margin
            and (mean["gap_closed"] or 0.0) >= share)

