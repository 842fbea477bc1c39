"""Where the benchmarks' rows come from: pinned hub commits, or local copies, read as streams.

A pin names a dataset's hub repository, the commit to read it at and the files holding
its rows (for LiveCodeBench, the release's file set). Rows come one at a time, a file
and a line (or a parquet batch) after another, so a loader never holds the whole
upstream dataset in memory.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evaluator.errors import BenchmarkError
from evaluator.rules import DATASET_REVISIONS, LIVECODEBENCH_RELEASE

log = logging.getLogger(__name__)


COMMIT = re.compile(r"[0-9a-f]{40}")
PARQUET_BATCH_ROWS = 1024
# release_vN is the first N files of LiveCodeBench's code_generation_lite, as upstream loads it
LIVECODEBENCH_RELEASES = {f"release_v{n}": ("test.jsonl", *(f"test{i}.jsonl" for i in range(2, n + 1)))
                          for n in range(1, 7)}


@dataclass(frozen=True)
class DatasetPin:
    """A dataset at one commit: its hub id, the revision, and the files that hold its rows.

    `files` are glob patterns; with a `release` they are exact names, every one required.
    """

    hub_id: str
    revision: str
    files: tuple[str, ...]
    release: str | None = None

    @property
    def ref(self) -> str:
        release = f" {self.release}" if self.release else ""
        return f"{self.hub_id}@{self.revision}{release}"


MATH500 = DatasetPin("HuggingFaceH4/MATH-500", DATASET_REVISIONS["math500"], ("test.jsonl",))
MMLU = DatasetPin("cais/mmlu", DATASET_REVISIONS["mmlu"], ("all/test-*.parquet", "all/test-*.jsonl"))
LIVECODEBENCH = DatasetPin("livecodebench/code_generation_lite", DATASET_REVISIONS["livecodebench"],
                           LIVECODEBENCH_RELEASES[LIVECODEBENCH_RELEASE], LIVECODEBENCH_RELEASE)


def stream_rows(pin: DatasetPin, source: str | None = None) -> Iterator[dict[str, Any]]:
    """The pinned dataset's rows, one at a time: from the hub (`source` None or the pin's
    hub id) at the pinned commit, or from a local file or folder in the upstream layout."""
    for path in source_files(pin, source):
        yield from read_file(path)


def source_files(pin: DatasetPin, source: str | None) -> list[Path]:
    """The files to read, in order; anything but the pinned dataset or a local copy is refused."""
    if source is None or source == pin.hub_id:
        return _matching(pin, download(pin))
    path = Path(source)
    if path.is_dir():
        return _matching(pin, path)
    if path.is_file() and not pin.release:
        return [path]
    if path.is_file():
        raise BenchmarkError(f"{source} is one file; {pin.ref} is the files "
                             f"{', '.join(pin.files)}: pass the folder holding them")
    raise BenchmarkError(f"{source!r} is neither a local file or folder nor the pinned dataset "
                         f"{pin.ref}")


def _matching(pin: DatasetPin, folder: Path) -> list[Path]:
    if pin.release:  # a release is its whole file set, read in release order
        missing = [name for name in pin.files if not (folder / name).is_file()]
        if missing:
            raise BenchmarkError(f"{folder} is not a copy of {pin.ref}: it lacks "
                                 f"{', '.join(missing)}")
        return [folder / name for name in pin.files]
    files = sorted({f for pattern in pin.files for f in folder.glob(pattern) if f.is_file()})
    if not files:
        raise BenchmarkError(f"no files matching {', '.join(pin.files)} under {folder}")
    return files


def download(pin: DatasetPin) -> Path:
    """A local snapshot of the pinned files, at the pinned commit only."""
    if not COMMIT.fullmatch(pin.revision):
        raise BenchmarkError(f"{pin.hub_id} has no pinned commit ({pin.revision!r}): set its "
                             "40-hex revision in the dataset pins, or pass a local copy")
    try:
        from huggingface_hub import snapshot_download  # slow to import; only for a download

        log.info("downloading %s (%s) from the Hugging Face hub", pin.ref, ", ".join(pin.files))
        return Path(snapshot_download(pin.hub_id, repo_type="dataset", revision=pin.revision,
                                      allow_patterns=list(pin.files)))
    except Exception as exc:
        raise BenchmarkError(f"cannot fetch dataset {pin.ref} ({exc}); pass a local "
                             "file or folder in the upstream format instead") from exc


# Readers: one row at a time ---------------------------------------------------------------


def read_file(path: Path) -> Iterator[dict[str, Any]]:
    """Rows of one .jsonl (a line at a time), .parquet (a batch at a time) or .json file."""
    readers = {".jsonl": _jsonl_rows, ".parquet": _parquet_rows, ".json": _json_rows}
    reader = readers.get(path.suffix.lower())
    if reader is None:
        raise BenchmarkError(f"unsupported file type {path.name} (expected .jsonl, .json, .parquet)")
    try:
        yield from reader(path)
    except (OSError, ValueError, KeyError) as exc:
        raise BenchmarkError(f"cannot read {path}: {exc}") from exc


def _jsonl_rows(path: Path) -> Iterator[dict[str, Any]]:
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if line.strip():
                try:
                    yield json.loads(line)
                except ValueError as exc:
                    raise ValueError(f"line {number}: {exc}") from exc


def _parquet_rows(path: Path) -> Iterator[dict[str, Any]]:
    try:
        import pyarrow.parquet as pq  # heavy; only MMLU's parquet files need it
    except ImportError as exc:
        raise BenchmarkError(f"reading {path.name} needs pyarrow, from the grade extra: "
                             "pip install 'tinyrouter[grade]'") from exc
    for batch in pq.ParquetFile(path).iter_batches(batch_size=PARQUET_BATCH_ROWS):
        yield from batch.to_pylist()


def _json_rows(path: Path) -> Iterator[dict[str, Any]]:
    """A .json file is one document (a list of rows, or {"rows": [...]}): small files only."""
    data = json.loads(path.read_text(encoding="utf-8"))
    yield from data if isinstance(data, list) else data["rows"]
