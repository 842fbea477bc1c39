"""`tinyrouter leaderboard validate|apply|seed-king|mark|lift|subjects|render`: the committed
leaderboard state."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from evaluator.commands.output import write_text_out
from evaluator.errors import LeaderboardError, UsageError
from evaluator.files import format_time, utc_now
from evaluator.leaderboard import (
    apply_result,
    check_king_folder,
    check_private,
    check_result,
    decide,
    lift_mark,
    mark_unfinished,
    require_king_folder,
    seed_king,
    validate_state,
)
from evaluator.lifecycle import UNFINISHED
from evaluator.records import STALE
from evaluator.reports import render_result
from evaluator.rules import is_commit_sha
from evaluator.store import LEADERBOARD_DIR, QUEUE_FILE, Store


def add_leaderboard(board: argparse.ArgumentParser) -> None:
    verbs = board.add_subparsers(dest="verb", metavar="VERB", required=True)

    check = verbs.add_parser("validate", help="check every leaderboard file against its schema "
                                              "and the others")
    check.add_argument("results", nargs="*", type=Path,
                       help="result records to check too (e.g. an evaluation artifact)")
    check.add_argument("--repo", type=Path, default=Path("."), help="repository root")
    check.add_argument("--private", type=Path, metavar="FULL.json",
                       help="with one result: its private record, which must match it")
    check.add_argument("--results-only", action="store_true",
                       help="check the named results alone, not the whole leaderboard (what a "
                            "record job checks before applying one; apply checks what it writes)")
    check.set_defaults(func=run_validate)

    apply = verbs.add_parser("apply", help="record one result (idempotent, atomic)")
    apply.add_argument("result", type=Path, help="RESULT.json written by `tinyrouter evaluate`")
    apply.add_argument("--private", type=Path, metavar="FULL.json",
                       help="its private record: refuse the result unless they match, "
                            "partition commitment included")
    apply.add_argument("--repo", type=Path, default=Path("."), help="repository root")
    apply.set_defaults(func=run_apply)

    seed = verbs.add_parser("seed-king", help="install the first king (maintainer)")
    seed.add_argument("submission", type=Path, help="submissions/<login>/<n>, committed")
    seed.add_argument("--result", type=Path, required=True,
                      help="its RESULT.json from `tinyrouter evaluate` (no king reigning)")
    seed.add_argument("--repo", type=Path, default=Path("."), help="repository root")
    seed.set_defaults(func=run_seed)

    mark = verbs.add_parser("mark", help="mark a stuck queue entry (maintainer): its evaluation "
                                         "ended without a result, for this reason")
    mark.add_argument("--pr", type=int, required=True, help="the pull request")
    mark.add_argument("--head-sha", required=True, help="the gated head, in full")
    mark.add_argument("--state", choices=UNFINISHED, required=True,
                      help="declined, expired or failed (each refunds the slot)")
    mark.add_argument("--reason", required=True, help="one line, shown on the Queue page")
    mark.add_argument("--repo", type=Path, default=Path("."), help="repository root")
    mark.set_defaults(func=run_mark)

    attest = verbs.add_parser("subjects", help="what the record job attests for one evaluation: "
                                               "its result file and leaderboard/ at the commit "
                                               "that recorded it")
    attest.add_argument("--pr", type=int, required=True, help="the pull request")
    attest.add_argument("--head-sha", required=True, help="the evaluated head, in full")
    attest.add_argument("--out", type=Path, required=True,
                        help="the checksums file to write (actions/attest's subject-checksums)")
    attest.add_argument("--repo", type=Path, default=Path("."),
                        help="a checkout of the branch the record job pushed, with its history")
    attest.set_defaults(func=run_subjects)

    lift = verbs.add_parser(
        "lift", help="take back a head's declined, expired or failed mark (maintainer): its "
                     "slot counts again from its gated time and the record job records its next "
                     "result; refused when the refund was already spent")
    lift.add_argument("--pr", type=int, required=True, help="the pull request")
    lift.add_argument("--head-sha", required=True, help="the marked head, in full")
    lift.add_argument("--reason", required=True, help="one line, shown on the Queue page")
    lift.add_argument("--repo", type=Path, default=Path("."), help="repository root")
    lift.set_defaults(func=run_lift)

    render = verbs.add_parser("render", help="a result as the PR comment or the job summary")
    render.add_argument("result", type=Path, help="a public RESULT.json")
    render.add_argument("--template", choices=("comment", "summary"), default="comment",
                        help="which rendering")
    render.add_argument("--out", default="-", help="where to write it (- for stdout)")
    render.set_defaults(func=run_render)


PARSERS = {"leaderboard": add_leaderboard}


def load_result(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise LeaderboardError(f"cannot read the result {path}: {exc}") from exc
    if not isinstance(data, dict):
        raise LeaderboardError(f"{path} is not a result record (a JSON object)")
    return data


def run_validate(args: argparse.Namespace) -> int:
    if args.results_only and not args.results:
        raise UsageError("--results-only needs the results to check")
    checked = None if args.results_only else validate_state(args.repo, args.rules)
    if checked is not None:
        check_king_folder(args.repo)
    for path in args.results:
        check_result(load_result(path), args.rules, str(path))
    if args.private:
        if len(args.results) != 1:
            raise UsageError("--private goes with exactly one result")
        check_private(load_result(args.results[0]), load_result(args.private), args.rules)
    if checked is None:
        print(f"{len(args.results)} named result(s) valid (the leaderboard itself not checked)")
        return 0
    named = f", and {len(args.results)} named result(s)" if args.results else ""
    print(f"leaderboard valid: {checked.files} state file(s) and {checked.results} recorded "
          f"result(s) checked{named}")
    return 0


def run_apply(args: argparse.Namespace) -> int:
    result = load_result(args.result)
    if args.private:
        check_private(result, load_result(args.private), args.rules)
    record, already = decide(Store(args.repo), result, args.rules)
    if not already:
        require_king_folder(Store(args.repo), record)
    applied = apply_result(args.repo, result, args.rules)
    if not applied.changed:
        print(f"already recorded ({applied.outcome}); nothing changed")
    for path in applied.changed:
        print(f"wrote {path}")
    if applied.crowned:
        print("a new king is crowned")
    elif applied.changed and applied.outcome == STALE:
        print(f"recorded as stale: {applied.record.get('reason')} Evaluate it again against the "
              "current king.")
    return 0


def run_seed(args: argparse.Namespace) -> int:
    folder = args.submission if args.submission.is_absolute() else args.repo / args.submission
    applied = seed_king(args.repo, folder, load_result(args.result), args.rules)
    for path in applied.changed:
        print(f"wrote {path}")
    print("seeded the first king" if applied.changed else "already the king; nothing changed")
    return 0


def run_mark(args: argparse.Namespace) -> int:
    if not is_commit_sha(args.head_sha):
        raise UsageError(f"--head-sha {args.head_sha!r} is not a full lowercase commit SHA "
                         "(the head the gates passed, as leaderboard/attempts.jsonl holds it)")
    event = mark_unfinished(Store(args.repo), args.pr, args.head_sha, args.state, args.reason,
                            format_time(utc_now()))
    if event is None:
        print(f"PR {args.pr} at {args.head_sha[:12]} is already {args.state}; nothing changed")
        return 0
    print(f"marked PR {args.pr} at {args.head_sha[:12]} {args.state}: {event['reason']}")
    print(f"commit {LEADERBOARD_DIR}/{QUEUE_FILE} through a pull request; once merged, the "
          "Queue page shows it settled and the miner's slot is refunded")
    return 0


def run_subjects(args: argparse.Namespace) -> int:
    from evaluator.attestation import subjects

    if not is_commit_sha(args.head_sha):
        raise UsageError(f"--head-sha {args.head_sha!r} is not a full lowercase commit SHA")
    found = subjects(args.repo, args.pr, args.head_sha)
    write_text_out(str(args.out), "".join(subject.line for subject in found))
    for subject in found:
        print(f"attesting {subject.name} (sha256 {subject.sha256})")
    return 0


def run_lift(args: argparse.Namespace) -> int:
    if not is_commit_sha(args.head_sha):
        raise UsageError(f"--head-sha {args.head_sha!r} is not a full lowercase commit SHA")
    event = lift_mark(Store(args.repo), args.pr, args.head_sha, args.reason,
                      format_time(utc_now()), args.rules)
    print(f"lifted the mark of PR {args.pr} at {args.head_sha[:12]} ({event['reason']}): its "
          f"slot counts again for {event['miner']} from the time its gates passed, and the "
          "record job records the next result of this head (re-run its evaluation)")
    print(f"commit {LEADERBOARD_DIR}/{QUEUE_FILE} through a pull request first")
    return 0


def run_render(args: argparse.Namespace) -> int:
    result = load_result(args.result)
    check_result(result, args.rules, str(args.result))
    write_text_out(args.out, render_result(args.template, result, args.rules))
    return 0
