"""`tinyrouter gates` (the PR bot) and `tinyrouter preflight` (the same gates, locally)."""

from __future__ import annotations

import argparse
import os
from contextlib import nullcontext
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from evaluator import attempts_index, precedence
from evaluator.advisories import Advisory
from evaluator.changes import Change, parse_changes
from evaluator.commands.output import (
    annotate,
    append_summary,
    github_output,
    say,
    set_outputs,
    write_json_out,
    write_text_out,
)
from evaluator.errors import GitHubError, UsageError
from evaluator.files import format_time, parse_time, utc_now
from evaluator.gates import GateReport, attempt_of, context_for, run_gates
from evaluator.github import GitHub, publish
from evaluator.next_steps import NextStep, next_step, submission_advisories
from evaluator.preflight import BehaviourPreview
from evaluator.rules import Competition, is_commit_sha, is_name
from evaluator.store import LEADERBOARD_DIR, Store
from evaluator.submission import Submission
from evaluator.templating import render

COMMENT_TEMPLATE = "gates/comment.md.j2"


def add_gates(p: argparse.ArgumentParser) -> None:
    p.add_argument("--repo", type=Path, required=True, help="base checkout holding the PR's folder")
    p.add_argument("--submission", required=True, help="submissions/<login>/<n>")
    p.add_argument("--author", required=True, help="the PR author's GitHub login")
    p.add_argument("--changed-files", type=Path, help="`git diff --name-status` of the PR")
    p.add_argument("--pr", type=int, help="PR number (re-runs keep their generation and slot)")
    p.add_argument("--head-sha", help="the PR head commit (full SHA), stored with the attempt")
    p.add_argument("--now", help="evaluate the rate limit at this UTC time (ISO 8601)")
    p.add_argument("--shown-at", help="when GitHub first showed this head on the pull request "
                                      "(UTC, ISO 8601; `gh pr-info --run-id`): gate 3 compares "
                                      "it with the heads shown before it")
    p.add_argument("--pending", type=Path, metavar="DIR",
                   help="the open pull requests' heads shown before this one and not gated yet "
                        "(`gh pending`): a head that routes like one of them is held, reading "
                        "main again, until that one's gates have run")
    p.add_argument("--json", dest="json_out", metavar="OUT",
                   help="write the report as JSON (- for stdout)")
    p.add_argument("--comment", metavar="OUT", help="write the PR comment (Markdown; - for stdout)")
    p.add_argument("--rules-url", default=os.environ.get("TINYROUTER_RULES_URL", ""),
                   help="link to the rules page in the comment")
    p.add_argument("--record-attempt", action="store_true",
                   help="append the attempt to leaderboard/attempts.jsonl once gate 1 passes")
    p.add_argument("--push", action="store_true",
                   help="with --record-attempt, record it on the remote: on the branch's newest "
                        "commit run the gates, commit, push, and all again if another job "
                        "pushed first (so racing pull requests see each other's attempts)")
    p.add_argument("--remote", default="origin", help="git remote for --push")
    p.add_argument("--branch", default="main", help="branch for --push")
    p.add_argument("--format", choices=("text", "github"), default="text",
                   help="github: log lines kept inert, an annotation, a job summary and the "
                        "step output passed=true|false")
    p.add_argument("--exit-zero", action="store_true",
                   help="exit 0 when a gate fails too (the outcome is in the report); "
                        "non-zero then means the gates could not run")
    p.set_defaults(func=run_bot, ledger=None)


def add_preflight(p: argparse.ArgumentParser) -> None:
    p.add_argument("submission", help="submissions/<login>/<n>")
    p.add_argument("--repo", type=Path, default=Path("."), help="repository root")
    p.add_argument("--author", help="the GitHub account that will open the pull request "
                                    "(default: the folder's login, said when assumed)")
    p.add_argument("--ledger", type=Path,
                   help="your run's ledger.jsonl: also advise when the receipt's cost or ledger "
                        "head is not what it records (advisories never block)")
    p.add_argument("--data", type=Path, default=Path("data"),
                   help="your collected rows (`tinyrouter collect --out`): they hold the public "
                        "train items the behavioural check routes")
    p.add_argument("--encoder", help="hub id or local folder (default: the rules' encoder)")
    p.add_argument("--earlier-dir", type=Path,
                   help="a folder holding earlier attempts' submissions/<login>/<n> folders "
                        "copied from their pull requests (default: this checkout)")
    p.add_argument("--now", help=argparse.SUPPRESS)
    p.set_defaults(func=run_preflight, changed_files=None, pr=None, head_sha=None,
                   json_out=None, comment=None, rules_url="", record_attempt=False, push=False,
                   format="text", exit_zero=False, shown_at=None, pending=None)


PARSERS = {"gates": add_gates, "preflight": add_preflight}


def run_preflight(args: argparse.Namespace) -> int:
    relpath = Path(args.submission)
    if relpath.is_absolute():
        try:
            relpath = relpath.resolve().relative_to(args.repo.resolve())
        except ValueError as exc:
            raise UsageError(f"{args.submission} is not inside {args.repo}") from exc
    args.submission = relpath.as_posix()
    parts = relpath.parts
    if not args.author:
        args.author = parts[1] if len(parts) > 1 else ""
        print(f"checking as if the pull request came from {args.author!r}, the folder's login "
              "(gate 0 refuses any other author); pass --author with the account you will "
              "open it from")
    code = run_bot(args)
    if code != 0:  # a gate failed: the evaluation stops there too
        return code
    from evaluator.preflight import preview_submission

    preview = preview_submission(args.repo, args.submission, args.rules, args.data,
                                 args.encoder, args.earlier_dir)
    print("\n".join(behaviour_lines(preview, args.rules)))
    return 1 if preview.passed is False else 0


def behaviour_lines(preview: BehaviourPreview, rules: Competition) -> list[str]:
    """The behavioural check's verdict as preflight and score print it."""
    from evaluator.contenders import BEHAVIOUR_GATE, behaviour_line
    from evaluator.preflight import NOT_COMPARED

    if preview.not_run:
        return [f"– {BEHAVIOUR_GATE}: not run here: {preview.not_run}"]
    if preview.reason:
        return [f"✗ {preview.reason}",
                "the evaluation would reject this head before it opens the hidden sets"]
    if not preview.compared:
        return [f"✓ {BEHAVIOUR_GATE}: no king and no earlier attempt to compare with"]
    lines = [f"✓ {BEHAVIOUR_GATE}: routes like no earlier head ({len(preview.compared)} "
             "compared)"]
    lines += [f"  {behaviour_line(found, rules)}" for found in preview.compared]
    if preview.skipped:
        prs = ", ".join(f"PR #{a.pr}" for a in preview.skipped)
        lines.append(f"  not compared with {len(preview.skipped)} {NOT_COMPARED}: {prs}")
    return lines


def run_bot(args: argparse.Namespace) -> int:
    if not args.repo.is_dir():
        raise UsageError(f"--repo {args.repo} is not a folder")
    if not is_name(args.author):
        raise UsageError(f"--author {args.author!r} is not a GitHub login")
    if args.pr is not None and args.pr < 1:
        raise UsageError("--pr must be a pull request's number, 1 or more")
    if args.head_sha is not None and not is_commit_sha(args.head_sha):
        raise UsageError("--head-sha must be a full lowercase hex commit id")
    if args.push and not (args.record_attempt and args.pr and args.head_sha
                          and is_name(args.remote) and is_name(args.branch)):
        raise UsageError("--push goes with --record-attempt, --pr and --head-sha, and a plain "
                         "--remote and --branch")
    try:
        now = parse_time(args.now) if args.now else utc_now()
        if args.shown_at:
            args.shown_at = format_time(parse_time(args.shown_at))
        changes = (parse_changes(args.changed_files.read_text(encoding="utf-8"))
                   if args.changed_files else None)
    except (OSError, ValueError) as exc:
        raise UsageError(str(exc)) from exc
    pending = precedence.read(args.pending, args.rules) if args.pending else []
    with github_output() if args.format == "github" else nullcontext():
        checked = _gate(args, now, changes, pending)
        _emit(checked, args)
    return 0 if checked.report.passed or args.exit_zero else 1


def _gate(args: argparse.Namespace, now: datetime, changes: list[Change] | None,
          pending: list) -> GatesRun:
    """The gates, recorded on main with --push; while the head routes like a pending head
    shown before it (`precedence`), it is held: main is read again until that head's gates
    have run, for at most `precedence.HOLD_BUDGET_S`."""
    waited, github = 0.0, None
    while True:
        if args.push:
            checked, _ = publish(args.repo, [LEADERBOARD_DIR], f"leaderboard: attempt of PR "
                                 f"#{args.pr}", lambda held=pending: _check(args, now, changes, held),
                                 args.remote, args.branch)
        else:
            checked = _check(args, now, changes, pending)
        if not checked.held:
            return checked
        names = ", ".join(p.what for p in checked.held)
        if not args.push or waited >= precedence.HOLD_BUDGET_S:
            raise GitHubError(f"held: the head routes like that of {names}, shown on a pull "
                              "request before it, whose gates have not run yet; re-run this job "
                              "once they have (the earlier head wins)")
        say([f"held: the head routes like that of {names}, shown before it; waiting for its "
             "gates"], args.format == "github")
        precedence.pause()
        waited += precedence.HOLD_POLL_S
        github = github or GitHub.from_env(os.environ.get("GITHUB_REPOSITORY") or None)
        pending = [(p, rows) for p, rows in pending if not precedence.settled(github, p)]


@dataclass(frozen=True)
class GatesRun:
    """The gates' verdict, and what the miner is told besides (neither changes it). `held`:
    pending heads shown before this one that it routes like (nothing is recorded then)."""

    report: GateReport
    step: NextStep | None
    advisories: list[Advisory]
    held: tuple = ()

    def to_dict(self) -> dict:
        return {**self.report.to_dict(), "advisories": [a.to_dict() for a in self.advisories],
                "next_step": None if self.step is None else self.step.to_dict()}


def _check(args: argparse.Namespace, now: datetime, changes: list[Change] | None,
           pending: list = ()) -> GatesRun:
    """The gates on the checkout as it is now, recording the attempt if asked (unless the
    head is held: see `_gate`)."""
    ctx = context_for(args.repo, args.author, args.rules, now, changes, args.pr, args.head_sha,
                      args.shown_at)
    sub = Submission(args.repo, args.submission, args.rules)
    report = run_gates(sub, ctx)
    if pending and report.passed_gate(3):
        logged = Store(args.repo, lenient=True).attempts()  # the whole log: who has run
        held = precedence.alike(sub.weights[0], pending, logged, args.rules, ctx.basis)
        if held:
            return GatesRun(report, None, [], tuple(held))
    step = next_step(sub, report, ctx, recorded=args.record_attempt)
    if args.record_attempt and report.passed_gate(1):
        store = Store(args.repo, lenient=True)  # it checks the line it appends
        generation = store.next_generation(sub.login, ctx.attempts, args.pr, exclude=sub.folder)
        if store.record_attempt(attempt_of(sub, report, ctx, generation), ctx.attempts):
            attempts_index.update(store.root, args.rules, ctx.basis, ctx.index)
    return GatesRun(report, step, submission_advisories(sub, report, args.ledger))


def _emit(checked: GatesRun, args: argparse.Namespace) -> None:
    github, report = args.format == "github", checked.report
    lines = []
    for r in report.results:
        mark = {True: "✓", False: "✗", None: "–"}[r.passed]
        detail = r.reason if r.passed is False else ("passed" if r.passed else "not run")
        lines.append(f"{mark} gate {r.number} {r.name}: {detail}")
    lines.append("all gates passed" if report.passed else
                 f"gate {report.failed.number} ({report.failed.name}) failed")
    lines += [f"advisory [{a.id}] (never blocks): {a.message}; {a.fix}"
              for a in checked.advisories]
    say(lines, github)
    write_json_out(args.json_out, checked.to_dict())
    comment = render(COMMENT_TEMPLATE, report=report, step=checked.step,
                     advisories=checked.advisories, folder=args.submission, closes=True,
                     rules=args.rules, rules_url=args.rules_url)
    write_text_out(args.comment, comment)
    if github:
        if report.failed:
            annotate("error", f"Gate {report.failed.number} ({report.failed.name})",
                     report.failed.reason or "")
        append_summary(comment)
        set_outputs({"passed": "true" if report.passed else "false"})
