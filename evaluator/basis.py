"""The public items' feature basis: gate 3 compares model rows as routing uses them.

Weight in a direction the features never take changes no decision, so gate 3 compares rows
projected on the leading directions of the public train items' features, each scaled by how
much the features use it: two heads read as alike exactly when their logits there are alike.
The maintainer computes it once per season (`tinyrouter basis`) and commits it, so the hosted
gates stay torch-free; a basis from another season is refused.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import numpy as np

from evaluator.rules import Competition
from evaluator.store import LEADERBOARD_DIR

BASIS_FILE = "feature-basis.safetensors"
BASIS_PATH = PurePosixPath(LEADERBOARD_DIR, BASIS_FILE)
TENSOR = "directions"
FORMAT = "1"


class BasisError(ValueError):
    """The committed basis cannot be used: gate 3 fails closed and says how to fix it."""


@dataclass(frozen=True)
class FeatureBasis:
    """(k, hidden) directions, each scaled by its share of the public items' features."""

    directions: np.ndarray
    items: int
    digest: str  # names the basis a recorded `Seen` is on (see `read_basis`)

    def project(self, view: np.ndarray, n_models: int) -> np.ndarray:
        """A fingerprint (centred model rows) as the public items see it, at unit norm."""
        rows = np.asarray(view, dtype=np.float64).reshape(n_models, -1) @ self.directions.T
        norm = np.linalg.norm(rows)
        return (rows / norm if norm > 0 else rows).reshape(-1)


def directions_of(features: np.ndarray, rules: Competition) -> np.ndarray:
    """The leading directions of the features (rows: items), scaled by their singular values
    over √n: enough of them to hold `rules.fingerprint_energy` of the features' energy, at
    most `rules.fingerprint_directions`."""
    x = np.asarray(features, dtype=np.float64)
    if x.ndim != 2 or x.shape[0] < 2 or x.shape[1] != rules.hidden_size:
        raise BasisError(f"features must be (items, {rules.hidden_size}) with 2 items or more, "
                         f"not {x.shape}")
    _, s, vt = np.linalg.svd(x / np.sqrt(x.shape[0]), full_matrices=False)
    energy = np.cumsum(s ** 2) / max(float(np.sum(s ** 2)), 1e-300)
    k = min(int(np.searchsorted(energy, rules.fingerprint_energy) + 1),
            rules.fingerprint_directions, int(np.count_nonzero(s > s[0] * 1e-9)))
    return s[:k, None] * vt[:k]


def train_ids_digest(manifest: Mapping[str, Any], rules: Competition) -> str:
    """The SHA-256 of the manifest's train ids, per benchmark in the rules' order."""
    ids = {b: list((manifest.get("benchmarks", {}).get(b) or {}).get("train_ids") or [])
           for b in rules.benchmarks}
    return hashlib.sha256(json.dumps(ids, separators=(",", ":")).encode()).hexdigest()


def write_basis(path: str | Path, directions: np.ndarray, items: int,
                manifest: Mapping[str, Any], rules: Competition) -> None:
    from safetensors.numpy import save_file

    save_file({TENSOR: np.ascontiguousarray(directions, dtype=np.float32)}, str(path),
              metadata={"format": FORMAT, "items": str(items), "encoder": rules.encoder_id,
                        "train_ids_sha256": train_ids_digest(manifest, rules)})


def read_basis(path: str | Path, manifest: Mapping[str, Any] | None,
               rules: Competition) -> FeatureBasis | None:
    """The committed basis, checked against the manifest and the rules; None when there is
    none. BasisError says what is wrong with one that is there."""
    from safetensors import SafetensorError, safe_open

    path = Path(path)
    if not path.exists():
        return None
    fix = "run `tinyrouter basis` for the sealed season and commit its file"
    try:
        if path.stat().st_size > rules.max_basis_bytes:
            raise BasisError(f"{BASIS_PATH} is larger than {rules.max_basis_bytes} bytes; {fix}")
        with safe_open(str(path), framework="numpy") as opened:
            meta = opened.metadata() or {}
            directions = opened.get_tensor(TENSOR).astype(np.float64)
    except (OSError, SafetensorError, KeyError) as exc:
        raise BasisError(f"{BASIS_PATH} cannot be read ({exc}); {fix}") from exc
    if meta.get("format") != FORMAT:
        raise BasisError(f"{BASIS_PATH} is not format {FORMAT}; {fix}")
    if manifest is None or meta.get("train_ids_sha256") != train_ids_digest(manifest, rules):
        raise BasisError(f"{BASIS_PATH} was computed on other train ids than the manifest's "
                         f"(another season); {fix}")
    k = directions.shape[0] if directions.ndim == 2 else 0
    if not (directions.ndim == 2 and 1 <= k <= rules.fingerprint_directions
            and directions.shape[1] == rules.hidden_size and np.isfinite(directions).all()
            and np.linalg.norm(directions) > 0):
        raise BasisError(f"{BASIS_PATH} holds {directions.shape}, not up to "
                         f"{rules.fingerprint_directions} finite directions of "
                         f"{rules.hidden_size}; {fix}")
    items = meta.get("items", "")
    digest = hashlib.sha256(np.ascontiguousarray(directions).tobytes()).hexdigest()[:16]
    return FeatureBasis(directions, int(items) if items.isdigit() else 0, digest)
