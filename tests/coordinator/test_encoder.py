"""Loading, the checkpoint checks, the tiny checkpoint and the head input (SPEC §3)."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from deferred import deferred

from evaluator.errors import EncoderError
from evaluator.rules import ENCODER_REVISIONS, OFFICIAL

torch, tiny = deferred("torch"), deferred("evaluator.coordinator.tiny")
encoders = deferred("evaluator.coordinator.encoder")


def test_tiny_rules_are_read_from_the_checkpoint(tiny_rules, tiny_path):
    assert tiny_rules.encoder_id == str(tiny_path)
    assert (tiny_rules.hidden_size, tiny_rules.num_layers) == (128, 4)
    assert tiny_rules.svf_layer == 2
    # q 128, k 128, v 128, o 128, gate 128, up 128, down 128: min(out, in) per matrix
    assert tiny_rules.svf_scale_count == 896
    assert tiny_rules.head_shape == (6, 128)
    assert tiny_rules.win_margin == OFFICIAL.win_margin


def test_loaded_encoder_is_frozen_fp32_on_cpu(encoder, tiny_rules):
    assert encoder.dtype == torch.float32
    assert encoder.svf.count == tiny_rules.svf_scale_count
    assert not any(p.requires_grad for p in encoder.model.parameters())
    assert not encoder.model.training


@pytest.mark.slow
def test_make_tiny_is_deterministic_for_a_seed(tmp_path, tiny_path):
    again = tiny.make_tiny(tmp_path / "again", seed=0)
    other = tiny.make_tiny(tmp_path / "other", seed=1)
    for name in ("model.safetensors", "tokenizer.json"):
        assert (again / name).read_bytes() == (tiny_path / name).read_bytes()
    assert (other / "model.safetensors").read_bytes() != (tiny_path / "model.safetensors").read_bytes()
    width = json.loads((tiny_path / "config.json").read_text())["hidden_size"]
    assert width == tiny.TINY_CONFIG["hidden_size"]


@pytest.mark.parametrize("shape", [(40, 300), (300, 40), (5, 5)])
def test_the_word_directions_are_the_svds_whatever_the_sign(shape):
    """The tiny encoder's word directions come from the small Gram matrix, not an SVD: the
    same right singular vectors, each signed so its largest entry is positive."""
    from evaluator.coordinator.tiny import _right_singular_vectors

    matrix = np.random.default_rng(sum(shape)).normal(size=shape)
    found = _right_singular_vectors(matrix)
    expected = np.linalg.svd(matrix, full_matrices=False)[2]
    assert found.shape == expected.shape
    for mine, theirs in zip(found, expected, strict=True):
        assert np.allclose(mine, theirs, atol=1e-8) or np.allclose(mine, -theirs, atol=1e-8)
        assert mine[np.abs(mine).argmax()] > 0


@pytest.mark.slow
@pytest.mark.parametrize("width", [8, 127])
def test_make_tiny_builds_every_width_the_command_allows(tmp_path, width):
    # RoPE wants an even head size, so a width that is no multiple of 4 keeps fewer values
    path = tiny.make_tiny(tmp_path / "wide", hidden_size=width)
    rules = encoders.competition_for_encoder(path, OFFICIAL)
    features = encoders.load_encoder(str(path), rules, "cpu").features(["QUERY:\nsolve x = 42"])
    assert tuple(features.shape) == (1, width) and rules.hidden_size == width


@pytest.mark.parametrize(("change", "message"), [
    # the rules expect another shape than the checkpoint has
    ({"hidden_size": 1024}, "hidden size 128"),
    ({"num_layers": 28}, "4 layers"),
    # the SVF count or layer do not fit the checkpoint
    ({"svf_scale_count": 7168}, "896 singular values"),
    ({"svf_layer": 3}, "before the last layer"),
])
def test_a_checkpoint_that_breaks_the_rules_is_refused(tiny_path, tiny_rules, change, message):
    with pytest.raises(EncoderError, match=message):
        encoders.load_encoder(str(tiny_path), dataclasses.replace(tiny_rules, **change), "cpu")


def test_official_rules_refuse_the_tiny_checkpoint(tiny_path):
    with pytest.raises(EncoderError, match="--competition"):
        encoders.load_encoder(str(tiny_path), OFFICIAL, "cpu")


def test_missing_or_pickle_only_checkpoints_are_refused(tmp_path, tiny_path, tiny_rules):
    with pytest.raises(EncoderError, match="cannot load"):
        encoders.load_encoder(str(tmp_path / "nowhere"), tiny_rules, "cpu")
    pickled = tmp_path / "pickled"
    pickled.mkdir()
    for name in ("config.json", "tokenizer.json", "tokenizer_config.json"):
        (pickled / name).write_bytes((tiny_path / name).read_bytes())
    (pickled / "pytorch_model.bin").write_bytes(b"not loaded: safetensors only")
    with pytest.raises(EncoderError, match="cannot load"):
        encoders.load_encoder(str(pickled), tiny_rules, "cpu")
    with pytest.raises(EncoderError, match="cannot read the checkpoint"):
        encoders.competition_for_encoder(tmp_path / "nowhere", OFFICIAL)


def test_head_input_is_transcript_suffix_then_eos(encoder):
    ids = encoder.head_ids(["QUERY:\nWhat is 2+3?"])[0]
    assert ids[-1] == encoder.eos_id
    text = encoder.tokenizer.decode(ids[:-1])
    assert text == "QUERY:\nWhat is 2+3?" + encoder.rules.head_input_suffix


def test_long_transcripts_are_cut_from_the_left_keeping_the_suffix(encoder):
    short = encoders.Encoder(encoder.model, encoder.tokenizer,
                    dataclasses.replace(encoder.rules, head_context_tokens=24))
    ids = short.head_ids(["start " + "filler words " * 40 + "the very end"])[0]
    assert len(ids) == 24
    assert short.tokenizer.decode(ids[:-1]).endswith("the very end" + OFFICIAL.head_input_suffix)
    assert short.features(["x " * 100]).shape == (1, encoder.hidden_size)


def test_features_are_unit_fp32_and_ignore_the_eos_position(encoder, make_transcripts):
    feats = encoder.features(make_transcripts(5))
    assert feats.dtype == torch.float32
    assert torch.allclose(feats.norm(dim=-1), torch.ones(5), atol=1e-6)
    ids = encoder.head_ids(["QUERY:\nabc"])
    other_last = [[*ids[0][:-1], ids[0][-2]]]
    # position −2 is read, so the final token cannot change the feature (causal attention)
    assert torch.allclose(encoder.features_from_ids(ids), encoder.features_from_ids(other_last))


@pytest.mark.slow
def test_a_batch_gives_the_features_of_its_rows_one_by_one(encoder, make_transcripts, make_theta):
    import numpy as np

    texts = make_transcripts(12, seed=3)
    scales = make_theta(encoder.rules, np.random.default_rng(0))[encoder.rules.n_head_params:]
    batched = encoder.features(texts, scales)
    alone = torch.cat([encoder.features([t], scales) for t in texts])
    assert torch.allclose(batched, alone, atol=1e-5)


def test_empty_input_is_refused(encoder):
    with pytest.raises(EncoderError, match="no transcripts"):
        encoder.features([])


def test_a_hub_encoder_is_loaded_at_its_pinned_revision_a_folder_as_is(tmp_path):
    assert encoders.encoder_revision(OFFICIAL.encoder_id) == ENCODER_REVISIONS[OFFICIAL.encoder_id]
    assert len(encoders.encoder_revision(OFFICIAL.encoder_id)) == 40
    assert encoders.encoder_revision(str(tmp_path)) is None
    with pytest.raises(EncoderError, match="neither a local folder nor a hub id with a pinned"):
        encoders.encoder_revision("someone/Qwen3-0.6B-retrained")
