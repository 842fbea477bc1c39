"""The frozen Qwen3 encoder: loading, the head input, and the full forward pass (SPEC §3).

The only module that imports transformers. Head input: the transcript plus the rules'
suffix, tokenized without special tokens, cut from the left to the context budget,
one EOS appended; the feature is the final (normed) hidden state at position −2, in
fp32, L2-normalised. Batches are right-padded with no padding mask: under causal
attention a real token never sees the padding, so a batch gives the features of its
rows one by one, and the full pass and the prefix cache run the same kernels.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
import torch.nn.functional as F
from safetensors import safe_open
from transformers import (
    AutoConfig,
    AutoModelForCausalLM,
    AutoTokenizer,
    PreTrainedTokenizerFast,
    Qwen3Config,
    Qwen3ForCausalLM,
)
from transformers.utils import logging as hf_logging

from evaluator.coordinator.svf import MATRIX_PARENTS, SVF
from evaluator.errors import EncoderError
from evaluator.rules import ENCODER_REVISIONS, SVF_MATRICES, Competition

if TYPE_CHECKING:
    from tokenizers import Tokenizer

log = logging.getLogger(__name__)
BATCH_TOKENS = 16384  # padded tokens per forward batch: bounds activation memory


@dataclass(frozen=True)
class LayerParts:
    """One decoder layer as the frozen-prefix cache computes it: its modules and attention shape.

    The only view of transformers' layer internals outside this module.
    """

    input_norm: torch.nn.Module
    q_proj: torch.nn.Module
    k_proj: torch.nn.Module
    v_proj: torch.nn.Module
    o_proj: torch.nn.Module
    q_norm: torch.nn.Module
    k_norm: torch.nn.Module
    post_norm: torch.nn.Module
    mlp: torch.nn.Module
    head_dim: int
    scaling: float


class Encoder:
    """A frozen Qwen3 body with SVF installed on the rules' layer; features for transcripts."""

    def __init__(self, model: torch.nn.Module, tokenizer: Any, rules: Competition):
        config = model.config
        _check_shape(config, rules)
        self.model = model.eval().requires_grad_(False)
        self.body = model.model
        self.tokenizer = tokenizer
        self.rules = rules
        self.config = config
        self.device = next(model.parameters()).device
        self.dtype = next(model.parameters()).dtype
        self.svf = SVF(self.body.layers[rules.svf_layer])
        if self.svf.count != rules.svf_scale_count:
            raise EncoderError(f"the encoder's layer {rules.svf_layer} has {self.svf.count} "
                               f"singular values, the rules want {rules.svf_scale_count}")
        self.eos_id = _eos_id(tokenizer, config)

    @property
    def hidden_size(self) -> int:
        return self.config.hidden_size

    @property
    def num_layers(self) -> int:
        return self.config.num_hidden_layers

    def head_ids(self, transcripts: Sequence[str]) -> list[list[int]]:
        """Token ids of each head input: transcript + suffix, left-cut, then EOS."""
        if self.tokenizer is None:
            raise EncoderError("this encoder has no tokenizer; pass token ids instead")
        if not transcripts:
            raise EncoderError("no transcripts to encode")
        texts = [t + self.rules.head_input_suffix for t in transcripts]
        keep = self.rules.head_context_tokens - 1
        encoded = self.tokenizer(texts, add_special_tokens=False)["input_ids"]
        return [[*ids[-keep:], self.eos_id] for ids in encoded]

    def features(self, transcripts: Sequence[str], scales: np.ndarray | None = None) -> torch.Tensor:
        """(N, hidden) head-input features by the full forward pass under `scales`."""
        return self.features_from_ids(self.head_ids(transcripts), scales)

    @torch.inference_mode()
    def features_from_ids(self, ids: Sequence[Sequence[int]],
                          scales: np.ndarray | None = None) -> torch.Tensor:
        """Features of head-input ids (EOS included) by the full forward pass."""
        _check_ids(ids, min_len=2)
        out = torch.empty(len(ids), self.hidden_size, dtype=torch.float32)
        with self.svf.applied(scales, sum(len(s) for s in ids)):
            for batch in length_batches([len(s) for s in ids], BATCH_TOKENS):
                input_ids = self.pad([ids[i] for i in batch])
                hidden = self.body(input_ids=input_ids, use_cache=False).last_hidden_state
                read = torch.tensor([len(ids[i]) - 2 for i in batch], device=self.device)
                rows = hidden[torch.arange(len(batch), device=self.device), read]
                out[torch.tensor(batch)] = rows.float().cpu()
        return F.normalize(out, dim=-1)

    def pad(self, seqs: Sequence[Sequence[int]]) -> torch.Tensor:
        """Right-padded ids (the padding comes after every real token, so needs no mask)."""
        input_ids = torch.full((len(seqs), max(len(s) for s in seqs)), self.eos_id)
        for row, seq in enumerate(seqs):
            input_ids[row, :len(seq)] = torch.tensor(seq, dtype=torch.long)
        return input_ids.to(self.device)

    @torch.inference_mode()
    def run_layers(self, input_ids: torch.Tensor, n_layers: int) -> torch.Tensor:
        """The residual stream after the first `n_layers` layers of a right-padded batch."""
        hidden = self.body.embed_tokens(input_ids)
        positions = torch.arange(input_ids.shape[1], device=self.device)[None]
        rope = self.body.rotary_emb(hidden, positions)
        for layer in self.body.layers[:n_layers]:
            hidden = layer(hidden, attention_mask=None, position_ids=positions,
                           position_embeddings=rope)
        return hidden

    def rotary(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """RoPE cos and sin, (len(positions), head_dim), as the model computes them."""
        probe = torch.empty(0, dtype=self.dtype, device=self.device)
        cos, sin = self.body.rotary_emb(probe, positions.to(self.device)[None])
        return cos[0], sin[0]

    def layer(self, index: int) -> LayerParts:
        """The parts of decoder layer `index` (negative counts from the end)."""
        layer = self.body.layers[index]
        attn = layer.self_attn
        return LayerParts(input_norm=layer.input_layernorm, q_proj=attn.q_proj,
                          k_proj=attn.k_proj, v_proj=attn.v_proj, o_proj=attn.o_proj,
                          q_norm=attn.q_norm, k_norm=attn.k_norm,
                          post_norm=layer.post_attention_layernorm, mlp=layer.mlp,
                          head_dim=attn.head_dim, scaling=attn.scaling)

    def final_norm(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.body.norm(hidden)


def length_batches(lengths: Sequence[int], max_tokens: int) -> list[list[int]]:
    """Indices grouped by similar length, each group under `max_tokens` padded tokens."""
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    batches: list[list[int]] = []
    for i in order:
        if batches and lengths[i] * (len(batches[-1]) + 1) <= max_tokens:
            batches[-1].append(i)
        else:
            batches.append([i])
    return batches


def load_encoder(id_or_path: str, rules: Competition, device: str | None = None) -> Encoder:
    """Load a Qwen3 checkpoint (hub id or local folder; safetensors only), frozen, SVF-ready."""
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    dtype = torch.bfloat16 if device.startswith("cuda") else torch.float32
    pin = {"revision": encoder_revision(id_or_path)}
    try:
        with _quiet():
            config = AutoConfig.from_pretrained(id_or_path, trust_remote_code=False, **pin)
            _check_shape(config, rules)
            tokenizer = AutoTokenizer.from_pretrained(id_or_path, trust_remote_code=False, **pin)
            model = AutoModelForCausalLM.from_pretrained(
                id_or_path, dtype=dtype, use_safetensors=True, trust_remote_code=False,
                attn_implementation="sdpa", **pin)
    except (OSError, ValueError, KeyError) as exc:
        raise EncoderError(f"cannot load the encoder {id_or_path!r}: {exc}") from exc
    log.debug("loaded encoder %s on %s (%s)", id_or_path, device, dtype)
    return Encoder(model.to(device), tokenizer, rules)


HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+", re.ASCII)


def encoder_revision(id_or_path: str) -> str | None:
    """The pinned hub commit of a hub id (None for a local folder); a hub id without a pin is
    refused, as an unpinned dataset is."""
    if Path(id_or_path).is_dir() or not HUB_ID.fullmatch(id_or_path):
        return None  # a folder, or no hub id (then loading it says it cannot)
    if id_or_path not in ENCODER_REVISIONS:
        raise EncoderError(f"the encoder {id_or_path!r} is neither a local folder nor a hub id "
                           f"with a pinned revision ({', '.join(ENCODER_REVISIONS)})")
    return ENCODER_REVISIONS[id_or_path]


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """No transformers progress bars: commands print their own progress."""
    was_enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_enabled:
            hf_logging.enable_progress_bar()


def _check_shape(config: Any, rules: Competition) -> None:
    if getattr(config, "model_type", None) != "qwen3":
        raise EncoderError(f"the encoder must be a Qwen3 model, got {config.model_type!r}")
    found = (config.hidden_size, config.num_hidden_layers)
    wanted = (rules.hidden_size, rules.num_layers)
    if found != wanted:
        raise EncoderError(f"the encoder has hidden size {found[0]} and {found[1]} layers, the "
                           f"rules want {wanted[0]} and {wanted[1]} (wrong checkpoint, or a "
                           "missing --competition file for a local one)")
    if not 0 <= rules.svf_layer <= config.num_hidden_layers - 2:
        raise EncoderError(f"SVF layer {rules.svf_layer} must come before the last layer of "
                           f"{config.num_hidden_layers}")


def _check_ids(ids: Sequence[Sequence[int]], min_len: int) -> None:
    if not ids:
        raise EncoderError("no transcripts to encode")
    if min(len(s) for s in ids) < min_len:
        raise EncoderError(f"a head input needs at least {min_len} tokens")


def _eos_id(tokenizer: Any, config: Any) -> int:
    eos = tokenizer.eos_token_id if tokenizer is not None else None
    eos = config.eos_token_id if eos is None else eos
    eos = eos[0] if isinstance(eos, (list, tuple)) else eos
    if eos is None:
        raise EncoderError("the encoder's tokenizer and config name no EOS token")
    return int(eos)


def encoder_overrides(path: str | Path) -> dict[str, Any]:
    """The rule fields a local checkpoint implies, as a `--competition` JSON file holds them."""
    path = Path(path)
    try:
        config = json.loads((path / "config.json").read_text(encoding="utf-8"))
        layers = int(config["num_hidden_layers"])
        svf_layer = layers - 2
        shapes = _weight_shapes(path, [f"model.layers.{svf_layer}.{MATRIX_PARENTS[name]}.{name}.weight"
                                       for name in SVF_MATRICES])
    except (OSError, ValueError, KeyError) as exc:
        raise EncoderError(f"cannot read the checkpoint in {path}: {exc}") from exc
    return {"encoder_id": str(path), "hidden_size": int(config["hidden_size"]),
            "num_layers": layers, "svf_layer": svf_layer,
            "svf_scale_count": sum(min(shape) for shape in shapes)}


def competition_for_encoder(path: str | Path, base: Competition) -> Competition:
    """The rules for a local checkpoint: its shapes, and its SVF count read from the weights."""
    return Competition.from_overrides(encoder_overrides(path), base)


def _weight_shapes(path: Path, names: list[str]) -> list[tuple[int, ...]]:
    index = path / "model.safetensors.index.json"
    if index.exists():
        files = json.loads(index.read_text(encoding="utf-8"))["weight_map"]
    else:
        files = dict.fromkeys(names, "model.safetensors")
    shapes = []
    for name in names:
        with safe_open(path / files[name], framework="pt") as handle:
            shapes.append(tuple(handle.get_slice(name).get_shape()))
    return shapes


def random_model(config: dict[str, Any], seed: int = 0, dtype: torch.dtype = torch.float32,
                 device: str = "cpu") -> Qwen3ForCausalLM:
    """A randomly initialised Qwen3 (deterministic for a seed and device): tests, demo, bench."""
    torch.manual_seed(seed)
    with torch.device(device):
        model = Qwen3ForCausalLM(Qwen3Config(**config, attn_implementation="sdpa"))
    return model.to(dtype).eval().requires_grad_(False)


def save_checkpoint(out_dir: str | Path, model: Qwen3ForCausalLM, tokenizer: Tokenizer,
                    eos_token: str) -> Path:
    """Write a model and a `tokenizers` tokenizer the normal way, so load_encoder reads them."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    with _quiet():
        model.save_pretrained(out)
    wrapped = PreTrainedTokenizerFast(tokenizer_object=tokenizer, eos_token=eos_token,
                                      pad_token=eos_token)
    wrapped.save_pretrained(out)
    return out
