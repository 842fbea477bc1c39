"""A pull request's submission folder, copied in as data through the git data API, and the
earlier heads the behavioural check compares, kept by their content's digest."""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
from collections.abc import Sequence
from pathlib import Path, PurePosixPath

from evaluator.errors import GitHubError
from evaluator.files import write_atomic
from evaluator.github.rest import GitHub, GitHubHTTPError, NotAFile
from evaluator.records import Attempt
from evaluator.rules import WEIGHTS_FILE, Competition, is_commit_sha, is_sha256
from evaluator.store import parse_submission_path, submission_path

log = logging.getLogger(__name__)

MAX_ENTRIES = 64  # a submission holds three files; anything far beyond is not copied
REGULAR_MODES = ("100644", "100755")
LINK_MODE = "120000"


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


def fetch_submission(github: GitHub, repo: Path, head_sha: str, folder: str,
                     rules: Competition) -> list[str]:
    """Copy the PR head's `folder` into `repo` as data, through the git data API; returns the
    paths written.

    Only that folder's tree and blobs are read, so nothing else in the PR costs anything, and
    nothing is checked out, installed or run. Regular files are copied with mode 0644; a
    link becomes a link to /dev/null (so gate 0 names it, and it never points into the
    runner); a folder or submodule becomes an empty folder (gate 0 refuses it); a blob over
    the size cap becomes a sparse file of its size (gate 0 reports the size, nothing is
    downloaded). Names are kept exactly, odd ones included, for gate 0 to judge.
    """
    if not is_commit_sha(head_sha):
        raise GitHubError(f"{head_sha!r} is not a full commit SHA")
    if parse_submission_path(folder) is None:
        raise GitHubError(f"{folder!r} is not a submissions/<login>/<generation> folder")
    target = repo / folder
    if target.is_symlink() or target.is_file():
        target.unlink()
    elif target.is_dir():
        shutil.rmtree(target)
    tree = github.root_tree(head_sha)
    for name in folder.split("/"):
        entry = next((e for e in github.tree(tree) if e.get("path") == name), None)
        if entry is None or entry.get("type") != "tree":
            log.warning("%s is not a folder at %s; nothing to copy", folder, head_sha[:12])
            return []
        tree = str(entry["sha"])
    entries = github.tree(tree)
    if len(entries) > MAX_ENTRIES:
        log.warning("%s holds %d entries; copying the first %d", folder, len(entries), MAX_ENTRIES)
    target.mkdir(parents=True)
    cap = max(rules.max_weights_bytes, rules.max_receipt_bytes, rules.max_readme_bytes)
    return [_copy(github, target, entry, cap, folder) for entry in entries[:MAX_ENTRIES]]


def _copy(github: GitHub, target: Path, entry: dict, cap: int, folder: str) -> str:
    name, mode, kind = str(entry.get("path")), str(entry.get("mode")), entry.get("type")
    if "/" in name or "\0" in name or name in ("", ".", "..", ".git"):
        raise GitHubError(f"GitHub listed an impossible entry {name!r} in {folder}")
    dest = target / name
    if mode == LINK_MODE:
        dest.symlink_to(os.devnull)
    elif kind == "blob" and mode in REGULAR_MODES:
        size = int(entry.get("size") or 0)
        with open(dest, "wb") as handle:
            if size > cap:
                handle.truncate(size)  # sparse: the size is what gate 0 needs, not the bytes
            else:
                handle.write(github.blob(str(entry["sha"])))
        dest.chmod(0o644)
    else:
        dest.mkdir()
    return f"{folder}/{name}"


HEAD_SUFFIX = ".safetensors"
UNREACHABLE = (404, 409, 422)  # a commit or file gone, an empty repository, a bad ref


def cached_head(cache: Path, digest: str) -> Path:
    """Where the head cache keeps the weights whose SHA-256 is `digest`."""
    return Path(cache) / f"{digest}{HEAD_SUFFIX}"


def _holds(path: Path, digest: str) -> bool:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest() == digest
    except OSError:
        return False


def fetch_heads(github: GitHub, cache: Path, attempts: Sequence[Attempt],
                rules: Competition) -> tuple[int, list[tuple[Attempt, str]]]:
    """Each attempt's weights into the head cache under the SHA-256 its gates recorded,
    fetched (one call) only when the cache does not hold them already: a season's evaluations
    fetch each head once. Returns (heads fetched, (attempt, why) of each head that could not
    be had: its commit or file gone, or other bytes than its gates saw). Only the rate limit
    and the network stop it: an unreachable head is one head not compared."""
    fetched, missing = 0, []
    for attempt in attempts:
        digest = attempt.weights_sha256 or ""
        if not is_sha256(digest) or not is_commit_sha(attempt.head_sha or ""):
            missing.append((attempt, "its attempt names no weights or commit"))
            continue
        path = cached_head(cache, digest)
        if _holds(path, digest):
            continue
        where = f"{submission_path(attempt.miner, attempt.generation)}/{WEIGHTS_FILE}"
        try:
            data = github.file_at(str(attempt.head_sha), where, rules.max_weights_bytes)
        except GitHubHTTPError as exc:
            if exc.status not in UNREACHABLE:
                raise
            missing.append((attempt, f"GitHub answered {exc.status} for its head"))
            continue
        except NotAFile as exc:
            missing.append((attempt, str(exc)))
            continue
        if hashlib.sha256(data).hexdigest() != digest:
            missing.append((attempt, "its head holds other weights than its gates saw"))
            continue
        write_atomic(path, data)
        fetched += 1
    return fetched, missing
