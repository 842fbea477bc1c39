"""Fixtures for the pool tests; the fakes themselves live in pool_fakes.py."""

from __future__ import annotations

import pytest
from pool_fakes import PERSONAS, FakeMath, Sleeps, make_corpus

from evaluator.benchmarks.corpus import CorpusItem
from evaluator.pool.client import OpenRouterClient, RetryPolicy
from evaluator.pool.simulator import Simulator, serve_simulator
from evaluator.rules import OFFICIAL


@pytest.fixture(scope="session")
def corpus() -> list[CorpusItem]:
    return make_corpus()


@pytest.fixture
def simulator(corpus) -> Simulator:
    return Simulator(corpus, PERSONAS, seed=7, retry_after=2, slow_seconds=1.0, rules=OFFICIAL)


@pytest.fixture
def base_url(simulator):
    with serve_simulator(simulator) as url:
        yield url


@pytest.fixture
def benchmark() -> FakeMath:
    return FakeMath()


@pytest.fixture
def sleeps() -> Sleeps:
    return Sleeps()


@pytest.fixture
def make_client(base_url, sleeps):
    """A client for the simulator that records its waits; keyword arguments override."""

    def make(**overrides) -> OpenRouterClient:
        options = dict(rules=OFFICIAL, base_url=base_url, api_key="sk-test-secret", timeout=5.0,
                       retry=RetryPolicy(attempts=4, base_delay=0.01, max_delay=10.0),
                       sleep=sleeps)
        options.update(overrides)
        return OpenRouterClient(**options)

    return make
