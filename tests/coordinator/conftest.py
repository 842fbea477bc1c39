"""The tiny encoder loaded (its checkpoint: tests/conftest.py), and transcripts shaped like the
loop's."""

from __future__ import annotations

import numpy as np
import pytest

from evaluator.rules import ROLES

WORDS = ("solve", "the", "equation", "x", "=", "42", "\\boxed{7}", "Answer: B", "def f(n):",
         "return", "prime", "VERDICT: ACCEPT", "plan", "check", "é", "∑", "\n", "```python")


@pytest.fixture(scope="session")
def encoder(tiny_path, tiny_rules):
    from evaluator.coordinator.encoder import load_encoder

    return load_encoder(str(tiny_path), tiny_rules, "cpu")


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """The tiny model's matrices are too small to share: threads only add overhead."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _transcripts(n: int, seed: int = 0, max_words: int = 30) -> list[str]:
    """Varied transcripts: a query, then 0–3 turns of random text (up to a few hundred tokens)."""
    rng = np.random.default_rng(seed)
    pool = ("qwen3.5-35b-a3b", "gemini-3.1-flash-lite", "deepseek-v4-flash")
    out = []
    for _ in range(n):
        text = "QUERY:\n" + " ".join(rng.choice(WORDS, rng.integers(0, max_words)))
        for k in range(int(rng.integers(0, 4))):
            words = " ".join(rng.choice(WORDS, rng.integers(1, max_words)))
            text += f"\n\n[Turn {k + 1} | {rng.choice(ROLES)} | {rng.choice(pool)}]\n{words}"
        out.append(text)
    return out


def _random_theta(rules, rng: np.random.Generator, head_std: float = 1.0,
                 scale_std: float = 0.5) -> np.ndarray:
    """A θ with a random head and SVF scales spread around (and far from) 1."""
    head = rng.normal(0.0, head_std, rules.n_head_params)
    scales = np.exp(rng.normal(0.0, scale_std, rules.svf_scale_count))
    return np.concatenate([head, scales]).astype(np.float32)


@pytest.fixture(scope="session")
def make_transcripts():
    return _transcripts


@pytest.fixture(scope="session")
def make_theta():
    return _random_theta
