"""What the gates tell a miner besides the verdict: the next step after a failure, and
advisories (warnings that never block).

The next step follows the attempts log, as the gates will read it on the miner's next PR: a
head that passed gate 1 has its attempt recorded, which spends a slot and its generation
number, so the next PR is a fresh pack one generation on; a head stopped at gate 0 or 1 spent
nothing, so the same folder serves when its path is still the right one. A failed PR is
closed, and a push to a closed PR starts no gates, so the step is always a new PR.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

from evaluator.advisories import Advisory, ledger_advisories, receipt_advisories, weight_advisories
from evaluator.errors import SubmissionError
from evaluator.files import format_time
from evaluator.gates import GATES, GateContext, GateReport, check_rate_limit
from evaluator.lifecycle import slot_opens
from evaluator.records import Attempt
from evaluator.rules import is_name
from evaluator.store import SUBMISSIONS_DIR, Store
from evaluator.submission import Submission


@dataclass(frozen=True)
class NextStep:
    """The miner's next PR after a failed gate."""

    recorded: bool  # this head's attempt is in the log: its slot and generation are spent
    fix: bool  # the PR needs a change (every failure but the rate limit's)
    login: str  # a valid GitHub login, so safe inside a Markdown code span
    generation: int  # the generation the next PR must add
    same_folder: bool  # the failed PR's folder is that one: fix it in place, no re-pack
    opens: str | None  # when the miner's next slot opens (UTC); None: open now

    @property
    def folder(self) -> str:
        return f"{SUBMISSIONS_DIR}/{self.login}/{self.generation}"

    def to_dict(self) -> dict:
        return {**asdict(self), "folder": self.folder}


def _after(sub: Submission, ctx: GateContext, spent: bool) -> list[Attempt]:
    """The attempts log as the miner's next PR will find it."""
    if not spent or any((a.pr, a.head_sha) == (ctx.pr, ctx.head_sha) for a in ctx.attempts):
        return list(ctx.attempts)
    generation = Store(sub.repo).next_generation(ctx.author, ctx.attempts, ctx.pr,
                                                 exclude=sub.folder)
    at = format_time(ctx.now)  # as the log keeps it: to the second
    return [*ctx.attempts, Attempt(miner=ctx.author, generation=generation, pr=ctx.pr,
                                   head_sha=ctx.head_sha, at=at)]


def next_step(sub: Submission, report: GateReport, ctx: GateContext,
              recorded: bool) -> NextStep | None:
    """What to do after `report` failed (None when it passed); `recorded`: whether this head's
    attempt went into the log (it passed gate 1 and the bot records attempts)."""
    if report.passed:
        return None
    if not is_name(ctx.author):
        raise ValueError(f"{ctx.author!r} is not a GitHub login")
    spent = recorded and report.passed_gate(1)
    attempts = _after(sub, ctx, spent)
    generation = Store(sub.repo).next_generation(ctx.author, attempts, None, exclude=sub.folder)
    parts = sub.parts
    login = parts[1] if len(parts) == 3 and is_name(parts[1]) and \
        parts[1].lower() == ctx.author.lower() else ctx.author
    times = [a.time for a in attempts if a.miner.lower() == ctx.author.lower()
             and a.head_sha not in ctx.refunded]
    opens = slot_opens(times, ctx.now, ctx.rules)
    waits = any(g.number == report.failed.number and g.check is check_rate_limit for g in GATES)
    return NextStep(recorded=spent, fix=not waits, login=login, generation=generation,
                    same_folder=not spent and sub.relpath.rstrip("/") ==
                    f"{SUBMISSIONS_DIR}/{login}/{generation}",
                    opens=None if opens is None else format_time(opens))


def submission_advisories(sub: Submission, report: GateReport,
                          ledger: Path | None = None) -> list[Advisory]:
    """The torch-free advisories of a folder: its weights once gate 2 found them sane, its
    receipt once gate 0 vouched for the folder and the receipt parses, and the miner's ledger
    when given. Nothing here changes an outcome."""
    if not report.passed_gate(0):
        return []
    found = []
    if report.passed_gate(2):
        head, scales = sub.weights
        found += weight_advisories(head, scales, sub.rules)
    try:
        receipt = sub.receipt.data
    except (SubmissionError, OSError, ValueError):
        return found
    found += receipt_advisories(receipt)
    if ledger is not None:
        found += ledger_advisories(receipt, ledger)
    return found
