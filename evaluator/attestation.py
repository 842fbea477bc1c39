"""What the record job attests: the result file an evaluation left on the board, and leaderboard/
as the commit that recorded it holds it.

evaluate.yml's `attest` job signs each subject's SHA-256 with GitHub's artifact attestations,
so anyone can check with `gh attestation verify` that a file came from the approved workflow
(the Maintaining guide shows how). A commit's subject is the listing `git ls-tree -r <commit>
leaderboard` prints, which anyone can print again from a clone.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from evaluator.errors import LeaderboardError
from evaluator.files import parse_time
from evaluator.github.pushes import git
from evaluator.rules import is_commit_sha
from evaluator.store import DIGESTS_FILE, LEADERBOARD_DIR, Store

TREE_COMMAND = ("ls-tree", "-r", "{commit}", LEADERBOARD_DIR)  # the listing of a commit's board


@dataclass(frozen=True)
class Subject:
    """One attested thing: its name in the attestation and the SHA-256 of its bytes."""

    name: str
    sha256: str

    @property
    def line(self) -> str:
        """Its line of a checksums file (`actions/attest`'s `subject-checksums`)."""
        return f"{self.sha256}  {self.name}\n"


def tree_listing(repo: Path, commit: str) -> bytes:
    """What `git ls-tree -r <commit> leaderboard` prints in the checkout."""
    return git(repo, *(part.format(commit=commit) for part in TREE_COMMAND)).stdout.encode()


def subjects(repo: Path, pr: int, head_sha: str) -> list[Subject]:
    """The newest result file of this PR at this head (the one its record job wrote), with the
    digest results.sha256 holds for it, and leaderboard/ at the commit that added it."""
    store = Store(Path(repo))
    mine = [(path, store.result(path)) for path in store.result_files()]
    mine = [(path, result) for path, result in mine if (result.pr, result.head_sha) ==
            (pr, head_sha)]
    if not mine:
        raise LeaderboardError(f"{LEADERBOARD_DIR}/ holds no result of PR {pr} at "
                               f"{head_sha[:12]}: record it before attesting it")
    path, _ = max(mine, key=lambda pair: parse_time(pair[1].evaluated_at))
    name = path.relative_to(store.root).as_posix()
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if store.digests().get(name) != digest:
        raise LeaderboardError(f"{store.relative(path)} is not the file {DIGESTS_FILE} names; "
                               "run `tinyrouter leaderboard validate` and restore it from git")
    where = f"{LEADERBOARD_DIR}/{name}"
    commit = git(repo, "log", "-1", "--format=%H", "--", where).stdout.strip()
    if not is_commit_sha(commit):
        raise LeaderboardError(f"{where} is not committed in {repo}: check out the branch the "
                               "record job pushed, with its history")
    listing = hashlib.sha256(tree_listing(Path(repo), commit)).hexdigest()
    return [Subject(where, digest), Subject(f"{LEADERBOARD_DIR}@{commit}", listing)]
