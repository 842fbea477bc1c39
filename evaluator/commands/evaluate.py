"""`tinyrouter evaluate`: score one submission against the king on the hidden benchmark."""

from __future__ import annotations

import argparse
import dataclasses
import os
from contextlib import nullcontext
from pathlib import Path

from evaluator import isolation, vault
from evaluator.changes import parse_changes
from evaluator.commands.output import github_output, say, write_json_out
from evaluator.errors import IsolationError, UsageError
from evaluator.files import format_time, utc_now
from evaluator.records import VOID, Result
from evaluator.reports import headline
from evaluator.rules import OFFICIAL, Competition, is_commit_sha, is_name
from evaluator.store import Store, parse_submission_path


def add_evaluate(p: argparse.ArgumentParser) -> None:
    p.description = ("Re-check gates 0–4, compare the submission's routing with the king's and "
                     "every earlier attempt's on the public train items, score both on a fresh "
                     "secret partition of the sealed hidden benchmark, and write the public "
                     "result (and optionally the full private record).")
    p.add_argument("--repo", type=Path, default=Path("."), help="repository root")
    p.add_argument("--submission", required=True, help="submissions/<login>/<n>")
    p.add_argument("--benchmark-dir", type=Path,
                   default=os.environ.get("TINYROUTER_BENCHMARK_DIR"),
                   help="folder of sealed splits (default $TINYROUTER_BENCHMARK_DIR); "
                        "the password comes from $BENCHMARK_PASSWORD")
    p.add_argument("--encoder", help="encoder hub id or local folder (default: "
                   f"{OFFICIAL.encoder_id}, or the --competition file's)")
    p.add_argument("--pool-url", help="pool base URL (default $OPENROUTER_BASE_URL or OpenRouter)")
    p.add_argument("--pr", type=int, help="the pull request number")
    p.add_argument("--head-sha", help="the approved PR head commit")
    p.add_argument("--author", help="the PR author, for gate 0 (default: the folder's login)")
    p.add_argument("--changed-files", type=Path,
                   help="the head's `git diff --name-status`, for gate 0's scope check")
    p.add_argument("--require-gates-pass", action="store_true",
                   help="refuse to evaluate unless leaderboard/attempts.jsonl records a gates "
                        "pass for --pr at --head-sha (the workflow's evaluation does)")
    p.add_argument("--earlier-dir", type=Path,
                   help="a folder holding the earlier attempts' submissions/<login>/<n> folders "
                        "copied from their PR heads (`tinyrouter gh fetch-earlier`), for the "
                        "behavioural check (default: the repository)")
    p.add_argument("--out", help="public result record (JSON; - for stdout); default: "
                                 f"{RECORDS_HELP}/result.json, outside the repository")
    p.add_argument("--private-out", help="full private record (JSON; it holds the partition seed "
                                         "and the hidden item ids); default: "
                                         f"{RECORDS_HELP}/private.json, readable by you only")
    p.add_argument("--format", choices=("text", "github"), default="text",
                   help="github: annotations and a job summary")
    p.set_defaults(func=run)


PARSERS = {"evaluate": add_evaluate}
PRIVATE_DIR_ENV = "TINYROUTER_PRIVATE_DIR"
RECORDS_HELP = f"${PRIVATE_DIR_ENV} (else ~/.local/state/tinyrouter)/<login>-<n>[-pr<N>]"


def records_dir(relpath: str, pr: int | None) -> Path:
    """Where an evaluation's records go by default: a private folder outside any checkout."""
    base = os.environ.get(PRIVATE_DIR_ENV) or Path(
        os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state", "tinyrouter")
    login, generation = parse_submission_path(relpath) or ("unknown", 0)
    folder = Path(base, f"{login}-{generation}" + (f"-pr{pr}" if pr else ""))
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        folder.chmod(0o700)
    except OSError as exc:
        raise UsageError(f"cannot keep the records in {folder} ({exc}): set {PRIVATE_DIR_ENV} "
                         "or pass --out and --private-out") from exc
    return folder


def submission_arg(repo: Path, given: str) -> str:
    """`submissions/<login>/<n>` relative to the repo, from what the user typed."""
    path = Path(given)
    if path.is_absolute():
        try:
            path = path.resolve().relative_to(repo.resolve())
        except ValueError as exc:
            raise UsageError(f"{given} is not inside {repo}") from exc
    if parse_submission_path(path.as_posix()) is None:
        raise UsageError(f"--submission must be submissions/<login>/<n>, not {given!r}")
    return path.as_posix()


def run(args: argparse.Namespace) -> int:
    rules = args.rules
    relpath = submission_arg(args.repo, args.submission)
    if args.head_sha is not None and not is_commit_sha(args.head_sha):
        raise UsageError("--head-sha must be a full lowercase hex commit id")
    if args.pr is not None and args.pr < 1:
        raise UsageError("--pr must be a positive number")
    if args.require_gates_pass and (args.pr is None or args.head_sha is None):
        raise UsageError("--require-gates-pass needs --pr and --head-sha")
    if args.author is not None and not is_name(args.author):
        raise UsageError(f"--author {args.author!r} is not a GitHub login")
    try:
        changes = (parse_changes(args.changed_files.read_text(encoding="utf-8"))
                   if args.changed_files else None)
    except (OSError, ValueError) as exc:
        raise UsageError(f"cannot read --changed-files: {exc}") from exc
    if args.benchmark_dir is None:
        raise UsageError("give --benchmark-dir or set TINYROUTER_BENCHMARK_DIR")
    if args.require_gates_pass:  # before the encoder loads
        Store(args.repo).require_gates_pass(args.pr, args.head_sha)
    with github_output() if args.format == "github" else nullcontext():
        try:
            found = isolation.require(flag=None)  # before any secret is read
            result = dataclasses.replace(evaluate_held(args, relpath, changes),
                                         isolation=found.describe())
        except IsolationError as exc:
            result = isolation_void(args, relpath, str(exc))
        public = result.public(rules.disclosure_precision)
        out, private = args.out, args.private_out
        if out is None or private is None:
            folder = records_dir(relpath, args.pr)
            out, private = out or folder / "result.json", private or folder / "private.json"
        write_json_out(out, public)
        write_json_out(private, result.private(rules.disclosure_precision))
        if private != "-":
            Path(private).chmod(0o600)
        report(public, args.format == "github", rules)
        if args.out is None or args.private_out is None:
            say([f"result: {out}", f"private record (keep it private): {private}"],
                args.format == "github")
    return 0


def evaluate_held(args: argparse.Namespace, relpath: str, changes: list | None) -> Result:
    """The evaluation proper, once isolation is proven: the secret is read only here."""
    # torch, the encoder and the sealed benchmark load only when an evaluation runs
    from evaluator.benchmarks.sealing import open_train_items, open_verified, password_from_env
    from evaluator.coordinator.router import load_router
    from evaluator.evaluate import evaluate_submission
    from evaluator.pool.client import API_KEY_ENV
    from evaluator.pool.runner import pool_runner

    rules = args.rules
    password = password_from_env()
    vault.take(API_KEY_ENV)  # out of the environment now, before anything else starts
    manifest = Store(args.repo).manifest()
    if manifest is None:
        raise UsageError(f"{args.repo} has no leaderboard/manifest.json to check the sealed "
                         "benchmark against")

    def train_items() -> list:
        found = open_train_items(args.benchmark_dir, manifest, rules)
        return [item for bench in rules.benchmarks for item in found[bench]]

    return evaluate_submission(
        args.repo, relpath,
        open_sets=lambda: open_verified(args.benchmark_dir, password, manifest, rules),
        router=load_router(args.encoder or rules.encoder_id, rules),
        run_live=pool_runner(args.pool_url, rules, share_responses=True), rules=rules,
        public_items=train_items,
        pr=args.pr, head_sha=args.head_sha, author=args.author, changes=changes,
        require_gates_pass=args.require_gates_pass, earlier_dir=args.earlier_dir)


def isolation_void(args: argparse.Namespace, relpath: str, why: str) -> Result:
    """The void result of an evaluation the runner's isolation stopped: refunded, nothing else
    published; the maintainers read the fix in the job's log."""
    from evaluator.evaluate import VOID_NOTE

    miner, generation = parse_submission_path(relpath) or ("", 0)
    say([f"error: {why}"], args.format == "github")
    return Result(miner=miner, generation=generation, pr=args.pr, head_sha=args.head_sha,
                  evaluated_at=format_time(utc_now()), outcome=VOID,
                  benchmark_manifest=Store(args.repo).manifest_hash(),
                  reason=f"void: {isolation.NOT_IN_FORCE} on the evaluation runner; {VOID_NOTE}",
                  isolation=isolation.NOT_IN_FORCE)


def report(public: dict, github: bool, rules: Competition) -> None:
    """Print the public view only. In a workflow, nothing about the score at all: the GPU job's
    log is public before the record job has decided whether the result stands (a PR changed
    after its approval is withdrawn and publishes nothing), so the verdict is published by the
    record job alone."""
    if github:
        say(["evaluated; the record job publishes the verdict once it is recorded"], github)
        return
    say([headline(public)], github)
