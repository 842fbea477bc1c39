"""The GitHub REST client (`httpx.MockTransport`), the folder fetch and pushes (the fake API and
a local bare remote), and the one function that keeps strangers' text out of workflow commands."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import re
import subprocess
import sys

import httpx
import pytest

from evaluator.changes import parse_changes, quote_path, unquote_path
from evaluator.cli import main
from evaluator.commands.output import github_output, inert, say
from evaluator.errors import GitHubError, LeaderboardError
from evaluator.github import (
    SECONDARY_WAIT_S,
    WAIT_BUDGET_S,
    ChangedFile,
    GitHub,
    MergeRefused,
    fetch_submission,
    publish,
)
from evaluator.rules import OFFICIAL

NOW = 1_800_000_000.0


def client(handler, **kwargs) -> tuple[GitHub, list[float]]:
    waits: list[float] = []
    github = GitHub("owner/repo", token="t0ken", base_url="https://api.test",
                    transport=httpx.MockTransport(handler), sleep=waits.append,
                    clock=lambda: NOW + sum(waits), **kwargs)
    return github, waits


def answers(*responses):
    """A handler giving these (status, headers, json) answers in turn, recording requests."""
    seen, queue = [], list(responses)

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        status, headers, body = queue.pop(0) if len(queue) > 1 else queue[0]
        return httpx.Response(status, headers=headers, json=body)

    return handler, seen


PULL = {"number": 7, "user": {"login": "alice"}, "head": {"sha": "a" * 40}, "state": "open",
        "merged": False, "base": {"ref": "main"}, "labels": [{"name": "gates-passed"}]}
SECONDARY = {"message": "You have exceeded a secondary rate limit. Please wait."}
PRIMARY = {"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(int(NOW) + 90)}

RETRIES = [
    # transient server errors back off from 2 s
    ("502 then ok", [(502, {}, {"message": "bad gateway"})], [2.0]),
    ("503, 500 then ok", [(503, {}, {}), (500, {}, {})], [2.0, 4.0]),
    # secondary rate limits: retry-after when given, else at least a minute, doubling
    ("403 secondary with retry-after", [(403, {"retry-after": "7"}, SECONDARY)], [7.0]),
    ("403 secondary without retry-after", [(403, {}, SECONDARY)] * 3, [60.0, 120.0, 240.0]),
    ("429 with retry-after", [(429, {"retry-after": "3"}, {})], [3.0]),
    ("429 without headers", [(429, {}, {})], [SECONDARY_WAIT_S]),
    # the primary rate limit waits until its reset (plus a second)
    ("403 primary, reset in 90 s", [(403, PRIMARY, {"message": "API rate limit exceeded"})],
     [91.0]),
    ("429 primary, reset passed", [(429, {"x-ratelimit-remaining": "0",
                                          "x-ratelimit-reset": str(int(NOW) - 5)}, {})], [1.0]),
]


@pytest.mark.parametrize(("case", "failures", "waited"), RETRIES, ids=[r[0] for r in RETRIES])
def test_retries_wait_as_github_documents_then_succeed(case, failures, waited):
    handler, seen = answers(*failures, (200, {}, PULL))
    github, waits = client(handler)
    assert github.pull(7).author == "alice"
    assert len(seen) == len(failures) + 1 and waits == waited


OVER_BUDGET = [
    # a wait longer than what is left of the budget fails at once, saying until when
    ("retry-after of an hour", [(429, {"retry-after": "3600"}, {})], []),
    ("primary reset in an hour", [(403, {"x-ratelimit-remaining": "0",
                                         "x-ratelimit-reset": str(int(NOW) + 3600)}, {})], []),
    ("secondary limit that lasts", [(403, {}, SECONDARY)] * 9, [60.0, 120.0, 240.0]),  # not 480
]


@pytest.mark.parametrize(("case", "failures", "waited"), OVER_BUDGET,
                         ids=[r[0] for r in OVER_BUDGET])
def test_a_wait_past_the_budget_is_a_clear_error(case, failures, waited):
    handler, _ = answers(*failures, (200, {}, PULL))
    github, waits = client(handler)
    with pytest.raises(GitHubError, match=rf"wait budget of {WAIT_BUDGET_S:.0f} s.*re-run"):
        github.pull(7)
    assert waits == waited


FINAL = [
    # client errors are not retried
    ("404", 404, {}, "answered 404"),
    ("422", 422, {}, "answered 422"),
    ("403 forbidden, not a rate limit", 403, {}, "answered 403"),
]


@pytest.mark.parametrize(("case", "status", "headers", "message"), FINAL, ids=[f[0] for f in FINAL])
def test_final_errors_raise_without_retrying(case, status, headers, message):
    handler, seen = answers((status, headers, {"message": "Resource not accessible"}))
    github, waits = client(handler)
    with pytest.raises(GitHubError, match=message):
        github.pull(7)
    assert len(seen) == 1 and waits == []


def test_gives_up_after_bounded_retries():
    handler, seen = answers((500, {}, {}))
    github, _ = client(handler, retries=2)
    with pytest.raises(GitHubError, match="answered 500"):
        github.pull(7)
    assert len(seen) == 3


def test_requests_carry_the_token_api_version_and_repository():
    handler, seen = answers((200, {}, PULL))
    pull = client(handler)[0].pull(7)
    assert seen[0].url == "https://api.test/repos/owner/repo/pulls/7"
    assert seen[0].headers["authorization"] == "Bearer t0ken"
    assert seen[0].headers["x-github-api-version"]
    assert (pull.head_sha, pull.labels, pull.state) == ("a" * 40, ("gates-passed",), "open")


def test_base_url_and_token_come_from_the_environment(monkeypatch):
    monkeypatch.setenv("GITHUB_API_URL", "http://127.0.0.1:9/api/v3")
    monkeypatch.setenv("GITHUB_TOKEN", "from-env")
    monkeypatch.setenv("GITHUB_GRAPHQL_URL", "http://127.0.0.1:9/api/graphql")
    handler, seen = answers((200, {}, PULL))
    github = GitHub.from_env("owner/repo", transport=httpx.MockTransport(handler))
    github.pull(7)
    assert str(seen[0].url) == "http://127.0.0.1:9/api/v3/repos/owner/repo/pulls/7"
    assert seen[0].headers["authorization"] == "Bearer from-env"
    assert github.graphql_url == "http://127.0.0.1:9/api/graphql"


@pytest.mark.parametrize("repo", ["", "owner", "owner/repo/x", "own er/repo", "$(id)/x"])
def test_repository_names_are_validated(repo):
    with pytest.raises(GitHubError, match="owner/name"):
        GitHub(repo)


def test_changed_files_follow_every_page():
    files = [{"filename": f"f{i}", "status": "added"} for i in range(230)]

    def handler(request: httpx.Request) -> httpx.Response:
        page, per = int(request.url.params["page"]), int(request.url.params["per_page"])
        return httpx.Response(200, json=files[(page - 1) * per: page * per])

    listed = client(handler)[0].changed_files(7)
    assert [f.path for f in listed] == [f"f{i}" for i in range(230)]


def test_compare_lists_the_files_of_one_head():
    handler, seen = answers((200, {}, {"files": [{"filename": "a", "status": "added"}]}))
    assert client(handler)[0].compare_files("main", "b" * 40) == [ChangedFile("added", "a")]
    assert seen[0].url.path == f"/repos/owner/repo/compare/main...{'b' * 40}"
    with pytest.raises(GitHubError, match="cannot compare"):
        client(handler)[0].compare_files("main;x", "b" * 40)


NAME_STATUS = [
    (ChangedFile("added", "submissions/a/1/receipt.json"), "A\tsubmissions/a/1/receipt.json"),
    (ChangedFile("removed", "x"), "D\tx"),
    (ChangedFile("modified", "x"), "M\tx"),
    (ChangedFile("renamed", "new", "old"), "R100\told\tnew"),
    (ChangedFile("changed", "x"), "T\tx"),  # a mode change is not an add
    # unusual names are quoted as git quotes them, so a tab or newline stays in the name
    (ChangedFile("added", "a/1\n/b"), 'A\t"a/1\\n/b"'),
    (ChangedFile("added", "a\tb"), 'A\t"a\\tb"'),
    (ChangedFile("added", os.fsdecode(b"caf\xe9")), 'A\t"caf\\351"'),
    (ChangedFile("added", "\u0430"), 'A\t"\\320\\260"'),
]


@pytest.mark.parametrize(("change", "line"), NAME_STATUS)
def test_changes_render_as_git_name_status_and_read_back(change, line):
    assert change.name_status() == line
    [parsed] = parse_changes(line + "\n")
    assert parsed.path == change.path


@pytest.mark.parametrize("path", ["plain", 'q"uote', "back\\slash", "\x7f", "\u200b", "\x01"])
def test_quoted_paths_round_trip(path):
    assert unquote_path(quote_path(path)) == path


# ---------------------------------------------------------------- identity and comments

def comments_api(existing: list[dict], identity: str = "github-actions[bot]"):
    calls: list[tuple[str, str]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append((request.method, request.url.path))
        if request.url.path == "/graphql":
            return httpx.Response(200, json={"data": {"viewer": {"login": identity}}})
        if request.method == "GET":
            return httpx.Response(200, json=existing)
        body = json.loads(request.content)
        if request.method == "POST":
            existing.append({"id": 100 + len(existing), "body": body["body"],
                             "user": {"login": identity}})
        else:
            comment_id = int(request.url.path.rsplit("/", 1)[1])
            next(c for c in existing if c["id"] == comment_id)["body"] = body["body"]
        return httpx.Response(200, json={})

    return handler, calls


def test_the_bots_comment_is_created_once_then_updated():
    existing: list[dict] = []
    handler, calls = comments_api(existing)
    github = client(handler)[0]
    assert github.upsert_comment(7, "<!-- m -->", "first") is True
    assert github.upsert_comment(7, "<!-- m -->", "second") is False
    assert [c["body"] for c in existing] == ["<!-- m -->\nsecond"]
    assert calls.count(("POST", "/graphql")) == 1  # asked once per client


def test_a_strangers_comment_with_the_marker_is_left_alone():
    forged = {"id": 5, "body": "<!-- m -->\nGates passed", "user": {"login": "mallory"}}
    existing = [dict(forged)]
    handler, _ = comments_api(existing)
    assert client(handler)[0].upsert_comment(7, "<!-- m -->", "real") is True
    assert existing[0] == forged and existing[1]["body"] == "<!-- m -->\nreal"


@pytest.mark.parametrize(("identity", "author", "mine"), [
    # the identity comes from the API, not a constant
    ("tinyrouter-bot[bot]", "tinyrouter-bot[bot]", True),
    ("tinyrouter-bot[bot]", "github-actions[bot]", False),
    # an app named without its bot suffix still owns its bot's comments, and only those
    ("github-actions", "github-actions[bot]", True),
    ("github-actions", "github-actions-fan", False),
])
def test_only_the_tokens_own_comments_are_edited(identity, author, mine):
    existing = [{"id": 5, "body": "<!-- m -->\nold", "user": {"login": author}}]
    handler, _ = comments_api(existing, identity=identity)
    assert client(handler)[0].upsert_comment(7, "<!-- m -->", "new") is not mine
    assert (existing[0]["body"] == "<!-- m -->\nnew") is mine


@pytest.mark.parametrize("answer", [{"data": {"viewer": None}}, {"errors": [{"message": "x"}]},
                                    {"data": {"viewer": {"login": "a b"}}}])
def test_an_identity_the_api_does_not_give_is_an_error(answer):
    handler, _ = answers((200, {}, answer))
    with pytest.raises(GitHubError, match="which login the token is"):
        client(handler)[0].identity()


def test_removing_an_absent_label_is_fine():
    handler, _ = answers((404, {}, {"message": "Label does not exist"}))
    client(handler)[0].remove_label(7, "gates-failed")


# ---------------------------------------------------------------- merge

BASE_MOVED = (405, {}, {"message": "Base branch was modified. Review and try the merge again."})
OPEN = (200, {}, PULL)
MERGED = (200, {}, {**PULL, "state": "closed", "merged": True})

MERGES = [
    # (answers to PUT merge and GET pull in turn) → (what happens, waits)
    ("merged at once", [(200, {}, {"merged": True})], None, []),
    ("base moved twice", [BASE_MOVED, OPEN, BASE_MOVED, OPEN, (200, {}, {})], None, [2.0, 4.0]),
    ("base moved, 409", [(409, {}, {"message": "Base branch was modified."}), OPEN,
                         (200, {}, {})], None, [2.0]),
    ("the answer was lost, it merged", [BASE_MOVED, MERGED], None, []),
    ("head moved (409)", [(409, {}, {"message": "Head branch was modified."})],
     "no longer aaaaaaaaaaaa", []),
    ("head moved while retrying", [BASE_MOVED, (200, {}, {**PULL, "head": {"sha": "c" * 40}})],
     "moved to cccccccccccc", []),
    ("closed while retrying", [BASE_MOVED, (200, {}, {**PULL, "state": "closed"})],
     "was closed", []),
    ("base keeps moving", [BASE_MOVED, OPEN] * 40, "for 60 s", [2.0, 4.0, 8.0, 16.0, 30.0]),
]


@pytest.mark.parametrize(("case", "responses", "refused", "waited"), MERGES,
                         ids=[m[0] for m in MERGES])
def test_merge_is_guarded_and_retries_a_moved_base_for_a_bounded_time(case, responses, refused,
                                                                      waited):
    handler, seen = answers(*responses)
    github, waits = client(handler)
    if refused is None:
        github.merge(7, "a" * 40, budget_s=60)
    else:
        with pytest.raises(MergeRefused, match=refused):
            github.merge(7, "a" * 40, budget_s=60)
    assert waits == waited
    assert json.loads(seen[0].content) == {"sha": "a" * 40, "merge_method": "merge"}


def test_merge_permission_errors_are_not_refusals():
    handler, _ = answers((403, {}, {"message": "Resource not accessible by integration"}))
    with pytest.raises(GitHubError, match="answered 403") as raised:
        client(handler)[0].merge(7, "a" * 40)
    assert not isinstance(raised.value, MergeRefused)


# ---------------------------------------------------------------- command-line validation

COMMANDS = [
    # PR numbers, SHAs, labels and dispatch inputs are validated before any call
    (["gh", "close", "--pr", "7; id"], "positive whole number"),
    (["gh", "merge", "--pr", "7", "--sha", "HEAD"], "full lowercase commit SHA"),
    (["gh", "label", "--pr", "7", "--add", "a b"], "label"),
    (["gh", "dispatch", "--workflow", "x.yml", "--input", "pr=$(id)"], "KEY=VALUE"),
    (["gh", "fetch-submission", "--head-sha", "a" * 40, "--submission", "../etc"], "folder"),
    (["gh", "changed-files", "--head-sha", "a" * 40, "--base", "m;x", "--out", "x"],
     "plain branch name"),
    (["gh", "announce", "--pr", "7", "--event", "evaluating", "--head-sha", "a" * 40,
      "--submission", "x/y"], "submissions/<login>/<n>"),
    (["gh", "record", "--pr", "7", "--sha", "a" * 40, "--result", "/nonexistent.json"],
     "cannot read the result"),
]


@pytest.mark.parametrize(("argv", "message"), COMMANDS, ids=[" ".join(c[0][:2]) for c in COMMANDS])
def test_commands_refuse_unsafe_values(argv, message, monkeypatch, capsys):
    monkeypatch.setenv("GITHUB_REPOSITORY", "owner/repo")
    monkeypatch.setenv("GITHUB_API_URL", "http://127.0.0.1:9")  # nothing listens there
    assert main(argv) == 1
    assert message in capsys.readouterr().err


# ---------------------------------------------------------------- the folder, through the API

@pytest.fixture
def api(fake_github, remote):
    fake_github.git_dir = remote.bare
    return GitHub.from_env()


def test_fetch_copies_only_the_folder_as_plain_files(api, fake_github, remote, tmp_path):
    sha = remote.open_pr(5, {"submissions/alice/1/receipt.json": b"{}",
                             "submissions/alice/1/README.md": b"# hi",
                             "evaluator/evil.py": b"import os",
                             "big/blob.bin": os.urandom(1 << 20)})
    workspace = remote.clone(tmp_path / "w")
    written = fetch_submission(api, workspace, sha, "submissions/alice/1", rules=OFFICIAL)

    assert sorted(written) == ["submissions/alice/1/README.md", "submissions/alice/1/receipt.json"]
    assert (workspace / "submissions/alice/1/README.md").read_bytes() == b"# hi"
    assert not (workspace / "evaluator").exists() and not (workspace / "big").exists()
    assert (workspace / "submissions/alice/1/receipt.json").stat().st_mode & 0o777 == 0o644
    blobs = [path for _, path in fake_github.calls if "/git/blobs/" in path]
    trees = [path for _, path in fake_github.calls if "/git/trees/" in path]
    assert len(blobs) == 2 and len(trees) == 4  # root, submissions, alice, 1: nothing else


def test_fetch_turns_an_oversized_blob_into_a_sparse_file_of_its_size(api, fake_github, remote,
                                                                    tmp_path):
    rules = dataclasses.replace(OFFICIAL, max_weights_bytes=8, max_receipt_bytes=8,
                                max_readme_bytes=8)
    sha = remote.open_pr(6, {"submissions/alice/1/receipt.json": b"x" * 100})
    workspace = remote.clone(tmp_path / "w")
    fetch_submission(api, workspace, sha, "submissions/alice/1", rules)

    copied = workspace / "submissions/alice/1/receipt.json"
    assert copied.stat().st_size == 100 and b"x" not in copied.read_bytes()
    assert not [path for _, path in fake_github.calls if "/git/blobs/" in path]


def test_fetch_keeps_odd_names_exactly_for_gate_0(api, remote, tmp_path):
    odd = [os.fsdecode(b"\xff.md"), "README.md\n", "a\x1b[2J"]
    sha = remote.open_pr(7, {f"submissions/alice/1/{name}": b"x" for name in odd})
    workspace = remote.clone(tmp_path / "w")
    fetch_submission(api, workspace, sha, "submissions/alice/1", OFFICIAL)
    assert sorted(os.listdir(workspace / "submissions/alice/1")) == sorted(odd)


def test_fetch_of_a_head_without_the_folder_writes_nothing(api, remote, tmp_path):
    sha = remote.open_pr(8, {"submissions/bob/1/receipt.json": b"{}"})
    workspace = remote.clone(tmp_path / "w")
    assert fetch_submission(api, workspace, sha, "submissions/alice/1", OFFICIAL) == []
    assert not (workspace / "submissions/alice").exists()


def test_fetch_refuses_an_unknown_commit(api, remote, tmp_path):
    workspace = remote.clone(tmp_path / "w")
    with pytest.raises(GitHubError, match="answered 404"):
        fetch_submission(api, workspace, "e" * 40, "submissions/alice/1", rules=OFFICIAL)


# ---------------------------------------------------------------- publish: optimistic pushes

def log_of(remote) -> list[str]:
    return subprocess.run(["git", "log", "--format=%s", "main"], cwd=remote.bare, text=True,
                          capture_output=True, check=True).stdout.split("\n")


def append(workspace, name: str, line: str):
    def apply() -> int:
        path = workspace / "leaderboard" / name
        with path.open("a") as handle:
            handle.write(line + "\n")
        return len(path.read_text().splitlines())
    return apply


def test_publish_applies_again_on_the_newer_commit_when_another_job_pushed_first(remote, tmp_path):
    mine, theirs = remote.clone(tmp_path / "mine"), remote.clone(tmp_path / "theirs")
    first_try = {"done": False}

    def apply() -> int:
        if not first_try["done"]:  # between my fetch and my push, another job pushes
            first_try["done"] = True
            publish(theirs, ["leaderboard"], "their line", append(theirs, "log.jsonl", '"b"'),
                    sleep=lambda _: None)
        return append(mine, "log.jsonl", '"a"')()

    lines, pushed = publish(mine, ["leaderboard"], "my line", apply, sleep=lambda _: None)
    assert pushed and lines == 2  # decided on the newer state: their line is there
    assert remote.show("leaderboard/log.jsonl").splitlines() == ['"b"', '"a"']
    assert log_of(remote)[:3] == ["my line", "their line", "base"]  # no force, no rebase


def test_publish_with_nothing_changed_pushes_nothing(remote, tmp_path):
    before = remote.main_sha()
    assert publish(remote.clone(tmp_path / "w"), ["leaderboard"], "noop", lambda: "same") == \
        ("same", False)
    assert remote.main_sha() == before


def test_publish_keeps_untracked_data_such_as_the_copied_folder(remote, tmp_path):
    workspace = remote.clone(tmp_path / "w")
    (workspace / "submissions/alice/1").mkdir(parents=True)
    (workspace / "submissions/alice/1/receipt.json").write_text("{}")
    publish(workspace, ["leaderboard"], "x", append(workspace, "a.jsonl", "1"))
    assert (workspace / "submissions/alice/1/receipt.json").exists()
    assert "alice" not in remote.show("submissions")


@pytest.mark.slow
def test_publish_gives_up_after_bounded_tries(remote, tmp_path, monkeypatch):
    monkeypatch.setattr("evaluator.github.pushes._push", lambda *a: False)  # someone always first
    with pytest.raises(GitHubError, match="in 3 tries"):
        publish(remote.clone(tmp_path / "w"), ["leaderboard"], "x",
                append(tmp_path / "w", "a.jsonl", "1"), attempts=3, sleep=lambda _: None)


def test_an_error_inside_apply_pushes_nothing(remote, tmp_path):
    before = remote.main_sha()

    def apply():
        raise LeaderboardError("refused")

    with pytest.raises(LeaderboardError):
        publish(remote.clone(tmp_path / "w"), ["leaderboard"], "x", apply)
    assert remote.main_sha() == before


# ---------------------------------------------------------------- untrusted text in the log

HOSTILE = [
    "x\n::add-mask::hunter2",
    "::stop-commands::abc",
    "  ::error file=a::forged",
    "##[error]old-style command",
    "a\r::warning::carriage return",
    "a\u2028::notice::line separator",
    "name\x85::debug::next line",
    os.fsdecode(b"\xff::set-output name=x::1"),
]


def commands_in(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.lstrip().startswith(("::", "##["))]


@pytest.mark.parametrize("text", HOSTILE)
def test_inert_text_opens_no_workflow_command(text):
    line = inert(text)
    assert "\n" not in line and "\r" not in line and commands_in(line) == []
    assert "::" not in line and "##[" not in line
    line.encode("utf-8")  # prints, whatever the name's bytes


@pytest.mark.parametrize("text", HOSTILE)
def test_every_channel_of_a_workflow_command_is_neutralised(text, capsys):
    handler = logging.StreamHandler()  # the CLI's log handler, on stderr
    logging.getLogger().addHandler(handler)
    try:
        with pytest.raises(GitHubError) as raised, github_output():
            say([f"gate reason: {text}"], github=True)
            logging.getLogger("evaluator.github").warning("%s is not a file", text)
            raise GitHubError(f"unsafe path {text}")
    finally:
        logging.getLogger().removeHandler(handler)
    print(f"error: {raised.value}", file=sys.stderr)  # the line the CLI ends with
    out = capsys.readouterr()
    printed = out.out + out.err
    found = commands_in(printed)
    tokens = {re.fullmatch(r"::stop-commands::([0-9a-f]{32})", line.strip()).group(1)
              for line in found if line.startswith("::stop-commands::")}
    assert found == [f"::stop-commands::{t}" for t in tokens] + [f"::{t}::" for t in tokens]
