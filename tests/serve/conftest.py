"""The tiny encoder loaded (its checkpoint: tests/conftest.py), a crowned head in a checkout,
the simulated pool and `tinyrouter serve` on 127.0.0.1 in front of it, and the official
`openai` client."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from kings import FAST_RETRY, TOKEN, crown, make_theta

from evaluator.pool.ledger import Ledger
from evaluator.pool.simulator import bundled_simulator, serve_simulator
from evaluator.serve import ChatServer, ServeLimits, king_of


@pytest.fixture(scope="session")
def router(tiny_path, tiny_rules):
    import torch

    from evaluator.coordinator.router import Router, load_encoder

    torch.set_num_threads(1)  # the tiny model's matrices are too small to share
    return Router(load_encoder(str(tiny_path), tiny_rules, "cpu"), tiny_rules)


@pytest.fixture(scope="session")
def king_weights(tiny_rules, router):
    return make_theta(tiny_rules, router)


@pytest.fixture
def king_repo(tmp_path, tiny_rules, king_weights, make_receipt_fields) -> Path:
    repo = tmp_path / "repo"
    (repo / "leaderboard").mkdir(parents=True)
    crown(repo, tiny_rules, king_weights, make_receipt_fields)
    return repo


@pytest.fixture
def simulator(tiny_rules):
    return bundled_simulator(tiny_rules, seed=0)


@pytest.fixture
def pool_url(simulator):
    with serve_simulator(simulator) as url:
        yield url


@pytest.fixture
def start_server(router, tiny_rules, pool_url, tmp_path):
    """start_server(served, token=…, limits=…) → a running ChatServer (stopped afterwards)."""
    running = []

    def start(served, token: str | None = None, limits: ServeLimits | None = None,
              log_prompts: bool = False, pool: str | None = None,
              host: str = "127.0.0.1") -> ChatServer:
        limits = limits or ServeLimits(request_timeout=20.0, retry_after=7)
        server = ChatServer(served, router.bind(served.head.theta), tiny_rules, pool or pool_url,
                            Ledger(tmp_path / "serve-ledger.jsonl"), limits, host, 0,
                            token, log_prompts, retry=FAST_RETRY).start()
        running.append(server)
        return server

    yield start
    for server in running:
        server.stop()


@pytest.fixture
def served_king(king_repo, tiny_rules):
    return king_of(king_repo, tiny_rules)


@pytest.fixture
def openai_client():
    """openai_client(server, key=…) → the official client, retries off (a test sees each try)."""
    import openai

    def make(server: ChatServer, key: str = TOKEN, **options) -> openai.OpenAI:
        return openai.OpenAI(base_url=server.base_url, api_key=key, max_retries=0, timeout=30,
                             **options)

    return make


@pytest.fixture
def access_lines(caplog):
    """access_lines(path) → the access log's JSON lines so far, once one for `path` is in (the
    server logs a request after answering it)."""
    import json
    import time

    caplog.set_level(logging.INFO, logger="evaluator.serve.access")

    def lines(path: str = "/v1/chat/completions") -> list[dict]:
        deadline = time.monotonic() + 5
        while True:
            found = [json.loads(r.getMessage()) for r in caplog.records
                     if r.name == "evaluator.serve.access"]
            if any(entry["path"] == path for entry in found) or time.monotonic() > deadline:
                return found
            time.sleep(0.01)

    return lines
