"""Which head a server routes through: the reigning king, checked, or any head a miner has.

The king's weights are checked against what the board recorded of them: the gates' attempt
of the king's pull request (its `weights_sha256`), or, for a king seeded without one, its
receipt's digest, which gate 4 checked. A checkout whose king folder holds other weights (an
old pull, a hand edit) is refused, never served under the king's name.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from evaluator.errors import LeaderboardError, SubmissionError, UsageError
from evaluator.files import parse_time
from evaluator.heads import THE_KING, Head, resolve_head
from evaluator.records import King
from evaluator.rules import RECEIPT_FILE, Competition
from evaluator.store import Store, submission_path
from evaluator.submission.receipt import load_receipt

MODEL_PREFIX = "tinyrouter/"
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


@dataclass(frozen=True)
class ServedHead:
    """A head and the name clients call it by (`tinyrouter/alice-1`)."""

    head: Head
    model_id: str
    owner: str
    created: int  # when it was crowned, else when its weights were written (Unix seconds)
    encoder: str | None = None  # the encoder a training run records, if any

    @property
    def weights_sha256(self) -> str:
        return self.head.weights_sha256


def model_id(name: str) -> str:
    return MODEL_PREFIX + (_UNSAFE.sub("-", name).strip("-") or "head")


def recorded_digest(store: Store, king: King, rules: Competition) -> tuple[str, str]:
    """(the king's weights digest as the board recorded it, where it is recorded)."""
    if king.pr is not None:
        attempt = store.gates_pass(king.pr, king.head_sha)
        if attempt is None or attempt.weights_sha256 is None:
            raise LeaderboardError(f"the attempts log records no gates pass for the king's pull "
                                   f"request #{king.pr} at {king.head_sha}; pull the "
                                   "competition's main branch whole")
        return attempt.weights_sha256, f"the attempt of pull request #{king.pr}"
    folder = store.submission(king.miner, king.generation)
    try:
        receipt = load_receipt(folder / RECEIPT_FILE, rules)
    except SubmissionError as exc:
        raise LeaderboardError(f"the seeded king's {RECEIPT_FILE} cannot be read: {exc}") from exc
    return receipt.weights_sha256, f"its {RECEIPT_FILE}"


def king_of(repo: Path, rules: Competition) -> ServedHead:
    """The reigning king of a checkout, its weights checked against the board's record."""
    store = Store(Path(repo))
    head = resolve_head(THE_KING, Path(repo), rules)  # says what to do when there is none
    king = store.king()
    assert king is not None
    digest, where = recorded_digest(store, king, rules)
    if digest != head.weights_sha256:
        raise LeaderboardError(
            f"{submission_path(king.miner, king.generation)}/{head.path.name} in {repo} has "
            f"digest {head.weights_sha256[:12]}…, but {where} records {digest[:12]}…: these are "
            "not the crowned weights; check out the competition's main branch as it is")
    return ServedHead(head, model_id(f"{king.miner}-{king.generation}"), king.miner,
                      int(parse_time(king.crowned_at).timestamp()))


def head_at(spec: str, rules: Competition) -> ServedHead:
    """A training run, a submission folder or a weights file, named by where it lies."""
    if spec == THE_KING:
        raise UsageError("serve the king with --king REPO, which checks its weights")
    head = resolve_head(spec, Path("."), rules)
    if head.run_dir is not None:
        from evaluator.train.run import read_run

        summary, _ = read_run(head.run_dir)
        return ServedHead(head, model_id(f"run-{head.run_dir.name}"), "you",
                          int(head.path.stat().st_mtime), summary.get("encoder"))
    name, owner = head.path.stem, "you"
    if Path(spec).is_dir():  # a submission folder: named by its receipt, else its place
        folder = Path(spec)
        try:
            receipt = load_receipt(folder / RECEIPT_FILE, rules)
            name, owner = f"{receipt.miner}-{receipt.generation}", receipt.miner
        except SubmissionError:
            name = f"{folder.resolve().parent.name}-{folder.resolve().name}"
    return ServedHead(head, model_id(name), owner, int(head.path.stat().st_mtime))
