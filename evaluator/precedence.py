"""Which of two alike heads is the earlier one, whatever order their gates jobs run in.

The earlier head is the one GitHub showed first on a pull request (`Attempt.shown_at`, from the
gates run GitHub started for it); gate 3 and the behavioural check compare a head only with
heads shown before it (`Attempt.precedence`). A head shown earlier whose gates have not run
yet holds this one while it routes like it (`alike`), until its attempt is settled.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from evaluator.basis import FeatureBasis
from evaluator.errors import GitHubError, SubmissionError
from evaluator.files import format_time, parse_time, try_parse_time, write_atomic
from evaluator.github.fetch import submission_folder
from evaluator.github.rest import GitHub, GitHubHTTPError, NotAFile
from evaluator.records import Attempt
from evaluator.rules import WEIGHTS_FILE, Competition, is_commit_sha, is_name
from evaluator.submission import read_weights

log = logging.getLogger(__name__)

PENDING_FILE = "pending.json"
HOLD_POLL_S = 30.0  # how often a held head reads main and the pending pull requests again
HOLD_BUDGET_S = 900.0  # how long it waits before the job fails, to be re-run
SETTLED_LABELS = ("gates-passed", "gates-failed")  # what a finished gates job leaves


@dataclass(frozen=True)
class Pending:
    """The head of an open pull request, not in the attempts log, that GitHub may have shown
    before the head being gated: its weights file is `weights` in the folder `collect` wrote."""

    pr: int
    head_sha: str
    author: str
    weights: str

    @property
    def what(self) -> str:
        return f"PR #{self.pr} ({self.author})"


SHOWN_BY = ("pull_request_target",)  # the events whose run says when a head was shown


def shown_at(github: GitHub, run_id: int) -> str:
    """When GitHub first showed the head on the pull request: the creation of the gates run it
    started for it (a re-run keeps it), as ISO 8601 UTC."""
    event, created = github.run_created(run_id)
    moment = try_parse_time(created)
    if event not in SHOWN_BY or moment is None:
        raise GitHubError(f"run {run_id} was started by {event!r} at {created!r}, not by a pull "
                          "request's event; it cannot say when the head was shown")
    return format_time(moment)


def collect(github: GitHub, attempts: Sequence[Attempt], pr: int, author: str, shown_at: str,
            out: Path, rules: Competition) -> list[Pending]:
    """The heads of other miners' open pull requests opened before `shown_at` whose gates have
    not recorded them, their weights copied into `out` (one call each, after their files' list);
    a head whose weights cannot be had is left out (its gates will say why)."""
    shown = parse_time(shown_at)
    logged = {(a.pr, a.head_sha) for a in attempts}
    found = []
    for pull in github.open_pulls():
        opened = try_parse_time(pull.created_at)
        if (pull.number == pr or pull.author.lower() == author.lower() or opened is None
                or opened > shown or (pull.number, pull.head_sha) in logged
                or not is_commit_sha(pull.head_sha) or not is_name(pull.author)):
            continue
        folder = submission_folder([f.path for f in github.changed_files(pull.number)
                                    if f.status == "added"], pull.author)
        try:
            data = github.file_at(pull.head_sha, f"{folder}/{WEIGHTS_FILE}",
                                  rules.max_weights_bytes)
        except (GitHubHTTPError, NotAFile) as exc:
            log.warning("PR #%d's head is not compared while gating: %s", pull.number, exc)
            continue
        name = f"{pull.number}.safetensors"
        write_atomic(out / name, data)
        found.append(Pending(pull.number, pull.head_sha, pull.author, name))
    write_atomic(out / PENDING_FILE, json.dumps([asdict(p) for p in found], indent=2) + "\n")
    return found


def read(folder: Path, rules: Competition) -> list[tuple[Pending, np.ndarray]]:
    """What `collect` wrote, each head with its model rows (an unreadable one left out)."""
    try:
        entries = json.loads((folder / PENDING_FILE).read_text(encoding="utf-8"))
        pending = [Pending(int(e["pr"]), str(e["head_sha"]), str(e["author"]), str(e["weights"]))
                   for e in entries]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise GitHubError(f"cannot read the pending heads in {folder}: {exc}") from exc
    found = []
    for entry in pending:
        try:
            found.append((entry, read_weights(folder / Path(entry.weights).name, rules)[0]))
        except SubmissionError as exc:
            log.warning("%s is not compared while gating: %s", entry.what, exc)
    return found


def alike(head: np.ndarray, pending: Sequence[tuple[Pending, np.ndarray]],
          attempts: Sequence[Attempt], rules: Competition,
          basis: FeatureBasis | None) -> list[Pending]:
    """The pending heads, still without an attempt in `attempts`, whose model rows gate 3 would
    call alike to `head`'s, on the season's feature basis where there is one."""
    from evaluator.gates import fingerprint

    def seen(rows: np.ndarray) -> np.ndarray:
        view = fingerprint(rows, rules.n_models)
        return basis.project(view, rules.n_models) if basis is not None else view

    logged = {(a.pr, a.head_sha) for a in attempts}
    mine = seen(head)
    return [p for p, rows in pending if (p.pr, p.head_sha) not in logged
            and float(mine @ seen(rows)) >= rules.duplicate_cosine]


def settled(github: GitHub, pending: Pending) -> bool:
    """Whether the pending head's gates have run (or never will on it): its pull request was
    closed or labelled by them, or moved to another head."""
    pull = github.pull(pending.pr)
    return (pull.state != "open" or pull.head_sha != pending.head_sha
            or any(label in pull.labels for label in SETTLED_LABELS))


def pause(seconds: float = HOLD_POLL_S) -> None:
    time.sleep(seconds)
