"""SVF on the rules' layer: identity, scaling, the cheaper form, and the scale count."""

from __future__ import annotations

import numpy as np
import pytest
from deferred import deferred

from evaluator.errors import SubmissionError
from evaluator.rules import SVF_MATRICES

torch, nn = deferred("torch"), deferred("torch.nn")
svf = deferred("evaluator.coordinator.svf")


def _linear(out_features: int, in_features: int, seed: int = 0) -> torch.nn.Linear:
    torch.manual_seed(seed)
    return nn.Linear(in_features, out_features, bias=False).requires_grad_(False)


def test_svf_sits_on_the_rules_layer_in_matrix_order(encoder):
    layer = encoder.body.layers[encoder.rules.svf_layer]
    assert list(encoder.svf.modules) == list(SVF_MATRICES)
    assert layer.self_attn.k_proj is encoder.svf.modules["k_proj"]
    assert layer.mlp.down_proj is encoder.svf.modules["down_proj"]
    assert not isinstance(encoder.body.layers[0].self_attn.q_proj, svf.SVFLinear)


@pytest.mark.parametrize("shape", [(64, 64), (32, 64), (192, 64), (64, 192)])
def test_scales_of_one_reproduce_the_weight(shape):
    module = svf.SVFLinear(_linear(*shape))
    ones = torch.ones(module.rank)
    assert module.rank == min(shape)
    assert torch.allclose(module.reconstruct(ones), module.weight, atol=1e-5)


def test_reset_restores_the_original_weight_exactly(encoder):
    x = torch.randn(5, encoder.hidden_size)
    module = encoder.svf.modules["q_proj"]
    before = module(x)
    encoder.svf.apply(np.full(encoder.svf.count, 3.0), n_tokens=5)
    assert not torch.allclose(module(x), before)
    encoder.svf.reset()
    assert torch.equal(module(x), before)


def test_factored_and_reconstructed_forms_agree():
    module = svf.SVFLinear(_linear(96, 48))
    x = torch.randn(7, 48)
    scale = torch.exp(torch.randn(module.rank))
    expected = x @ (module.u * (module.s * scale) @ module.vh).T
    module.set_scale(scale, dense=False)
    factored = module(x)
    module.set_scale(scale, dense=True)
    assert torch.allclose(factored, expected, atol=1e-5)
    assert torch.allclose(module(x), expected, atol=1e-5)
    assert torch.allclose(module.from_coords(module.coords(x)), expected, atol=1e-5)


@pytest.mark.parametrize(("n_tokens", "cached", "form"), [
    # few tokens: reconstructing a 128×128 weight (128³ multiply-adds) is dearer
    (1, (), "FACTORED"),
    (31, (), "FACTORED"),
    # many tokens: the extra x·V per token outweighs one reconstruction
    (5000, (), "RECONSTRUCTED"),
    # a frozen input's x·V is cached: always factored
    (5000, ("q_proj",), "FACTORED_CACHED"),
])
def test_the_cheaper_form_is_chosen_for_the_token_count(encoder, n_tokens, cached, form):
    forms = encoder.svf.apply(np.ones(encoder.svf.count), n_tokens, cached)
    encoder.svf.reset()
    assert forms["q_proj"] == getattr(svf, form)


@pytest.mark.parametrize("size", [0, 895, 897, 7168])
def test_wrong_number_of_scales_is_refused(encoder, size):
    with pytest.raises(SubmissionError, match="896 singular values"):
        encoder.svf.apply(np.ones(size), n_tokens=1)


def test_installing_twice_keeps_one_decomposition(encoder):
    layer = encoder.body.layers[encoder.rules.svf_layer]
    again = svf.SVF(layer)
    assert again.modules["o_proj"] is encoder.svf.modules["o_proj"]


@pytest.mark.parametrize("dense", [False, True])
@pytest.mark.parametrize("shared_input", [False, True])
def test_k_scale_vectors_bound_at_once_give_each_its_own_output(dense, shared_input):
    module = svf.SVFLinear(_linear(96, 48))
    scales = torch.exp(torch.randn(4, module.rank))
    x = torch.randn(7, 48) if shared_input else torch.randn(4, 7, 48)
    module.set_scale(scales, dense=dense)
    batched = module(x)
    assert batched.shape == (4, 7, 96)
    for k, scale in enumerate(scales):
        module.set_scale(scale, dense=dense)
        assert torch.allclose(batched[k], module(x if shared_input else x[k]), atol=1e-5)


def test_k_scale_vectors_from_cached_coordinates():
    module = svf.SVFLinear(_linear(64, 32))
    x = torch.randn(5, 32)
    scales = torch.exp(torch.randn(3, module.rank))
    module.set_scale(scales)
    batched = module.from_coords(module.coords(x))
    for k, scale in enumerate(scales):
        module.set_scale(scale)
        assert torch.allclose(batched[k], module.from_coords(module.coords(x)), atol=1e-6)


def test_one_candidate_of_a_batch_is_the_plain_linear_bit_for_bit():
    module = svf.SVFLinear(_linear(64, 32))
    x = torch.randn(5, 32)
    scale = torch.exp(torch.randn(module.rank))
    module.set_scale(scale, dense=True)
    alone = module(x)
    module.set_scale(scale[None], dense=True)
    assert module.dense.dim() == 2
    assert torch.equal(module(x[None])[0], alone)


def test_k_scale_vectors_bind_every_matrix_in_the_same_form(encoder):
    scales = np.exp(np.random.default_rng(0).normal(0, 0.3, (3, encoder.svf.count)))
    forms = encoder.svf.apply(scales, n_tokens=5000, coords_cached=("q_proj",))
    try:
        assert forms == encoder.svf.choose(5000, ("q_proj",))
        assert encoder.svf.modules["o_proj"].dense.shape[0] == 3
        assert encoder.svf.modules["q_proj"].gain.shape == (3, 1, encoder.svf.modules["q_proj"].rank)
    finally:
        encoder.svf.reset()


@pytest.mark.parametrize("shape", [(2, 895), (2, 897), (0, 7168)])
def test_a_batch_of_wrong_sized_scales_is_refused(encoder, shape):
    with pytest.raises(SubmissionError, match="896 singular values"):
        encoder.svf.apply(np.ones(shape), n_tokens=1)
