"""The LLM pool: the OpenRouter client, the hash-chained cost ledger and the loopback simulator."""

from evaluator.benchmarks.corpus import CorpusItem, read_corpus
from evaluator.pool.client import Completion, OpenRouterClient, RetryBudget, RetryPolicy
from evaluator.pool.ledger import GENESIS, Ledger, LedgerSummary, verify_ledger
from evaluator.pool.simulator import (
    Simulator,
    SimulatorServer,
    bundled_simulator,
    serve_simulator,
)

__all__ = [
    "GENESIS",
    "Completion",
    "CorpusItem",
    "Ledger",
    "LedgerSummary",
    "OpenRouterClient",
    "RetryBudget",
    "RetryPolicy",
    "Simulator",
    "SimulatorServer",
    "bundled_simulator",
    "read_corpus",
    "serve_simulator",
    "verify_ledger",
]
