"""The record job: an evaluation's result onto leaderboard/, as named steps each safe to run again.

A job that died between two steps is finished by a re-run: decide (on main's newest state),
withdraw, merge a new king's PR, publish leaderboard/ (optimistic concurrency), comment, then
close a loser's PR or evaluate a stale result again. The steps take a `Recording` and the
GitHub client in it, raise `GitHubError` or `LeaderboardError`, and say what they did through
`Recording.tell`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evaluator import leaderboard
from evaluator.errors import GitHubError, LeaderboardError
from evaluator.github import pushes
from evaluator.github.rest import GitHub, MergeRefused
from evaluator.leaderboard import UNKNOWN
from evaluator.lifecycle import withdrawal
from evaluator.records import KING, STALE, VOID, WITHDRAWN, HeadRef, King, Outcome, Result
from evaluator.reports import headline, render_result
from evaluator.rules import Competition
from evaluator.store import KING_FILE, LEADERBOARD_DIR, Store

log = logging.getLogger(__name__)

EVALUATION_MARKER = "<!-- tinyrouter:evaluation -->"  # the bot's one evaluation comment on a PR
EVALUATE_WORKFLOW = "evaluate.yml"  # what a stale result is dispatched to again


@dataclass(frozen=True)
class Board:
    """Where leaderboard/ is published: the checkout, and the remote branch it is pushed to."""

    repo: Path
    remote: str = "origin"
    branch: str = "main"


@dataclass
class Recording:
    """One evaluation being recorded. `result` is the checked public record the GPU job handed
    over; `record` is what the board holds (or will) for it, `already` whether it held it
    before this run; `against` the king it was scored against (UNKNOWN: not said)."""

    github: GitHub
    board: Board
    rules: Competition
    head: HeadRef
    result: dict[str, Any]
    against: object = UNKNOWN
    record: dict[str, Any] = field(default_factory=dict)
    already: bool = False
    tell: Callable[..., None] = field(default=lambda *lines: _log(lines))

    @property
    def number(self) -> int:
        return int(self.head.pr or 0)

    @property
    def sha(self) -> str:
        return str(self.head.head_sha)

    @property
    def outcome(self) -> Outcome | str:
        value = self.record.get("outcome")
        return Outcome(value) if value in tuple(Outcome) else str(value)

    def void(self, why: str) -> None:
        self.record = leaderboard.unscored(
            self.result, VOID, f"void: the merge was refused: {why}; nothing was crowned, and "
            "the attempt is refunded.", self.rules)

    def withdraw(self, why: str) -> None:
        self.record = leaderboard.unscored(
            self.result, WITHDRAWN, f"withdrawn: {why}; nothing about its score is published, "
            "and the attempt stays spent.", self.rules)


def _log(lines: tuple[str, ...]) -> None:
    for line in lines:
        log.info("%s", line)


def king_at(repo: Path, commit: str) -> King | None:
    """The king leaderboard/ held at `commit`: the one an evaluation there was scored against."""
    text = pushes.read_at(repo, commit, f"{LEADERBOARD_DIR}/{KING_FILE}")
    try:
        king = (json.loads(text) if text else {}).get("king")
    except (ValueError, AttributeError) as exc:
        raise GitHubError(f"{LEADERBOARD_DIR}/{KING_FILE} at {commit} is not valid JSON") from exc
    return King.from_dict(king) if isinstance(king, dict) else None


def start(github: GitHub, board: Board, rules: Competition, result: dict[str, Any], pr: int,
          sha: str, base: str | None = None, where: str = "result",
          tell: Callable[..., None] | None = None) -> Recording:
    """The recording of `result`, checked: it must be for PR `pr` at `sha`, and follow the
    rules. `base`: the main commit the evaluation ran on (its king is the one it was scored
    against); None when not known."""
    if result.get("pr") != pr or result.get("head_sha") != sha:
        raise GitHubError(f"the result is for PR {result.get('pr')!r} at "
                          f"{result.get('head_sha')!r}, not PR #{pr} at {sha}")
    checked = leaderboard.check_result(result, rules, where)
    against = UNKNOWN if base is None else king_at(board.repo, base)
    job = Recording(github, board, rules, checked.ref, result, against)
    if tell is not None:
        job.tell = tell
    return job


# ---------------------------------------------------------------- the steps

def decide(job: Recording) -> None:
    """What the board will hold for this result, on main's newest state; a result the board
    must not hold (`leaderboard.refusal`: one life per head) stops the job, recording nothing."""
    pushes.sync(job.board.repo, job.board.remote, job.board.branch)
    store = Store(job.board.repo)
    job.record, job.already = leaderboard.decide(store, job.result, job.rules, job.against)
    if not job.already:
        why = leaderboard.refusal(store, Result.from_dict(job.result), job.rules)
        if why is not None:
            raise LeaderboardError(f"the record job refuses this result and records nothing: "
                                   f"{why}")


def withdraw(job: Recording) -> None:
    """What the author did to the PR after the approval (lifecycle.withdrawal) withdraws the
    evaluation, whatever it scored: nothing of the score is published."""
    if job.already:
        return
    why = withdrawal(job.github.pull(job.number), job.sha, job.board.branch)
    if why is not None:
        job.withdraw(why)


def merge(job: Recording) -> None:
    """A new king's PR is merged before anything claims it: guarded by the evaluated head and
    by its base, which must be the published branch."""
    if job.outcome != KING:
        return
    branch = job.board.branch
    pull = job.github.pull(job.number)
    if pull.merged:
        if pull.head_sha != job.sha or pull.base_ref != branch:
            job.void(f"the pull request was merged at {pull.head_sha[:12]} into "
                     f"{pull.base_ref}, not at {job.sha[:12]} into {branch}")
        return
    why = withdrawal(pull, job.sha, branch)
    try:
        if why is not None:
            raise MergeRefused(why, by_author=True)
        job.github.merge(job.number, job.sha, base=branch)
    except MergeRefused as exc:
        if job.already:
            raise GitHubError(f"leaderboard/ crowns PR #{job.number} but it cannot be merged: "
                              f"{exc}; a maintainer must settle it by hand") from exc
        if exc.by_author:
            job.withdraw(str(exc))
        else:
            job.void(str(exc))
        return
    job.tell(f"merged PR #{job.number} at {job.sha[:12]}")


def publish(job: Recording) -> None:
    """leaderboard/ on main's newest commit; decided again on each try, so a king crowned by a
    job that pushed first turns this result stale instead of being overwritten. A crown is
    applied only where the merge put the king's folder."""
    repo = job.board.repo

    def apply() -> dict[str, Any]:
        record, already = leaderboard.decide(Store(repo), job.record, job.rules, job.against)
        if not already:
            leaderboard.require_king_folder(Store(repo), record)
        return leaderboard.apply_result(repo, job.record, job.rules, job.against).record

    job.record, pushed = pushes.publish(repo, [LEADERBOARD_DIR],
                                        f"leaderboard: evaluation of PR #{job.number}", apply,
                                        job.board.remote, job.board.branch)
    job.tell(headline(job.record), "leaderboard/ pushed" if pushed else
             "leaderboard/ already holds it")


def comment(job: Recording) -> None:
    job.github.upsert_comment(job.number, EVALUATION_MARKER,
                              render_result("comment", job.record, job.rules))


def conclude(job: Recording) -> None:
    """Close a decided loser's PR (if it is still at the evaluated head), or evaluate a stale
    result again; a king is merged, and a void or withdrawn PR stays as its author left it."""
    if job.outcome == KING:
        return
    if job.outcome == STALE:
        job.github.dispatch(EVALUATE_WORKFLOW, job.board.branch,
                            {"pr": str(job.number), "head_sha": job.sha})
        job.tell(f"PR #{job.number} is evaluated again against the new king")
        return
    if job.outcome in (VOID, WITHDRAWN):
        return  # refunded or spent; the PR stays as its author left it, for a new head
    pull = job.github.pull(job.number)
    if pull.state == "open" and pull.head_sha == job.sha:
        job.github.close(job.number)
        job.tell(f"{job.outcome}: closed PR #{job.number}")


RECORD_STEPS: tuple[tuple[str, Callable[[Recording], None]], ...] = (
    ("decide", decide),
    ("withdraw", withdraw),
    ("merge", merge),
    ("publish", publish),
    ("comment", comment),
    ("conclude", conclude),
)


def record(job: Recording) -> dict[str, Any]:
    """Every step in turn; the public record the board holds for this evaluation now."""
    for _, step in RECORD_STEPS:
        step(job)
    return job.record
