"""The GitHub REST client: just the calls the workflows make, with GitHub's documented waits.

The base URL comes from `GITHUB_API_URL` and the token from `GITHUB_TOKEN`, so tests point
it at a fake server on loopback. Every value read from GitHub is untrusted data: callers
validate names and SHAs before using them.

Waits follow GitHub's guidance for REST clients: a primary rate limit
(`x-ratelimit-remaining: 0`) waits until `x-ratelimit-reset`; a secondary one waits
`retry-after` seconds, else at least a minute, doubling while it lasts; server errors and
dropped connections back off from two seconds. All the waits of one client share a budget,
so a job ends with a clear error well inside its timeout instead of being killed.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import logging
import os
import re
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

import httpx

from evaluator.changes import quote_path
from evaluator.errors import GitHubError
from evaluator.rules import is_commit_sha, is_name

log = logging.getLogger(__name__)

DEFAULT_API_URL = "https://api.github.com"
API_VERSION = "2022-11-28"
PER_PAGE = 100
MAX_PAGES = 30  # GitHub lists at most 3000 changed files per PR
RETRIES = 4  # server errors and dropped connections, per request
BACKOFF_S = 2.0
MAX_BACKOFF_S = 30.0
SECONDARY_WAIT_S = 60.0  # GitHub: at least a minute after a secondary limit without retry-after
WAIT_BUDGET_S = 600.0  # all waits of one command; every job's timeout leaves room for it
MERGE_BUDGET_S = 300.0  # how long a merge is retried while GitHub says the base moved
REPO_RE = re.compile(r"[A-Za-z0-9_.-]{1,100}/[A-Za-z0-9_.-]{1,100}", re.ASCII)
LOGIN_RE = re.compile(r"[A-Za-z0-9_-]{1,64}(?:\[bot\])?", re.ASCII)  # a user, or an app's bot

# `git diff --name-status` letters for GitHub's file statuses; "changed" is a mode change.
STATUS_LETTERS = {"added": "A", "removed": "D", "modified": "M", "renamed": "R",
                  "copied": "C", "changed": "T", "unchanged": "M"}


class GitHubHTTPError(GitHubError):
    """GitHub answered a request with a final error status."""

    def __init__(self, text: str, status: int, message: str) -> None:
        super().__init__(text)
        self.status, self.message = status, message


class NotAFile(GitHubError):
    """What a path names at a commit is not a regular file within the size asked for."""


class MergeRefused(GitHubError):
    """The pull request cannot be merged at the evaluated head, for good. `by_author`: because
    of what its author did (a new head, a close, another base), not GitHub's refusal."""

    def __init__(self, text: str, by_author: bool = False) -> None:
        super().__init__(text)
        self.by_author = by_author


@dataclass(frozen=True)
class PullRequest:
    number: int
    author: str
    head_sha: str
    state: str
    merged: bool
    base_ref: str
    labels: tuple[str, ...] = field(default=())
    created_at: str = ""  # when it was opened, as GitHub says (ISO 8601, UTC)


@dataclass(frozen=True)
class ChangedFile:
    status: str
    path: str
    previous_path: str | None = None

    def name_status(self) -> str:
        """One line of `git diff --name-status`, unusual paths quoted as git quotes them."""
        letter = STATUS_LETTERS.get(self.status, "X")
        if letter in ("R", "C") and self.previous_path:
            return f"{letter}100\t{quote_path(self.previous_path)}\t{quote_path(self.path)}"
        return f"{letter}\t{quote_path(self.path)}"


def _number(value: str | None) -> float | None:
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def _message(response: httpx.Response) -> str:
    try:
        data = response.json()
    except ValueError:
        return response.text[:200]
    return str(data.get("message", ""))[:200] if isinstance(data, dict) else ""


def wait_for(response: httpx.Response, now: float, failures: int, limited: int,
             retries: int = RETRIES) -> tuple[str, float] | None:
    """(why, seconds) to wait before retrying `response`, or None when its failure is final.

    `failures`: server errors so far; `limited`: secondary rate limits so far (each doubles
    the next wait). `now` is the epoch time `x-ratelimit-reset` is measured against.
    """
    status, headers = response.status_code, response.headers
    if status in (403, 429):
        retry_after = _number(headers.get("retry-after"))
        if retry_after is not None:
            return "rate limited (retry-after)", max(retry_after, 0.0)
        reset = _number(headers.get("x-ratelimit-reset"))
        if headers.get("x-ratelimit-remaining") == "0" and reset is not None:
            return "primary rate limit", max(reset - now, 0.0) + 1.0
        if status == 429 or "rate limit" in _message(response).lower():
            return "secondary rate limit", SECONDARY_WAIT_S * 2 ** limited
        return None
    if status >= 500 and failures < retries:
        return "server error", min(BACKOFF_S * 2 ** failures, MAX_BACKOFF_S)
    return None


@functools.cache
def _tls() -> ssl.SSLContext:
    """httpx's certificate store, read once however many clients a job makes."""
    return httpx.create_ssl_context()


class GitHub:
    """The REST calls on one repository. `transport`, `sleep` and `clock` are the test seams."""

    def __init__(self, repo: str, token: str | None = None, base_url: str = DEFAULT_API_URL,
                 transport: httpx.BaseTransport | None = None, retries: int = RETRIES,
                 sleep: Callable[[float], None] | None = None,
                 clock: Callable[[], float] | None = None, wait_budget_s: float = WAIT_BUDGET_S,
                 graphql_url: str | None = None) -> None:
        if not isinstance(repo, str) or not REPO_RE.fullmatch(repo):
            raise GitHubError(f"{repo!r} is not an owner/name repository; set GITHUB_REPOSITORY")
        headers = {"Accept": "application/vnd.github+json", "X-GitHub-Api-Version": API_VERSION,
                   "User-Agent": "tinyrouter"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        self.repo, self.retries = repo, retries
        self.sleep, self.clock = sleep or time.sleep, clock or time.time
        self.wait_budget_s, self.waited = wait_budget_s, 0.0
        self.graphql_url = graphql_url or f"{base_url.rstrip('/')}/graphql"
        self.http = httpx.Client(base_url=base_url.rstrip("/"), headers=headers,
                                 transport=transport, timeout=30.0, verify=_tls())
        self._identity: str | None = None

    @classmethod
    def from_env(cls, repo: str | None = None, **kwargs) -> GitHub:
        return cls(repo or os.environ.get("GITHUB_REPOSITORY", ""),
                   token=os.environ.get("GITHUB_TOKEN") or None,
                   base_url=os.environ.get("GITHUB_API_URL") or DEFAULT_API_URL,
                   graphql_url=os.environ.get("GITHUB_GRAPHQL_URL") or None, **kwargs)

    def request(self, method: str, path: str, **kwargs) -> httpx.Response:
        """One call on this repository (`path` after /repos/owner/name); raises on failure."""
        return self.send(method, f"/repos/{self.repo}{path}", **kwargs)

    def send(self, method: str, url: str, **kwargs) -> httpx.Response:
        """One call at an absolute API path (`request` for this repository's); raises on failure."""
        failures = limited = 0
        while True:
            try:
                response = self.http.request(method, url, **kwargs)
            except httpx.TransportError as exc:
                if failures >= self.retries:
                    raise GitHubError(f"{method} {url} failed: {exc}") from exc
                why, wait = "connection failed", min(BACKOFF_S * 2 ** failures, MAX_BACKOFF_S)
                failures += 1
            else:
                if response.is_success:
                    return response
                found = wait_for(response, self.clock(), failures, limited, self.retries)
                if found is None:
                    raise GitHubHTTPError(f"{method} {url} answered {response.status_code}: "
                                          f"{_message(response)}", response.status_code,
                                          _message(response))
                why, wait = found
                failures += why == "server error"
                limited += why == "secondary rate limit"
            self._wait(f"{method} {url}", why, wait)

    def _wait(self, what: str, why: str, wait: float) -> None:
        if self.waited + wait > self.wait_budget_s:
            until = datetime.fromtimestamp(self.clock() + wait, UTC).strftime("%H:%M:%S UTC")
            raise GitHubError(f"{what}: {why}, GitHub asks to wait until {until} ({wait:.0f} s), "
                              f"past this command's wait budget of {self.wait_budget_s:.0f} s "
                              f"({self.waited:.0f} s spent); re-run the job after that")
        log.warning("GitHub %s: %s; retrying in %.0f s", what, why, wait)
        self.waited += wait
        self.sleep(wait)

    def identity(self) -> str:
        """The login the token acts as (`github-actions[bot]` for a workflow's token), asked
        of the API once: only comments this identity wrote are the bot's own."""
        if self._identity is None:
            data = self.send("POST", self.graphql_url,
                              json={"query": "query { viewer { login } }"}).json()
            login = ((data.get("data") or {}).get("viewer") or {}).get("login") \
                if isinstance(data, dict) else None
            if not isinstance(login, str) or not LOGIN_RE.fullmatch(login):
                raise GitHubError(f"GitHub did not say which login the token is ({data!r:.200}); "
                                  "check GITHUB_TOKEN")
            self._identity = login
        return self._identity

    # ---------------------------------------------------------------- pull requests

    def pull(self, number: int) -> PullRequest:
        return _pull(self.request("GET", f"/pulls/{int(number)}").json())

    def open_pulls(self) -> list[PullRequest]:
        """Every open pull request, oldest first, every page."""
        pulls: list[PullRequest] = []
        for page in range(1, MAX_PAGES + 1):
            batch = self.request("GET", "/pulls", params={
                "state": "open", "sort": "created", "direction": "asc", "per_page": PER_PAGE,
                "page": page}).json()
            pulls += [_pull(data) for data in batch]
            if len(batch) < PER_PAGE:
                break
        return pulls

    def run_created(self, run_id: int) -> tuple[str, str]:
        """(the event that started it, when GitHub created it) of one workflow run: for the
        gates' run of a pull request, when GitHub first showed that head on the pull request
        (a re-run keeps its run's creation time). The commit's own dates are its author's
        to set; this one is GitHub's."""
        data = self.request("GET", f"/actions/runs/{int(run_id)}").json()
        event, created = data.get("event"), data.get("created_at")
        if not isinstance(event, str) or not isinstance(created, str):
            raise GitHubError(f"run {run_id} says no event or creation time; re-run the job")
        return event, created

    def changed_files(self, number: int) -> list[ChangedFile]:
        """The PR's files at its current head."""
        files: list[ChangedFile] = []
        for page in range(1, MAX_PAGES + 1):
            batch = self.request("GET", f"/pulls/{int(number)}/files",
                                 params={"per_page": PER_PAGE, "page": page}).json()
            files += [_changed(f) for f in batch]
            if len(batch) < PER_PAGE:
                break
        return files

    def compare_files(self, base: str, head_sha: str) -> list[ChangedFile]:
        """The files `head_sha` changes since it left `base` (what a PR at that head shows);
        GitHub lists at most 300, which is plenty to refuse a PR that is not one folder."""
        if not is_name(base) or not is_commit_sha(head_sha):
            raise GitHubError(f"cannot compare {base!r} with {head_sha!r}")
        data = self.request("GET", f"/compare/{base}...{head_sha}").json()
        return [_changed(f) for f in data.get("files") or []]

    def merge(self, number: int, sha: str, method: str = "merge",
              budget_s: float = MERGE_BUDGET_S, base: str | None = None) -> None:
        """Merge only if the head is still `sha` (and, given `base`, the PR still targets it).
        While GitHub answers 405/409 because the base branch moved (it often does right after a
        push to main), retry with backoff for `budget_s`; raise MergeRefused when the merge
        cannot happen (head moved, PR closed or retargeted: `by_author`)."""
        started, attempt = self.clock(), 0
        if base is not None:
            pull = self.pull(number)
            if pull.base_ref != base:
                raise MergeRefused(f"its base is {pull.base_ref}, not {base}", by_author=True)
        while True:
            try:
                self.request("PUT", f"/pulls/{int(number)}/merge",
                             json={"sha": sha, "merge_method": method})
                return
            except GitHubHTTPError as exc:
                if exc.status not in (405, 409):
                    raise
                if exc.status == 409 and "head" in exc.message.lower():
                    raise MergeRefused(f"its head is no longer {sha[:12]}",
                                       by_author=True) from exc
                refusal = exc
            pull = self.pull(number)
            if pull.merged and pull.head_sha == sha:
                return  # the merge went through, its answer was lost
            if pull.state != "open":
                raise MergeRefused("the pull request was closed", by_author=True) from refusal
            if pull.head_sha != sha:
                raise MergeRefused(f"its head moved to {pull.head_sha[:12]}",
                                   by_author=True) from refusal
            wait = min(BACKOFF_S * 2 ** attempt, MAX_BACKOFF_S)
            if self.clock() - started + wait > budget_s:
                raise MergeRefused(f"GitHub answered {refusal.status} ({refusal.message}) for "
                                   f"{budget_s:.0f} s") from refusal
            log.warning("merging PR #%d: %s; retrying in %.0f s", number, refusal.message, wait)
            self.sleep(wait)
            attempt += 1

    def close(self, number: int) -> None:
        self.request("PATCH", f"/pulls/{int(number)}", json={"state": "closed"})

    # ---------------------------------------------------------------- comments and labels

    def upsert_comment(self, number: int, marker: str, body: str) -> bool:
        """Create or update the one comment of this token's identity that carries `marker`;
        True when created. A comment anyone else wrote is never edited, marker or not."""
        if marker not in body:
            body = f"{marker}\n{body}"
        me = self.identity().lower()
        # an app may be named without its bot suffix; no person's login can hold brackets
        mine = {me} if me.endswith("[bot]") else {me, f"{me}[bot]"}
        for comment in self._comments(number):
            author = str((comment.get("user") or {}).get("login", "")).lower()
            if author in mine and marker in (comment.get("body") or ""):
                self.request("PATCH", f"/issues/comments/{int(comment['id'])}",
                             json={"body": body})
                return False
        self.request("POST", f"/issues/{int(number)}/comments", json={"body": body})
        return True

    def _comments(self, number: int) -> list[dict]:
        comments: list[dict] = []
        for page in range(1, MAX_PAGES + 1):
            batch = self.request("GET", f"/issues/{int(number)}/comments",
                                 params={"per_page": PER_PAGE, "page": page}).json()
            comments += batch
            if len(batch) < PER_PAGE:
                break
        return comments

    def add_labels(self, number: int, labels: list[str]) -> None:
        if labels:
            self.request("POST", f"/issues/{int(number)}/labels", json={"labels": labels})

    def remove_label(self, number: int, label: str) -> None:
        """Remove a label; one that is not there is fine."""
        try:
            self.request("DELETE", f"/issues/{int(number)}/labels/{label}")
        except GitHubHTTPError as exc:
            if exc.status != 404:
                raise

    # ---------------------------------------------------------------- git data, workflows

    def root_tree(self, commit_sha: str) -> str:
        return str(self.request("GET", f"/git/commits/{commit_sha}").json()["tree"]["sha"])

    def tree(self, sha: str) -> list[dict]:
        """The entries of one tree: name (`path`), mode, type, SHA, and a blob's size, without
        its content."""
        return list(self.request("GET", f"/git/trees/{sha}").json().get("tree") or [])

    def blob(self, sha: str) -> bytes:
        data = self.request("GET", f"/git/blobs/{sha}").json()
        content = base64.b64decode(str(data.get("content", "")))
        if len(sha) == 40 and hashlib.sha1(b"blob %d\0" % len(content) + content,
                                           usedforsecurity=False).hexdigest() != sha:
            raise GitHubError(f"blob {sha} came back with other content; re-run the job")
        return content

    def file_at(self, commit_sha: str, path: str, cap: int) -> bytes:
        """One file's bytes at a commit, in one call (the contents API): refused when it is not
        a regular file there or is larger than `cap`. GitHubHTTPError 404 when the commit or the
        file is not there (a head garbage-collected after a force push, say)."""
        if not is_commit_sha(commit_sha):
            raise GitHubError(f"{commit_sha!r} is not a full commit SHA")
        data = self.request("GET", f"/contents/{path}", params={"ref": commit_sha}).json()
        if not isinstance(data, dict) or data.get("type") != "file":
            raise NotAFile(f"{path} at {commit_sha[:12]} is not a regular file")
        if int(data.get("size") or 0) > cap or data.get("encoding") != "base64":
            raise NotAFile(f"{path} at {commit_sha[:12]} is {data.get('size')} bytes, over the "
                           f"cap of {cap}")
        return base64.b64decode(str(data.get("content", "")))

    def dispatch(self, workflow: str, ref: str, inputs: dict[str, str] | None = None) -> None:
        self.request("POST", f"/actions/workflows/{workflow}/dispatches",
                     json={"ref": ref, "inputs": inputs or {}})

    def run_reviews(self, run_id: int) -> list[tuple[str, str]]:
        """(state, comment) of each review of the run's deployments ("approved" or "rejected",
        oldest first), every page of them: what a reviewer of a protected environment
        decided."""
        reviews: list[tuple[str, str]] = []
        for page in range(1, MAX_PAGES + 1):
            data = self.request("GET", f"/actions/runs/{int(run_id)}/approvals",
                                params={"per_page": PER_PAGE, "page": page}).json()
            if not isinstance(data, list):
                raise GitHubError(f"the reviews of run {run_id} are not a list; re-run the job")
            reviews += [(str(review.get("state")), str(review.get("comment") or ""))
                        for review in data if isinstance(review, dict)]
            if len(data) < PER_PAGE:
                break
        return reviews


def _pull(data: dict) -> PullRequest:
    return PullRequest(number=int(data["number"]), author=str(data["user"]["login"]),
                       head_sha=str(data["head"]["sha"]), state=str(data["state"]),
                       merged=bool(data.get("merged")), base_ref=str(data["base"]["ref"]),
                       labels=tuple(str(label["name"]) for label in data.get("labels", [])),
                       created_at=str(data.get("created_at") or ""))


def _changed(entry: dict) -> ChangedFile:
    return ChangedFile(str(entry["status"]), str(entry["filename"]),
                       entry.get("previous_filename"))
