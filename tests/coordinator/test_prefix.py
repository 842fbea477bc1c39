"""The frozen-prefix cache gives the full forward's features and decisions, for any θ."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from evaluator.coordinator import head as routing
from evaluator.coordinator.encoder import Encoder
from evaluator.coordinator.prefix import CachedFeaturizer, features, prefix_of
from evaluator.errors import EncoderError


@pytest.fixture(scope="module")
def texts(make_transcripts):
    return make_transcripts(240, seed=11)


@pytest.fixture(scope="module")
def cache(encoder, texts):
    return prefix_of(encoder, texts)


@pytest.mark.parametrize(("seed", "head_std", "scale_std"), [
    # scales near 1, moderate head
    (0, 1.0, 0.05),
    # scales far from 1 (about ×0.1 to ×10)
    (1, 1.0, 1.2),
    # heads with large logits
    (2, 1000.0, 0.5),
    # scales far from 1 and large logits together
    (3, 1000.0, 1.2),
])
def test_cached_decisions_equal_the_full_forward(encoder, texts, cache, make_theta,
                                                 seed, head_std, scale_std):
    rules = encoder.rules
    theta = make_theta(rules, np.random.default_rng(seed), head_std, scale_std)
    head = theta[:rules.n_head_params].reshape(rules.head_shape)
    scales = theta[rules.n_head_params:]
    full = encoder.features(texts, scales)
    cached = features(cache, scales)
    assert torch.allclose(cached, full, atol=2e-5)
    decisions = routing.decide(routing.logits(cached, head, rules), rules)
    assert decisions == routing.decide(routing.logits(full, head, rules), rules)
    assert len({d.model for d in decisions}) > 1  # the θ really routes


def test_scales_change_the_features(encoder, texts, cache):
    plain = features(cache, None)
    scaled = features(cache, np.full(encoder.svf.count, 2.0, dtype=np.float32))
    assert torch.allclose(plain, encoder.features(texts), atol=2e-5)
    assert (plain - scaled).abs().max() > 1e-2


def test_a_subset_in_any_order_matches_the_whole(encoder, cache, make_theta):
    scales = make_theta(encoder.rules, np.random.default_rng(5))[encoder.rules.n_head_params:]
    whole = features(cache, scales)
    index = np.array([17, 3, 200, 4, 239, 0])
    assert torch.allclose(features(cache, scales, index), whole[index], atol=1e-6)


def test_a_subset_read_for_many_thetas_gives_each_its_own_features(encoder, texts, cache,
                                                                   make_theta):
    # a generation's candidates read one minibatch; what is kept between them must not leak
    rng = np.random.default_rng(6)
    n = encoder.rules.n_head_params
    first, second = np.array([5, 17, 40, 41, 90, 200]), np.array([1, 5, 77, 150])
    for index in (first, first, second, first):
        scales = make_theta(encoder.rules, rng, 1.0, 0.8)[n:]
        whole = features(cache, scales)
        assert torch.allclose(features(cache, scales, index), whole[index], atol=1e-6)


@pytest.mark.parametrize("spill", [False, True])
def test_over_budget_chunks_are_spilled_or_recomputed(encoder, texts, cache, tmp_path, spill):
    small = prefix_of(encoder, texts[:60], budget_bytes=200_000, chunk_tokens=300,
                           spill_dir=tmp_path if spill else None)
    assert small.held_bytes <= 200_000
    assert any(c.tensors is None for c in small.chunks)
    assert any(tmp_path.iterdir()) == spill
    scales = np.linspace(0.2, 3.0, encoder.svf.count, dtype=np.float32)
    assert torch.allclose(features(small, scales), features(cache, scales, range(60)), atol=1e-5)


def test_left_cut_transcripts_match_too(encoder, texts):
    short = Encoder(encoder.model, encoder.tokenizer,
                    dataclasses.replace(encoder.rules, head_context_tokens=48))
    scales = np.linspace(3.0, 0.3, encoder.svf.count, dtype=np.float32)
    cached = features(prefix_of(short, texts[:40]), scales)
    assert torch.allclose(cached, short.features(texts[:40], scales), atol=2e-5)


def test_an_earlier_svf_layer_runs_the_layers_between_in_full(encoder, texts):
    early = Encoder(encoder.model, encoder.tokenizer,
                    dataclasses.replace(encoder.rules, svf_layer=1))
    scales = np.linspace(0.3, 3.0, early.svf.count, dtype=np.float32)
    cached = features(prefix_of(early, texts[:40]), scales)
    assert torch.allclose(cached, early.features(texts[:40], scales), atol=2e-5)
    assert not torch.allclose(cached, encoder.features(texts[:40], scales), atol=1e-3)


def test_featurizer_gives_numpy_rows_for_training(encoder, texts, cache):
    featurizer = CachedFeaturizer(encoder, texts[:10])
    rows = featurizer.features(np.array([2, 5]), np.ones(encoder.svf.count, dtype=np.float32))
    assert isinstance(rows, np.ndarray)
    assert rows.shape == (2, encoder.hidden_size)
    assert np.allclose(rows, features(cache, None, [2, 5]).numpy(), atol=1e-6)


@pytest.mark.parametrize("index", [[0, 0], [240], [-1]])
def test_bad_indices_are_refused(cache, index):
    with pytest.raises(EncoderError, match="indices"):
        features(cache, None, index)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_bf16_on_cuda_matches_the_full_forward(tiny_path, tiny_rules, make_transcripts):
    from evaluator.coordinator.encoder import load_encoder

    gpu = load_encoder(str(tiny_path), tiny_rules, "cuda")
    texts = make_transcripts(40, seed=8)
    scales = np.linspace(0.5, 2.0, gpu.svf.count, dtype=np.float32)
    assert gpu.dtype == torch.bfloat16
    assert torch.allclose(features(prefix_of(gpu, texts), scales), gpu.features(texts, scales),
                          atol=3e-2)
