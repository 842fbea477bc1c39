"""The GitHub REST client (`httpx.MockTransport`) and the git helpers (a local bare remote)."""

from __future__ import annotations

import json
import subprocess

import httpx
import pytest

from evaluator.cli import main
from evaluator.errors import GitHubError
from evaluator.github import ChangedFile, GitHub, fetch_submission, push_paths
from evaluator.rules import OFFICIAL


def client(handler, **kwargs) -> tuple[GitHub, list[float]]:
    waits: list[float] = []
    github = GitHub("owner/repo", token="t0ken", base_url="https://api.test",
                    transport=httpx.MockTransport(handler), sleep=waits.append, **kwargs)
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

RETRIES = [
    # transient server errors
    ("502 then ok", [(502, {}, {"message": "bad gateway"})], 2.0),
    ("503 then ok", [(503, {}, {}), (500, {}, {})], 2.0),
    # secondary rate limits
    ("403 secondary with retry-after", [(403, {"retry-after": "7"},
                                         {"message": "You have exceeded a secondary rate limit"})], 7),
    ("429 with retry-after", [(429, {"retry-after": "3"}, {})], 3),
    ("retry-after is capped", [(429, {"retry-after": "99999"}, {})], 120),
]


@pytest.mark.parametrize(("case", "failures", "first_wait"), RETRIES, ids=[r[0] for r in RETRIES])
def test_retries_then_succeeds(case, failures, first_wait):
    handler, seen = answers(*failures, (200, {}, PULL))
    github, waits = client(handler)
    assert github.pull(7).author == "alice"
    assert len(seen) == len(failures) + 1 and waits[0] == first_wait


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
    handler, seen = answers((200, {}, PULL))
    GitHub.from_env("owner/repo", transport=httpx.MockTransport(handler)).pull(7)
    assert str(seen[0].url) == "http://127.0.0.1:9/api/v3/repos/owner/repo/pulls/7"
    assert seen[0].headers["authorization"] == "Bearer from-env"


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


NAME_STATUS = [
    (ChangedFile("added", "submissions/a/1/receipt.json"), "A\tsubmissions/a/1/receipt.json"),
    (ChangedFile("removed", "x"), "D\tx"),
    (ChangedFile("modified", "x"), "M\tx"),
    (ChangedFile("renamed", "new", "old"), "R100\told\tnew"),
    (ChangedFile("changed", "x"), "T\tx"),  # a mode change is not an add
]


@pytest.mark.parametrize(("change", "line"), NAME_STATUS)
def test_changes_render_as_git_name_status(change, line):
    assert change.name_status() == line


def test_sticky_comment_is_created_once_then_updated():
    comments: list[dict] = []

    def handler(request: httpx.Request) -> httpx.Response:
        if request.method == "GET":
            return httpx.Response(200, json=comments)
        body = json.loads(request.content)
        if request.method == "POST":
            comments.append({"id": 5, "body": body["body"]})
        else:
            assert request.url.path.endswith("/issues/comments/5")
            comments[0]["body"] = body["body"]
        return httpx.Response(200, json={})

    github = client(handler)[0]
    assert github.upsert_comment(7, "<!-- m -->", "first") is True
    assert github.upsert_comment(7, "<!-- m -->", "second") is False
    assert comments == [{"id": 5, "body": "<!-- m -->\nsecond"}]


def test_merge_sends_the_head_sha_and_a_moved_head_is_an_error():
    handler, seen = answers((409, {}, {"message": "Head branch was modified"}))
    github = client(handler)[0]
    with pytest.raises(GitHubError, match="409"):
        github.merge(7, "a" * 40)
    assert json.loads(seen[0].content) == {"sha": "a" * 40, "merge_method": "merge"}


def test_removing_an_absent_label_is_fine():
    handler, _ = answers((404, {}, {"message": "Label does not exist"}))
    client(handler)[0].remove_label(7, "gates-failed")


# ---------------------------------------------------------------- command-line validation

COMMANDS = [
    # PR numbers, SHAs, labels and dispatch inputs are validated before any call
    (["gh", "close", "--pr", "7; id"], "positive whole number"),
    (["gh", "merge", "--pr", "7", "--sha", "HEAD"], "full lowercase commit SHA"),
    (["gh", "label", "--pr", "7", "--add", "a b"], "label"),
    (["gh", "dispatch", "--workflow", "x.yml", "--input", "pr=$(id)"], "KEY=VALUE"),
    (["gh", "fetch-submission", "--head-sha", "a" * 40, "--submission", "../etc"], "folder"),
]


@pytest.mark.parametrize(("argv", "message"), COMMANDS, ids=[" ".join(c[0][:2]) for c in COMMANDS])
def test_commands_refuse_unsafe_values(argv, message, monkeypatch, capsys):
    monkeypatch.setenv("GITHUB_REPOSITORY", "owner/repo")
    monkeypatch.setenv("GITHUB_API_URL", "http://127.0.0.1:9")  # nothing listens there
    assert main(argv) == 1
    assert message in capsys.readouterr().err


# ---------------------------------------------------------------- git helpers

def test_push_retries_after_a_concurrent_push_without_forcing(remote, tmp_path):
    mine, theirs = remote.clone(tmp_path / "mine"), remote.clone(tmp_path / "theirs")
    (theirs / "leaderboard" / "other.json").write_text("{}\n")
    push_paths(theirs, ["leaderboard"], "their write")
    (mine / "leaderboard" / "attempts.jsonl").write_text('{"miner": "alice"}\n')

    assert push_paths(mine, ["leaderboard"], "my write", sleep=lambda _: None) is True
    log = subprocess.run(["git", "log", "--format=%s", "main"], cwd=remote.bare, text=True,
                         capture_output=True, check=True).stdout.split("\n")
    assert log[:3] == ["my write", "their write", "base"]  # rebased on top, history kept


def test_push_with_nothing_changed_does_nothing(remote, tmp_path):
    before = remote.main_sha()
    assert push_paths(remote.clone(tmp_path / "w"), ["leaderboard"], "noop") is False
    assert remote.main_sha() == before


def test_fetch_copies_only_the_folder_as_plain_files(remote, tmp_path):
    sha = remote.open_pr(5, {"submissions/alice/1/receipt.json": b"{}",
                             "submissions/alice/1/README.md": b"# hi",
                             "evaluator/evil.py": b"import os"})
    workspace = remote.clone(tmp_path / "w")
    written = fetch_submission(workspace, "origin", sha, "submissions/alice/1", rules=OFFICIAL)

    assert sorted(written) == ["submissions/alice/1/README.md", "submissions/alice/1/receipt.json"]
    assert (workspace / "submissions/alice/1/README.md").read_bytes() == b"# hi"
    assert not (workspace / "evaluator").exists()
    assert (workspace / "submissions/alice/1/receipt.json").stat().st_mode & 0o777 == 0o644


def test_fetch_turns_an_oversized_blob_into_a_sparse_file_of_its_size(remote, tmp_path):
    import dataclasses

    from evaluator.rules import OFFICIAL

    rules = dataclasses.replace(OFFICIAL, max_weights_bytes=8, max_receipt_bytes=8,
                                max_readme_bytes=8)
    sha = remote.open_pr(6, {"submissions/alice/1/receipt.json": b"x" * 100})
    workspace = remote.clone(tmp_path / "w")
    fetch_submission(workspace, "origin", sha, "submissions/alice/1", rules)

    copied = workspace / "submissions/alice/1/receipt.json"
    assert copied.stat().st_size == 100 and b"x" not in copied.read_bytes()


def test_fetch_refuses_an_unknown_commit(remote, tmp_path):
    workspace = remote.clone(tmp_path / "w")
    with pytest.raises(GitHubError, match="git fetch failed"):
        fetch_submission(workspace, "origin", "e" * 40, "submissions/alice/1", rules=OFFICIAL)
