"""The one small interface every benchmark implements: load rows, render a prompt, grade.

A benchmark turns upstream dataset rows into `Item`s, renders the prompt a pool model
sees (asking for the answer format its grader reads), extracts the answer from a
response and grades it against the item's reference.
"""

from __future__ import annotations

import json
import logging
from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from evaluator.errors import BenchmarkError
from evaluator.types import Item

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Grade:
    """A grading decision: correct or not, what was extracted, why it could not be graded.

    `error` is set only when the case could not be graded at all (then `correct` is False);
    `detail` is a human note on the decision (e.g. which test failed), not part of the record.
    """

    correct: bool
    extracted: str | None = None
    error: str | None = None
    detail: str | None = field(default=None, compare=False)

    def to_dict(self) -> dict[str, Any]:
        return {"correct": self.correct, "extracted": self.extracted, "error": self.error}


class Benchmark(ABC):
    """One benchmark: its upstream source, prompt template, extractor and grader."""

    name: ClassVar[str]
    hub_id: ClassVar[str]
    upstream_files: ClassVar[tuple[str, ...]]

    def load_upstream(self, source: str | None = None) -> list[Item]:
        """Items from the upstream dataset: a hub id (default) or a local file or folder."""
        rows = read_rows(source or self.hub_id, self.upstream_files)
        items = self.items_from_rows(rows)
        if not items:
            raise BenchmarkError(f"{self.name}: no rows found in {source or self.hub_id}")
        ids = [item.id for item in items]
        if len(set(ids)) != len(ids):
            raise BenchmarkError(f"{self.name}: duplicate item ids in {source or self.hub_id}")
        return items

    @abstractmethod
    def items_from_rows(self, rows: list[dict[str, Any]]) -> list[Item]:
        """Map upstream rows (in file order) to items."""

    @abstractmethod
    def render_prompt(self, item: Item) -> str:
        """The question as a pool model sees it, with the answer format the grader reads."""

    @abstractmethod
    def extract(self, response: str) -> str | None:
        """The gradable answer in a response, or None when there is none."""

    @abstractmethod
    def grade(self, response: str, reference: Any) -> Grade:
        """Grade one response; a case that cannot be graded is wrong with an error, never raises."""

    def grade_many(self, pairs: Iterable[tuple[str, Any]], workers: int | None = None
                   ) -> list[Grade]:
        """Grade (response, reference) pairs in order; benchmarks that run code parallelise."""
        return [self.grade(response, reference) for response, reference in pairs]


# Readers for upstream files ---------------------------------------------------------------


def read_rows(source: str, patterns: Sequence[str]) -> list[dict[str, Any]]:
    """Rows from a local file, a local folder (files matching `patterns`) or a hub dataset id."""
    path = Path(source)
    if path.is_file():
        return read_file(path)
    folder = path if path.is_dir() else download(source, patterns)
    files = sorted({f for pattern in patterns for f in folder.glob(pattern) if f.is_file()})
    if not files:
        raise BenchmarkError(f"no files matching {', '.join(patterns)} under {folder}")
    return [row for f in files for row in read_file(f)]


def read_file(path: Path) -> list[dict[str, Any]]:
    """Rows of one .jsonl, .json or .parquet file."""
    suffix = path.suffix.lower()
    try:
        if suffix == ".jsonl":
            with path.open(encoding="utf-8") as handle:
                return [json.loads(line) for line in handle if line.strip()]
        if suffix == ".json":
            data = json.loads(path.read_text(encoding="utf-8"))
            return data if isinstance(data, list) else data["rows"]
        if suffix == ".parquet":
            return read_parquet(path)
    except (OSError, ValueError, KeyError) as exc:
        raise BenchmarkError(f"cannot read {path}: {exc}") from exc
    raise BenchmarkError(f"unsupported file type {path.name} (expected .jsonl, .json, .parquet)")


def read_parquet(path: Path) -> list[dict[str, Any]]:
    import pandas as pd

    try:
        frame = pd.read_parquet(path)
    except ImportError as exc:
        raise BenchmarkError(f"reading {path.name} needs a parquet engine: "
                             "pip install pyarrow") from exc
    return [{key: _plain(value) for key, value in row.items()}
            for row in frame.to_dict(orient="records")]


def _plain(value: Any) -> Any:
    """numpy arrays and scalars from parquet as plain Python values."""
    if hasattr(value, "tolist"):
        return value.tolist()
    return value


def download(repo_id: str, patterns: Sequence[str]) -> Path:
    """A local snapshot of the dataset files of a hub repository."""
    try:
        from huggingface_hub import snapshot_download

        log.info("downloading %s (%s) from the Hugging Face hub", repo_id, ", ".join(patterns))
        return Path(snapshot_download(repo_id, repo_type="dataset",
                                      allow_patterns=list(patterns)))
    except Exception as exc:
        raise BenchmarkError(f"cannot fetch dataset {repo_id!r} ({exc}); pass a local "
                             "file or folder in the upstream format instead") from exc
