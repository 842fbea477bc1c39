"""Singular Value Fine-tuning of one decoder layer's 7 matrices (SPEC §3).

Each matrix `W0 = U·diag(s)·Vᵀ` is decomposed once; a scale vector `c` makes it
`U·diag(s ⊙ c)·Vᵀ`. A scaled matrix is applied in whichever form costs fewer
multiply-adds for the tokens at hand: factored `((x·V) ⊙ s·c)·Uᵀ` (with `x·V`
possibly cached where the input is frozen) or a reconstructed dense weight.

K scale vectors can be bound at once, as a (K, count) array: each matrix then maps
inputs of shape (K, tokens, in), or a shared (tokens, in), to (K, tokens, out), one
slice per candidate, with K gains or K dense weights (a batched matmul).
"""

from __future__ import annotations

import contextlib
from collections.abc import Collection, Iterator

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from evaluator.errors import SubmissionError
from evaluator.rules import SVF_MATRICES

FACTORED = "factored"
RECONSTRUCTED = "reconstructed"
FACTORED_CACHED = "factored, x·V cached"
# Where each SVF matrix sits in a Qwen3 decoder layer (and in its checkpoint's weight names).
MATRIX_PARENTS = {"q_proj": "self_attn", "k_proj": "self_attn", "v_proj": "self_attn",
                  "o_proj": "self_attn", "gate_proj": "mlp", "up_proj": "mlp", "down_proj": "mlp"}


class SVFLinear(nn.Module):
    """A frozen linear layer whose singular values can be rescaled; identity when unset."""

    def __init__(self, linear: nn.Linear):
        super().__init__()
        self.weight = linear.weight
        self.bias = linear.bias
        self.out_features, self.in_features = linear.weight.shape
        u, s, vh = torch.linalg.svd(linear.weight.detach().float(), full_matrices=False)
        dtype = linear.weight.dtype
        self.u, self.s, self.vh = u.to(dtype), s, vh.to(dtype)
        self.gain: torch.Tensor | None = None
        self.dense: torch.Tensor | None = None

    @property
    def rank(self) -> int:
        return self.s.numel()

    def factored_cost(self, n_tokens: int, coords_cached: bool = False) -> int:
        """Multiply-adds of the factored form; `x·V` is free when cached."""
        per_token = self.rank * self.out_features
        if not coords_cached:
            per_token += self.rank * self.in_features
        return n_tokens * per_token

    def reconstructed_cost(self, n_tokens: int) -> int:
        dense = self.in_features * self.out_features
        return dense * self.rank + n_tokens * dense

    def reconstruct(self, scale: torch.Tensor) -> torch.Tensor:
        """The dense weight `U·diag(s ⊙ scale)·Vᵀ` in fp32; (K, out, in) for (K, rank) scales."""
        gain = self.s * scale.to(self.s)
        return ((self.u.float() * gain.unsqueeze(-2)) @ self.vh.float()).to(self.weight.dtype)

    def set_scale(self, scale: torch.Tensor | None, dense: bool = False) -> None:
        """Bind a scale vector, or (K, rank) of them (None: the original weight, bit for bit)."""
        if scale is None:
            self.gain = self.dense = None
            return
        gain = (self.s * scale.to(self.s)).to(self.weight.dtype)
        self.gain = gain if gain.dim() == 1 else gain[:, None, :]  # broadcasts over tokens
        self.dense = self.reconstruct(scale) if dense else None
        if self.dense is not None and self.dense.dim() == 3 and len(self.dense) == 1:
            self.dense = self.dense[0]  # one candidate: the plain linear kernel, as for one θ

    def coords(self, x: torch.Tensor) -> torch.Tensor:
        """`x·V`: the input in the right singular basis (cacheable when x is frozen)."""
        return F.linear(x, self.vh)

    def from_coords(self, xv: torch.Tensor) -> torch.Tensor:
        """The scaled output from cached coordinates `x·V`."""
        return F.linear(xv * self.gain, self.u, self.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.gain is None:
            return F.linear(x, self.weight, self.bias)
        if self.dense is None:
            return self.from_coords(self.coords(x))
        if self.dense.dim() == 2:
            return F.linear(x, self.dense, self.bias)
        out = torch.matmul(x, self.dense.mT)  # (K, tokens, in) · (K, in, out)
        return out if self.bias is None else out + self.bias


class SVF:
    """The 7 SVF matrices of one decoder layer, installed in place of its linear layers."""

    def __init__(self, layer: nn.Module):
        self.modules: dict[str, SVFLinear] = {}
        for name in SVF_MATRICES:
            parent = getattr(layer, MATRIX_PARENTS[name])
            module = getattr(parent, name)
            if not isinstance(module, SVFLinear):
                module = SVFLinear(module)
                setattr(parent, name, module)
            self.modules[name] = module
        self.forms: dict[str, str] = {}

    @property
    def count(self) -> int:
        """The number of scales: the sum of the 7 ranks, read from the weights."""
        return sum(m.rank for m in self.modules.values())

    def split(self, scales: np.ndarray | torch.Tensor) -> dict[str, torch.Tensor]:
        """One scale vector (or (K, rank) block, for (K, count) scales) per matrix, in order."""
        scales = torch.as_tensor(np.asarray(scales, dtype=np.float32))
        if scales.dim() != 2:
            scales = scales.reshape(-1)
        if scales.shape[-1] != self.count:
            raise SubmissionError(f"the SVF scales have {scales.shape[-1]} numbers, this encoder "
                                  f"has {self.count} singular values in its 7 matrices")
        device = next(iter(self.modules.values())).s.device
        parts = torch.split(scales.to(device), [m.rank for m in self.modules.values()], dim=-1)
        return dict(zip(self.modules, parts, strict=True))

    def choose(self, n_tokens: int, coords_cached: Collection[str] = ()) -> dict[str, str]:
        """Each matrix's cheaper form for a pass over `n_tokens` tokens (per candidate)."""
        forms = {}
        for name, module in self.modules.items():
            if name in coords_cached:
                forms[name] = FACTORED_CACHED
            elif module.reconstructed_cost(n_tokens) < module.factored_cost(n_tokens):
                forms[name] = RECONSTRUCTED
            else:
                forms[name] = FACTORED
        return forms

    def apply(self, scales: np.ndarray | torch.Tensor, n_tokens: int,
              coords_cached: Collection[str] = ()) -> dict[str, str]:
        """Bind scales ((count,) or (K, count)) for a pass over `n_tokens` tokens per candidate,
        each matrix in its cheaper form."""
        forms = self.choose(n_tokens, coords_cached)
        for name, scale in self.split(scales).items():
            self.modules[name].set_scale(scale, dense=forms[name] == RECONSTRUCTED)
        self.forms = forms
        return forms

    def reset(self) -> None:
        """Back to the original weights."""
        for module in self.modules.values():
            module.set_scale(None)

    @contextlib.contextmanager
    def applied(self, scales: np.ndarray | torch.Tensor | None, n_tokens: int,
                coords_cached: Collection[str] = ()) -> Iterator[dict[str, str]]:
        """Scales bound for the duration of a block (None: the original encoder)."""
        if scales is None:
            yield {}
            return
        try:
            yield self.apply(scales, n_tokens, coords_cached)
        finally:
            self.reset()
