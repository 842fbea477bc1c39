"""The coordinator benchmark: a full forward per θ (naive) against the frozen-prefix cache.

Both paths score the same K random θ (SVF scales away from 1) on the same N token
sequences, apply SVF through the same modules in the cheaper form for their token
count, and must reach the same decisions. `limit_ratio` is the multiply-add bound of
the per-θ speed-up: the naive body's work over the work the cached path cannot avoid.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from evaluator.coordinator import head as routing
from evaluator.coordinator.encoder import (
    Encoder,
    competition_for_encoder,
    load_encoder,
    random_model,
)
from evaluator.coordinator.prefix import FROZEN_INPUT, build_prefix, features
from evaluator.coordinator.svf import SVF
from evaluator.coordinator.tiny import make_tiny
from evaluator.rules import OFFICIAL

# Qwen/Qwen3-0.6B's architecture beyond the rules' hidden size and depth (same compute).
QWEN3_0_6B = {
    "num_attention_heads": 16,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "intermediate_size": 3072,
    "vocab_size": 151_936,
    "max_position_embeddings": 40_960,
    "rope_parameters": {"rope_type": "default", "rope_theta": 1_000_000.0},
    "rms_norm_eps": 1e-6,
    "tie_word_embeddings": True,
    "eos_token_id": 151_645,
}


@dataclass(frozen=True)
class BenchConfig:
    shape: str = "tiny"
    questions: int = 4
    candidates: int = 8
    tokens: int = 128
    repeats: int = 3
    device: str = "cpu"
    seed: int = 0


def build_encoder(config: BenchConfig, workdir: str) -> Encoder:
    """The tiny checkpoint through the real loading code, or a random Qwen3-0.6B body."""
    if config.shape == "tiny":
        path = make_tiny(workdir, seed=config.seed)
        return load_encoder(str(path), competition_for_encoder(path, OFFICIAL), config.device)
    dtype = torch.bfloat16 if config.device.startswith("cuda") else torch.float32
    shape = {**QWEN3_0_6B, "hidden_size": OFFICIAL.hidden_size,
             "num_hidden_layers": OFFICIAL.num_layers}
    return Encoder(random_model(shape, config.seed, dtype, config.device), None, OFFICIAL)


def make_inputs(encoder: Encoder, config: BenchConfig) -> tuple[list[list[int]], list[np.ndarray]]:
    """N head inputs of about T tokens (EOS last) and K random θ."""
    rng = np.random.default_rng(config.seed)
    spread = max(1, config.tokens // 8)
    lens = rng.integers(config.tokens - spread, config.tokens + spread + 1, config.questions)
    vocab = encoder.config.vocab_size
    ids = [[int(t) for t in rng.integers(0, vocab, max(1, n - 1)) if t != encoder.eos_id]
           + [encoder.eos_id] for n in lens]
    rules = encoder.rules
    thetas = [np.concatenate([rng.normal(0, 1, rules.n_head_params),
                              np.exp(rng.normal(0, 0.3, rules.svf_scale_count))]).astype(np.float32)
              for _ in range(config.candidates)]
    return [s if len(s) >= 2 else [0, *s] for s in ids], thetas


def multiply_adds(encoder: Encoder, lens: list[int], cached: bool) -> int:
    """Matmul and attention multiply-adds per θ of one path over sequences of `lens` tokens."""
    cfg, svf = encoder.config, encoder.svf
    dense = {name: m.in_features * m.out_features for name, m in svf.modules.items()}
    per_token = sum(dense.values())
    width = cfg.num_attention_heads * cfg.head_dim

    def attention(n: int) -> int:  # causal QKᵀ and AV over one sequence
        return width * n * (n + 1)

    if not cached:
        full = [n + 1 for n in lens]  # the naive pass carries the EOS token
        return ((cfg.num_hidden_layers - 1) * sum(full) * per_token
                + _svf_cost(svf, sum(full), ()) + cfg.num_hidden_layers * sum(map(attention, full)))
    tokens = sum(lens)
    middle = cfg.num_hidden_layers - encoder.rules.svf_layer - 2
    kv = dense["k_proj"] + dense["v_proj"]
    last = tokens * kv + len(lens) * (per_token - kv) + sum(2 * width * n for n in lens)
    return (_svf_cost(svf, tokens, FROZEN_INPUT) + (1 + middle) * sum(map(attention, lens))
            + middle * tokens * per_token + last)


def _svf_cost(svf: SVF, tokens: int, coords_cached: tuple[str, ...]) -> int:
    return sum(m.factored_cost(tokens, True) if name in coords_cached
               else min(m.factored_cost(tokens), m.reconstructed_cost(tokens))
               for name, m in svf.modules.items())


def _timed(device: str, fn: Callable[[], Any]) -> tuple[float, Any]:
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    sync()
    start = time.perf_counter()
    value = fn()
    sync()
    return time.perf_counter() - start, value


def run(config: BenchConfig) -> dict[str, Any]:
    """Time both paths side by side; medians over repeats."""
    with tempfile.TemporaryDirectory() as workdir:
        encoder = build_encoder(config, workdir)
        ids, thetas = make_inputs(encoder, config)
        rules = encoder.rules
        split = [(t[:rules.n_head_params].reshape(rules.head_shape), t[rules.n_head_params:])
                 for t in thetas]
        encoder.features_from_ids(ids, split[0][1])  # warm-up
        forms = {"svf_form_naive": dict(encoder.svf.forms)}
        features(build_prefix(encoder, ids), split[0][1])  # warm-up
        forms["svf_form_cached"] = dict(encoder.svf.forms)
        times: dict[str, list[float]] = {"naive_s": [], "prefix_s": [], "cached_s": []}
        for _ in range(config.repeats):
            naive_feats, cached_feats = _measure(encoder, ids, [s for _, s in split], times,
                                                 config.device)
    equal = all(routing.decide(routing.logits(a, h, rules), rules)
                == routing.decide(routing.logits(b, h, rules), rules)
                for (h, _), a, b in zip(split, naive_feats, cached_feats, strict=True))
    diff = max(float((a - b).abs().max()) for a, b in zip(naive_feats, cached_feats, strict=True))
    return _report(config, encoder, times, equal, [len(s) - 1 for s in ids],
                   {"max_feature_diff": diff, **forms})


def _measure(encoder: Encoder, ids: list[list[int]], scales: list[np.ndarray],
             times: dict[str, list[float]], device: str) -> tuple[list, list]:
    """One repeat: the prefix, then each θ naive and cached, interleaved (same machine load)."""
    seconds, cache = _timed(device, lambda: build_prefix(encoder, ids))
    times["prefix_s"].append(seconds)
    naive, cached, naive_s, cached_s = [], [], 0.0, 0.0
    for scale in scales:
        seconds, feats = _timed(device, lambda s=scale: encoder.features_from_ids(ids, s))
        naive_s, naive = naive_s + seconds, [*naive, feats]
        seconds, feats = _timed(device, lambda s=scale: features(cache, s))
        cached_s, cached = cached_s + seconds, [*cached, feats]
    times["naive_s"].append(naive_s)
    times["cached_s"].append(cached_s)
    return naive, cached


def _report(config: BenchConfig, encoder: Encoder, times: dict[str, list[float]], equal: bool,
            lens: list[int], extra: dict[str, Any]) -> dict[str, Any]:
    medians = {key: statistics.median(values) for key, values in times.items()}
    k = config.candidates
    per_naive, per_cached = medians["naive_s"] / k, medians["cached_s"] / k
    limit = multiply_adds(encoder, lens, False) / multiply_adds(encoder, lens, True)
    return {"shape": config.shape, "device": config.device, "dtype": str(encoder.dtype),
            "threads": torch.get_num_threads(), "questions": config.questions,
            "candidates": k, "tokens_mean": statistics.mean(n + 1 for n in lens),
            "repeats": config.repeats, **medians,
            "per_theta_naive_s": per_naive, "per_theta_cached_s": per_cached,
            "per_theta_ratio": per_naive / per_cached,
            "generation_ratio": medians["naive_s"] / (medians["prefix_s"] + medians["cached_s"]),
            "limit_ratio": limit, "share_of_limit": per_naive / per_cached / limit,
            "decisions_equal": equal, **extra}
