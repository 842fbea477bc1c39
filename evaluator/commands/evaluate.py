"""`tinyrouter evaluate`: score one submission against the king on the hidden benchmark."""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

from evaluator.evaluate import (
    coordinator_router,
    evaluate_submission,
    pool_live_runner,
    render_report,
)
from evaluator.files import dumps, write_atomic
from evaluator.rules import GENERATION_PATTERN, NAME_PATTERN

HEAD_SHA = re.compile(r"^[0-9a-f]{40}([0-9a-f]{24})?$")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("evaluate", help="score a submission against the king (maintainer, GPU)",
                       description="Re-check gates 2–4, score the submission and the reigning "
                                   "king on the sealed hidden benchmark, and write the public "
                                   "result (and optionally the full private record).")
    p.add_argument("--repo", type=Path, default=Path("."), help="repository root (default .)")
    p.add_argument("--submission", required=True, help="submissions/<login>/<n>")
    p.add_argument("--benchmark-dir", type=Path,
                   default=os.environ.get("TINYROUTER_BENCHMARK_DIR"),
                   help="folder of sealed splits (default $TINYROUTER_BENCHMARK_DIR); "
                        "the password comes from $BENCHMARK_PASSWORD")
    p.add_argument("--encoder", help="encoder hub id or local folder (default: the rules')")
    p.add_argument("--pool-url", help="pool base URL (default $OPENROUTER_BASE_URL or OpenRouter)")
    p.add_argument("--pr", type=int, help="the pull request number")
    p.add_argument("--head-sha", help="the approved PR head commit")
    p.add_argument("--out", type=Path, required=True, help="public result record (JSON)")
    p.add_argument("--private-out", type=Path, help="full private record (JSON); keep it private")
    p.add_argument("--format", choices=("text", "github"), default="text",
                   help="github: annotations and a job summary")
    p.set_defaults(func=run)


def submission_path(repo: Path, given: str) -> str:
    """`submissions/<login>/<n>` relative to the repo; ValueError when it is not one."""
    path = Path(given)
    if path.is_absolute():
        try:
            path = path.resolve().relative_to(repo.resolve())
        except ValueError as exc:
            raise ValueError(f"{given} is not inside {repo}") from exc
    parts = path.parts
    if (len(parts) != 3 or parts[0] != "submissions" or not NAME_PATTERN.match(parts[1])
            or not GENERATION_PATTERN.match(parts[2])):
        raise ValueError(f"--submission must be submissions/<login>/<n>, not {given!r}")
    return path.as_posix()


def usage(message: str) -> int:
    print(f"usage error: {message}", file=sys.stderr)
    return 2


def run(args: argparse.Namespace) -> int:
    from evaluator.benchmarks.sealing import open_benchmark, password_from_env

    rules = args.rules
    try:
        relpath = submission_path(args.repo, args.submission)
    except ValueError as exc:
        return usage(str(exc))
    if args.head_sha is not None and not HEAD_SHA.match(args.head_sha):
        return usage("--head-sha must be a full lowercase hex commit id")
    if args.pr is not None and args.pr < 1:
        return usage("--pr must be a positive number")
    if args.benchmark_dir is None:
        return usage("give --benchmark-dir or set TINYROUTER_BENCHMARK_DIR")
    password = password_from_env()
    evaluation = evaluate_submission(
        args.repo, relpath,
        open_sets=lambda: open_benchmark(args.benchmark_dir, password, rules),
        router=coordinator_router(args.encoder or rules.encoder_id, rules),
        run_live=pool_live_runner(args.pool_url, rules), rules=rules,
        pr=args.pr, head_sha=args.head_sha)
    write_atomic(args.out, dumps(evaluation.public))
    if args.private_out:
        write_atomic(args.private_out, dumps(evaluation.private))
    report(evaluation.public, args.format, rules)
    return 0


def report(public: dict, fmt: str, rules) -> None:
    """Print the public view only: the outcome line, and for GitHub an annotation and summary."""
    print(headline(public))
    if fmt != "github":
        return
    level = "error" if public["outcome"] == "rejected" else "notice"
    print(f"::{level} title=TinyRouter evaluation::{annotation(headline(public))}")
    summary = render_report("summary", public, rules)
    path = os.environ.get("GITHUB_STEP_SUMMARY")
    if path:
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(summary)
    else:
        print(summary)


def headline(public: dict) -> str:
    who = f"{public['miner']} generation {public['generation']}"
    if public["outcome"] == "rejected":
        return f"{who}: rejected: {public['reason']}"
    versus = ("no king reigned" if public["king_composite"] is None else
              f"king {public['king_composite']:.4f}, delta {public['delta']:+.4f}")
    verdict = "new king" if public["outcome"] == "king" else "not crowned"
    return f"{who}: {verdict}: composite {public['composite']:.4f} ({versus})"


def annotation(text: str) -> str:
    """Workflow-command escaping, so untrusted text cannot start a command of its own."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
