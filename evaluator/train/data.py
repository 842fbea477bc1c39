"""Training data: the rows `tinyrouter collect` wrote (evaluator.answered), and the training set.

Each row is an `AnsweredItem`: a public train item with every pool model's graded Worker
answer. Here they are read per benchmark, split into held-out and training rows, batched and
held as arrays for the fitness.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from evaluator.answered import read_answered
from evaluator.errors import TrainingError
from evaluator.rules import Competition
from evaluator.types import AnsweredItem

LEDGER_FILE = "ledger.jsonl"  # the cost ledger beside collected data, and in every run folder
HOLDOUT_STREAM = 2  # keeps the held-out draw apart from the minibatches' random stream
ASIDE_STREAM = 3  # and the rows set aside to choose the generation by


def data_path(data_dir: str | Path, benchmark: str) -> Path:
    return Path(data_dir) / f"{benchmark}.jsonl"


def read_training_rows(path: Path, rules: Competition) -> list[AnsweredItem]:
    """The rows `tinyrouter collect` wrote to one benchmark's file, for the rules' pool."""
    if not path.is_file():
        raise TrainingError(f"no training data at {path}; run `tinyrouter collect` first")
    rows = read_answered(path, rules)
    if not rows:
        raise TrainingError(f"{path} holds no training rows")
    return rows


@dataclass
class TrainingSet:
    """Training rows in benchmark order, with their correctness matrix (rows × pool models)."""

    rows: list[AnsweredItem]
    benchmark_of: np.ndarray
    correct: np.ndarray = field(repr=False)
    benchmarks: tuple[str, ...]

    @classmethod
    def of(cls, rows: Sequence[AnsweredItem], rules: Competition,
           benchmarks: Sequence[str] | None = None) -> TrainingSet:
        """Rows (any order) as a training set; benchmarks in the given order, else the rules'."""
        present = {r.item.benchmark for r in rows}
        benchmarks = tuple(benchmarks or (b for b in rules.benchmarks if b in present))
        ordered = sorted(rows, key=lambda r: benchmarks.index(r.item.benchmark))
        owner = np.array([benchmarks.index(r.item.benchmark) for r in ordered], dtype=np.int64)
        correct = np.array([r.correct_vector(rules.pool_names) for r in ordered])
        return cls(ordered, owner, correct.reshape(len(ordered), rules.n_models), benchmarks)

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

    def subset(self, index: np.ndarray) -> TrainingSet:
        """The rows `index` names (sorted indices keep the benchmark order)."""
        index = np.sort(np.asarray(index, dtype=np.int64))
        return TrainingSet([self.rows[i] for i in index], self.benchmark_of[index],
                           self.correct[index], self.benchmarks)

    def fingerprint(self) -> str:
        digest = hashlib.sha256()
        for row in self.rows:
            digest.update(f"{row.item.benchmark}/{row.item.id}/{row.item.category}\n".encode())
        digest.update(np.ascontiguousarray(self.correct).tobytes())
        return digest.hexdigest()


def load_training_set(data_dir: str | Path, benchmarks: Sequence[str],
                      rules: Competition) -> TrainingSet:
    unknown = sorted(set(benchmarks) - set(rules.benchmarks))
    if unknown or not benchmarks or len(set(benchmarks)) != len(benchmarks):
        raise TrainingError(f"--benchmarks {','.join(benchmarks)}: name each once, from "
                            f"{','.join(rules.benchmarks)}")
    rows = [row for name in benchmarks for row in read_training_rows(data_path(data_dir, name),
                                                                       rules)]
    return TrainingSet.of(rows, rules, benchmarks)


# A king whose receipt names more than this share of a miner's rows as never trained on is not
# believed: holding them all out would leave the challenger too little to train on.
KINGS_HELD_OUT_MAX = 0.5


def check_kings_held_out(data: TrainingSet, kings: dict[str, list[str]]) -> None:
    """TrainingError when the king's declared held-out ids cover more than KINGS_HELD_OUT_MAX
    of this data's rows of a benchmark (a receipt its miner wrote: `--holdout-king` must not
    let a king starve its challengers of training rows)."""
    for b, name in enumerate(data.benchmarks):
        ids = {data.rows[i].item.id for i in np.flatnonzero(data.benchmark_of == b)}
        named = ids & set(kings.get(name) or ())
        if ids and len(named) > KINGS_HELD_OUT_MAX * len(ids):
            raise TrainingError(
                f"the king's receipt names {len(named)} of your {len(ids)} {name} rows as never "
                f"trained on, more than {KINGS_HELD_OUT_MAX:.0%}: holding them out would leave "
                "too little to train on; train without --holdout-king")


def split_holdout(data: TrainingSet, share: float, seed: int, rules: Competition,
                  also: dict[str, list[str]] | None = None
                  ) -> tuple[TrainingSet, dict[str, list[str]]]:
    """(the rows to train on, the held-out item ids per benchmark): a seeded `share` of each
    benchmark's rows is kept out, and the rows whose ids `also` names (the king's held-out
    rows, so `score --king` can compare on rows neither head saw), leaving at least one row
    to train on."""
    rng = np.random.default_rng([seed, HOLDOUT_STREAM])
    held: dict[str, list[str]] = {}
    keep: list[AnsweredItem] = []
    for b, name in enumerate(data.benchmarks):
        rows = np.flatnonzero(data.benchmark_of == b)
        n = min(round(share * len(rows)), len(rows) - 1)
        chosen = set(rng.choice(rows, size=n, replace=False).tolist()) if n > 0 else set()
        named = set((also or {}).get(name) or ())
        extra = [i for i in rows.tolist() if data.rows[i].item.id in named and i not in chosen]
        chosen |= set(extra[:max(0, len(rows) - 1 - len(chosen))])
        held[name] = sorted(data.rows[i].item.id for i in chosen)
        keep += [data.rows[i] for i in rows if i not in chosen]
    return TrainingSet.of(keep, rules, data.benchmarks), held


def rows_with_ids(data_dir: str | Path, ids: dict[str, list[str]],
                  rules: Competition) -> list[AnsweredItem]:
    """The collected rows of the named items, per benchmark; an id the folder lacks is an error."""
    found = []
    for bench, wanted in ids.items():
        by_id = {row.item.id: row for row in read_training_rows(data_path(data_dir, bench), rules)}
        missing = [i for i in wanted if i not in by_id]
        if missing:
            raise TrainingError(f"{data_path(data_dir, bench)} lacks {len(missing)} of the run's "
                                f"held-out rows (e.g. {missing[0]!r}); pass the --data folder "
                                "the run was trained on")
        found += [by_id[i] for i in wanted]
    return found


def split_aside(data: TrainingSet, share: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(the rows the search reads, the rows set aside to choose its generation by), as indices
    of `data.rows`: a seeded `share` of each benchmark's rows, leaving at least one to search."""
    rng = np.random.default_rng([seed, ASIDE_STREAM])
    aside = []
    for b in range(len(data.benchmarks)):
        rows = np.flatnonzero(data.benchmark_of == b)
        n = min(round(share * len(rows)), len(rows) - 1)
        aside += rng.choice(rows, size=n, replace=False).tolist() if n > 0 else []
    chosen = np.zeros(len(data.rows), dtype=bool)
    chosen[aside] = True
    return np.flatnonzero(~chosen), np.flatnonzero(chosen)


def minibatch(data: TrainingSet, generation: int, seed: int, size: int,
              among: np.ndarray | None = None) -> np.ndarray:
    """Indices of one generation's batch: an equal share per benchmark, without replacement,
    drawn from the rows `among` names (default all)."""
    rng = np.random.default_rng([seed, generation])
    parts = []
    share = max(1, size // len(data.benchmarks))
    allowed = np.ones(len(data.rows), dtype=bool) if among is None else np.isin(
        np.arange(len(data.rows)), among)
    for b in range(len(data.benchmarks)):
        pool = np.flatnonzero((data.benchmark_of == b) & allowed)
        parts.append(rng.choice(pool, size=min(share, len(pool)), replace=False))
    return np.sort(np.concatenate(parts))
