"""The frozen-prefix cache gives the full forward's features and decisions, for any θ."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from deferred import deferred

from evaluator.coordinator import head as routing
from evaluator.errors import EncoderError, SubmissionError

pytestmark = pytest.mark.slow  # each test encodes through the tiny model

torch, prefix = deferred("torch"), deferred("evaluator.coordinator.prefix")
encoder_module = deferred("evaluator.coordinator.encoder")
TEXTS = 60  # transcripts encoded once for the module: enough for every θ here to route apart


@pytest.fixture(scope="module")
def texts(make_transcripts):
    return make_transcripts(TEXTS, seed=11)


@pytest.fixture(scope="module")
def cache(encoder, texts):
    return prefix.prefix_of(encoder, texts)


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
    cached = prefix.features(cache, scales)
    assert torch.allclose(cached, full, atol=2e-5)
    # blind to what every transcript shares (the template's tokens), so the words decide
    shared = full.double().mean(0).numpy()
    head = (head - np.outer(head @ shared, shared) / (shared @ shared)).astype(np.float32)
    decisions = routing.decide(routing.logits(cached, head, rules), rules)
    assert decisions == routing.decide(routing.logits(full, head, rules), rules)
    assert len({d.model for d in decisions}) > 1  # the θ really routes


def test_scales_change_the_features(encoder, texts, cache):
    plain = prefix.features(cache, None)
    scaled = prefix.features(cache, np.full(encoder.svf.count, 2.0, dtype=np.float32))
    assert torch.allclose(plain, encoder.features(texts), atol=2e-5)
    assert (plain - scaled).abs().max() > 1e-2


def test_a_subset_in_any_order_matches_the_whole(encoder, cache, make_theta):
    scales = make_theta(encoder.rules, np.random.default_rng(5))[encoder.rules.n_head_params:]
    whole = prefix.features(cache, scales)
    index = np.array([17, 3, 50, 4, TEXTS - 1, 0])
    assert torch.allclose(prefix.features(cache, scales, index), whole[index], atol=1e-6)


def test_a_subset_read_for_many_thetas_gives_each_its_own_features(encoder, texts, cache,
                                                                   make_theta):
    # a generation's candidates read one minibatch; what is kept between them must not leak
    rng = np.random.default_rng(6)
    n = encoder.rules.n_head_params
    first, second = np.array([5, 17, 40, 41, 45, 55]), np.array([1, 5, 37, 57])
    for index in (first, first, second, first):
        scales = make_theta(encoder.rules, rng, 1.0, 0.8)[n:]
        whole = prefix.features(cache, scales)
        assert torch.allclose(prefix.features(cache, scales, index), whole[index], atol=1e-6)


@pytest.mark.parametrize("spill", [False, True])
def test_over_budget_chunks_are_spilled_or_recomputed(encoder, texts, cache, tmp_path, spill):
    small = prefix.prefix_of(encoder, texts[:60], budget_bytes=200_000, chunk_tokens=300,
                             spill_dir=tmp_path if spill else None)
    assert small.held_bytes <= 200_000
    assert any(c.tensors is None for c in small.chunks)
    assert any(tmp_path.iterdir()) == spill
    scales = np.linspace(0.2, 3.0, encoder.svf.count, dtype=np.float32)
    assert torch.allclose(prefix.features(small, scales), prefix.features(cache, scales, range(60)),
                          atol=1e-5)


def test_left_cut_transcripts_match_too(encoder, texts):
    short = encoder_module.Encoder(encoder.model, encoder.tokenizer,
                                   dataclasses.replace(encoder.rules, head_context_tokens=48))
    scales = np.linspace(3.0, 0.3, encoder.svf.count, dtype=np.float32)
    cached = prefix.features(prefix.prefix_of(short, texts[:40]), scales)
    assert torch.allclose(cached, short.features(texts[:40], scales), atol=2e-5)


def test_an_earlier_svf_layer_runs_the_layers_between_in_full(encoder, texts):
    early = encoder_module.Encoder(encoder.model, encoder.tokenizer,
                                   dataclasses.replace(encoder.rules, svf_layer=1))
    scales = np.linspace(0.3, 3.0, early.svf.count, dtype=np.float32)
    cached = prefix.features(prefix.prefix_of(early, texts[:40]), scales)
    assert torch.allclose(cached, early.features(texts[:40], scales), atol=2e-5)
    assert not torch.allclose(cached, encoder.features(texts[:40], scales), atol=1e-3)


def test_featurizer_gives_numpy_rows_for_training(encoder, texts, cache):
    featurizer = prefix.CachedFeaturizer(encoder, texts[:10])
    rows = featurizer.features(np.array([2, 5]), np.ones(encoder.svf.count, dtype=np.float32))
    assert isinstance(rows, np.ndarray)
    assert rows.shape == (2, encoder.hidden_size)
    assert np.allclose(rows, prefix.features(cache, None, [2, 5]).numpy(), atol=1e-6)


@pytest.mark.parametrize("index", [[0, 0], [TEXTS], [-1]])
def test_bad_indices_are_refused(cache, index):
    with pytest.raises(EncoderError, match="indices"):
        prefix.features(cache, None, index)


# ---------------------------------------------------------------- a generation at once

def _population(rules, k: int, seed: int) -> tuple[list[np.ndarray], np.ndarray]:
    """K heads with large logits and their (K, count) SVF scales, far from 1."""
    rng = np.random.default_rng(seed)
    thetas = [np.concatenate([rng.normal(0, 50.0, rules.n_head_params),
                              np.exp(rng.normal(0, 0.8, rules.svf_scale_count))]) for _ in range(k)]
    n = rules.n_head_params
    return [t[:n].reshape(rules.head_shape) for t in thetas], np.stack(thetas)[:, n:].astype(np.float32)


def _budget(cache, per_pass: int, index=None) -> int:
    """The activation budget that fits `per_pass` candidates in each pass over `index`."""
    wanted = set(range(len(cache)) if index is None else np.asarray(index).tolist())
    lens = [[cache.lengths[s] for s in c.seqs if s in wanted] for c in cache.chunks]
    lens = [row for row in lens if row]
    widest = max(prefix.candidate_bytes(cache.encoder, row) for row in lens)
    assert prefix.candidates_per_pass(cache.encoder, lens, per_pass * widest) == per_pass
    return per_pass * widest


def _assert_same_as_one_by_one(cache, heads, scales, index=None, budget=None, atol=1e-6):
    batched = prefix.features_many(cache, scales, index, budget)
    assert batched.shape == (len(scales), len(cache) if index is None else len(index),
                             cache.encoder.hidden_size)
    rules = cache.encoder.rules
    for head, scale, rows in zip(heads, scales, batched, strict=True):
        alone = prefix.features(cache, scale, index)
        assert torch.allclose(rows, alone, atol=atol)
        decisions = routing.decide(routing.logits(rows, head, rules), rules)
        assert decisions == routing.decide(routing.logits(alone, head, rules), rules)
    return batched


@pytest.mark.parametrize(("k", "per_pass"), [
    # one pass for the whole generation
    (1, 1),
    (4, 4),
    # K over the budget: passes of 2, 2, 2 and 1 candidates
    (7, 2),
    # the device's default budget
    (5, None),
])
def test_a_generation_at_once_equals_each_candidate_alone(encoder, cache, k, per_pass):
    heads, scales = _population(encoder.rules, k, seed=k)
    budget = None if per_pass is None else _budget(cache, per_pass)
    batched = _assert_same_as_one_by_one(cache, heads, scales, budget=budget)
    picks = routing.decide(routing.logits(batched[0], heads[0], encoder.rules), encoder.rules)
    assert len({d.model for d in picks}) > 1  # the θ really routes


def test_a_generation_matches_the_full_forward(encoder, texts, cache):
    heads, scales = _population(encoder.rules, 3, seed=20)
    index = np.arange(0, TEXTS, 2)
    batched = prefix.features_many(cache, scales, index, _budget(cache, 3, index))
    rules = encoder.rules
    for head, scale, rows in zip(heads, scales, batched, strict=True):
        full = encoder.features([texts[i] for i in index], scale)
        assert torch.allclose(rows, full, atol=2e-5)
        assert (routing.decide(routing.logits(rows, head, rules), rules)
                == routing.decide(routing.logits(full, head, rules), rules))


@pytest.mark.parametrize("per_pass", [1, 3, 6])
def test_a_generation_on_a_subset_in_any_order(encoder, cache, per_pass):
    heads, scales = _population(encoder.rules, 6, seed=30)
    index = np.array([17, 3, 50, 4, TEXTS - 1, 0, 28, 29])
    batched = _assert_same_as_one_by_one(cache, heads, scales, index, _budget(cache, per_pass, index))
    whole = prefix.features_many(cache, scales, budget_bytes=_budget(cache, per_pass))
    assert torch.allclose(batched, whole[:, index], atol=1e-6)


@pytest.mark.parametrize("spill", [False, True])
def test_a_generation_over_spilled_or_recomputed_chunks(encoder, texts, cache, tmp_path,
                                                        monkeypatch, spill):
    small = prefix.prefix_of(encoder, texts[:60], budget_bytes=1_000_000, chunk_tokens=300,
                             spill_dir=tmp_path if spill else None)
    held = sum(c.tensors is not None for c in small.chunks)
    assert 0 < held < len(small.chunks) and any(tmp_path.iterdir()) == spill
    heads, scales = _population(encoder.rules, 5, seed=40)
    loads = []
    real_load = prefix._load
    monkeypatch.setattr("evaluator.coordinator.prefix._load",
                        lambda *a: loads.append(1) or real_load(*a))
    batched = prefix.features_many(small, scales, budget_bytes=_budget(small, 2))
    assert len(loads) == len(small.chunks)  # each chunk once, not once per candidate
    for scale, rows in zip(scales, batched, strict=True):
        assert torch.allclose(rows, prefix.features(cache, scale, range(60)), atol=1e-5)
    _assert_same_as_one_by_one(small, heads, scales, [59, 0, 31, 7], _budget(small, 3, [59, 0, 31, 7]))


def test_a_generation_with_an_earlier_svf_layer(encoder, texts):
    early = encoder_module.Encoder(encoder.model, encoder.tokenizer,
                                   dataclasses.replace(encoder.rules, svf_layer=1))
    cache = prefix.prefix_of(early, texts[:40])
    heads, scales = _population(early.rules, 4, seed=50)
    batched = _assert_same_as_one_by_one(cache, heads, scales, budget=_budget(cache, 4))
    assert torch.allclose(batched[1], early.features(texts[:40], scales[1]), atol=2e-5)


def test_featurizer_scores_a_generation_in_one_call(encoder, texts, cache):
    featurizer = prefix.CachedFeaturizer(encoder, texts[:10], activation_bytes=1 << 30)
    _, scales = _population(encoder.rules, 3, seed=60)
    index = np.array([7, 2, 5])
    rows = featurizer.features_many(index, scales)
    assert isinstance(rows, np.ndarray) and rows.shape == (3, 3, encoder.hidden_size)
    for scale, block in zip(scales, rows, strict=True):
        assert np.allclose(block, featurizer.features(index, scale), atol=1e-6)


@pytest.mark.parametrize("shape", [(896,), (2, 895), (2, 3, 896)])
def test_badly_shaped_generations_are_refused(cache, shape):
    with pytest.raises(SubmissionError, match=r"\(K, 896\)"):
        prefix.features_many(cache, np.ones(shape, dtype=np.float32))


@pytest.mark.gpu
def test_bf16_on_cuda_matches_the_full_forward(tiny_path, tiny_rules, make_transcripts):
    from evaluator.coordinator.encoder import load_encoder

    gpu = load_encoder(str(tiny_path), tiny_rules, "cuda")
    texts = make_transcripts(40, seed=8)
    scales = np.linspace(0.5, 2.0, gpu.svf.count, dtype=np.float32)
    assert gpu.dtype == torch.bfloat16
    assert torch.allclose(prefix.features(prefix.prefix_of(gpu, texts), scales),
                          gpu.features(texts, scales), atol=3e-2)
