"""The exceptions callers catch by meaning.

The CLI turns a `UsageError` into one line and exit 2, any other `TinyRouterError` into one
line and exit 1; library code raises them and never prints.
"""


class TinyRouterError(Exception):
    """Base class: the message says what went wrong and what to do about it."""


class UsageError(TinyRouterError):
    """The command line asks for something impossible (a bad flag value, a missing option)."""


class MissingExtraError(TinyRouterError):
    """A command needs a dependency of an optional extra that is not installed."""


class SubmissionError(TinyRouterError):
    """A submission folder, weights file or receipt is malformed or unsafe."""


class EncoderError(TinyRouterError):
    """The encoder checkpoint does not match the rules or cannot be loaded."""


class BenchmarkError(TinyRouterError):
    """A benchmark file is missing, tampered with, or breaks the rules."""


class GraderError(BenchmarkError):
    """A grader cannot run here (its math-verify worker does not start): nothing is graded."""


class CorpusError(BenchmarkError):
    """A demo corpus file or the persona skills are malformed."""


class PoolError(TinyRouterError):
    """A pool call failed for good (after retries, or on a non-retryable status)."""


class InfrastructureError(PoolError):
    """One call failed for good for reasons outside the submission (retries, or their time
    budget, spent): that item fails and the others go on. `cost_usd`: what its attempts billed."""

    def __init__(self, message: str, cost_usd: float = 0.0):
        super().__init__(message)
        self.cost_usd = cost_usd


class OutOfCreditError(PoolError):
    """The OpenRouter key or account cannot pay for more calls: top it up; the evaluation ends."""


class LedgerError(TinyRouterError):
    """A cost ledger is malformed or its hash chain is broken."""


class VaultError(TinyRouterError):
    """A secret is missing or malformed, or what it sealed was tampered with or is another's."""


class LeaderboardError(TinyRouterError):
    """Leaderboard state or a result record is invalid."""


class TrainingError(TinyRouterError):
    """A training run, checkpoint or training data set cannot be used."""


class BaselineError(TinyRouterError):
    """A correctness matrix or training set cannot be read as one."""


class SiteBuildError(TinyRouterError):
    """The site could not be built (a broken page, link or leaderboard file)."""


class GitHubError(TinyRouterError):
    """A GitHub REST call failed."""


class IsolationError(TinyRouterError):
    """The sandbox's isolation is not in force here: code a model wrote is not graded."""
