"""GitHub for the workflows, one module a job: `rest` (the REST client and its waits),
`app` (the App's installation token), `fetch` (a PR's folder copied in as data, earlier heads
into the head cache) and `pushes` (git: publishing leaderboard/ by optimistic concurrency).
The names callers use are here."""

from evaluator.github.app import APP_PERMISSIONS, installation_token
from evaluator.github.fetch import fetch_heads, fetch_submission, submission_folder
from evaluator.github.pushes import head_commit, publish, read_at, sync
from evaluator.github.rest import (
    SECONDARY_WAIT_S,
    WAIT_BUDGET_S,
    ChangedFile,
    GitHub,
    GitHubHTTPError,
    MergeRefused,
    PullRequest,
)

__all__ = [
    "APP_PERMISSIONS", "SECONDARY_WAIT_S", "WAIT_BUDGET_S", "ChangedFile", "GitHub",
    "GitHubHTTPError", "MergeRefused", "PullRequest", "fetch_heads", "fetch_submission",
    "head_commit", "installation_token", "publish", "read_at", "submission_folder", "sync",
]
