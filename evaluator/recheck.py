"""The evaluation's re-check of the gates: the head judged as when its attempt was recorded.

Every gate runs again in the evaluator's checkout of the base branch (none needs a secret),
as defence in depth: a head whose attempt the gates recorded is judged at that attempt's
time and against the attempts before it, and an evaluation finds that attempt whether or not
it was given the head commit.
"""

from __future__ import annotations

from pathlib import Path

from evaluator.changes import Change
from evaluator.errors import UsageError
from evaluator.files import utc_now
from evaluator.gates import GateContext, basis_fields, run_gates
from evaluator.records import Attempt
from evaluator.rules import WEIGHTS_FILE, Competition
from evaluator.store import ATTEMPTS_FILE, LEADERBOARD_DIR, Store
from evaluator.submission import Submission, sha256_file


def own_attempt(attempts: list[Attempt], login: str, weights_sha256: str, pr: int | None,
                head_sha: str | None) -> Attempt | None:
    """The head's own line in the attempts log, or None: the line of its PR and head commit
    when the commit is known, else the last line of its PR (or of no PR) recording this
    miner's exact weights."""
    if head_sha is not None:
        return next((a for a in attempts if (a.pr, a.head_sha) == (pr, head_sha)), None)
    found = [a for a in attempts if a.pr == pr and a.weights_sha256 == weights_sha256
             and a.miner.lower() == login.lower()]
    return found[-1] if found else None


def recheck(repo: Path, relpath: str, pr: int | None, rules: Competition,
            head_sha: str | None = None, author: str | None = None,
            changes: list[Change] | None = None) -> str | None:
    """Every gate again (none needs a secret), in the evaluator's checkout of the base branch:
    "gate N (name): reason" for the first failure, or None.

    A head whose attempt is recorded (`own_attempt`) is judged as when it was recorded: the
    rate limit at the attempt's time, duplicates against every attempt shown on a pull request
    before it, whenever its gates ran (the earlier one wins). Without a head commit, a head the
    log cannot tell apart from the miner's other attempts is refused (UsageError) rather than
    charged for its own slot.
    """
    store, sub = Store(Path(repo)), Submission(Path(repo), relpath, rules)
    attempts, now, shown_at = store.attempts(), utc_now(), None
    weights = sub.folder / WEIGHTS_FILE
    own = own_attempt(attempts, sub.login, sha256_file(weights) if weights.is_file() else "",
                      pr, head_sha)
    if own is not None:
        now, shown_at = own.time, own.shown_at or own.at
        attempts = [a for a in attempts
                    if a is own or a.time <= now or a.precedence < own.precedence]
    elif head_sha is None and any(a.miner.lower() == sub.login.lower() for a in attempts):
        which = f"PR #{pr}" if pr is not None else "no pull request"
        raise UsageError(f"{LEADERBOARD_DIR}/{ATTEMPTS_FILE} records attempts of {sub.login} but "
                         f"none of {which} with the weights in {relpath}: pass the --pr (and "
                         "--head-sha) its attempt was recorded with, or record this head's "
                         "attempt first (`tinyrouter gates ... --record-attempt`)")
    ctx = GateContext(author=author or sub.login, now=now, rules=rules, changes=changes, pr=pr,
                      head_sha=head_sha, attempts=attempts, shown_at=shown_at,
                      refunded=store.refunded_heads(author or sub.login), own=own,
                      **basis_fields(store, rules))
    failed = run_gates(sub, ctx).failed
    return None if failed is None else f"gate {failed.number} ({failed.name}): {failed.reason}"
