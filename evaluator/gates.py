"""Pre-evaluation gates 0–4: pure checks run in order, stopping at the first failure.

Each gate is `check(sub, ctx) -> str | None`: None passes, a string is the reason a
miner can act on. The chain is the `GATES` tuple; the bot, preflight and the
evaluator's defence-in-depth re-check all iterate it.
"""

from __future__ import annotations

import logging
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path, PurePosixPath
from typing import Any

import numpy as np

from evaluator import attempts_index, fingerprints
from evaluator.attempts_index import AttemptsIndex
from evaluator.basis import BASIS_FILE, BasisError, FeatureBasis, read_basis
from evaluator.changes import Change, raw_bytes
from evaluator.errors import SubmissionError
from evaluator.files import format_time, parse_time, utc_now
from evaluator.lifecycle import recent, slot_opens
from evaluator.records import Attempt, Seen
from evaluator.rules import (
    RECEIPT_FILE,
    REQUIRED_FILES,
    SUBMISSION_FILES,
    WEIGHTS_FILE,
    Competition,
    is_generation,
    is_name,
)
from evaluator.store import SUBMISSIONS_DIR, Store
from evaluator.submission import Submission, read_weights, sha256_file
from evaluator.submission.receipt import format_problem

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class GateContext:
    author: str
    now: datetime
    rules: Competition
    changes: list[Change] | None = None
    pr: int | None = None
    head_sha: str | None = None
    attempts: list[Attempt] = field(default_factory=list)
    refunded: frozenset[str] = frozenset()  # heads whose evaluation was void
    # gate 3's view of the model rows: the public items' feature basis (None: plain rows), or
    # why the committed one cannot be used (the gate then fails closed)
    basis: FeatureBasis | None = None
    basis_error: str | None = None
    # the season's attempts index when it matches the log (evaluator/attempts_index.py):
    # `attempts` then holds only the author's and this PR's lines, and gate 3 reads the index
    index: AttemptsIndex | None = None
    shown_at: str | None = None  # when GitHub first showed this head (None: now); see `precedence`

    @property
    def precedence(self) -> tuple[datetime, int]:
        """This head's place among the attempts (see `Attempt.precedence`)."""
        return (parse_time(self.shown_at) if self.shown_at else self.now), self.pr or 0
    own: Attempt | None = None  # an evaluation's re-check: the head's own line, never charged


GateCheck = Callable[[Submission, GateContext], "str | None"]


@dataclass(frozen=True)
class Gate:
    number: int
    name: str
    check: GateCheck


@dataclass(frozen=True)
class GateResult:
    number: int
    name: str
    passed: bool | None  # None: not run, an earlier gate failed
    reason: str | None


@dataclass(frozen=True)
class GateReport:
    results: tuple[GateResult, ...]

    @property
    def passed(self) -> bool:
        return all(r.passed for r in self.results)

    @property
    def failed(self) -> GateResult | None:
        return next((r for r in self.results if r.passed is False), None)

    def passed_gate(self, number: int) -> bool:
        return any(r.number == number and r.passed for r in self.results)

    def to_dict(self) -> dict:
        failed = self.failed
        return {
            "passed": self.passed,
            "failed_gate": None if failed is None else
            {"number": failed.number, "name": failed.name, "reason": failed.reason},
            "gates": [{"number": r.number, "name": r.name, "passed": r.passed, "reason": r.reason}
                      for r in self.results],
        }


# ---------------------------------------------------------------- gate 0

def _shown(name: str) -> str:
    """A name as a reason quotes it: escaped, and a non-UTF-8 one as its bytes."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return repr(raw_bytes(name))
    return ascii(name)


def odd_name(name: str) -> str | None:
    """Why a file or folder name is refused whatever it is called, else None. Names are plain
    ASCII without control characters, so a look-alike or a trailing newline cannot pass."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return f"the name {_shown(name)} is not valid UTF-8; rename it"
    for char in name:
        if ord(char) < 0x20 or 0x7F <= ord(char) <= 0x9F:
            return (f"the name {_shown(name)} contains a control character (U+{ord(char):04X}); "
                    "rename it")
        if ord(char) > 0x7F:
            return (f"the name {_shown(name)} contains U+{ord(char):04X}, which is not ASCII; "
                    "names are plain ASCII so that a look-alike cannot pass for another")
    return None


def _odd_path(path: str) -> str | None:
    return next(filter(None, map(odd_name, PurePosixPath(path).parts)), None)


def _scope_of_changes(sub: Submission, ctx: GateContext) -> str | None:
    prefix = PurePosixPath(sub.relpath)
    for change in ctx.changes or []:
        path = PurePosixPath(change.path)
        if change.status != "A":
            verb = {"M": "modifies", "D": "deletes", "R": "renames", "C": "copies"}.get(
                change.status, "makes an unreadable change to")
            return f"the PR {verb} {_shown(change.path)}; a submission may only add new files"
        odd = _odd_path(change.path)
        if odd:
            return f"the PR adds {_shown(change.path)}: {odd}"
        if path.parent != prefix:
            return (f"the PR touches {change.path!r}, outside {sub.relpath}/; "
                    "submit only your one folder")
        if path.name not in SUBMISSION_FILES:
            return f"{path.name!r} is not allowed; use only {', '.join(SUBMISSION_FILES)}"
    return None


def _scope_of_folder(sub: Submission, rules: Competition) -> str | None:
    for part in (sub.repo / SUBMISSIONS_DIR, sub.folder.parent, sub.folder):
        where = part.relative_to(sub.repo).as_posix()
        if part.is_symlink():
            return f"{where} must be a real folder, not a link"
        if not part.is_dir():
            return f"{where} does not exist"
    names = sorted(p.name for p in sub.folder.iterdir())
    odd = next(filter(None, map(odd_name, names)), None)
    if odd:
        return f"in {sub.relpath}/: {odd}"
    extra = [n for n in names if n not in SUBMISSION_FILES]
    if extra:
        return f"unexpected file(s) {', '.join(map(repr, extra))}; allowed: {', '.join(SUBMISSION_FILES)}"
    missing = [n for n in REQUIRED_FILES if n not in names]
    if missing:
        return f"missing {', '.join(missing)}"
    caps = dict(zip(SUBMISSION_FILES, (rules.max_weights_bytes, rules.max_receipt_bytes,
                                       rules.max_readme_bytes), strict=True))
    for name in names:
        info = (sub.folder / name).lstat()
        if not stat.S_ISREG(info.st_mode):
            return f"{name} must be a regular file (links and special files are refused)"
        if info.st_size > caps[name]:
            return f"{name} is {info.st_size} bytes; the cap is {caps[name]}"
    return None


def check_scope(sub: Submission, ctx: GateContext) -> str | None:
    parts = sub.parts
    if len(parts) != 3 or parts[0] != SUBMISSIONS_DIR or ".." in parts:
        return f"the submission must be one folder submissions/<login>/<generation>, not {sub.relpath!r}"
    login, generation = parts[1], parts[2]
    odd = odd_name(login) or odd_name(generation)
    if odd:
        return f"the folder submissions/<login>/<generation>: {odd}"
    if not is_name(login):
        return f"{login!r} is not a valid GitHub login"
    if login.lower() != ctx.author.lower():
        return f"the folder is for {login!r} but the PR author is {ctx.author!r}; submit under your own login"
    if not is_generation(generation):
        return f"the generation {generation!r} must be a positive whole number"
    reason = _scope_of_changes(sub, ctx) or _scope_of_folder(sub, ctx.rules)
    if reason:
        return reason
    store = Store(sub.repo)
    expected = store.next_generation(login, ctx.attempts, ctx.pr, exclude=sub.folder)
    if int(generation) != expected:
        return (f"this is generation {generation} but your next generation is {expected}; pack "
                f"it again as that generation (a renamed folder no longer matches its receipt)")
    decided = store.decided_generation(login, int(generation))
    if decided is not None:
        return (f"generation {generation} of {login} already has a decisive result "
                f"({decided.outcome}, PR #{decided.pr}) and is not evaluated again; pack your "
                f"next generation, {int(generation) + 1}, in a new pull request")
    return format_problem(sub.folder / RECEIPT_FILE)


# ---------------------------------------------------------------- gates 1–4

def check_rate_limit(sub: Submission, ctx: GateContext) -> str | None:
    login = sub.login.lower()
    times = [a.time for a in ctx.attempts
             if a.miner.lower() == login and a != ctx.own
             and (ctx.head_sha is None or a.head_sha != ctx.head_sha)
             and a.head_sha not in ctx.refunded]
    opens = slot_opens(times, ctx.now, ctx.rules)
    if opens is not None:
        return (f"{len(recent(times, ctx.now, ctx.rules))} submission(s) in the last "
                f"{ctx.rules.rate_limit_hours} h; the limit is {ctx.rules.rate_limit_count}. "
                f"Your next slot opens at {format_time(opens)}")
    return None


def check_weights(sub: Submission, ctx: GateContext) -> str | None:
    try:
        head, scales = sub.weights
    except SubmissionError as exc:
        return str(exc)
    for name, values in (("head", head), ("svf_scales", scales)):
        if not np.isfinite(values).all():
            return f"{name} contains NaN or Inf"
        if np.abs(values).max() > ctx.rules.max_abs_weight:
            return f"{name} has a value above {ctx.rules.max_abs_weight:g} in magnitude"
    if not head.any():
        return "the head is all zeros, so it cannot route; train it before submitting"
    return None


def fingerprint(head: np.ndarray, n_models: int) -> np.ndarray:
    """The model rows as routing sees them: each column centred across the rows (adding one
    vector to every row changes no decision), then scaled to unit norm (nor does a rescale).
    The role rows and SVF scales play no part: cached accuracy follows the model choice alone."""
    rows = np.asarray(head, dtype=np.float64)[:n_models]
    centred = rows - rows.mean(axis=0, keepdims=True)
    norm = np.linalg.norm(centred)
    return (centred / norm if norm > 0 else centred).reshape(-1)


def encode_fingerprint(view: np.ndarray, n_models: int) -> str:
    """A fingerprint as the attempts log keeps it (see evaluator.fingerprints)."""
    return fingerprints.encode(view, n_models)


def decode_fingerprint(text: str, rules: Competition) -> np.ndarray:
    """The recorded fingerprint back as a vector; ValueError when it is not one of these rules."""
    return fingerprints.decode(text, rules)


def _earlier(mine: np.ndarray, login: str, ctx: GateContext) -> list[tuple[str, float]]:
    """(what, cosine with `mine`) of the earlier original heads (see `Attempt.is_original`) of
    other PRs than this one and other miners than `login` (resubmitting your own head is no
    copy) that `mine` routes like: a cosine at gate 3's line or above. Earlier: shown on a pull
    request before this head (`Attempt.precedence`), whichever gates job recorded first.

    Raises ValueError naming an attempt whose fingerprint cannot be read: the gate then fails
    closed rather than skip a comparison.
    """
    if ctx.index is not None and ctx.basis is not None:
        rows, values = ctx.index.originals(login, ctx.pr)
        found = fingerprints.projected_cosines(
            values, fingerprints.target_of(mine, ctx.rules, ctx.basis.directions))
        alike = [(ctx.index.attempt(row), cosine) for row, cosine
                 in zip(rows.tolist(), found.tolist(), strict=True)
                 if cosine >= ctx.rules.duplicate_cosine]
        return [(_what(attempt), cosine) for attempt, cosine in alike
                if attempt.precedence < ctx.precedence]
    found = [(number, attempt) for number, attempt in enumerate(ctx.attempts, start=1)
             if attempt.is_original and attempt.miner.lower() != login.lower()
             and (ctx.pr is None or attempt.pr != ctx.pr)
             and attempt.precedence < ctx.precedence]
    basis = ctx.basis
    on_basis = [basis is not None and a.seen is not None and a.seen.basis == basis.digest
                for _, a in found]
    directions = None if basis is None else basis.directions
    try:
        cosines = fingerprints.cosines(mine, [a.fingerprint or "" for _, a in found], ctx.rules,
                                       directions, None if basis is None else on_basis)
    except ValueError as exc:
        for (number, attempt), on in zip(found, on_basis, strict=True):  # name the first bad one
            problem = _unreadable(mine, attempt, on, ctx)
            if problem is not None:
                raise ValueError(f"leaderboard/attempts.jsonl line {number} ({_what(attempt)}) "
                                 f"{problem} before any head can pass this gate") from exc
        raise
    return [(_what(attempt), cosine) for (_, attempt), cosine
            in zip(found, cosines.tolist(), strict=True) if cosine >= ctx.rules.duplicate_cosine]


def _unreadable(mine: np.ndarray, attempt: Attempt, on_basis: bool, ctx: GateContext) -> str | None:
    """Why gate 3 cannot compare `mine` with this attempt, and what a maintainer does, or None.
    Only a projection that names another basis than the board's (or a board with none) calls
    for rotating the log; anything else unreadable is a damaged line, restored from git."""
    text, seen, basis = attempt.fingerprint or "", attempt.seen, ctx.basis
    if text.startswith(fingerprints.PROJECTED) and seen is not None and (
            basis is None or seen.basis != basis.digest):
        where = "no feature basis" if basis is None else f"the basis {basis.digest}"
        return (f"was projected on the feature basis {seen.basis}, and the board has {where}: "
                "a new basis starts a new season, whose log starts empty; a maintainer must "
                "rotate the log (Maintaining guide, Seasons) or restore the season's basis")
    try:
        if text.startswith(fingerprints.PROJECTED) and seen is None:
            raise ValueError("a projected fingerprint that names no feature basis")
        fingerprints.cosines(mine, [text], ctx.rules,
                             None if basis is None else basis.directions,
                             None if basis is None else [on_basis])
    except ValueError as exc:
        return (f"has no readable fingerprint ({exc}); a maintainer must restore the file "
                "from git")
    return None


def _what(attempt: Attempt) -> str:
    return f"the attempt of PR #{attempt.pr} ({attempt.miner}, {attempt.at})"


def _merged(sub: Submission, ctx: GateContext) -> list[tuple[str, np.ndarray]]:
    """(what, fingerprint) of every folder on the base branch, the king's included."""
    found = []
    for folder in Store(sub.repo).submission_folders():
        if folder.resolve() == sub.folder.resolve():
            continue
        try:
            other, _ = read_weights(folder / WEIGHTS_FILE, ctx.rules)
        except SubmissionError:
            log.warning("skipped unreadable weights in %s", folder.relative_to(sub.repo))
            continue
        found.append((folder.relative_to(sub.repo).as_posix(),
                      fingerprint(other, ctx.rules.n_models)))
    return found


def check_duplicate(sub: Submission, ctx: GateContext) -> str | None:
    if ctx.basis_error is not None:
        return ctx.basis_error
    n_models = ctx.rules.n_models
    mine = fingerprint(sub.weights[0], n_models)
    try:
        earlier = _earlier(mine, sub.login, ctx)
    except ValueError as exc:
        return str(exc)
    seen = ((lambda view: ctx.basis.project(view, n_models)) if ctx.basis is not None
            else (lambda view: view))
    mine_seen = seen(mine)
    merged = [(what, float(mine_seen @ seen(other))) for what, other in _merged(sub, ctx)]
    on = " on the public items' features" if ctx.basis is not None else ""
    for what, cosine in merged + earlier:
        if cosine >= ctx.rules.duplicate_cosine:
            return (f"the model rows route like {what} (cosine {cosine:.4f}{on} ≥ "
                    f"{ctx.rules.duplicate_cosine}, whatever the role rows and SVF scales); "
                    "submit a head you trained yourself")
    return None


def check_receipt(sub: Submission, ctx: GateContext) -> str | None:
    rules = ctx.rules
    try:
        receipt = sub.receipt
    except SubmissionError as exc:
        return str(exc)
    problems = [
        (receipt.miner.lower() != sub.login.lower(), f"miner is {receipt.miner!r}, not {sub.login!r}"),
        (receipt.generation != sub.generation,
         f"generation is {receipt.generation}, but the folder is {sub.generation}"),
        (receipt.pool != list(rules.pool_names), f"pool must be {list(rules.pool_names)}"),
        (receipt.n_params != rules.n_params, f"n_params must be {rules.n_params}"),
        (receipt.weights_sha256 != sha256_file(sub.folder / WEIGHTS_FILE),
         "weights_sha256 does not match weights.safetensors; re-run tinyrouter pack"),
        (not receipt.total_cost_usd > rules.receipt_min_cost_usd,
         f"total_cost_usd must be more than ${rules.receipt_min_cost_usd:g}"),
        (len(receipt.fitness_history) < rules.receipt_min_fitness_entries,
         f"fitness_history needs at least {rules.receipt_min_fitness_entries} generations"),
    ]
    return next((f"receipt.json: {text}" for bad, text in problems if bad), None)


GATES = (
    Gate(0, "scope", check_scope),
    Gate(1, "rate limit", check_rate_limit),
    Gate(2, "weight sanity", check_weights),
    Gate(3, "duplicate", check_duplicate),
    Gate(4, "receipt", check_receipt),
)


def run_gates(sub: Submission, ctx: GateContext, gates: tuple[Gate, ...] = GATES) -> GateReport:
    results: list[GateResult] = []
    failed = False
    for gate in gates:
        if failed:
            results.append(GateResult(gate.number, gate.name, None, None))
            continue
        try:
            reason = gate.check(sub, ctx)
        except (SubmissionError, OSError, ValueError) as exc:
            reason = f"could not be checked: {exc}"
        failed = reason is not None
        results.append(GateResult(gate.number, gate.name, not failed, reason))
    return GateReport(tuple(results))


def context_for(repo: str | Path, author: str, rules: Competition, now: datetime | None = None,
                changes: list[Change] | None = None, pr: int | None = None,
                head_sha: str | None = None, shown_at: str | None = None) -> GateContext:
    store = Store(Path(repo), lenient=True)  # lines were checked as they were written
    basis = basis_fields(store, rules)
    index, attempts = attempts_index.for_gates(store.root, rules, basis.get("basis"), author, pr)
    return GateContext(author=author, now=now or utc_now(), rules=rules, changes=changes, pr=pr,
                       head_sha=head_sha,
                       attempts=store.attempts() if index is None else attempts,
                       refunded=store.refunded_heads(author), index=index, shown_at=shown_at,
                       **basis)


def basis_fields(store: Store, rules: Competition) -> dict[str, Any]:
    """GateContext's basis fields for the board in `store`."""
    try:
        return {"basis": read_basis(store.root / BASIS_FILE, store.manifest(), rules)}
    except BasisError as exc:
        return {"basis_error": str(exc)}


def attempt_of(sub: Submission, report: GateReport, ctx: GateContext,
               generation: int) -> Attempt:
    """The attempts-log line of a head that passed gate 1: its hash, fingerprint and verdict."""
    seen = None
    try:
        head, _ = sub.weights
        weights_sha = sha256_file(sub.folder / WEIGHTS_FILE)
        mine, view = fingerprint(head, ctx.rules.n_models), None
        if ctx.basis is not None:  # the log keeps only the projection gate 3 compares there
            try:
                view = fingerprints.encode_projected(mine, ctx.rules.n_models,
                                                     ctx.basis.directions)
                seen = Seen(ctx.basis.digest)
            except ValueError:  # nothing on the basis: kept whole, compared as before
                seen = None
        if view is None:
            view = encode_fingerprint(mine, ctx.rules.n_models)
    except (SubmissionError, OSError):
        weights_sha = view = None  # unreadable weights: gate 2 failed, nothing to compare
    failed = report.failed
    return Attempt(miner=sub.login, generation=generation, pr=ctx.pr, head_sha=ctx.head_sha,
                   at=format_time(ctx.now), weights_sha256=weights_sha, fingerprint=view,
                   gates_passed=report.passed, failed_gate=None if failed is None else failed.number,
                   seen=seen, shown_at=ctx.shown_at)
