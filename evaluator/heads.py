"""Where a head comes from: a training run, a submission folder, a weights file, or the king.

`score`, `diff` and `train --init` take any of them by one argument, so a miner can point at
what they have: `experiments/<run>`, `submissions/<login>/<n>`, a `.safetensors` file, or
`king` (the reigning king's folder on the checked-out main branch).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from evaluator.errors import SubmissionError, UsageError
from evaluator.rules import RECEIPT_FILE, WEIGHTS_FILE, Competition
from evaluator.store import KING_FILE, LEADERBOARD_DIR, Store, submission_path
from evaluator.submission.weights import read_weights, sha256_file, theta_from_tensors

THE_KING = "king"  # the head spec that names the reigning king (not an outcome)
RUN_WEIGHTS = "best.safetensors"  # what a training run keeps (train.run.BEST_FILE)


@dataclass(frozen=True)
class Head:
    """A head and its SVF scales, with where it came from and its weights' hash."""

    label: str
    path: Path
    head: np.ndarray
    scales: np.ndarray
    weights_sha256: str
    run_dir: Path | None = None  # set when the head is a training run's

    @property
    def theta(self) -> np.ndarray:
        return theta_from_tensors(self.head, self.scales)


def weights_of(spec: str, repo: Path) -> tuple[str, Path, Path | None]:
    """(label, weights file, run folder or None) that `spec` names."""
    if spec == THE_KING:
        store = Store(repo)
        if not store.file(KING_FILE).is_file():
            raise UsageError(f"{repo} has no {LEADERBOARD_DIR}/{KING_FILE}: pass --repo with a "
                             "checkout of the competition's main branch")
        king = store.king()
        if king is None:
            raise UsageError(f"{repo} has no king yet ({LEADERBOARD_DIR}/{KING_FILE} names "
                             "none); there is nothing to compare with until one is crowned")
        folder = Store(repo).submission(king.miner, king.generation)
        if not (folder / WEIGHTS_FILE).is_file():
            raise UsageError(f"the king's folder {submission_path(king.miner, king.generation)} "
                             f"is not in {repo}; pull the main branch first")
        return f"the king ({king.miner} generation {king.generation})", folder / WEIGHTS_FILE, None
    path = Path(spec)
    if path.is_dir() and (path / RUN_WEIGHTS).is_file():
        return f"run {path.name}", path / RUN_WEIGHTS, path
    if path.is_dir() and (path / WEIGHTS_FILE).is_file():
        return f"submission {path.as_posix()}", path / WEIGHTS_FILE, None
    if path.is_file():
        return path.name, path, None
    raise UsageError(f"{spec!r} is not a training run ({RUN_WEIGHTS}), a submission folder "
                     f"({WEIGHTS_FILE}), a weights file or {THE_KING!r}")


def resolve_head(spec: str, repo: Path, rules: Competition) -> Head:
    """The head `spec` names, its weights file read as safely as the gates read it."""
    label, path, run_dir = weights_of(spec, Path(repo))
    try:
        head, scales = read_weights(path, rules)
    except SubmissionError as exc:
        raise UsageError(f"{path}: {exc}") from exc
    return Head(label, path, head, scales, sha256_file(path), run_dir)


def held_out_of(head: Head, rules: Competition) -> dict[str, list[str]] | None:
    """The public train ids a submitted head's receipt declares it never trained on, or None
    (not a submission folder, a receipt from before the field, or one that does not parse).
    The miner who packed it wrote them; only previews read them, never the evaluation."""
    from evaluator.submission.receipt import load_receipt

    receipt = head.path.parent / RECEIPT_FILE
    if head.run_dir is not None or not receipt.is_file():
        return None
    try:
        return load_receipt(receipt, rules).held_out or None
    except SubmissionError:
        return None
