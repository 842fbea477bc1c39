"""`tinyrouter gh …`: one command per workflow step that talks to GitHub or pushes.

The pull request number and head SHA come from `--pr`/`--head-sha` or, when omitted, from
the event payload at `$GITHUB_EVENT_PATH`, so workflow steps need no `${{ }}` expansion.
Values that leave a command (step outputs) are validated first, and everything a command
prints or logs goes through `output.github_output` (these commands run in workflows).

`record` is the evaluation's last job; its steps are `evaluator.recording`'s, and this module
only parses its arguments and prints what the steps say.
"""

from __future__ import annotations

import argparse
import json
import os
import re
from collections.abc import Callable
from pathlib import Path

from evaluator import handover, precedence, recording, vault
from evaluator.commands.leaderboard import load_result
from evaluator.commands.output import github_output, say, set_outputs, write_json_out
from evaluator.contenders import earlier_attempts
from evaluator.errors import GitHubError, VaultError
from evaluator.files import format_time, try_parse_time, utc_now
from evaluator.github import (
    GitHub,
    fetch_heads,
    fetch_submission,
    head_commit,
    installation_token,
    publish,
    submission_folder,
)
from evaluator.leaderboard import mark_unfinished
from evaluator.lifecycle import REFUNDED, unfinished
from evaluator.recording import EVALUATION_MARKER, Board
from evaluator.records import WITHDRAWN
from evaluator.reports import render_unfinished
from evaluator.rules import NAME_RE, is_commit_sha, is_name, is_pr_number
from evaluator.store import (
    LEADERBOARD_DIR,
    Store,
    parse_submission_path,
)

GATES_MARKER = "<!-- tinyrouter:gates -->"
QUEUE_EVENTS = ("evaluating",)
APP_ID_ENV, APP_KEY_ENV = "TINYROUTER_APP_ID", "TINYROUTER_APP_PRIVATE_KEY"
RESULT_KEY_ENV = "TINYROUTER_RESULT_KEY"  # in both environments: the GPU job's hand-over key
WORKFLOW_RE = re.compile(r"[A-Za-z0-9_.-]{1,64}", re.ASCII)  # a workflow file name, a ref
INPUT_VALUE_RE = re.compile(r"[A-Za-z0-9_.-]{0,64}", re.ASCII)


def add_gh(gh: argparse.ArgumentParser) -> None:
    gh.add_argument("--repository", default=os.environ.get("GITHUB_REPOSITORY", ""),
                    help="owner/name (default $GITHUB_REPOSITORY)")
    verbs = gh.add_subparsers(dest="verb", metavar="VERB", required=True)

    def verb(name: str, help: str, func: Callable[[argparse.Namespace], int],
             pr: bool = True, repo: bool = False) -> argparse.ArgumentParser:
        parser = verbs.add_parser(name, help=help)
        if pr:
            parser.add_argument("--pr", help="pull request number (default: from the event)")
        if repo:
            parser.add_argument("--repo", type=Path, default=Path("."),
                                help="the checkout of the base branch")
        parser.set_defaults(func=_in_workflow(func))
        return parser

    info = verb("pr-info", "validate the PR and write author, head_sha, submission outputs",
                run_pr_info, repo=True)
    info.add_argument("--head-sha", help="expected head (default: from the event, if any)")
    info.add_argument("--base", default="main", help="the branch submissions target")
    info.add_argument("--require-open", action="store_true", help="fail unless the PR is open")
    info.add_argument("--or-merged", action="store_true",
                      help="with --require-open, also accept a PR merged at the expected head "
                           "(a king evaluated again because another was crowned first)")
    info.add_argument("--require-gates-pass", action="store_true",
                      help="fail unless leaderboard/attempts.jsonl records a gates pass for "
                           "the PR at this head (the gates-passed label is only a display)")
    info.add_argument("--require-undecided", action="store_true",
                      help="fail if this head already has a decisive result")
    info.add_argument("--run-id", type=int,
                      help="this gates run: its creation time, when GitHub first showed the head "
                           "on the pull request, becomes the shown_at output")

    pending = verb("pending", "copy in, as data, the heads of other miners' open pull requests "
                   "opened before this head was shown and not in the attempts log (the gates "
                   "hold a head that routes like one of them until its gates have run)",
                   run_pending, repo=True)
    pending.add_argument("--author", required=True, help="this pull request's author")
    pending.add_argument("--shown-at", required=True,
                         help="when GitHub first showed this head (pr-info's shown_at)")
    pending.add_argument("--out", type=Path, required=True, help="the folder to copy them into")

    files = verb("changed-files", "write a head's changes as `git diff --name-status`",
                 run_changed_files, pr=False)
    files.add_argument("--head-sha", required=True, help="the head commit to list")
    files.add_argument("--base", default="main", help="the branch it is compared with")
    files.add_argument("--out", type=Path, required=True, help="where to write them")

    fetch = verb("fetch-submission", "copy the PR head's submission folder in as data (and "
                 "write the checkout's commit as the base_sha output)", run_fetch, pr=False,
                 repo=True)
    fetch.add_argument("--head-sha", required=True)
    fetch.add_argument("--submission", required=True, help="submissions/<login>/<n>")

    earlier = verb("fetch-earlier", "keep the weights of every earlier head the behavioural "
                   "check compares (other miners' heads that passed the gates) in the head cache "
                   "OUT, by their SHA-256, fetching only those it does not hold; a head that "
                   "cannot be fetched is listed as not compared", run_fetch_earlier, repo=True)
    earlier.add_argument("--head-sha", required=True, help="the head being evaluated")
    earlier.add_argument("--submission", required=True, help="submissions/<login>/<n>")
    earlier.add_argument("--out", type=Path, required=True,
                         help="the head cache (kept between evaluations where it can be)")

    comment = verb("comment", "create or update the bot's one comment with MARKER", run_comment)
    comment.add_argument("--marker", required=True, help="the HTML comment that marks it")
    comment.add_argument("--body-file", type=Path, required=True, help="its Markdown body")

    label = verb("label", "add and remove PR labels", run_label)
    label.add_argument("--add", action="append", default=[], help="a label to add (repeatable)")
    label.add_argument("--remove", action="append", default=[],
                       help="a label to remove (repeatable)")

    verb("close", "close the PR", run_close)

    merge = verb("merge", "merge the PR only if its head is still SHA (retrying while GitHub "
                 "says the base moved)", run_merge)
    merge.add_argument("--sha", required=True, help="the head SHA the merge is guarded by")
    merge.add_argument("--method", choices=("merge", "squash", "rebase"), default="merge",
                       help="GitHub's merge method")

    record = verb("record", "record an evaluation: merge a new king, publish leaderboard/, "
                  "comment, then close a loser or evaluate a stale result again", run_record,
                  repo=True)
    record.add_argument("--sha", required=True, help="the approved, evaluated head SHA")
    record.add_argument("--result", type=Path, required=True, help="the public RESULT.json")
    record.add_argument("--base", help="the main commit the evaluation ran on (its king is "
                                       "the one it was scored against)")
    record.add_argument("--out", help="write the record the board now holds (JSON; - for stdout)")
    _push_options(record)

    announce = verb("announce", "append a queue event to leaderboard/queue.jsonl and push it",
                    run_announce, repo=True)
    announce.add_argument("--event", choices=QUEUE_EVENTS, required=True, help="what happened")
    announce.add_argument("--head-sha", required=True)
    announce.add_argument("--submission", required=True, help="submissions/<login>/<n>")
    _push_options(announce)

    unfinished = verb("unfinished", "record that the evaluation of a gated head ended without a "
                      "result (declined, expired or failed, read from the run's deployment "
                      "reviews) on the queue, and comment", run_unfinished, repo=True)
    unfinished.add_argument("--head-sha", required=True, help="the head the run pinned")
    unfinished.add_argument("--run-id", type=int, required=True,
                            help="this workflow run (its deployment reviews say who decided)")
    unfinished.add_argument("--evaluate-result", required=True,
                            help="how the GPU job ended (needs.evaluate.result)")
    _push_options(unfinished)

    encrypt = verb("encrypt-result", f"seal the GPU job's result for the record job under "
                   f"${RESULT_KEY_ENV}, bound to this PR and head (what the artifact holds)",
                   run_encrypt_result)
    encrypt.add_argument("--head-sha", required=True, help="the evaluated head")
    encrypt.add_argument("--result", type=Path, required=True, help="the public RESULT.json")
    encrypt.add_argument("--out", type=Path, required=True, help="the sealed file to upload")

    decrypt = verb("decrypt-result", f"open the sealed result under ${RESULT_KEY_ENV}, refusing "
                   "one changed since, sealed under another key or for another PR or head",
                   run_decrypt_result)
    decrypt.add_argument("--head-sha", required=True, help="the evaluated head")
    decrypt.add_argument("--sealed", type=Path, required=True, help="the downloaded artifact")
    decrypt.add_argument("--out", type=Path, required=True, help="where to write RESULT.json")

    verb("app-token", "mint this job's token of the repository's GitHub App (from "
         f"${APP_ID_ENV} and ${APP_KEY_ENV}) as the masked `token` output", run_app_token,
         pr=False)

    dispatch = verb("dispatch", "start a workflow_dispatch workflow", run_dispatch, pr=False)
    dispatch.add_argument("--workflow", required=True, help="file name, e.g. pages.yml")
    dispatch.add_argument("--ref", default="main", help="the branch to run it on")
    dispatch.add_argument("--input", action="append", default=[], metavar="KEY=VALUE",
                          help="a workflow input (repeatable)")


def _push_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--remote", default="origin", help="git remote to push leaderboard/ to")
    parser.add_argument("--branch", default="main", help="branch to push to")


PARSERS = {"gh": add_gh}


def _in_workflow(func: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        with github_output():
            return func(args)
    return run


def _say(*lines: object) -> None:
    say(lines, github=True)


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


def _branch(value: str, what: str = "--base") -> str:
    if not is_name(value):
        raise GitHubError(f"{what} {value!r} must be a plain branch name")
    return value


def _client(args: argparse.Namespace) -> GitHub:
    return GitHub.from_env(args.repository)


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
    if pull.base_ref != _branch(args.base):
        raise GitHubError(f"PR #{number} targets {pull.base_ref!r}; submissions are pull "
                          f"requests into {args.base}")
    if args.require_open and pull.state != "open" and not (args.or_merged and pull.merged):
        raise GitHubError(f"PR #{number} is {pull.state}, not open")
    store = Store(args.repo)
    if args.require_gates_pass:
        store.require_gates_pass(number, head)
    ended = store.ended(number, head) if args.require_undecided else None
    if ended is not None:
        state = ended[0]
        why = ("its slot was refunded instead: push a new commit to be evaluated again"
               if state in REFUNDED else "it changed after its evaluation was approved"
               if state == WITHDRAWN else "one decisive evaluation per head")
        raise GitHubError(f"PR #{number} at {head[:12]} is already {state} and is not "
                          f"evaluated again ({why})")
    paths = [f.path for f in github.changed_files(number) if f.status == "added"]
    outputs = {"pr": str(number), "author": pull.author, "head_sha": head,
               "submission": submission_folder(paths, pull.author)}
    if args.run_id is not None:
        outputs["shown_at"] = precedence.shown_at(github, args.run_id)
    set_outputs(outputs)
    return 0


def run_pending(args: argparse.Namespace) -> int:
    if not is_name(args.author):
        raise GitHubError(f"--author {args.author!r} is not a GitHub login")
    moment = try_parse_time(args.shown_at)
    if moment is None:
        raise GitHubError(f"--shown-at {args.shown_at!r} is not a UTC time")
    store = Store(args.repo, lenient=True)  # its lines were checked as they were written
    found = precedence.collect(_client(args), store.attempts(), _pr(args), args.author,
                               format_time(moment), args.out, args.rules)
    _say(f"{len(found)} open pull request head(s) shown before this one, not gated yet: "
         + (", ".join(p.what for p in found) or "none"))
    return 0


def run_changed_files(args: argparse.Namespace) -> int:
    files = _client(args).compare_files(_branch(args.base), _sha(args.head_sha))
    text = "".join(f.name_status() + "\n" for f in files)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text, encoding="utf-8")
    _say(f"wrote {len(files)} changed file(s) of {args.head_sha[:12]} to {args.out}")
    return 0


def run_fetch(args: argparse.Namespace) -> int:
    written = fetch_submission(_client(args), args.repo, _sha(args.head_sha), args.submission,
                               args.rules)
    base = head_commit(args.repo)
    if base is not None:
        set_outputs({"base_sha": base})
    _say(f"copied {len(written)} entr{'y' if len(written) == 1 else 'ies'} of "
         f"{args.submission} at {args.head_sha[:12]} as data")
    return 0


def run_fetch_earlier(args: argparse.Namespace) -> int:
    parsed = parse_submission_path(args.submission)
    if parsed is None:
        raise GitHubError(f"{args.submission!r} is not a submissions/<login>/<generation> folder")
    store = Store(args.repo, lenient=True)  # its lines were checked as they were written
    attempts = earlier_attempts(store, parsed[0], _pr(args), _sha(args.head_sha), store.king())
    fetched, missing = fetch_heads(_client(args), args.out, attempts, args.rules)
    for attempt, why in missing:
        _say(f"not compared: the attempt of PR #{attempt.pr} ({attempt.miner}): {why}")
    _say(f"{len(attempts)} earlier head(s) to compare: {fetched} fetched, "
         f"{len(attempts) - fetched - len(missing)} already kept, {len(missing)} not to be had")
    return 0


def run_comment(args: argparse.Namespace) -> int:
    body = args.body_file.read_text(encoding="utf-8")
    created = _client(args).upsert_comment(_pr(args), args.marker, body)
    _say("comment created" if created else "comment updated")
    return 0


def run_label(args: argparse.Namespace) -> int:
    for name in args.add + args.remove:
        if not is_name(name):
            raise GitHubError(f"label {name!r} must match {NAME_RE.pattern}")
    number, github = _pr(args), _client(args)
    for name in args.remove:
        github.remove_label(number, name)
    github.add_labels(number, args.add)
    _say(f"labels: +{args.add} -{args.remove}")
    return 0


def run_close(args: argparse.Namespace) -> int:
    number = _pr(args)
    _client(args).close(number)
    _say(f"closed PR #{number}")
    return 0


def run_merge(args: argparse.Namespace) -> int:
    number = _pr(args)
    _client(args).merge(number, _sha(args.sha), args.method)
    _say(f"merged PR #{number} at {args.sha[:12]}")
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
    _say(f"dispatched {args.workflow} on {args.ref}")
    return 0


def run_app_token(args: argparse.Namespace) -> int:
    """The token is masked in the log before it exists anywhere else, and leaves this step only
    as a step output (never printed, never in a file of the checkout)."""
    app_id, key = os.environ.get(APP_ID_ENV, "").strip(), os.environ.get(APP_KEY_ENV, "")
    if not app_id or not key.strip():
        raise GitHubError(f"{APP_ID_ENV} and {APP_KEY_ENV} must be set (the App's id, a "
                          "repository variable, and its private key, a repository secret); "
                          "see the maintaining guide's GitHub setup")
    token = installation_token(_client(args), app_id, key)
    print(f"::add-mask::{token}", flush=True)
    target = os.environ.get("GITHUB_OUTPUT")
    if not target:
        raise GitHubError("GITHUB_OUTPUT is not set: app-token only runs as a workflow step")
    with open(target, "a", encoding="utf-8") as handle:
        handle.write(f"token={token}\n")
    _say(f"minted this job's token of App {app_id} for {args.repository}")
    return 0


def _result_key() -> str:
    key = vault.take(RESULT_KEY_ENV)
    if not key.strip():
        raise GitHubError(f"{RESULT_KEY_ENV} must be set: the same secret in the `evaluation` "
                          "and `leaderboard` environments (see the maintaining guide's GitHub "
                          "setup)")
    return key


def _about(number: int, sha: str) -> str:
    """What a sealed result is bound to: one PR at one head."""
    return f"tinyrouter evaluation result of PR #{number} at {sha}"


def run_encrypt_result(args: argparse.Namespace) -> int:
    number, sha = _pr(args), _sha(args.head_sha)
    try:
        plain = args.result.read_bytes()
    except OSError as exc:
        raise GitHubError(f"cannot read the result {args.result}: {exc}") from exc
    sealed = handover.lock(plain, _result_key(), _about(number, sha), RESULT_KEY_ENV)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_bytes(sealed)
    _say(f"sealed the result of PR #{number} at {sha[:12]} for the record job")
    return 0


def run_decrypt_result(args: argparse.Namespace) -> int:
    number, sha = _pr(args), _sha(args.head_sha)
    try:
        with args.sealed.open("rb") as handle:  # no more than the cap is read (unlock refuses it)
            sealed = handle.read(handover.MAX_SEALED_BYTES + 1)
    except OSError as exc:
        raise GitHubError(f"cannot read the sealed result {args.sealed}: {exc}") from exc
    try:
        plain = handover.unlock(sealed, _result_key(), _about(number, sha), RESULT_KEY_ENV)
    except VaultError as exc:
        raise GitHubError(f"the evaluation artifact is refused: {exc}; nothing is recorded. "
                          "Re-run the evaluation (a new artifact), and check that "
                          f"{RESULT_KEY_ENV} is the same in both environments") from exc
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_bytes(plain)
    _say(f"opened the sealed result of PR #{number} at {sha[:12]}")
    return 0


ENDED_WITHOUT_RESULT = ("failure", "cancelled", "skipped")  # GitHub's needs.<job>.result


def run_unfinished(args: argparse.Namespace) -> int:
    number, sha = _pr(args), _sha(args.head_sha)
    if args.evaluate_result not in ENDED_WITHOUT_RESULT:
        raise GitHubError(f"--evaluate-result {args.evaluate_result!r}: only a GPU job that "
                          f"ended {', '.join(ENDED_WITHOUT_RESULT)} left no result to record "
                          "(a successful one is the record job's)")
    github = _client(args)
    state, reason = unfinished(github.run_reviews(args.run_id), args.evaluate_result)
    event, pushed = publish(
        args.repo, [LEADERBOARD_DIR], f"leaderboard: PR #{number} is {state}",
        lambda: mark_unfinished(Store(args.repo), number, sha, state, reason,
                                format_time(utc_now())),
        _branch(args.remote, "--remote"), _branch(args.branch, "--branch"))
    if event is None:  # recorded by an earlier try of this job: its comment may be missing
        event = next(e for e in Store(args.repo).queue_events()
                     if (e.get("event"), e.get("pr"), e.get("head_sha")) == (state, number, sha))
    github.upsert_comment(number, EVALUATION_MARKER, render_unfinished(event))
    _say(f"PR #{number} at {sha[:12]}: {state} ({event['reason']})"
         + ("" if pushed else "; leaderboard/ already held it"))
    return 0


def run_announce(args: argparse.Namespace) -> int:
    number, sha = _pr(args), _sha(args.head_sha)
    parsed = parse_submission_path(args.submission)
    if parsed is None:
        raise GitHubError(f"--submission {args.submission!r} is not submissions/<login>/<n>")
    event = {"event": args.event, "miner": parsed[0], "generation": parsed[1], "pr": number,
             "head_sha": sha, "at": format_time(utc_now())}
    _, pushed = publish(args.repo, [LEADERBOARD_DIR],
                        f"leaderboard: PR #{number} is {args.event}",
                        lambda: Store(args.repo).record_queue_event(event),
                        _branch(args.remote, "--remote"), _branch(args.branch, "--branch"))
    _say(f"PR #{number} at {sha[:12]}: {args.event}" + ("" if pushed else " (already recorded)"))
    return 0


# ---------------------------------------------------------------- record

def run_record(args: argparse.Namespace) -> int:
    board = Board(args.repo, _branch(args.remote, "--remote"), _branch(args.branch, "--branch"))
    base = None if args.base is None else _sha(args.base, "--base")
    job = recording.start(_client(args), board, args.rules, load_result(args.result), _pr(args),
                          _sha(args.sha), base, str(args.result), tell=_say)
    write_json_out(args.out, recording.record(job))
    return 0
