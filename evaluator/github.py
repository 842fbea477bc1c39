"""A small GitHub REST client: just the calls the workflows make, with retries.

The base URL comes from `GITHUB_API_URL` and the token from `GITHUB_TOKEN`, so tests point
it at a fake server on loopback. Every value read from GitHub is untrusted data: callers
validate names and SHAs before using them.
"""

from __future__ import annotations

import base64
import logging
import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from evaluator.errors import GitHubError
from evaluator.rules import Competition, is_commit_sha
from evaluator.store import parse_submission_path

log = logging.getLogger(__name__)

DEFAULT_API_URL = "https://api.github.com"
API_VERSION = "2022-11-28"
PER_PAGE = 100
MAX_PAGES = 30  # GitHub lists at most 3000 changed files per PR
RETRIES = 4
BACKOFF_S = 2.0
MAX_WAIT_S = 120.0
REPO_RE = re.compile(r"[A-Za-z0-9_.-]{1,100}/[A-Za-z0-9_.-]{1,100}", re.ASCII)

# `git diff --name-status` letters for GitHub's file statuses; "changed" is a mode change.
STATUS_LETTERS = {"added": "A", "removed": "D", "modified": "M", "renamed": "R",
                  "copied": "C", "changed": "T", "unchanged": "M"}


@dataclass(frozen=True)
class PullRequest:
    number: int
    author: str
    head_sha: str
    state: str
    merged: bool
    base_ref: str
    labels: tuple[str, ...] = field(default=())


@dataclass(frozen=True)
class ChangedFile:
    status: str
    path: str
    previous_path: str | None = None

    def name_status(self) -> str:
        """One line of `git diff --name-status`."""
        letter = STATUS_LETTERS.get(self.status, "X")
        if letter in ("R", "C") and self.previous_path:
            return f"{letter}100\t{self.previous_path}\t{self.path}"
        return f"{letter}\t{self.path}"


def _retry_after(response: httpx.Response, attempt: int) -> float | None:
    """Seconds to wait before retrying, or None when the failure is final."""
    status = response.status_code
    limited = status == 429 or (status == 403 and (
        response.headers.get("x-ratelimit-remaining") == "0"
        or "rate limit" in response.text.lower()))
    if not limited and status < 500:
        return None
    if "retry-after" in response.headers:
        try:
            return min(float(response.headers["retry-after"]), MAX_WAIT_S)
        except ValueError:
            pass
    if response.headers.get("x-ratelimit-remaining") == "0" and "x-ratelimit-reset" in response.headers:
        try:
            return min(max(float(response.headers["x-ratelimit-reset"]) - time.time(), 1.0),
                       MAX_WAIT_S)
        except ValueError:
            pass
    return min(BACKOFF_S * 2 ** attempt, MAX_WAIT_S)


class GitHub:
    """The REST calls on one repository. `transport` and `sleep` are the test seams."""

    def __init__(self, repo: str, token: str | None = None, base_url: str = DEFAULT_API_URL,
                 transport: httpx.BaseTransport | None = None, retries: int = RETRIES,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        if not isinstance(repo, str) or not REPO_RE.fullmatch(repo):
            raise GitHubError(f"{repo!r} is not an owner/name repository; set GITHUB_REPOSITORY")
        headers = {"Accept": "application/vnd.github+json", "X-GitHub-Api-Version": API_VERSION,
                   "User-Agent": "tinyrouter"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        self.repo, self.retries, self.sleep = repo, retries, sleep
        self.http = httpx.Client(base_url=base_url.rstrip("/"), headers=headers,
                                 transport=transport, timeout=30.0)

    @classmethod
    def from_env(cls, repo: str | None = None, **kwargs) -> GitHub:
        return cls(repo or os.environ.get("GITHUB_REPOSITORY", ""),
                   token=os.environ.get("GITHUB_TOKEN") or None,
                   base_url=os.environ.get("GITHUB_API_URL") or DEFAULT_API_URL, **kwargs)

    def request(self, method: str, path: str, **kwargs) -> httpx.Response:
        """One call with retries on 5xx, 429 and secondary rate limits; raises on failure."""
        url = f"/repos/{self.repo}{path}"
        for attempt in range(self.retries + 1):
            try:
                response = self.http.request(method, url, **kwargs)
            except httpx.TransportError as exc:
                if attempt == self.retries:
                    raise GitHubError(f"{method} {url} failed: {exc}") from exc
                wait = min(BACKOFF_S * 2 ** attempt, MAX_WAIT_S)
            else:
                if response.is_success:
                    return response
                wait = _retry_after(response, attempt)
                if wait is None or attempt == self.retries:
                    raise GitHubError(f"{method} {url} answered {response.status_code}: "
                                      f"{_message(response)}")
            log.warning("GitHub %s %s: retrying in %.0f s", method, url, wait)
            self.sleep(wait)
        raise AssertionError("unreachable")

    # ---------------------------------------------------------------- pull requests

    def pull(self, number: int) -> PullRequest:
        data = self.request("GET", f"/pulls/{int(number)}").json()
        return PullRequest(number=int(data["number"]), author=str(data["user"]["login"]),
                           head_sha=str(data["head"]["sha"]), state=str(data["state"]),
                           merged=bool(data.get("merged")), base_ref=str(data["base"]["ref"]),
                           labels=tuple(str(label["name"]) for label in data.get("labels", [])))

    def changed_files(self, number: int) -> list[ChangedFile]:
        files: list[ChangedFile] = []
        for page in range(1, MAX_PAGES + 1):
            batch = self.request("GET", f"/pulls/{int(number)}/files",
                                 params={"per_page": PER_PAGE, "page": page}).json()
            files += [ChangedFile(str(f["status"]), str(f["filename"]),
                                  f.get("previous_filename")) for f in batch]
            if len(batch) < PER_PAGE:
                break
        return files

    def merge(self, number: int, sha: str, method: str = "merge") -> None:
        """Merge only if the head is still `sha`; GitHub answers 409 when it moved."""
        self.request("PUT", f"/pulls/{int(number)}/merge",
                     json={"sha": sha, "merge_method": method})

    def close(self, number: int) -> None:
        self.request("PATCH", f"/pulls/{int(number)}", json={"state": "closed"})

    # ---------------------------------------------------------------- comments and labels

    def upsert_comment(self, number: int, marker: str, body: str) -> bool:
        """Create or update the one comment that carries `marker`; True when created."""
        if marker not in body:
            body = f"{marker}\n{body}"
        for comment in self._comments(number):
            if marker in (comment.get("body") or ""):
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
        except GitHubError as exc:
            if " 404:" not in str(exc):
                raise

    # ---------------------------------------------------------------- workflows

    def dispatch(self, workflow: str, ref: str, inputs: dict[str, str] | None = None) -> None:
        self.request("POST", f"/actions/workflows/{workflow}/dispatches",
                     json={"ref": ref, "inputs": inputs or {}})


def _message(response: httpx.Response) -> str:
    try:
        return str(response.json().get("message", ""))[:200]
    except ValueError:
        return response.text[:200]


# ---------------------------------------------------------------- git: PR files as data, pushes

MAX_ENTRIES = 64  # a submission holds three files; anything far beyond is refused outright
REGULAR_MODES = ("100644", "100755")
LINK_MODE = "120000"
BOT = ("github-actions[bot]", "41898282+github-actions[bot]@users.noreply.github.com")


def git_env() -> dict[str, str]:
    """The environment for git: the token (if any) as an HTTP header, never in argv or .git."""
    env = dict(os.environ, GIT_TERMINAL_PROMPT="0")
    token = os.environ.get("GITHUB_TOKEN")
    if token:
        server = os.environ.get("GITHUB_SERVER_URL", "https://github.com").rstrip("/")
        basic = base64.b64encode(f"x-access-token:{token}".encode()).decode()
        env.update(GIT_CONFIG_COUNT="1", GIT_CONFIG_KEY_0=f"http.{server}/.extraheader",
                   GIT_CONFIG_VALUE_0=f"AUTHORIZATION: basic {basic}")
    return env


def git(repo: str | os.PathLike, *args: str, check: bool = True,
        binary: bool = False) -> subprocess.CompletedProcess:
    result = subprocess.run(["git", "-C", str(repo), *args], capture_output=True,
                            text=not binary, env=git_env(), timeout=600)
    if check and result.returncode != 0:
        stderr = result.stderr if not binary else result.stderr.decode(errors="replace")
        raise GitHubError(f"git {args[0]} failed: {stderr.strip()[-500:]}")
    return result


def fetch_submission(repo: Path, remote: str, head_sha: str, folder: str,
                     rules: Competition) -> list[str]:
    """Copy the PR head's `folder` into `repo` as data; returns the paths written.

    Only git objects are read (`ls-tree`, `cat-file`): nothing from the PR is checked out,
    installed or run. Regular files are copied with mode 0644; a link becomes a link to
    /dev/null (so gate 0 names it, and it never points into the runner); an oversized blob
    becomes a sparse file of its size (so gate 0 reports the size without reading it).
    """
    if not is_commit_sha(head_sha):
        raise GitHubError(f"{head_sha!r} is not a full commit SHA")
    if parse_submission_path(folder) is None:
        raise GitHubError(f"{folder!r} is not a submissions/<login>/<generation> folder")
    git(repo, "fetch", "--no-tags", "--no-recurse-submodules", "--depth=1", remote, head_sha)
    git(repo, "cat-file", "-e", f"{head_sha}^{{commit}}")
    entries = _tree_entries(repo, head_sha, folder)
    target = repo / folder
    if target.is_dir() and not target.is_symlink():
        shutil.rmtree(target)
    elif target.is_symlink() or target.exists():
        target.unlink()
    cap = max(rules.max_weights_bytes, rules.max_receipt_bytes, rules.max_readme_bytes)
    written = []
    for mode, kind, blob, path in entries:
        dest = repo / path
        dest.parent.mkdir(parents=True, exist_ok=True)
        if mode == LINK_MODE:
            dest.symlink_to(os.devnull)
        elif kind == "blob" and mode in REGULAR_MODES:
            _write_blob(repo, blob, dest, cap)
        else:
            log.warning("%s is not a file (mode %s) and was not copied", path, mode)
            continue
        written.append(path)
    return written


def _tree_entries(repo: Path, sha: str, folder: str) -> list[tuple[str, str, str, str]]:
    listing = git(repo, "ls-tree", "-r", "-z", "--full-tree", sha, "--", folder).stdout
    entries = []
    for record in filter(None, listing.split("\0")):
        meta, path = record.split("\t", 1)
        mode, kind, blob = meta.split()
        parts = path.split("/")
        if path != folder and not path.startswith(folder + "/"):
            continue
        if any(p in ("", ".", "..", ".git") for p in parts):
            raise GitHubError(f"the PR holds an unsafe path {path!r}")
        entries.append((mode, kind, blob, path))
    if len(entries) > MAX_ENTRIES:
        raise GitHubError(f"{folder} holds {len(entries)} entries; a submission holds three files")
    return entries


def _write_blob(repo: Path, blob: str, dest: Path, cap: int) -> None:
    size = int(git(repo, "cat-file", "-s", blob).stdout.strip())
    with open(dest, "wb") as handle:
        if size > cap:
            handle.truncate(size)  # sparse: the size is what gate 0 needs, not the bytes
        else:
            handle.write(git(repo, "cat-file", "blob", blob, binary=True).stdout)
    dest.chmod(0o644)


def push_paths(repo: Path, paths: list[str], message: str, remote: str = "origin",
               branch: str = "main", retries: int = 5,
               sleep: Callable[[float], None] = time.sleep) -> bool:
    """Commit `paths` and push: fetch → rebase → push, bounded, never forced.

    Returns False when nothing changed. A rebase conflict aborts and raises: the caller's
    run is then re-done from a fresh checkout rather than guessing a merge of state files.
    """
    git(repo, "add", "--", *paths)
    if git(repo, "diff", "--cached", "--quiet", check=False).returncode == 0:
        return False
    name, email = BOT
    git(repo, "-c", f"user.name={name}", "-c", f"user.email={email}",
        "commit", "--quiet", "--no-verify", "-m", message)
    for attempt in range(retries + 1):
        git(repo, "fetch", "--no-tags", remote, branch)
        rebase = git(repo, "-c", f"user.name={name}", "-c", f"user.email={email}",
                     "rebase", "FETCH_HEAD", check=False)
        if rebase.returncode != 0:
            git(repo, "rebase", "--abort", check=False)
            raise GitHubError(f"cannot rebase the leaderboard commit onto {remote}/{branch}: "
                              f"{rebase.stderr.strip()[-300:]}; re-run the workflow")
        if git(repo, "push", remote, f"HEAD:refs/heads/{branch}", check=False).returncode == 0:
            return True
        if attempt < retries:
            log.warning("push to %s/%s was rejected; retrying (%d/%d)", remote, branch,
                        attempt + 1, retries)
            sleep(min(BACKOFF_S * 2 ** attempt, MAX_WAIT_S))
    raise GitHubError(f"could not push to {remote}/{branch} after {retries + 1} tries")
