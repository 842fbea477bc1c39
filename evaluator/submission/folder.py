"""A submission folder `submissions/<login>/<generation>/`: read as untrusted data, written whole."""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path, PurePosixPath
from typing import Any

import numpy as np

from evaluator.errors import SubmissionError
from evaluator.files import dumps
from evaluator.rules import (
    README_FILE,
    RECEIPT_FILE,
    RECEIPT_FORMAT,
    WEIGHTS_FILE,
    Competition,
    is_name,
)
from evaluator.store import Store
from evaluator.submission.receipt import Receipt, load_receipt, parse_receipt
from evaluator.submission.weights import read_weights, sha256_file, theta_from_tensors, write_weights


@dataclass
class Submission:
    """A submission folder as untrusted data; its files are parsed on first use."""

    repo: Path
    relpath: str
    rules: Competition

    @property
    def parts(self) -> tuple[str, ...]:
        return PurePosixPath(self.relpath).parts

    @property
    def login(self) -> str:
        return self.parts[1] if len(self.parts) > 1 else ""

    @property
    def generation(self) -> int:
        return int(self.parts[2])

    @property
    def folder(self) -> Path:
        return Path(self.repo) / self.relpath

    @cached_property
    def weights(self) -> tuple[np.ndarray, np.ndarray]:
        return read_weights(self.folder / WEIGHTS_FILE, self.rules)

    @property
    def theta(self) -> np.ndarray:
        return theta_from_tensors(*self.weights)

    @cached_property
    def receipt(self) -> Receipt:
        return load_receipt(self.folder / RECEIPT_FILE, self.rules)


def write_submission(repo_dir: str | Path, login: str, generation: int, head: np.ndarray,
                     scales: np.ndarray, receipt_fields: dict[str, Any], rules: Competition,
                     readme: str | None = None) -> Path:
    """Write submissions/<login>/<generation>/ whole or not at all; returns the folder.

    `receipt_fields` gives everything but miner, generation, n_params, pool, format and
    weights_sha256, which are filled in here so they cannot disagree with the files.
    """
    if not is_name(login):
        raise SubmissionError(f"{login!r} is not a valid GitHub login")
    folder = Store(Path(repo_dir)).submission(login, generation)
    if folder.exists():
        raise SubmissionError(f"{folder} already exists; pick the next generation")
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=folder.parent, prefix=f".{generation}."))
    try:
        write_weights(staging / WEIGHTS_FILE, head, scales)
        receipt = dict(receipt_fields, format=RECEIPT_FORMAT, miner=login, generation=generation,
                       n_params=rules.n_params, pool=list(rules.pool_names),
                       weights_sha256=sha256_file(staging / WEIGHTS_FILE))
        text = dumps(receipt)
        parse_receipt(text, rules)
        (staging / RECEIPT_FILE).write_text(text, encoding="utf-8")
        if readme is not None:
            (staging / README_FILE).write_text(readme, encoding="utf-8")
        os.replace(staging, folder)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return folder
