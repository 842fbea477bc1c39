"""The exceptions callers catch by meaning. The CLI turns any of them into one line and exit 1."""


class TinyRouterError(Exception):
    """Base class: the message says what went wrong and what to do about it."""


class SubmissionError(TinyRouterError):
    """A submission folder, weights file or receipt is malformed or unsafe."""


class EncoderError(TinyRouterError):
    """The encoder checkpoint does not match the rules or cannot be loaded."""


class BenchmarkError(TinyRouterError):
    """A benchmark file is missing, tampered with, or breaks the rules."""


class PoolError(TinyRouterError):
    """A pool call failed for good (after retries, or on a non-retryable status)."""


class LedgerError(TinyRouterError):
    """A cost ledger is malformed or its hash chain is broken."""


class LeaderboardError(TinyRouterError):
    """Leaderboard state or a result record is invalid."""


class TrainingError(TinyRouterError):
    """A training run, checkpoint or training data set cannot be used."""


class GitHubError(TinyRouterError):
    """A GitHub REST call failed."""
