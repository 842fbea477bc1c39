"""Train one routing head with separable CMA-ES, and pack a run into a submission folder.

Fitness is the expected cached accuracy Σ_m p(m|q)·correct(q,m) over a minibatch shared
by every candidate of a generation (common random numbers). correct(q,m) is the cached
answer's grade pulled toward the model's rate on the question's category (`shrink`), so the
head is rewarded for who is good at what rather than for which answers happened to land.
Resuming replays the recorded fitness values through a fresh optimiser with the same seed,
which rebuilds its state exactly without pickling it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Protocol

import cma
import numpy as np

from evaluator import __version__
from evaluator.answers import LEDGER_FILE, data_path, read_answered
from evaluator.attempts import format_time, read_attempts
from evaluator.errors import TrainingError
from evaluator.files import dumps, write_json
from evaluator.gates import next_generation
from evaluator.pool.ledger import verify_ledger
from evaluator.rules import NAME_PATTERN, OFFICIAL, Competition
from evaluator.submission import (
    read_weights,
    tensors_from_theta,
    theta_from_tensors,
    write_submission,
    write_weights,
)
from evaluator.types import AnsweredItem

log = logging.getLogger(__name__)

OPTIMIZER_NAME = "sep-cma-es"
BEST_FILE = "best.safetensors"
HISTORY_FILE = "history.json"
SUMMARY_FILE = "summary.json"
CHECKPOINT_FILE = "checkpoint.json"
CHECKPOINT_FORMAT = 1


class Featurizer(Protocol):
    """Head-input features of the training items under a θ's SVF scales."""

    def features(self, index: np.ndarray, scales: np.ndarray) -> np.ndarray:
        """(len(index), hidden) L2-normalised features of items[index]."""


@dataclass(frozen=True)
class TrainConfig:
    benchmarks: tuple[str, ...]
    generations: int
    popsize: int
    sigma0: float
    minibatch: int
    seed: int = 0
    scales_step: float = OFFICIAL.train_scales_step
    shrink: float = OFFICIAL.train_shrink
    encoder: str = ""
    data: str = ""
    live: bool = False
    live_items: int = 0  # live questions per benchmark and generation, with `live`

    def settings(self) -> dict[str, Any]:
        """What must match for a resume to continue the same run (not the length)."""
        data = asdict(self)
        data.pop("generations")
        data["benchmarks"] = list(self.benchmarks)
        return data


@dataclass
class TrainingSet:
    """All training rows of the run, in benchmark order, with their correctness matrix."""

    rows: list[AnsweredItem]
    benchmark_of: np.ndarray
    correct: np.ndarray = field(repr=False)
    benchmarks: tuple[str, ...]

    def targets(self, shrink: float) -> np.ndarray:
        """Correctness pulled toward each (benchmark, category)'s mean: (1 − s)·c + s·mean.

        One cached answer is a single draw of the model's skill on such a question; the
        category's rate on the train rows is the better guess for the next question like it.
        Rows without a category share their benchmark's rate.
        """
        groups: dict[tuple[str, str], list[int]] = {}
        for i, row in enumerate(self.rows):
            groups.setdefault((row.item.benchmark, row.item.category), []).append(i)
        means = np.empty_like(self.correct, dtype=np.float64)
        for rows in groups.values():
            means[rows] = self.correct[rows].mean(axis=0)
        return (1 - shrink) * self.correct + shrink * means

    def fingerprint(self) -> str:
        digest = hashlib.sha256()
        for row in self.rows:
            digest.update(f"{row.item.benchmark}/{row.item.id}/{row.item.category}\n".encode())
        digest.update(np.ascontiguousarray(self.correct).tobytes())
        return digest.hexdigest()


# ---------------------------------------------------------------- data

def check_shrink(shrink: float) -> None:
    """`shrink` weighs a category's rate against each answer's grade: it must lie in 0..1."""
    if not 0 <= shrink <= 1:
        raise TrainingError(f"--shrink {shrink} must lie between 0 and 1")


def read_training_rows(path: Path, rules: Competition = OFFICIAL) -> list[AnsweredItem]:
    """The rows `tinyrouter collect` wrote to one benchmark's file, for the rules' pool."""
    if not path.is_file():
        raise TrainingError(f"no training data at {path}; run `tinyrouter collect` first")
    rows = read_answered(path, rules)
    if not rows:
        raise TrainingError(f"{path} holds no training rows")
    return rows


def load_training_set(data_dir: str | Path, benchmarks: Sequence[str],
                      rules: Competition = OFFICIAL) -> TrainingSet:
    unknown = sorted(set(benchmarks) - set(rules.benchmarks))
    if unknown or not benchmarks or len(set(benchmarks)) != len(benchmarks):
        raise TrainingError(f"--benchmarks {','.join(benchmarks)}: name each once, from "
                            f"{','.join(rules.benchmarks)}")
    rows, owner = [], []
    for b, name in enumerate(benchmarks):
        part = read_training_rows(data_path(data_dir, name), rules)
        rows += part
        owner += [b] * len(part)
    correct = np.array([row.correct_vector(rules.pool_names) for row in rows])
    return TrainingSet(rows, np.array(owner), correct, tuple(benchmarks))


# ---------------------------------------------------------------- fitness

def model_probabilities(head: np.ndarray, feats: np.ndarray, n_models: int) -> np.ndarray:
    """Softmax over the model rows of the head: (items, n_models)."""
    logits = feats @ head[:n_models].T
    logits -= logits.max(axis=1, keepdims=True)
    p = np.exp(logits)
    return p / p.sum(axis=1, keepdims=True)


def expected_accuracy(head: np.ndarray, feats: np.ndarray, correct: np.ndarray) -> float:
    """Mean over items of Σ_m p(m|q)·correct(q,m)."""
    return float((model_probabilities(head, feats, correct.shape[1]) * correct).sum(1).mean())


def argmax_accuracy(head: np.ndarray, feats: np.ndarray, correct: np.ndarray) -> float:
    """Cached accuracy of the evaluation's decision: the argmax model's answer."""
    picks = (feats @ head[:correct.shape[1]].T).argmax(axis=1)
    return float(correct[np.arange(len(picks)), picks].mean())


def minibatch(data: TrainingSet, generation: int, seed: int, size: int) -> np.ndarray:
    """Indices of one generation's batch: an equal share per benchmark, without replacement."""
    rng = np.random.default_rng([seed, generation])
    parts = []
    share = max(1, size // len(data.benchmarks))
    for b in range(len(data.benchmarks)):
        pool = np.flatnonzero(data.benchmark_of == b)
        parts.append(rng.choice(pool, size=min(share, len(pool)), replace=False))
    return np.sort(np.concatenate(parts))


def evaluate_population(thetas: Sequence[np.ndarray], index: np.ndarray, targets: np.ndarray,
                        featurizer: Featurizer, rules: Competition) -> np.ndarray:
    """Each θ's expected accuracy on items[index], against `targets` (TrainingSet.targets)."""
    correct = targets[index]
    values = []
    for theta in thetas:
        head, scales = tensors_from_theta(np.asarray(theta, dtype=np.float32), rules)
        values.append(expected_accuracy(head, featurizer.features(index, scales), correct))
    return np.array(values)


# ---------------------------------------------------------------- optimiser

def initial_theta(rules: Competition) -> np.ndarray:
    """W = 0 (uniform routing) and scales = 1 (the encoder unchanged)."""
    return theta_from_tensors(np.zeros(rules.head_shape, np.float32),
                              np.ones(rules.svf_scale_count, np.float32)).astype(np.float64)


def make_optimizer(config: TrainConfig, rules: Competition) -> cma.CMAEvolutionStrategy:
    # pycma reads seed 0 as "from the clock", so the run's seed is shifted by one.
    stds = np.concatenate([np.ones(rules.n_head_params),
                           np.full(rules.svf_scale_count, config.scales_step)])
    options = {"CMA_diagonal": True, "popsize": config.popsize, "seed": config.seed + 1,
               "CMA_stds": stds, "verbose": -9, "tolfun": 0, "tolflatfitness": 10**9,
               "tolfunhist": 0, "tolstagnation": 10**9, "tolx": 0}
    return cma.CMAEvolutionStrategy(initial_theta(rules), config.sigma0, options)


def _state_digest(es: cma.CMAEvolutionStrategy) -> str:
    return hashlib.sha256(np.asarray(es.mean, dtype=np.float64).tobytes()).hexdigest()


def _step(es: cma.CMAEvolutionStrategy, fitness: Callable[[list], np.ndarray]) -> np.ndarray:
    """One ask/evaluate/tell; the evaluation cannot disturb pycma's global random stream."""
    thetas = es.ask()
    state = np.random.get_state()
    try:
        values = np.asarray(fitness(thetas), dtype=np.float64)
    finally:
        np.random.set_state(state)
    es.tell(thetas, list(-values))  # pycma minimises
    return values


# ---------------------------------------------------------------- run directory

def _read_json(path: Path, what: str) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise TrainingError(f"{path.parent} has no {path.name}: {what}") from exc
    except (OSError, ValueError) as exc:
        raise TrainingError(f"{path} is unreadable or corrupt ({exc}); start a new run") from exc


def load_checkpoint(run_dir: Path, config: TrainConfig, data: TrainingSet) -> dict[str, Any]:
    ckpt = _read_json(run_dir / CHECKPOINT_FILE, "nothing to resume")
    told = ckpt.get("told") if isinstance(ckpt, dict) else None
    if (ckpt.get("format") != CHECKPOINT_FORMAT or not isinstance(told, list)
            or not all(isinstance(g, list) and len(g) == config.popsize for g in told)):
        raise TrainingError(f"{run_dir / CHECKPOINT_FILE} is corrupt; start a new run")
    if ckpt.get("settings") != config.settings():
        raise TrainingError(f"{run_dir} was trained with other settings {ckpt.get('settings')}; "
                            "resume with the same options or pick another --run-name")
    if ckpt.get("data_fingerprint") != data.fingerprint():
        raise TrainingError(f"{run_dir} was trained on other data; resume with the same --data")
    return ckpt


def replay(es: cma.CMAEvolutionStrategy, ckpt: dict[str, Any]) -> None:
    """Rebuild the optimiser's state from the fitness values it was told."""
    for values in ckpt["told"]:
        es.tell(es.ask(), [-float(v) for v in values])
    if _state_digest(es) != ckpt.get("digest"):
        raise TrainingError("the checkpoint does not reproduce its run (corrupt, or another "
                            "version of pycma); start a new run")


def prepare_run_dir(run_dir: Path, resume: bool, ledger_source: Path | None) -> None:
    if resume:
        return
    if run_dir.exists() and any(run_dir.iterdir()):
        raise TrainingError(f"{run_dir} already holds a run; pass --resume to continue it "
                            "or choose another --run-name")
    run_dir.mkdir(parents=True, exist_ok=True)
    if ledger_source is not None and ledger_source.is_file():
        # The run's ledger starts as the collection's; live training appends to it.
        shutil.copyfile(ledger_source, run_dir / LEDGER_FILE)


def save_state(run_dir: Path, es: cma.CMAEvolutionStrategy, config: TrainConfig,
               data: TrainingSet, told: list[list[float]], history: list[dict],
               rules: Competition) -> None:
    head, scales = tensors_from_theta(np.asarray(es.mean, dtype=np.float32), rules)
    tmp = run_dir / f".{BEST_FILE}.tmp"
    write_weights(tmp, head, scales)
    tmp.replace(run_dir / BEST_FILE)
    write_json(run_dir / HISTORY_FILE, {"format": CHECKPOINT_FORMAT, "generations": history})
    write_json(run_dir / CHECKPOINT_FILE, {
        "format": CHECKPOINT_FORMAT, "settings": config.settings(),
        "data_fingerprint": data.fingerprint(), "told": told, "digest": _state_digest(es)})


def run_training(run_dir: str | Path, config: TrainConfig, data: TrainingSet,
                 featurizer: Featurizer, rules: Competition = OFFICIAL, resume: bool = False,
                 ledger_source: Path | None = None,
                 on_generation: Callable[[dict], None] | None = None,
                 live: LiveFitness | None = None) -> dict[str, Any]:
    """Train to `config.generations` (continuing a checkpoint with `resume`); returns the summary.

    With `config.live`, each candidate's fitness also counts its live accuracy, weighted as
    the score weighs live against cached accuracy; `live` plays the questions.
    """
    run_dir = Path(run_dir)
    if config.live and live is None:
        raise TrainingError("live training needs a pool to play questions through")
    if not NAME_PATTERN.match(run_dir.name):
        raise TrainingError(f"run name {run_dir.name!r} must match {NAME_PATTERN.pattern}")
    prepare_run_dir(run_dir, resume, ledger_source)
    log.debug("training %s: %s on %d rows", run_dir, config, len(data.rows))
    es = make_optimizer(config, rules)
    told: list[list[float]] = []
    history: list[dict] = []
    if resume:
        ckpt = load_checkpoint(run_dir, config, data)
        replay(es, ckpt)
        told = ckpt["told"]
        history = _read_json(run_dir / HISTORY_FILE, "nothing to resume")["generations"]
    start = time.monotonic() - (history[-1]["seconds"] if history else 0.0)
    targets = data.targets(config.shrink)
    for generation in range(len(told), config.generations):
        index = minibatch(data, generation, config.seed, config.minibatch)
        extra: dict[str, float] = {}

        def fitness(thetas: list, ix: np.ndarray = index, g: int = generation,
                    extra: dict = extra) -> np.ndarray:
            cached = evaluate_population(thetas, ix, targets, featurizer, rules)
            if not config.live:
                return cached
            played = live(thetas, g)
            extra["live_mean"] = float(played.mean())
            w = live_weight(rules)
            return (1 - w) * cached + w * played

        values = _step(es, fitness)
        told.append([float(v) for v in values])
        best = max(float(values.max()), history[-1]["best"] if history else -np.inf)
        history.append({"generation": generation, "mean": float(values.mean()),
                        "max": float(values.max()), "best": best, **extra,
                        "seconds": round(time.monotonic() - start, 3)})
        save_state(run_dir, es, config, data, told, history, rules)
        if on_generation:
            on_generation(history[-1])
    if not history:
        raise TrainingError("no generation was trained; ask for at least one (--generations)")
    summary = summarize(run_dir, config, data, featurizer, history, rules)
    write_json(run_dir / SUMMARY_FILE, summary)
    return summary


def summarize(run_dir: Path, config: TrainConfig, data: TrainingSet, featurizer: Featurizer,
              history: list[dict], rules: Competition) -> dict[str, Any]:
    """The run's settings and how its final head does on each benchmark's training rows."""
    head, scales = read_weights(run_dir / BEST_FILE, rules)
    feats = featurizer.features(np.arange(len(data.rows)), scales)
    per_bench = {}
    for b, name in enumerate(data.benchmarks):
        rows = data.benchmark_of == b
        per_bench[name] = {"items": int(rows.sum()),
                           "expected_acc": expected_accuracy(head, feats[rows], data.correct[rows]),
                           "argmax_acc": argmax_accuracy(head, feats[rows], data.correct[rows])}
    return {"format": CHECKPOINT_FORMAT, "run_name": run_dir.name,
            "benchmarks": list(data.benchmarks), "pool": list(rules.pool_names),
            "n_params": rules.n_params, "encoder": config.encoder, "data": config.data,
            "live": config.live, "minibatch": config.minibatch,
            "scales_step": config.scales_step, "shrink": config.shrink,
            "optimizer": {"name": OPTIMIZER_NAME, "popsize": config.popsize,
                          "sigma0": config.sigma0, "generations": len(history),
                          "seed": config.seed},
            "best_fitness": history[-1]["best"], "final_mean_fitness": history[-1]["mean"],
            "seconds": history[-1]["seconds"], "train": per_bench,
            "tinyrouter_version": __version__}


# ---------------------------------------------------------------- pack

SPARK = "▁▂▃▄▅▆▇█"
SPARK_WIDTH = 60


def sparkline(values: Sequence[float], width: int = SPARK_WIDTH) -> str:
    """The values as one line of block characters, resampled to at most `width`."""
    if len(values) > width:
        values = [values[round(i * (len(values) - 1) / (width - 1))] for i in range(width)]
    lo, hi = min(values), max(values)
    span = (hi - lo) or 1.0
    return "".join(SPARK[round((v - lo) / span * (len(SPARK) - 1))] for v in values)


def render_readme(login: str, generation: int, summary: dict[str, Any],
                  history: list[dict], cost_usd: float) -> str:
    """The submission's README: the run's settings, how it did, and its fitness curve."""
    opt = summary["optimizer"]
    step = max(1, len(history) // 10)
    shown = history[::step] + ([history[-1]] if (len(history) - 1) % step else [])
    lines = [f"# {login} — generation {generation}", "",
             f"Trained with `tinyrouter train` ({opt['name']}, population {opt['popsize']}, "
             f"σ0 {opt['sigma0']}, {opt['generations']} generations, seed {opt['seed']}) "
             f"on {', '.join(summary['benchmarks'])}; minibatch {summary['minibatch']}, "
             f"{summary['seconds']:.0f} s, data cost ${cost_usd:.4f}.", "",
             "## Fitness (expected cached accuracy on the training minibatch)", "",
             f"Each cached answer's grade is blended with its model's rate on the question's "
             f"category at weight {summary.get('shrink', 0.0)}.", "",
             f"    best {sparkline([h['best'] for h in history])}",
             f"    mean {sparkline([h['mean'] for h in history])}", "",
             "| generation | mean | max | best |", "|---:|---:|---:|---:|"]
    lines += [f"| {h['generation']} | {h['mean']:.4f} | {h['max']:.4f} | {h['best']:.4f} |"
              for h in shown]
    lines += ["", "## Final head on the training data", "",
              "| benchmark | items | expected accuracy | argmax accuracy |", "|---|---:|---:|---:|"]
    lines += [f"| {name} | {t['items']} | {t['expected_acc']:.4f} | {t['argmax_acc']:.4f} |"
              for name, t in summary["train"].items()]
    return "\n".join(lines) + "\n"


RECEIPT_MARGIN = 512  # bytes for the fields write_submission adds


def receipt_fields(summary: dict[str, Any], history: list[dict], cost_usd: float,
                   ledger_head: str, created_at: str) -> dict[str, Any]:
    """The receipt minus what write_submission fills in from the files themselves."""
    opt = summary["optimizer"]
    return {"benchmarks": summary["benchmarks"],
            "optimizer": {k: opt[k] for k in ("name", "popsize", "sigma0", "seed")}
            | {"generations": len(history)},
            "fitness_history": [{k: (h[k] if k == "generation" else round(h[k], 6))
                                 for k in ("generation", "mean", "max", "best")}
                                for h in history],
            "total_cost_usd": round(cost_usd, 6), "ledger_head": ledger_head,
            "tinyrouter_version": __version__, "created_at": created_at}


def pack(run_dir: str | Path, login: str, repo_dir: str | Path = ".",
         rules: Competition = OFFICIAL, created_at: str | None = None) -> Path:
    """Write the run's head as submissions/<login>/<next generation>/, whole or not at all."""
    run_dir = Path(run_dir)
    if not NAME_PATTERN.match(login):
        raise TrainingError(f"{login!r} is not a valid GitHub login ({NAME_PATTERN.pattern})")
    summary = _read_json(run_dir / SUMMARY_FILE, "the run has not finished a generation")
    history = _read_json(run_dir / HISTORY_FILE, "the run has not finished a generation")
    history = history.get("generations") if isinstance(history, dict) else None
    if not isinstance(history, list) or len(history) < rules.receipt_min_fitness_entries:
        raise TrainingError(f"{run_dir} has {len(history or [])} finished generation(s); a "
                            f"receipt needs at least {rules.receipt_min_fitness_entries}: "
                            "continue it with `tinyrouter train --resume --generations N`")
    if summary.get("pool") != list(rules.pool_names) or summary.get("n_params") != rules.n_params:
        raise TrainingError(f"{run_dir} was trained for another pool or head size than these "
                            "rules (check --competition)")
    head, scales = read_weights(run_dir / BEST_FILE, rules)
    if not (run_dir / LEDGER_FILE).is_file():
        raise TrainingError(f"{run_dir} has no {LEDGER_FILE}: train on data collected with "
                            "`tinyrouter collect`, whose ledger proves the receipt's cost")
    ledger = verify_ledger(run_dir / LEDGER_FILE)
    if ledger.total_cost_usd <= rules.receipt_min_cost_usd:
        raise TrainingError(f"the run's ledger records ${ledger.total_cost_usd}; a receipt "
                            f"needs a cost above ${rules.receipt_min_cost_usd}")
    repo = Path(repo_dir)
    generation = next_generation(repo, login, read_attempts(repo))
    created_at = created_at or format_time(datetime.now(timezone.utc))
    fields = receipt_fields(summary, history, ledger.total_cost_usd, ledger.head, created_at)
    size = len(dumps(fields)) + RECEIPT_MARGIN
    if size > rules.max_receipt_bytes:
        raise TrainingError(f"{len(history)} generations make a receipt of about {size} bytes, "
                            f"over the {rules.max_receipt_bytes}-byte cap; train a new run "
                            "with fewer --generations")
    readme = render_readme(login, generation, summary, history, ledger.total_cost_usd)
    return write_submission(repo, login, generation, head, scales, fields, readme, rules)



# ---------------------------------------------------------------- live fitness

LiveFitness = Callable[[Sequence[np.ndarray], int], np.ndarray]
LIVE_STREAM = 1  # keeps live draws apart from the minibatch's random stream


def live_weight(rules: Competition) -> float:
    """Live accuracy's share of the fitness: as the score weighs it against cached accuracy."""
    return rules.weight_live / (rules.weight_cached + rules.weight_live)


def live_items(data: TrainingSet, generation: int, seed: int, per_benchmark: int):
    """One generation's live questions, per benchmark, shared by every candidate."""
    rng = np.random.default_rng([seed, generation, LIVE_STREAM])
    picked = {}
    for b, name in enumerate(data.benchmarks):
        pool = np.flatnonzero(data.benchmark_of == b)
        chosen = rng.choice(pool, size=min(per_benchmark, len(pool)), replace=False)
        picked[name] = [data.rows[i].item for i in np.sort(chosen)]
    return picked


def pool_live_fitness(data: TrainingSet, encoder: Any, pool_url: str | None, ledger: Path,
                      rules: Competition, seed: int, per_benchmark: int) -> LiveFitness:
    """Live accuracy of each candidate's argmax policy through the multi-turn loop, ledgered."""
    import asyncio

    from evaluator.benchmarks import get_benchmark
    from evaluator.coordinator import Policy
    from evaluator.pool.client import OpenRouterClient
    from evaluator.pool.ledger import Ledger
    from evaluator.session import run_sessions

    policy, book = Policy(encoder, rules), Ledger(ledger)

    async def score(theta: np.ndarray, picked: dict, client: Any) -> float:
        correct = []
        for name, items in picked.items():
            bench = get_benchmark(name)
            played = await run_sessions(items, bench, policy.bind(theta), client, rules)
            answered = [t for t in played if t.answer is not None]
            grades = bench.grade_many([(t.answer, t.item.reference) for t in answered])
            correct += [g.correct for g in grades] + [False] * (len(played) - len(answered))
        return float(np.mean(correct))

    def fitness(thetas: Sequence[np.ndarray], generation: int) -> np.ndarray:
        picked = live_items(data, generation, seed, per_benchmark)

        async def play() -> list[float]:
            async with OpenRouterClient(base_url=pool_url, rules=rules, ledger=book) as client:
                return list(await asyncio.gather(*(score(t, picked, client) for t in thetas)))

        return np.array(asyncio.run(play()))

    return fitness


# ---------------------------------------------------------------- encoder

def encoder_featurizer(encoder: str | Any, data: TrainingSet, rules: Competition) -> Featurizer:
    """Features through the coordinator's frozen-prefix cache of each turn-1 transcript.

    `encoder` is a hub id, a local folder, or an already loaded coordinator encoder.
    """
    from evaluator.coordinator import CachedFeaturizer, load_encoder
    from evaluator.session import coordinator_transcript

    if isinstance(encoder, str):
        encoder = load_encoder(encoder, rules=rules)
    transcripts = [coordinator_transcript(row.item.prompt, []) for row in data.rows]
    return CachedFeaturizer(encoder, transcripts)
