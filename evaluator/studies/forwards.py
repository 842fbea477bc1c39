"""The coordinator benchmark: a full forward per θ (naive) against the frozen-prefix cache.

Three paths score the same K random θ on the same N token sequences and must reach the same
decisions: naive, per-candidate cached (`features`) and batched (`features_many`, as training
evaluates a generation). The ratios are of wall-clock medians over repeats; `limit_ratio` is
the multiply-add bound of what caching can save (the Reference page explains each ratio).
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
from evaluator.coordinator.prefix import (
    FROZEN_INPUT,
    build_prefix,
    candidates_per_pass,
    features,
    features_many,
)
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
    activation_bytes: int | None = None  # a batched pass's budget; None: the device's default


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


def prefix_multiply_adds(encoder: Encoder, lens: list[int]) -> int:
    """Matmul and attention multiply-adds of building the prefix: the layers before the SVF
    layer in full, and the x·V coordinates of its q, k and v."""
    cfg, svf = encoder.config, encoder.svf
    per_token = sum(m.in_features * m.out_features for m in svf.modules.values())
    width = cfg.num_attention_heads * cfg.head_dim
    coords = sum(svf.modules[name].rank * svf.modules[name].in_features for name in FROZEN_INPUT)
    layers = encoder.rules.svf_layer
    return (layers * (sum(lens) * per_token + sum(width * n * (n + 1) for n in lens))
            + sum(lens) * coords)


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
    """Time the three paths side by side; medians over repeats."""
    with tempfile.TemporaryDirectory() as workdir:
        encoder = build_encoder(config, workdir)
        ids, thetas = make_inputs(encoder, config)
        rules = encoder.rules
        heads = [t[:rules.n_head_params].reshape(rules.head_shape) for t in thetas]
        scales = np.stack([t[rules.n_head_params:] for t in thetas])
        encoder.features_from_ids(ids, scales[0])  # warm-up
        forms = {"svf_form_naive": dict(encoder.svf.forms)}
        cache = build_prefix(encoder, ids)
        features(cache, scales[0])  # warm-up
        forms["svf_form_cached"] = dict(encoder.svf.forms)
        features_many(cache, scales[:2], budget_bytes=config.activation_bytes)  # warm-up
        step = candidates_per_pass(encoder, [[cache.lengths[i] for i in c.seqs] for c in cache.chunks],
                                   config.activation_bytes)
        times: dict[str, list[float]] = {"naive_s": [], "prefix_s": [], "cached_s": [],
                                         "batched_s": []}
        for _ in range(config.repeats):
            feats = _measure(encoder, ids, scales, times, config)
    lens = [len(s) - 1 for s in ids]
    return _report(config, encoder, times, lens, {**_agreement(heads, feats, rules),
                                                  "candidates_per_pass": min(step, config.candidates),
                                                  **forms})


def _measure(encoder: Encoder, ids: list[list[int]], scales: np.ndarray,
             times: dict[str, list[float]], config: BenchConfig) -> dict[str, list[torch.Tensor]]:
    """One repeat: the prefix, each θ naive and per-candidate cached (interleaved, same machine
    load), then the whole generation batched."""
    device = config.device
    seconds, cache = _timed(device, lambda: build_prefix(encoder, ids))
    times["prefix_s"].append(seconds)
    feats: dict[str, list[torch.Tensor]] = {"naive": [], "cached": []}
    spent = {"naive": 0.0, "cached": 0.0}
    paths = {"naive": lambda s: encoder.features_from_ids(ids, s), "cached": lambda s: features(cache, s)}
    for scale in scales:
        for name, path in paths.items():
            seconds, value = _timed(device, lambda p=path, s=scale: p(s))
            spent[name] += seconds
            feats[name].append(value)
    seconds, batched = _timed(device, lambda: features_many(cache, scales,
                                                            budget_bytes=config.activation_bytes))
    times["naive_s"].append(spent["naive"])
    times["cached_s"].append(spent["cached"])
    times["batched_s"].append(seconds)
    return {**feats, "batched": list(batched)}


def _agreement(heads: list[np.ndarray], feats: dict[str, list[torch.Tensor]],
               rules: Any) -> dict[str, Any]:
    """Whether the three paths reach the same decisions for every θ, and their feature gaps."""
    def decisions(path: str) -> list:
        return [routing.decide(routing.logits(f, h, rules), rules)
                for h, f in zip(heads, feats[path], strict=True)]

    def gap(a: str, b: str) -> float:
        return max(float((x - y).abs().max()) for x, y in zip(feats[a], feats[b], strict=True))

    naive = decisions("naive")
    return {"decisions_equal": naive == decisions("cached") == decisions("batched"),
            "max_feature_diff": gap("naive", "cached"),
            "max_feature_diff_batched": max(gap("naive", "batched"), gap("cached", "batched"))}


def _report(config: BenchConfig, encoder: Encoder, times: dict[str, list[float]],
            lens: list[int], extra: dict[str, Any]) -> dict[str, Any]:
    medians = {key: statistics.median(values) for key, values in times.items()}
    k = config.candidates
    naive, cached, batched = (medians[key] for key in ("naive_s", "cached_s", "batched_s"))
    limit = multiply_adds(encoder, lens, False) / multiply_adds(encoder, lens, True)
    limit_with_prefix = k * multiply_adds(encoder, lens, False) / (
        prefix_multiply_adds(encoder, lens) + k * multiply_adds(encoder, lens, True))
    return {"shape": config.shape, "device": config.device, "dtype": str(encoder.dtype),
            "threads": torch.get_num_threads(), "questions": config.questions,
            "candidates": k, "tokens_mean": statistics.mean(n + 1 for n in lens),
            "repeats": config.repeats, **medians,
            "per_theta_naive_s": naive / k, "per_theta_cached_s": cached / k,
            "per_theta_batched_s": batched / k,
            "per_theta_ratio": naive / cached,
            "generation_ratio": naive / batched,
            "generation_ratio_with_prefix": naive / (medians["prefix_s"] + batched),
            "per_candidate_generation_ratio": naive / cached,
            "batching_speedup": cached / batched,
            "limit_ratio": limit, "share_of_limit": naive / cached / limit,
            "limit_ratio_with_prefix": limit_with_prefix, **extra}
