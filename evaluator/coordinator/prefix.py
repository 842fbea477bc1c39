"""The frozen-prefix cache (SPEC §3, "Performance idea").

SVF touches one layer, so the residual stream entering it never depends on θ. It is
computed once per transcript, with its `x·V` coordinates for q, k and v (their input
is frozen too); each θ then runs the SVF layer over the sequence, any later layers
but the last in full, and the last layer's keys and values over the sequence but its
query, output and MLP at the one position read, then the final norm. The EOS token is
dropped: under causal attention it cannot change the state at position −2.

Memory: chunks are held in memory up to a byte budget; beyond it they are spilled to
`spill_dir` (safetensors) when one is given, else recomputed on every call.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file

from evaluator.coordinator.encoder import Encoder, LayerParts, length_batches
from evaluator.errors import EncoderError

log = logging.getLogger(__name__)
FROZEN_INPUT = ("q_proj", "k_proj", "v_proj")
BUDGET_BYTES = 2 * 1024**3
CHUNK_TOKENS = 8192  # tokens per chunk: bounds the activations of one tail pass


@dataclass
class Layout:
    """Where a chunk's tokens sit: flat rows (real tokens only) and the padded batch."""

    lens: list[int]
    pad_index: torch.Tensor | None  # flat row → b·width + t; None when all rows are full
    last_rows: torch.Tensor  # the flat row each sequence reads
    key_mask: torch.Tensor | None  # (B, 1, 1, width) real keys; None when all rows are full
    cos: torch.Tensor
    sin: torch.Tensor

    @property
    def width(self) -> int:
        return max(self.lens)

    @classmethod
    def build(cls, encoder: Encoder, lens: list[int]) -> Layout:
        device, width = encoder.device, max(lens)
        positions = torch.cat([torch.arange(n) for n in lens]).to(device)
        starts = torch.tensor(np.cumsum([0, *lens[:-1]]), device=device)
        last_rows = starts + torch.tensor(lens, device=device) - 1
        pad_index = key_mask = None
        if min(lens) != width:
            rows = torch.cat([torch.full((n,), b) for b, n in enumerate(lens)]).to(device)
            pad_index = rows * width + positions
            key_mask = (torch.arange(width, device=device)[None] <
                        torch.tensor(lens, device=device)[:, None])[:, None, None, :]
        cos, sin = encoder.rotary(positions)
        return cls(lens, pad_index, last_rows, key_mask, cos, sin)


@dataclass
class Chunk:
    """A group of sequences of similar length and, when held, their frozen tensors."""

    seqs: list[int]
    ids: list[list[int]]
    layout: Layout
    tensors: dict[str, torch.Tensor] | None = None
    spill: Path | None = None
    # the last subset read from a held chunk: a generation's candidates all read the same one
    subset: tuple[tuple[int, ...], dict[str, torch.Tensor], Layout] | None = None


@dataclass
class PrefixCache:
    """Frozen prefixes of N transcripts for one encoder; `features(cache, scales)` reads it."""

    encoder: Encoder
    chunks: list[Chunk]
    lengths: list[int]
    held_bytes: int = 0

    def __len__(self) -> int:
        return len(self.lengths)

    @property
    def n_tokens(self) -> int:
        return sum(self.lengths)


def build_prefix(encoder: Encoder, ids: Sequence[Sequence[int]], budget_bytes: int = BUDGET_BYTES,
                 chunk_tokens: int = CHUNK_TOKENS, spill_dir: str | Path | None = None) -> PrefixCache:
    """Compute the frozen prefix of each head input (token ids with their EOS)."""
    if not ids or min(len(s) for s in ids) < 2:
        raise EncoderError("a head input needs at least 2 tokens (the suffix and EOS)")
    trimmed = [list(s[:-1]) for s in ids]
    lengths = [len(s) for s in trimmed]
    cache = PrefixCache(encoder, [], lengths)
    for n, seqs in enumerate(length_batches(lengths, chunk_tokens)):
        chunk = Chunk(seqs, [trimmed[i] for i in seqs],
                      Layout.build(encoder, [lengths[i] for i in seqs]))
        tensors = _compute(encoder, chunk)
        size = sum(t.numel() * t.element_size() for t in tensors.values())
        if cache.held_bytes + size <= budget_bytes:
            chunk.tensors, cache.held_bytes = tensors, cache.held_bytes + size
        elif spill_dir is not None:
            chunk.spill = Path(spill_dir) / f"prefix-{id(cache):x}-{n}.safetensors"
            chunk.spill.parent.mkdir(parents=True, exist_ok=True)
            save_file({k: v.contiguous().cpu() for k, v in tensors.items()}, chunk.spill)
        cache.chunks.append(chunk)
    spilled = sum(c.spill is not None for c in cache.chunks)
    recomputed = sum(c.tensors is None and c.spill is None for c in cache.chunks)
    if spilled or recomputed:
        log.info("prefix cache over its %d-byte budget: %d chunks spilled, %d recomputed per call",
                 budget_bytes, spilled, recomputed)
    return cache


@torch.inference_mode()
def _compute(encoder: Encoder, chunk: Chunk) -> dict[str, torch.Tensor]:
    input_ids = encoder.pad(chunk.ids)
    hidden = encoder.run_layers(input_ids, encoder.rules.svf_layer)
    x = _flat(hidden, chunk.layout)
    normed = encoder.layer(encoder.rules.svf_layer).input_norm(x)
    tensors = {"x": x}
    for name in FROZEN_INPUT:
        tensors[name] = encoder.svf.modules[name].coords(normed)
    return tensors


def _load(cache: PrefixCache, chunk: Chunk) -> dict[str, torch.Tensor]:
    if chunk.tensors is not None:
        return chunk.tensors
    if chunk.spill is not None:
        return load_file(chunk.spill, device=str(cache.encoder.device))
    return _compute(cache.encoder, chunk)


@torch.inference_mode()
def features(cache: PrefixCache, scales: np.ndarray | None,
             indices: Sequence[int] | np.ndarray | None = None) -> torch.Tensor:
    """(len(indices), hidden) fp32 L2-normalised features under `scales` (None: unscaled)."""
    enc = cache.encoder
    wanted = np.arange(len(cache)) if indices is None else np.asarray(indices, dtype=np.int64)
    where = {int(seq): row for row, seq in enumerate(wanted)}
    if len(where) != len(wanted) or (len(wanted) and not 0 <= wanted.min() <= wanted.max() < len(cache)):
        raise EncoderError(f"indices must be distinct and within 0..{len(cache) - 1}")
    n_tokens = sum(cache.lengths[i] for i in where)
    ones = np.ones(enc.svf.count, dtype=np.float32)
    out = torch.empty(len(wanted), enc.hidden_size, dtype=torch.float32)
    with enc.svf.applied(ones if scales is None else scales, n_tokens, FROZEN_INPUT):
        for chunk in cache.chunks:
            local = [k for k, seq in enumerate(chunk.seqs) if seq in where]
            if not local:
                continue
            tensors, layout = _subset(cache, chunk, local)
            rows = torch.tensor([where[chunk.seqs[k]] for k in local])
            out[rows] = tail(enc, tensors, layout).float().cpu()
    return F.normalize(out, dim=-1)


def _subset(cache: PrefixCache, chunk: Chunk,
            local: list[int]) -> tuple[dict[str, torch.Tensor], Layout]:
    """A chunk's tensors and layout for some of its sequences, the last subset of a held chunk
    kept for the next call (spilled or recomputed chunks keep nothing, to stay in budget)."""
    key = tuple(local)
    if chunk.subset is not None and chunk.subset[0] == key:
        return chunk.subset[1], chunk.subset[2]
    tensors, layout = _select(cache.encoder, _load(cache, chunk), chunk.layout, local)
    if chunk.tensors is not None and len(local) < len(chunk.seqs):
        chunk.subset = (key, tensors, layout)
    return tensors, layout


def _select(enc: Encoder, tensors: dict[str, torch.Tensor], layout: Layout,
            local: list[int]) -> tuple[dict[str, torch.Tensor], Layout]:
    """The tensors and layout of a subset of a chunk's sequences."""
    if len(local) == len(layout.lens):
        return tensors, layout
    starts = np.cumsum([0, *layout.lens[:-1]])
    rows = torch.cat([torch.arange(starts[k], starts[k] + layout.lens[k]) for k in local])
    rows = rows.to(enc.device)
    return ({k: v.index_select(0, rows) for k, v in tensors.items()},
            Layout.build(enc, [layout.lens[k] for k in local]))


def tail(enc: Encoder, tensors: dict[str, torch.Tensor], layout: Layout) -> torch.Tensor:
    """(B, hidden) final hidden states at each sequence's last token, under the bound SVF."""
    svf_layer, last = enc.rules.svf_layer, enc.num_layers - 1
    qkv = [enc.svf.modules[name].from_coords(tensors[name]) for name in FROZEN_INPUT]
    hidden = _block(enc.layer(svf_layer), tensors["x"], qkv, layout)
    for index in range(svf_layer + 1, last):
        parts = enc.layer(index)
        normed = parts.input_norm(hidden)
        hidden = _block(parts, hidden, [parts.q_proj(normed), parts.k_proj(normed),
                                        parts.v_proj(normed)], layout)
    return enc.final_norm(_last_block(enc.layer(last), hidden, layout))


def _block(parts: LayerParts, x: torch.Tensor, qkv: list[torch.Tensor],
           layout: Layout) -> torch.Tensor:
    """A decoder layer over every token, given its q, k, v projections."""
    q, k, v = (t.view(t.shape[0], -1, parts.head_dim) for t in qkv)
    q = _rope(parts.q_norm(q), layout.cos, layout.sin)
    k = _rope(parts.k_norm(k), layout.cos, layout.sin)
    q, k, v = (_padded(t, layout).transpose(1, 2) for t in (q, k, v))
    o = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=parts.scaling,
                                       enable_gqa=True)
    hidden = x + parts.o_proj(_flat(o.transpose(1, 2), layout).flatten(1))
    return hidden + parts.mlp(parts.post_norm(hidden))


def _last_block(parts: LayerParts, x: torch.Tensor, layout: Layout) -> torch.Tensor:
    """The last layer: keys and values over every token, the rest at the read rows only."""
    normed = parts.input_norm(x)
    rows = layout.last_rows
    k = parts.k_proj(normed).view(x.shape[0], -1, parts.head_dim)
    k = _rope(parts.k_norm(k), layout.cos, layout.sin)
    v = parts.v_proj(normed).view(x.shape[0], -1, parts.head_dim)
    q = parts.q_proj(normed[rows]).view(len(rows), -1, parts.head_dim)
    q = _rope(parts.q_norm(q), layout.cos[rows], layout.sin[rows])
    k, v = (_padded(t, layout).transpose(1, 2) for t in (k, v))
    o = F.scaled_dot_product_attention(q[:, :, None], k, v, attn_mask=layout.key_mask,
                                       scale=parts.scaling, enable_gqa=True)
    hidden = x[rows] + parts.o_proj(o.flatten(1))
    return hidden + parts.mlp(parts.post_norm(hidden))


def _rope(t: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary embedding of (rows, heads, head_dim), as Qwen3 applies it."""
    half = t.shape[-1] // 2
    rotated = torch.cat((-t[..., half:], t[..., :half]), dim=-1)
    return t * cos[:, None] + rotated * sin[:, None]


def _padded(flat: torch.Tensor, layout: Layout) -> torch.Tensor:
    """(rows, ...) → (B, width, ...)."""
    batch, width = len(layout.lens), layout.width
    if layout.pad_index is None:
        return flat.view(batch, width, *flat.shape[1:])
    out = flat.new_zeros((batch * width, *flat.shape[1:]))
    out[layout.pad_index] = flat
    return out.view(batch, width, *flat.shape[1:])


def _flat(padded: torch.Tensor, layout: Layout) -> torch.Tensor:
    """(B, width, ...) → (rows, ...), real tokens only."""
    merged = padded.reshape(-1, *padded.shape[2:])
    return merged if layout.pad_index is None else merged[layout.pad_index]


def prefix_of(encoder: Encoder, transcripts: Sequence[str], **options: object) -> PrefixCache:
    """The frozen-prefix cache of transcripts (their head inputs, see `build_prefix`)."""
    return build_prefix(encoder, encoder.head_ids(transcripts), **options)


class CachedFeaturizer:
    """Training's featurizer: fixed transcripts, features for many SVF scale vectors."""

    def __init__(self, encoder: Encoder, transcripts: Sequence[str], **options: object):
        self.cache = prefix_of(encoder, transcripts, **options)

    def features(self, index: np.ndarray, scales: np.ndarray) -> np.ndarray:
        return features(self.cache, scales, index).numpy()
