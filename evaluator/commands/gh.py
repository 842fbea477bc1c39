"""`tinyrouter gh …`: one command per workflow step that talks to GitHub or pushes.

The pull request number and head SHA come from `--pr`/`--head-sha` or, when omitted, from
the event payload at `$GITHUB_EVENT_PATH`, so workflow steps need no `${{ }}` expansion.
Values that leave a command (step outputs) are validated first.
"""

from __future__ import annotations

import argparse
import json
import os
import re
from pathlib import Path, PurePosixPath

from evaluator.commands.output import set_outputs
from evaluator.commands.reports import render_result
from evaluator.errors import GitHubError
from evaluator.github import GitHub, fetch_submission, push_paths
from evaluator.records import KING, OUTCOMES
from evaluator.rules import NAME_RE, is_commit_sha, is_name, is_pr_number
from evaluator.store import LEADERBOARD_DIR, parse_submission_path, submission_path

GATES_MARKER = "<!-- tinyrouter:gates -->"
EVALUATION_MARKER = "<!-- tinyrouter:evaluation -->"
WORKFLOW_RE = re.compile(r"[A-Za-z0-9_.-]{1,64}", re.ASCII)  # a workflow file name, a ref
INPUT_VALUE_RE = re.compile(r"[A-Za-z0-9_.-]{0,64}", re.ASCII)


def add_gh(gh: argparse.ArgumentParser) -> None:
    gh.add_argument("--repository", default=os.environ.get("GITHUB_REPOSITORY", ""),
                    help="owner/name (default $GITHUB_REPOSITORY)")
    verbs = gh.add_subparsers(dest="verb", metavar="VERB", required=True)

    def verb(name: str, help: str, func, pr: bool = True) -> argparse.ArgumentParser:
        parser = verbs.add_parser(name, help=help)
        if pr:
            parser.add_argument("--pr", help="pull request number (default: from the event)")
        parser.set_defaults(func=func)
        return parser

    info = verb("pr-info", "validate the PR and write author, head_sha, submission outputs",
                run_pr_info)
    info.add_argument("--head-sha", help="expected head (default: from the event, if any)")
    info.add_argument("--require-label", help="fail unless the PR carries this label")
    info.add_argument("--require-open", action="store_true", help="fail unless the PR is open")

    files = verb("changed-files", "write the PR's changes as `git diff --name-status`",
                 run_changed_files)
    files.add_argument("--out", type=Path, required=True, help="where to write them")

    fetch = verb("fetch-submission", "copy the PR head's submission folder in as data",
                 run_fetch, pr=False)
    fetch.add_argument("--head-sha", required=True)
    fetch.add_argument("--submission", required=True, help="submissions/<login>/<n>")
    fetch.add_argument("--repo", type=Path, default=Path("."), help="base checkout")
    fetch.add_argument("--remote", default="origin", help="git remote to fetch the head from")

    comment = verb("comment", "create or update the PR's one comment with MARKER", run_comment)
    comment.add_argument("--marker", required=True, help="the HTML comment that marks it")
    comment.add_argument("--body-file", type=Path, required=True, help="its Markdown body")

    label = verb("label", "add and remove PR labels", run_label)
    label.add_argument("--add", action="append", default=[], help="a label to add (repeatable)")
    label.add_argument("--remove", action="append", default=[],
                       help="a label to remove (repeatable)")

    verb("close", "close the PR", run_close)

    merge = verb("merge", "merge the PR only if its head is still SHA", run_merge)
    merge.add_argument("--sha", required=True, help="the head SHA the merge is guarded by")
    merge.add_argument("--method", choices=("merge", "squash", "rebase"), default="merge",
                       help="GitHub's merge method")

    conclude = verb("conclude", "comment an evaluation result, then merge (king) or close",
                    run_conclude)
    conclude.add_argument("--sha", required=True, help="the approved, evaluated head SHA")
    conclude.add_argument("--result", type=Path, required=True, help="the public RESULT.json")

    dispatch = verb("dispatch", "start a workflow_dispatch workflow", run_dispatch, pr=False)
    dispatch.add_argument("--workflow", required=True, help="file name, e.g. pages.yml")
    dispatch.add_argument("--ref", default="main", help="the branch to run it on")
    dispatch.add_argument("--input", action="append", default=[], metavar="KEY=VALUE",
                          help="a workflow input (repeatable)")

    push = verb("push-leaderboard", "commit leaderboard/ and push (fetch, rebase, push)",
                run_push, pr=False)
    push.add_argument("--repo", type=Path, default=Path("."), help="the checkout to push from")
    push.add_argument("--message", required=True, help="the commit message")
    push.add_argument("--remote", default="origin", help="git remote")
    push.add_argument("--branch", default="main", help="branch to push to")
    push.add_argument("--retries", type=int, default=5, help="rebase-and-push attempts")


PARSERS = {"gh": add_gh}


# ---------------------------------------------------------------- inputs and outputs

def _event() -> dict:
    path = os.environ.get("GITHUB_EVENT_PATH")
    if not path:
        return {}
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise GitHubError(f"cannot read the event payload: {exc}") from exc


def _pr(args: argparse.Namespace) -> int:
    event = _event()
    value = args.pr or (event.get("pull_request") or {}).get("number") or \
        (event.get("inputs") or {}).get("pr")
    if not is_pr_number(str(value or "")):
        raise GitHubError(f"pull request number {value!r} is not a positive whole number")
    return int(value)


def _sha(value: object, what: str = "head SHA") -> str:
    if not is_commit_sha(str(value or "")):
        raise GitHubError(f"{what} {value!r} is not a full lowercase commit SHA")
    return str(value)


def _client(args: argparse.Namespace) -> GitHub:
    return GitHub.from_env(args.repository)


def submission_folder(paths: list[str], author: str) -> str:
    """The submission folder a PR adds: the first safe `submissions/<a>/<b>`, else the author's.

    The fallback lets gate 0 explain what is wrong instead of the workflow failing blind.
    """
    for path in paths:
        parts = PurePosixPath(path).parts
        if len(parts) >= 3 and parts[0] == "submissions":
            folder = "/".join(parts[:3])
            if parse_submission_path(folder) is not None:
                return folder
    return submission_path(author, 1)


# ---------------------------------------------------------------- handlers

def run_pr_info(args: argparse.Namespace) -> int:
    number, github = _pr(args), _client(args)
    pull = github.pull(number)
    if not is_name(pull.author):
        raise GitHubError(f"PR author {pull.author!r} is not a valid GitHub login")
    head = _sha(pull.head_sha)
    event = _event()
    expected = args.head_sha or ((event.get("pull_request") or {}).get("head") or {}).get("sha") \
        or (event.get("inputs") or {}).get("head_sha")
    if expected and _sha(expected, "expected head SHA") != head:
        raise GitHubError(f"PR #{number} moved from {expected} to {head}; "
                          "the newer commit is checked by its own run")
    if args.require_open and pull.state != "open":
        raise GitHubError(f"PR #{number} is {pull.state}, not open")
    if args.require_label and args.require_label not in pull.labels:
        raise GitHubError(f"PR #{number} lacks the {args.require_label!r} label; "
                          "its gates have not passed at this head")
    paths = [f.path for f in github.changed_files(number) if f.status == "added"]
    set_outputs({"pr": str(number), "author": pull.author, "head_sha": head,
                  "submission": submission_folder(paths, pull.author)})
    return 0


def run_changed_files(args: argparse.Namespace) -> int:
    files = _client(args).changed_files(_pr(args))
    text = "".join(f.name_status() + "\n" for f in files)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text, encoding="utf-8")
    print(f"wrote {len(files)} changed file(s) to {args.out}")
    return 0


def run_fetch(args: argparse.Namespace) -> int:
    written = fetch_submission(args.repo, args.remote, _sha(args.head_sha), args.submission,
                               args.rules)
    print(f"copied {len(written)} entr{'y' if len(written) == 1 else 'ies'} of "
          f"{args.submission} at {args.head_sha[:12]} as data")
    return 0


def run_comment(args: argparse.Namespace) -> int:
    body = args.body_file.read_text(encoding="utf-8")
    created = _client(args).upsert_comment(_pr(args), args.marker, body)
    print("comment created" if created else "comment updated")
    return 0


def run_label(args: argparse.Namespace) -> int:
    for name in args.add + args.remove:
        if not is_name(name):
            raise GitHubError(f"label {name!r} must match {NAME_RE.pattern}")
    number, github = _pr(args), _client(args)
    for name in args.remove:
        github.remove_label(number, name)
    github.add_labels(number, args.add)
    print(f"labels: +{args.add} -{args.remove}")
    return 0


def run_close(args: argparse.Namespace) -> int:
    number = _pr(args)
    _client(args).close(number)
    print(f"closed PR #{number}")
    return 0


def run_merge(args: argparse.Namespace) -> int:
    number = _pr(args)
    _client(args).merge(number, _sha(args.sha), args.method)
    print(f"merged PR #{number} at {args.sha[:12]}")
    return 0


def run_conclude(args: argparse.Namespace) -> int:
    number, sha = _pr(args), _sha(args.sha)
    result = json.loads(args.result.read_text(encoding="utf-8"))
    if result.get("pr") != number or result.get("head_sha") != sha:
        raise GitHubError(f"the result is for PR {result.get('pr')!r} at "
                          f"{result.get('head_sha')!r}, not PR #{number} at {sha}")
    if result.get("outcome") not in OUTCOMES:
        raise GitHubError(f"unknown outcome {result.get('outcome')!r}")
    github = _client(args)
    github.upsert_comment(number, EVALUATION_MARKER, render_result("comment", result, args.rules))
    if result["outcome"] == KING:
        github.merge(number, sha)
        print(f"new king: merged PR #{number} at {sha[:12]}")
    else:
        github.close(number)
        print(f"{result['outcome']}: closed PR #{number}")
    return 0


def run_dispatch(args: argparse.Namespace) -> int:
    inputs = {}
    for item in args.input:
        key, sep, value = item.partition("=")
        if not sep or not is_name(key) or not INPUT_VALUE_RE.fullmatch(value):
            raise GitHubError(f"--input {item!r} must be KEY=VALUE of plain names")
        inputs[key] = value
    if not WORKFLOW_RE.fullmatch(args.workflow) or not is_name(args.ref):
        raise GitHubError("--workflow and --ref must be plain names")
    _client(args).dispatch(args.workflow, args.ref, inputs)
    print(f"dispatched {args.workflow} on {args.ref}")
    return 0


def run_push(args: argparse.Namespace) -> int:
    pushed = push_paths(args.repo, [LEADERBOARD_DIR], args.message, args.remote, args.branch,
                        args.retries)
    print(f"pushed leaderboard/ to {args.remote}/{args.branch}" if pushed
          else "leaderboard/ unchanged; nothing to push")
    return 0
