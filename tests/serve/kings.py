"""Heads for the serve tests: a routing head, and a checkout whose king it is."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from evaluator.leaderboard import apply_result
from evaluator.pool.client import RetryPolicy
from evaluator.records import Attempt
from evaluator.rules import OFFICIAL, ROLES, WEIGHTS_FILE
from evaluator.store import Store
from evaluator.submission import sha256_file, write_submission

TOKEN = "test-token-0123456789abcdef"
FAST_RETRY = RetryPolicy(attempts=2, base_delay=0.01, max_delay=0.05)


def make_theta(rules, router, seed: int = 5) -> tuple[np.ndarray, np.ndarray]:
    """A head like a trained one: model rows drawn, role rows fitted so that a Worker answers
    the query and a Verifier judges a Worker's answer (sessions then end early or run on, as
    the verdicts fall); SVF scales 1."""
    from evaluator.benchmarks.corpus import load_corpus
    from evaluator.loop import VERIFIER, WORKER, Turn, coordinator_transcript

    texts, roles = [], []
    for entry in load_corpus(rules)[100::40]:
        answered = Turn(rules.pool_names[0], WORKER, entry.right, entry.right)
        texts += [coordinator_transcript(entry.item.prompt, []),
                  coordinator_transcript(entry.item.prompt, [answered])]
        roles += [ROLES.index(WORKER), ROLES.index(VERIFIER)]
    features = router.encoder.features(texts, None).numpy()
    role_rows = np.linalg.lstsq(features, 10 * np.eye(len(ROLES))[roles], rcond=None)[0].T
    model_rows = np.random.default_rng(seed).normal(0.0, 1.0, (rules.n_models, rules.hidden_size))
    head = np.concatenate([model_rows, role_rows]).astype(np.float32)
    return head, np.ones(rules.svf_scale_count, np.float32)


def crowned(miner: str, generation: int, pr: int | None, sha: str | None) -> dict:
    """A crowning result as the evaluation writes it (the first king: nobody beaten)."""
    parts = {"cached_acc": 0.8, "audit_acc": 0.78, "live_acc": 0.7, "avg_turns": 2.0,
             "efficiency": 0.525, "novelty": 0.5, "overfit_penalty": 1.0, "score": 0.6}
    return {"format": 1, "miner": miner, "generation": generation, "pr": pr, "head_sha": sha,
            "evaluated_at": "2026-11-11T12:00:00Z", "outcome": "king", "composite": 0.6,
            "king_composite": None, "delta": None, "reason": None, "ci95": None,
            "per_benchmark": {b: parts for b in OFFICIAL.benchmarks}, "live_cost_usd": 0.41,
            "benchmark_manifest": "f" * 64, "partition_commitment": "9" * 64,
            "router_card": None, "crown_test": None, "against": None, "isolation": None,
            "not_compared": None}


def crown(repo: Path, rules, weights: tuple[np.ndarray, np.ndarray], make_receipt_fields,
          miner: str = "alice", pr: int | None = 1, record_attempt: bool = True) -> Path:
    """A checkout whose king is `miner` generation 1 with these weights, its gates pass
    recorded (a PR) or seeded without one (`pr` None); the king's folder."""
    head, scales = weights
    folder = write_submission(repo, miner, 1, head, scales, make_receipt_fields(), rules=rules)
    sha = None if pr is None else "a" * 40
    if record_attempt and pr is not None:
        Store(repo).record_attempt(Attempt(
            miner=miner, generation=1, pr=pr, head_sha=sha, at="2026-11-10T12:00:00Z",
            weights_sha256=sha256_file(folder / WEIGHTS_FILE), gates_passed=True))
    apply_result(repo, crowned(miner, 1, pr, sha), rules)
    return folder
