"""Copies of a head, disguised the ways a copier would try: what the duplicate checks must catch.

Gate 3 compares the model rows' fingerprint (see gates.fingerprint), so every disguise that
keeps the model rows up to a shift or a scale is caught by the weights alone. A copier who
knows that moves the model rows on purpose until the fingerprint's cosine drops below the
gate's limit (`evading`); such a copy still routes like the original, which the behavioural
check on the public train items catches.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from evaluator.gates import fingerprint

Pair = tuple[np.ndarray, np.ndarray]  # (head, svf scales)

# name → what the disguise does; each keeps every turn-1 model choice (or nearly: the noise)
DISGUISES = {
    "exact": "the head and scales as they are",
    "models shifted": "the same vector added to every model row (no decision changes)",
    "models rescaled": "the model rows multiplied by 7.5 (no decision changes)",
    "roles negated": "the role rows negated (cached grading ignores the role)",
    "roles permuted": "the role rows permuted",
    "roles rescaled": "the role rows multiplied by 40",
    "roles zeroed": "the role rows set to zero",
    "scales changed": "every SVF scale multiplied by a factor in [0.5, 2]",
    "scales nudged": "every SVF scale moved by 1 %",
    "noise 1e-3": "noise at 1e-3 of each row's norm",
}


def disguise(kind: str, head: np.ndarray, scales: np.ndarray, n_models: int,
             seed: int = 1) -> Pair:
    """A copy of (head, scales) disguised as DISGUISES[kind] says, as float32 arrays."""
    h, s = np.asarray(head, np.float64), np.asarray(scales, np.float64)
    rng = np.random.default_rng(seed)
    models, roles = h[:n_models], h[n_models:]
    variants: dict[str, Callable[[], Pair]] = {
        "exact": lambda: (h, s),
        "models shifted": lambda: (np.vstack([models + models[0], roles]), s),
        "models rescaled": lambda: (np.vstack([models * 7.5, roles]), s),
        "roles negated": lambda: (np.vstack([models, -roles]), s),
        "roles permuted": lambda: (np.vstack([models, np.roll(roles, 1, axis=0)]), s),
        "roles rescaled": lambda: (np.vstack([models, roles * 40.0]), s),
        "roles zeroed": lambda: (np.vstack([models, np.zeros_like(roles)]), s),
        "scales changed": lambda: (h, s * rng.uniform(0.5, 2.0, s.shape)),
        "scales nudged": lambda: (h, s * (1 + 0.01 * rng.choice([-1.0, 1.0], s.shape))),
        "noise 1e-3": lambda: (h + 1e-3 * np.linalg.norm(h, axis=1, keepdims=True)
                               * rng.normal(0, 1, h.shape) / np.sqrt(h.shape[1]), s),
    }
    if kind not in variants:
        raise ValueError(f"unknown disguise {kind!r}; choose from {sorted(variants)}")
    new_head, new_scales = variants[kind]()
    return new_head.astype(np.float32), new_scales.astype(np.float32)


def evading(head: np.ndarray, cosine: float, n_models: int, seed: int = 1) -> np.ndarray:
    """The head with its model rows moved by random noise until gate 3's fingerprint cosine to
    the original is exactly `cosine` (the role rows kept), as float32."""
    h = np.asarray(head, np.float64)
    rows = h[:n_models]
    mean = rows.mean(axis=0, keepdims=True)
    scale = np.linalg.norm(rows - mean)
    view = fingerprint(h, n_models)
    noise = np.random.default_rng(seed).normal(0, 1, rows.shape)
    noise = (noise - noise.mean(axis=0, keepdims=True)).reshape(-1)
    noise -= (noise @ view) * view
    noise /= np.linalg.norm(noise)
    moved = cosine * view + np.sqrt(max(0.0, 1 - cosine ** 2)) * noise
    new_rows = moved.reshape(rows.shape) * scale + mean
    return np.vstack([new_rows, h[n_models:]]).astype(np.float32)
