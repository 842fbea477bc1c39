"""`tinyrouter gates` (the PR bot) and `tinyrouter preflight` (the same gates, locally)."""

from __future__ import annotations

import argparse
import os
import re
import sys
from datetime import datetime, timezone
from pathlib import Path

from evaluator.attempts import Attempt, format_time, parse_time, record_attempt
from evaluator.files import write_json
from evaluator.gates import (
    GateReport,
    Submission,
    context_for,
    next_generation,
    parse_changes,
    run_gates,
)
from evaluator.rules import NAME_PATTERN
from evaluator.templating import render

SHA_PATTERN = re.compile(r"^[0-9a-f]{7,64}$")


def register(sub: argparse._SubParsersAction) -> None:
    gates = sub.add_parser("gates", help="run gates 0–4 on a PR's submission (the PR bot)")
    gates.add_argument("--repo", type=Path, required=True, help="base checkout holding the PR's folder")
    gates.add_argument("--submission", required=True, help="submissions/<login>/<n>")
    gates.add_argument("--author", required=True, help="the PR author's GitHub login")
    gates.add_argument("--changed-files", type=Path, help="`git diff --name-status` of the PR")
    gates.add_argument("--pr", type=int, help="PR number (re-runs keep their generation and slot)")
    gates.add_argument("--head-sha", help="the PR head commit, stored with the attempt")
    gates.add_argument("--now", help="evaluate the rate limit at this UTC time (ISO 8601)")
    gates.add_argument("--json", type=Path, dest="json_out", help="write the report as JSON")
    gates.add_argument("--comment", type=Path, help="write the PR comment (Markdown)")
    gates.add_argument("--rules-url", default=os.environ.get("TINYROUTER_RULES_URL", ""),
                       help="link to the rules page in the comment")
    gates.add_argument("--record-attempt", action="store_true",
                       help="append the attempt to leaderboard/attempts.jsonl once gate 1 passes")
    gates.add_argument("--format", choices=("text", "github"), default="text")
    gates.set_defaults(func=run_bot)

    pre = sub.add_parser("preflight", help="run gates 0–4 locally, exactly as the PR bot does")
    pre.add_argument("submission", help="submissions/<login>/<n>")
    pre.add_argument("--repo", type=Path, default=Path("."), help="repository root (default .)")
    pre.add_argument("--author", help="your GitHub login (default: the folder's)")
    pre.add_argument("--now", help=argparse.SUPPRESS)
    pre.set_defaults(func=run_preflight, changed_files=None, pr=None, head_sha=None,
                     json_out=None, comment=None, rules_url="", record_attempt=False, format="text")


def _usage(message: str) -> int:
    print(f"usage error: {message}", file=sys.stderr)
    return 2


def _now(args: argparse.Namespace) -> datetime:
    return parse_time(args.now) if args.now else datetime.now(timezone.utc)


def run_preflight(args: argparse.Namespace) -> int:
    relpath = Path(args.submission)
    if relpath.is_absolute():
        try:
            relpath = relpath.resolve().relative_to(args.repo.resolve())
        except ValueError:
            return _usage(f"{args.submission} is not inside {args.repo}")
    args.submission = relpath.as_posix()
    parts = relpath.parts
    args.author = args.author or (parts[1] if len(parts) > 1 else "")
    return run_bot(args)


def run_bot(args: argparse.Namespace) -> int:
    if not args.repo.is_dir():
        return _usage(f"--repo {args.repo} is not a folder")
    if not NAME_PATTERN.match(args.author or ""):
        return _usage(f"--author {args.author!r} is not a GitHub login")
    if args.head_sha is not None and not SHA_PATTERN.match(args.head_sha):
        return _usage("--head-sha must be a hex commit id")
    try:
        now = _now(args)
        changes = (parse_changes(args.changed_files.read_text(encoding="utf-8"))
                   if args.changed_files else None)
    except (OSError, ValueError) as exc:
        return _usage(str(exc))
    ctx = context_for(args.repo, args.author, now, changes, args.pr, args.rules)
    sub = Submission(args.repo, args.submission, args.rules)
    report = run_gates(sub, ctx)
    if args.record_attempt and report.passed_gate(1):
        generation = next_generation(args.repo, sub.login, ctx.attempts, args.pr, exclude=sub.folder)
        record_attempt(args.repo, Attempt(sub.login, generation, args.pr, args.head_sha,
                                          format_time(now)))
    _emit(report, args)
    return 0 if report.passed else 1


def _emit(report: GateReport, args: argparse.Namespace) -> None:
    for r in report.results:
        mark = {True: "✓", False: "✗", None: "–"}[r.passed]
        detail = r.reason if r.passed is False else ("passed" if r.passed else "not run")
        print(f"{mark} gate {r.number} {r.name}: {detail}")
    print("all gates passed" if report.passed else
          f"gate {report.failed.number} ({report.failed.name}) failed")
    if args.json_out:
        write_json(args.json_out, report.to_dict())
    comment = render("gates/comment.md.j2", report=report, folder=args.submission,
                     closes=True, rules_url=args.rules_url)
    if args.comment:
        args.comment.write_text(comment, encoding="utf-8")
    if args.format == "github":
        if report.failed:
            print(f"::error title=Gate {report.failed.number} ({report.failed.name})::"
                  f"{_annotation(report.failed.reason or '')}")
        summary = os.environ.get("GITHUB_STEP_SUMMARY")
        if summary:
            with open(summary, "a", encoding="utf-8") as handle:
                handle.write(comment)


def _annotation(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A").replace("::", ": :")
