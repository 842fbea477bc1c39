"""Train one routing head with separable CMA-ES: the run, its checkpoints and its summary.

Fitness is the expected cached accuracy against each row's shrunk target (`shrink`), so the
head is rewarded for who is good at what. A share of the rows (`select`) is never read by the
search: a head replaces the kept one only for a lead there beyond chance (train/select.py).
Resuming replays the recorded fitness values through a fresh optimiser with the same seed.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from evaluator import __version__
from evaluator.errors import TrainingError
from evaluator.files import write_json
from evaluator.rules import NAME_RE, TRAIN_STARTS, Competition, is_name
from evaluator.submission.weights import (
    read_weights,
    tensors_from_theta,
    theta_from_tensors,
    write_weights,
)
from evaluator.train.data import LEDGER_FILE, TrainingSet, minibatch, split_aside
from evaluator.train.fitness import (
    Featurizer,
    argmax_accuracy,
    evaluate_population,
    expected_accuracy,
)
from evaluator.train.live import LiveFitness, live_weight
from evaluator.train.roles import role_choices, with_roles
from evaluator.train.select import Chooser, global_random_kept
from evaluator.train.start import fitted_theta, start_targets

if TYPE_CHECKING:
    import cma

log = logging.getLogger(__name__)

OPTIMIZER_NAME = "sep-cma-es"
BEST_FILE = "best.safetensors"
HISTORY_FILE = "history.json"
SUMMARY_FILE = "summary.json"
CHECKPOINT_FILE = "checkpoint.json"
HOLDOUT_FILE = "holdout.json"  # the item ids the run kept out of training, per benchmark
CHECKPOINT_FORMAT = 1


@dataclass(frozen=True)
class TrainConfig:
    """One run's settings. `resolve` fills the rules' defaults and checks every value."""

    benchmarks: tuple[str, ...]
    generations: int
    popsize: int
    sigma0: float
    minibatch: int
    scales_step: float
    shrink: float
    seed: int = 0
    encoder: str = ""
    data: str = ""
    live: bool = False
    live_items: int = 0  # live questions per benchmark and generation, with `live`
    holdout: float = 0.0  # share of each benchmark's rows kept out of training
    select: float = 0.0  # share of the training rows set aside to keep the best generation by
    init: str = ""  # the weights hash of the head training starts from ("": `start`)
    start: str = "fit"  # without init: one of rules.TRAIN_STARTS
    role_rows: int = 0  # training rows the role fit reads (0: the role rows as CMA-ES left them)

    @classmethod
    def resolve(cls, rules: Competition, benchmarks: tuple[str, ...], **given: Any) -> TrainConfig:
        """A config from command-line values: None takes the rules' default, 0 is an error."""
        defaults = {"generations": rules.train_generations, "popsize": rules.train_popsize,
                    "sigma0": rules.train_sigma0, "minibatch": rules.train_minibatch,
                    "scales_step": rules.train_scales_step, "shrink": rules.train_shrink,
                    "select": rules.train_select}
        values = {**defaults, **{k: v for k, v in given.items() if v is not None}}
        config = cls(benchmarks=tuple(benchmarks), **values)
        config.check()
        return config

    def check(self) -> None:
        for name in ("generations", "minibatch", "sigma0", "scales_step"):
            if not getattr(self, name) > 0:
                raise TrainingError(f"--{name.replace('_', '-')} must be positive, "
                                    f"not {getattr(self, name)}")
        if self.popsize < 2:
            raise TrainingError(f"--popsize must be at least 2, not {self.popsize}")
        if not 0 <= self.shrink <= 1:
            raise TrainingError(f"--shrink {self.shrink} must lie between 0 and 1")
        if self.live and self.live_items < 1:
            raise TrainingError("--live-items must be positive")
        if self.role_rows < 0:
            raise TrainingError(f"--role-rows must be 0 (no role fit) or positive, "
                                f"not {self.role_rows}")
        if self.start not in TRAIN_STARTS:
            raise TrainingError(f"--start {self.start!r}: choose from {', '.join(TRAIN_STARTS)}")
        if not 0 <= self.holdout < 1:
            raise TrainingError(f"--holdout {self.holdout} must be at least 0 and below 1")
        if not 0 <= self.select < 1:
            raise TrainingError(f"--select {self.select} must be at least 0 and below 1")

    def settings(self) -> dict[str, Any]:
        """What must match for a resume to continue the same run (not the length)."""
        data = asdict(self)
        data.pop("generations")
        data["benchmarks"] = list(self.benchmarks)
        return data

    def replace(self, **changes: Any) -> TrainConfig:
        return dataclasses.replace(self, **changes)


# ---------------------------------------------------------------- optimiser

def initial_theta(rules: Competition) -> np.ndarray:
    """W = 0 (uniform routing) and scales = 1 (the encoder unchanged)."""
    return theta_from_tensors(np.zeros(rules.head_shape, np.float32),
                              np.ones(rules.svf_scale_count, np.float32)).astype(np.float64)


def make_optimizer(config: TrainConfig, rules: Competition,
                   start: np.ndarray | None = None) -> cma.CMAEvolutionStrategy:
    """Separable CMA-ES around `start` (default `initial_theta`)."""
    # pycma reads seed 0 as "from the clock", so the run's seed is shifted by one.
    stds = np.concatenate([np.ones(rules.n_head_params),
                           np.full(rules.svf_scale_count, config.scales_step)])
    options = {"CMA_diagonal": True, "popsize": config.popsize, "seed": config.seed + 1,
               "CMA_stds": stds, "verbose": -9, "tolfun": 0, "tolflatfitness": 10**9,
               "tolfunhist": 0, "tolstagnation": 10**9, "tolx": 0}
    x0 = initial_theta(rules) if start is None else np.asarray(start, dtype=np.float64)
    import cma  # it loads matplotlib where installed: only a run that trains pays for it

    return cma.CMAEvolutionStrategy(x0, config.sigma0, options)


def _state_digest(es: cma.CMAEvolutionStrategy) -> str:
    return hashlib.sha256(np.asarray(es.mean, dtype=np.float64).tobytes()).hexdigest()


def _step(es: cma.CMAEvolutionStrategy, fitness: Callable[[list], np.ndarray]) -> np.ndarray:
    """One ask/evaluate/tell."""
    thetas = es.ask()
    with global_random_kept():
        values = np.asarray(fitness(thetas), dtype=np.float64)
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


def recorded_seed(run_dir: Path) -> int:
    """The seed a run was trained with, from its checkpoint: a resume draws none of its own."""
    settings = _read_json(run_dir / CHECKPOINT_FILE, "nothing to resume").get("settings") or {}
    if not isinstance(settings.get("seed"), int):
        raise TrainingError(f"{run_dir / CHECKPOINT_FILE} records no seed; start a new run")
    return settings["seed"]


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


def write_head(run_dir: Path, theta: np.ndarray, rules: Competition) -> None:
    """The run's head (BEST_FILE), replaced whole."""
    head, scales = tensors_from_theta(np.asarray(theta, dtype=np.float32), rules)
    tmp = run_dir / f".{BEST_FILE}.tmp"
    write_weights(tmp, head, scales)
    tmp.replace(run_dir / BEST_FILE)


def save_state(run_dir: Path, es: cma.CMAEvolutionStrategy, config: TrainConfig,
               data: TrainingSet, told: list[list[float]], history: list[dict]) -> None:
    write_json(run_dir / HISTORY_FILE, {"format": CHECKPOINT_FORMAT, "generations": history})
    write_json(run_dir / CHECKPOINT_FILE, {
        "format": CHECKPOINT_FORMAT, "settings": config.settings(),
        "data_fingerprint": data.fingerprint(), "told": told, "digest": _state_digest(es)})


def run_training(run_dir: str | Path, config: TrainConfig, data: TrainingSet,
                 featurizer: Featurizer, rules: Competition, resume: bool = False,
                 ledger_source: Path | None = None,
                 on_generation: Callable[[dict], None] | None = None,
                 live: LiveFitness | None = None, heldout: dict[str, list[str]] | None = None,
                 start: np.ndarray | None = None,
                 roles: RoleData | None = None) -> dict[str, Any]:
    """Train to `config.generations` (continuing a checkpoint with `resume`); returns the summary.

    With `config.live`, each candidate's fitness also counts its live accuracy, weighted as
    the score weighs live against cached accuracy; `live` plays the questions. `heldout`:
    the item ids kept out of `data`, recorded for `tinyrouter score`. `start`: the θ to
    start from (`config.init` names its weights hash), else `config.start`'s. `roles`:
    the turn-2 transcripts of `config.role_rows` rows, whose role rows are fitted at the end.
    """
    run_dir = Path(run_dir)
    if config.live and live is None:
        raise TrainingError("live training needs a pool to play questions through")
    if not is_name(run_dir.name):
        raise TrainingError(f"run name {run_dir.name!r} must match {NAME_RE.pattern}")
    if (start is None) != (not config.init):
        raise TrainingError("a start θ and its weights hash (config.init) go together")
    if (roles is None) != (config.role_rows == 0):
        raise TrainingError("a role fit needs the turn-2 transcripts (train.roles) and "
                            "config.role_rows together")
    if (heldout is None) != (config.holdout == 0):
        raise TrainingError("split the held-out rows off first (data.split_holdout) and pass "
                            "their ids, or train with holdout 0")
    prepare_run_dir(run_dir, resume, ledger_source)
    if heldout is not None and not resume:
        write_json(run_dir / HOLDOUT_FILE, {"format": CHECKPOINT_FORMAT, "share": config.holdout,
                                            "seed": config.seed, "ids": heldout})
    log.debug("training %s: %s on %d rows", run_dir, config, len(data.rows))
    search, aside = split_aside(data, config.select, config.seed)
    searched = data.subset(search)
    # the search's targets come from its own rows: the set-aside rows' grades reach it nowhere
    targets = np.zeros_like(data.correct, dtype=np.float64)
    targets[search] = searched.targets(config.shrink)
    if start is None:
        start = start_theta(config, searched, featurizer, search, rules)
    chooser = Chooser(featurizer, data, aside, rules, start=None if config.init else start)
    es = make_optimizer(config, rules, start)
    told: list[list[float]] = []
    history: list[dict] = []
    if resume:
        ckpt = load_checkpoint(run_dir, config, data)
        replay(es, ckpt)
        told = ckpt["told"]
        history = _read_json(run_dir / HISTORY_FILE, "nothing to resume")["generations"]
        chooser.replay(history, lambda: theta_from_tensors(*read_weights(run_dir / BEST_FILE,
                                                                          rules)))
    elif chooser.kept is not None:
        write_head(run_dir, start, rules)
    began = time.monotonic() - (history[-1]["seconds"] if history else 0.0)
    for generation in range(len(told), config.generations):
        index = minibatch(data, generation, config.seed, config.minibatch, among=search)
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
        if chooser.offer(es.mean, generation + 1, extra):
            write_head(run_dir, es.mean, rules)
        history.append({"generation": generation, "mean": float(values.mean()),
                        "max": float(values.max()), "best": best, **extra,
                        "seconds": round(time.monotonic() - began, 3)})
        save_state(run_dir, es, config, data, told, history)
        if on_generation:
            on_generation(history[-1])
    if not history:
        raise TrainingError("no generation was trained; ask for at least one (--generations)")
    if chooser.kept == 0:
        # the start won (it is never a given head): its convex fit again, on every training row
        write_head(run_dir, start_theta(config, data, featurizer, np.arange(len(data.rows)),
                                        rules), rules)
    turns = fit_role_rows(run_dir, featurizer, roles, rules) if roles is not None else None
    summary = summarize(run_dir, config, data, featurizer, history, rules, roles, turns)
    summary["selection"] = chooser.record(config.select)
    write_json(run_dir / SUMMARY_FILE, summary)
    return summary


def start_theta(config: TrainConfig, data: TrainingSet, featurizer: Featurizer,
                index: np.ndarray, rules: Competition) -> np.ndarray:
    """Where `config.start` begins on `data`, whose row k is the featurizer's row index[k]."""
    if config.start == "zero":
        return initial_theta(rules)
    feats = featurizer.features(index, np.ones(rules.svf_scale_count))
    return fitted_theta(feats, start_targets(data, config.shrink) if config.start == "fit"
                        else data.targets(config.shrink), rules)


@dataclass(frozen=True)
class RoleData:
    """The rows the role fit reads (`roles.fit_rows`) and their turn-2 transcripts' featurizer
    (its row k is data.rows[rows[k]])."""

    rows: np.ndarray
    featurizer: Featurizer

    def features(self, featurizer: Featurizer,
                 scales: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The rows' turn-1 and turn-2 features under the scales."""
        return (featurizer.features(self.rows, scales),
                self.featurizer.features(np.arange(len(self.rows)), scales))


def fit_role_rows(run_dir: Path, featurizer: Featurizer, roles: RoleData,
                  rules: Competition) -> tuple[np.ndarray, np.ndarray]:
    """Replace the trained head's role rows by the fit on its own features (train/roles.py);
    the turn-1 and turn-2 features it fitted on (the scales stay, so the summary's too)."""
    head, scales = read_weights(run_dir / BEST_FILE, rules)
    turns = roles.features(featurizer, scales)
    tmp = run_dir / f".{BEST_FILE}.tmp"
    write_weights(tmp, with_roles(head, *turns, rules), scales)
    tmp.replace(run_dir / BEST_FILE)
    return turns


def summarize(run_dir: Path, config: TrainConfig, data: TrainingSet, featurizer: Featurizer,
              history: list[dict], rules: Competition, roles: RoleData | None = None,
              turns: tuple[np.ndarray, np.ndarray] | None = None) -> dict[str, Any]:
    """The run's settings and how its final head does on each benchmark's training rows (with
    `roles` and their features `turns` as the role fit read them, also how often it answers on
    turn 1 and judges on turn 2 on the fit's rows)."""
    head, scales = read_weights(run_dir / BEST_FILE, rules)
    feats = featurizer.features(np.arange(len(data.rows)), scales)
    per_bench = {}
    for b, name in enumerate(data.benchmarks):
        rows = data.benchmark_of == b
        per_bench[name] = {"items": int(rows.sum()),
                           "expected_acc": expected_accuracy(head, feats[rows], data.correct[rows],
                                                             rules),
                           "argmax_acc": argmax_accuracy(head, feats[rows], data.correct[rows],
                                                         rules)}
    if roles is not None and turns is not None:
        turn1, turn2 = turns
        for b, name in enumerate(data.benchmarks):
            mine = data.benchmark_of[roles.rows] == b
            if mine.any():
                per_bench[name]["roles"] = {"rows": int(mine.sum()), **role_choices(
                    head, turn1[mine], turn2[mine], rules)}
    return {"format": CHECKPOINT_FORMAT, "run_name": run_dir.name,
            "benchmarks": list(data.benchmarks), "pool": list(rules.pool_names),
            "n_params": rules.n_params, "encoder": config.encoder, "data": config.data,
            "live": config.live, "minibatch": config.minibatch, "holdout": config.holdout,
            "role_rows": config.role_rows,
            "init_weights_sha256": config.init or None,
            "start": "init" if config.init else config.start,
            "scales_step": config.scales_step, "shrink": config.shrink,
            "optimizer": {"name": OPTIMIZER_NAME, "popsize": config.popsize,
                          "sigma0": config.sigma0, "generations": len(history),
                          "seed": config.seed},
            "best_fitness": history[-1]["best"], "final_mean_fitness": history[-1]["mean"],
            "seconds": history[-1]["seconds"], "train": per_bench,
            "tinyrouter_version": __version__}


def read_holdout(run_dir: str | Path) -> dict[str, list[str]]:
    """The item ids a run kept out of training, per benchmark."""
    run_dir = Path(run_dir)
    data = _read_json(run_dir / HOLDOUT_FILE, "the run kept no held-out rows (it was trained "
                      "with --holdout 0); retrain with a held-out share to score it")
    ids = data.get("ids") if isinstance(data, dict) else None
    if not isinstance(ids, dict) or not all(
            isinstance(v, list) and all(isinstance(i, str) for i in v) for v in ids.values()):
        raise TrainingError(f"{run_dir / HOLDOUT_FILE} is corrupt; retrain the run")
    if not any(ids.values()):
        raise TrainingError(f"{run_dir} kept no held-out rows (too few rows per benchmark); "
                            "collect more data or retrain with a larger --holdout")
    return ids


def read_run(run_dir: str | Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A run's summary and its per-generation fitness history (what pack and score read)."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise TrainingError(f"no run folder {run_dir}: name one under your --experiments folder "
                            "(experiments/<run-name>)")
    summary = _read_json(run_dir / SUMMARY_FILE, "the run has not finished a generation")
    history = _read_json(run_dir / HISTORY_FILE, "the run has not finished a generation")
    history = history.get("generations") if isinstance(history, dict) else None
    if not isinstance(summary, dict) or not isinstance(history, list):
        raise TrainingError(f"{run_dir} holds a corrupt summary or history; start a new run")
    return summary, history
