"""git for the state files: the checkout's commit, a file at a commit, and `publish`, the
optimistic concurrency every job that writes leaderboard/ goes through.

The token reaches git as an HTTP header in the environment, never in argv or .git.
"""

from __future__ import annotations

import base64
import logging
import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from evaluator.errors import GitHubError
from evaluator.github.rest import BACKOFF_S, MAX_BACKOFF_S
from evaluator.rules import is_commit_sha

log = logging.getLogger(__name__)
T = TypeVar("T")

PUSH_ATTEMPTS = 8
BOT = ("github-actions[bot]", "41898282+github-actions[bot]@users.noreply.github.com")
REJECTED_PUSH = ("[rejected]", "fetch first", "non-fast-forward", "stale info", "cannot lock ref")


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


def git(repo: str | os.PathLike, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    result = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                            env=git_env(), timeout=600)
    if check and result.returncode != 0:
        raise GitHubError(f"git {args[0]} failed: {result.stderr.strip()[-500:]}")
    return result


def head_commit(repo: Path) -> str | None:
    """The commit the checkout is at, or None outside a git checkout."""
    result = git(repo, "rev-parse", "HEAD", check=False)
    sha = result.stdout.strip()
    return sha if result.returncode == 0 and is_commit_sha(sha) else None


def read_at(repo: Path, commit: str, path: str) -> str | None:
    """A file's text at `commit` of the checkout, or None where it did not exist."""
    if git(repo, "cat-file", "-e", f"{commit}^{{commit}}", check=False).returncode != 0:
        raise GitHubError(f"commit {commit} is not in the checkout at {repo}; check it out with "
                          "its history (fetch-depth: 0)")
    shown = git(repo, "show", f"{commit}:{path}", check=False)
    return shown.stdout if shown.returncode == 0 else None


def sync(repo: Path, remote: str = "origin", branch: str = "main") -> str:
    """Put the checkout on the remote branch's newest commit (tracked files reset; untracked
    data, such as a submission folder copied in, kept); returns that commit."""
    git(repo, "fetch", "--quiet", "--no-tags", remote, branch)
    git(repo, "reset", "--quiet", "--hard", "FETCH_HEAD")
    return git(repo, "rev-parse", "HEAD").stdout.strip()


def _commit(repo: Path, paths: list[str], message: str) -> bool:
    git(repo, "add", "--all", "--", *paths)
    if git(repo, "diff", "--cached", "--quiet", check=False).returncode == 0:
        return False
    name, email = BOT
    git(repo, "-c", f"user.name={name}", "-c", f"user.email={email}",
        "commit", "--quiet", "--no-verify", "-m", message)
    return True


def _push(repo: Path, remote: str, branch: str) -> bool:
    """Push without force; False when another job pushed first."""
    pushed = git(repo, "push", "--porcelain", remote, f"HEAD:refs/heads/{branch}", check=False)
    if pushed.returncode == 0:
        return True
    if any(sign in pushed.stdout + pushed.stderr for sign in REJECTED_PUSH):
        return False
    raise GitHubError(f"git push failed: {pushed.stderr.strip()[-500:]}")


def publish(repo: Path, paths: list[str], message: str, apply: Callable[[], T],
            remote: str = "origin", branch: str = "main", attempts: int = PUSH_ATTEMPTS,
            sleep: Callable[[float], None] | None = None) -> tuple[T, bool]:
    """Optimistic concurrency for state files: on the remote branch's newest commit run
    `apply` (which writes under `paths` and returns what it decided), commit, push; when
    another job pushed first, start again from its commit. Never a rebase of state files,
    never a force. Returns (what the last `apply` returned, whether a commit was pushed)."""
    for attempt in range(attempts):
        sync(repo, remote, branch)
        value = apply()
        if not _commit(repo, paths, message):
            return value, False
        if _push(repo, remote, branch):
            return value, True
        wait = min(BACKOFF_S * 2 ** attempt, MAX_BACKOFF_S)
        log.warning("another job pushed to %s/%s first; applying again on its commit in %.0f s "
                    "(%d/%d)", remote, branch, wait, attempt + 1, attempts)
        (sleep or time.sleep)(wait)
    raise GitHubError(f"could not push to {remote}/{branch} in {attempts} tries: other jobs kept "
                      "pushing first; re-run the job")
