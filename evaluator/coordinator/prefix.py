"""The frozen-prefix cache (SPEC §3, "Performance idea").

SVF touches one layer, so the residual stream entering it never depends on θ: it is computed
once per transcript, and each θ runs only the SVF layer and what follows it, the last layer at
the one position read. `features_many` evaluates a generation's K scale vectors together.
Chunks beyond a byte budget are spilled to `spill_dir` when one is given, else recomputed.
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
from evaluator.errors import EncoderError, SubmissionError

log = logging.getLogger(__name__)
FROZEN_INPUT = ("q_proj", "k_proj", "v_proj")
BUDGET_BYTES = 2 * 1024**3
CHUNK_TOKENS = 8192  # tokens per chunk: bounds the activations of one tail pass
# Bytes of one batched tail pass (see `candidate_bytes`), by device. 0 on a CPU: one candidate a
# pass, as its matrix products already run at full speed on one candidate's rows and wider passes
# only fall out of its caches (`dev coordinator --activation-mib` measures it); a GPU needs
# wide passes to fill it.
ACTIVATION_BYTES = {"cpu": 0, "cuda": 8 * 1024**3}


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
    x = _flat(hidden, chunk.layout)[0]
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


def features(cache: PrefixCache, scales: np.ndarray | None,
             indices: Sequence[int] | np.ndarray | None = None) -> torch.Tensor:
    """(len(indices), hidden) fp32 L2-normalised features under `scales` (None: unscaled)."""
    if scales is None:
        scales = np.ones(cache.encoder.svf.count, dtype=np.float32)
    return features_many(cache, np.asarray(scales, dtype=np.float32).reshape(1, -1), indices)[0]


@torch.inference_mode()
def features_many(cache: PrefixCache, scales: Sequence[np.ndarray] | np.ndarray,
                  indices: Sequence[int] | np.ndarray | None = None,
                  budget_bytes: int | None = None) -> torch.Tensor:
    """(K, len(indices), hidden) features, row k under scale vector k ((K, count) scales).

    The candidates share every θ-independent step (the subset's frozen tensors, its layout and
    RoPE, the cached x·V, a spilled chunk's load); their matrix products run batched,
    `candidates_per_pass` at a time, so a pass stays within the activation budget.
    """
    enc = cache.encoder
    grid = np.asarray(scales, dtype=np.float32)
    if grid.ndim != 2 or grid.shape[1] != enc.svf.count:
        raise SubmissionError(f"the SVF scales must be (K, {enc.svf.count}) for this encoder's "
                              f"{enc.svf.count} singular values, not of shape {grid.shape}")
    where, selected = _selection(cache, indices)
    step = candidates_per_pass(enc, [[cache.lengths[c.seqs[k]] for k in local]
                                     for c, local in selected], budget_bytes)
    out = torch.empty(len(grid), len(where), enc.hidden_size, dtype=torch.float32)
    # held chunks are read together; a spilled or recomputed one is loaded once for all K
    held = [pair for pair in selected if pair[0].tensors is not None]
    groups = ([held] if held else []) + [[pair] for pair in selected if pair[0].tensors is None]
    for group in groups:
        loaded = [(*_subset(cache, chunk, local), [where[chunk.seqs[k]] for k in local])
                  for chunk, local in group]
        for first in range(0, len(grid), step):
            _pass(enc, grid[first:first + step], loaded, out[first:first + step])
    return F.normalize(out, dim=-1)


def _pass(enc: Encoder, block: np.ndarray,
          loaded: list[tuple[dict[str, torch.Tensor], Layout, list[int]]], out: torch.Tensor) -> None:
    """Fill `out`'s rows of some chunks' subsets with their final states under a block of
    candidates bound together."""
    n_tokens = sum(sum(layout.lens) for _, layout, _ in loaded)
    with enc.svf.applied(block, n_tokens, FROZEN_INPUT):
        for tensors, layout, rows in loaded:
            out[:, rows] = tail(enc, tensors, layout).float().cpu()


Selection = tuple[dict[int, int], list[tuple[Chunk, list[int]]]]


def _selection(cache: PrefixCache, indices: Sequence[int] | np.ndarray | None) -> Selection:
    """Each wanted sequence's output row, and the chunks holding them with their local rows."""
    wanted = np.arange(len(cache)) if indices is None else np.asarray(indices, dtype=np.int64)
    where = {int(seq): row for row, seq in enumerate(wanted)}
    if len(where) != len(wanted) or (len(wanted) and not 0 <= wanted.min() <= wanted.max() < len(cache)):
        raise EncoderError(f"indices must be distinct and within 0..{len(cache) - 1}")
    selected = [(chunk, [k for k, seq in enumerate(chunk.seqs) if seq in where])
                for chunk in cache.chunks]
    return where, [(chunk, local) for chunk, local in selected if local]


def candidate_bytes(enc: Encoder, lens: Sequence[int]) -> int:
    """Bytes one candidate needs in a tail pass over sequences of `lens` tokens: the dense
    weights of its SVF matrices with a θ-dependent input (if reconstructed), and per padded
    token 4 residual, 4 query, 4 key/value and 3 MLP widths (the widest set of a layer alive
    at once, with slack for the padded and rotated copies)."""
    cfg, svf = enc.config, enc.svf
    kv_width = cfg.num_key_value_heads * cfg.head_dim
    per_token = (4 * cfg.hidden_size + 4 * cfg.num_attention_heads * cfg.head_dim
                 + 4 * kv_width + 3 * cfg.intermediate_size)
    dense = sum(m.in_features * m.out_features for name, m in svf.modules.items()
                if name not in FROZEN_INPUT)
    return (dense + len(lens) * max(lens, default=0) * per_token) * enc.dtype.itemsize


def candidates_per_pass(enc: Encoder, chunk_lens: Sequence[Sequence[int]],
                        budget_bytes: int | None = None) -> int:
    """How many candidates one batched pass holds within the budget (at least one): passes
    run chunk by chunk, so the widest chunk sets it."""
    budget = activation_budget(enc) if budget_bytes is None else budget_bytes
    widest = max((candidate_bytes(enc, lens) for lens in chunk_lens), default=1)
    return max(1, budget // widest)


def activation_budget(enc: Encoder) -> int:
    """ACTIVATION_BYTES for the encoder's device type (a CPU's for any other)."""
    return ACTIVATION_BYTES.get(enc.device.type, ACTIVATION_BYTES["cpu"])


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
    """(K, B, hidden) final hidden states at each sequence's last token, for each of the K
    scale vectors bound on the SVF (K = 1 for one vector)."""
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
    """A decoder layer over every token, given its (K, rows, ·) q, k, v projections; x is the
    (K, rows, hidden) residual, or one (rows, hidden) shared by the K candidates."""
    q, k, v = (_heads(t, parts.head_dim) for t in qkv)
    q = _rope(parts.q_norm(q), layout.cos, layout.sin)
    k = _rope(parts.k_norm(k), layout.cos, layout.sin)
    q, k, v = (_padded(t, layout).transpose(1, 2) for t in (q, k, v))
    o = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=parts.scaling,
                                       enable_gqa=True)
    hidden = x + parts.o_proj(_flat(o.transpose(1, 2), layout).flatten(2))
    return hidden + parts.mlp(parts.post_norm(hidden))


def _last_block(parts: LayerParts, x: torch.Tensor, layout: Layout) -> torch.Tensor:
    """The last layer: keys and values over every token, the rest at the read rows only."""
    normed = parts.input_norm(x)
    rows, n = layout.last_rows, len(x)
    k = _rope(parts.k_norm(_heads(parts.k_proj(normed), parts.head_dim)), layout.cos, layout.sin)
    v = _heads(parts.v_proj(normed), parts.head_dim)
    q = _heads(parts.q_proj(normed[:, rows]), parts.head_dim)
    q = _rope(parts.q_norm(q), layout.cos[rows], layout.sin[rows])
    k, v = (_padded(t, layout).transpose(1, 2) for t in (k, v))
    mask = None if layout.key_mask is None else layout.key_mask.repeat(n, 1, 1, 1)
    o = F.scaled_dot_product_attention(q.flatten(0, 1)[:, :, None], k, v, attn_mask=mask,
                                       scale=parts.scaling, enable_gqa=True)
    hidden = x[:, rows] + parts.o_proj(o.view(n, len(rows), -1))
    return hidden + parts.mlp(parts.post_norm(hidden))


def _heads(t: torch.Tensor, head_dim: int) -> torch.Tensor:
    """(..., heads·head_dim) → (..., heads, head_dim)."""
    return t.view(*t.shape[:-1], -1, head_dim)


def _rope(t: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary embedding of (…, rows, heads, head_dim), as Qwen3 applies it."""
    half = t.shape[-1] // 2
    rotated = torch.cat((-t[..., half:], t[..., :half]), dim=-1)
    return t * cos[:, None] + rotated * sin[:, None]


def _padded(flat: torch.Tensor, layout: Layout) -> torch.Tensor:
    """(K, rows, ...) → (K·B, width, ...): candidate-major, then sequence."""
    n, batch, width = len(flat), len(layout.lens), layout.width
    if layout.pad_index is None:
        return flat.reshape(n * batch, width, *flat.shape[2:])
    out = flat.new_zeros((n, batch * width, *flat.shape[2:]))
    out[:, layout.pad_index] = flat
    return out.view(n * batch, width, *flat.shape[2:])


def _flat(padded: torch.Tensor, layout: Layout) -> torch.Tensor:
    """(K·B, width, ...) → (K, rows, ...), real tokens only."""
    merged = padded.reshape(-1, len(layout.lens) * layout.width, *padded.shape[2:])
    return merged if layout.pad_index is None else merged[:, layout.pad_index]


def prefix_of(encoder: Encoder, transcripts: Sequence[str], **options: object) -> PrefixCache:
    """The frozen-prefix cache of transcripts (their head inputs, see `build_prefix`)."""
    return build_prefix(encoder, encoder.head_ids(transcripts), **options)


class CachedFeaturizer:
    """Training's featurizer: fixed transcripts, features for many SVF scale vectors."""

    def __init__(self, encoder: Encoder, transcripts: Sequence[str],
                 activation_bytes: int | None = None, **options: object):
        self.cache = prefix_of(encoder, transcripts, **options)
        self.activation_bytes = activation_bytes  # None: the device's ACTIVATION_BYTES

    def features(self, index: np.ndarray, scales: np.ndarray) -> np.ndarray:
        return features(self.cache, scales, index).numpy()

    def features_many(self, index: np.ndarray, scales: np.ndarray) -> np.ndarray:
        """(K, len(index), hidden) for (K, count) scales: a generation in one pass."""
        return features_many(self.cache, scales, index, self.activation_bytes).numpy()
