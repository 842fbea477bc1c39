"""How the attempts log stores gate 3's fingerprints, and how gate 3 reads a season of them.

A fingerprint (see gates.fingerprint) is the model rows centred across the rows, unit norm:
n rows whose columns sum to zero, so n−1 rows of contrasts hold all of it with the same dot
products. The log keeps those contrasts at 7 bits each (each row scaled to its largest
magnitude), packed, with the row scales as float32: "q7:" + base64, 2.4 KB for the
official head, where the float16 rows written before took 8.2 KB. Rounding moves a cosine
near gate 3's line by under 2e-4 (`tinyrouter dev scale` measures it on disguised copies,
with the decisions it changes: none). Lines written in the float16 format are still read.

Gate 3 compares a new head with every earlier attempt: `cosines` reads them all at once,
in blocks, without expanding them into full vectors.
"""

from __future__ import annotations

import base64

import numpy as np

from evaluator.rules import Competition

PREFIX, BITS = "q7:", 7
LEVELS = 2 ** (BITS - 1) - 1  # codes 0 … 2·LEVELS stand for −LEVELS … LEVELS
BLOCK = 256  # fingerprints decoded at a time: a few MB, whatever the season's size


def contrasts(n: int) -> np.ndarray:
    """An orthonormal basis (n−1 rows, Helmert's) of the vectors whose entries sum to zero."""
    basis = np.zeros((n - 1, n))
    for k in range(1, n):
        basis[k - 1, :k], basis[k - 1, k] = 1.0, -k
        basis[k - 1] /= np.sqrt(k * (k + 1))
    return basis


def encode(view: np.ndarray, n_models: int) -> str:
    """A fingerprint as the attempts log keeps it."""
    rows = np.asarray(view, dtype=np.float64).reshape(n_models, -1)
    if not np.allclose(rows.sum(axis=0), 0.0, atol=1e-6):
        raise ValueError("a fingerprint's rows are centred; this vector's are not")
    coefficients = contrasts(n_models) @ rows
    peak = np.abs(coefficients).max(axis=1, keepdims=True)
    scale = np.where(peak > 0, peak / LEVELS, 1.0)
    codes = (np.rint(coefficients / scale) + LEVELS).astype(np.uint8).reshape(-1)
    codes = np.concatenate([codes, np.zeros(-codes.size % 8, np.uint8)])
    bits = np.unpackbits(codes.reshape(-1, 1), axis=1)[:, 8 - BITS:]
    raw = scale.astype("<f4").tobytes() + np.packbits(bits.reshape(-1)).tobytes()
    return PREFIX + base64.b64encode(raw).decode("ascii")


def _codes(packed: np.ndarray, count: int) -> np.ndarray:
    """The 7-bit codes in rows of packed bytes: every seven bytes hold eight codes, high bits
    first, so each group read as one big-endian integer holds them as its 7-bit fields."""
    groups = packed.reshape(packed.shape[0], -1, 7)
    wide = np.zeros((*groups.shape[:2], 8), np.uint8)
    wide[:, :, 1:] = groups
    value = wide.view(">u8")[:, :, 0]
    codes = np.empty((*groups.shape[:2], 8), np.uint8)
    for i in range(8):
        codes[:, :, i] = (value >> np.uint64(BITS * (7 - i))) & np.uint64(0x7F)
    return codes.reshape(packed.shape[0], -1)[:, :count]


class _Compact:
    """Compact fingerprints of one head shape, read block by block as float32 contrasts."""

    def __init__(self, raws: list[bytes], n: int, columns: int) -> None:
        self.n, self.columns, self.head = n, columns, 4 * (n - 1)
        count = (n - 1) * columns
        if any(len(raw) != self.head + -(-count // 8) * 7 for raw in raws):
            raise ValueError("not a fingerprint of this head shape")
        self.table = np.frombuffer(b"".join(raws), np.uint8).reshape(len(raws), -1)
        self.scale = self.table[:, :self.head].copy().view("<f4")[:, :, None]
        if not (np.isfinite(self.scale).all() and (self.scale > 0).all()):
            raise ValueError("a fingerprint's scale is not a positive number")

    def codes(self, rows: slice) -> np.ndarray:
        """The block's contrasts in units of their row's scale: (k, n−1, columns) float32."""
        codes = _codes(self.table[rows, self.head:], (self.n - 1) * self.columns)
        if codes.size and codes.max() > 2 * LEVELS:
            raise ValueError("a fingerprint code is out of range")
        values = codes.reshape(-1, self.n - 1, self.columns).astype(np.float32)
        values -= LEVELS
        return values

    def blocks(self):
        """(rows, contrasts of unit norm) per block; rounding adds noise of known power, and
        dividing by the norm alone would shrink every cosine by half of it, so it is given
        back (cosines then err both ways)."""
        for start in range(0, len(self.table), BLOCK):
            rows = slice(start, start + BLOCK)
            values = self.codes(rows)
            values *= self.scale[rows]
            factor = self.unit(rows, np.einsum("krc,krc->kr", values, values, dtype=np.float64),
                               np.ones((len(values), self.n - 1)))
            values *= factor.astype(np.float32)[:, None, None]
            yield rows, values

    def unit(self, rows: slice, energy: np.ndarray, scale: np.ndarray) -> np.ndarray:
        """What turns a block's contrasts into unit vectors, given each row's energy in units
        of `scale`² (k, n−1), the rounding noise's half given back (see `blocks`)."""
        stored = self.scale[rows][:, :, 0].astype(np.float64)
        noise = self.columns * (stored ** 2).sum(axis=1) / 12
        norm = np.sqrt((scale ** 2 * energy).sum(axis=1))
        return np.divide(1 + noise / 2, norm, out=np.zeros_like(norm), where=norm > 0)

    def cosines(self, rows: slice, target: np.ndarray, seen: np.ndarray | None,
                known: np.ndarray | None = None, back: np.ndarray | None = None) -> np.ndarray:
        """The block's cosines with `target` (contrasts of unit norm, in the space `seen`
        projects on when given), without scaling the block itself: each row's dot product and
        energy are taken in code units and scaled after, a few numbers per fingerprint.

        `known`: each fingerprint's projected energy as recorded (see `energy_on`), NaN where
        it is not; a block that knows them all is not projected at all, its dot products
        taken with the target brought back through the basis instead (`back`, the same for
        every block: pass it to work it out once).
        """
        values = self.codes(rows)
        scale = self.scale[rows][:, :, 0].astype(np.float64)
        if seen is not None and known is not None and not np.isnan(known).any():
            back = target @ seen.T if back is None else back  # (D·v)·t = v·(Dᵀt)
            return (scale * _row_dots(values, back)).sum(axis=1) / np.sqrt(known)
        if seen is not None:
            values, energy = self.projected(rows, seen)
            dots = (scale * _row_dots(values, target)).sum(axis=1)
            return dots / np.maximum(np.sqrt(energy), 1e-30)
        dots = (scale * _row_dots(values, target)).sum(axis=1)
        return dots * self.unit(rows, np.einsum("krc,krc->kr", values, values,
                                                dtype=np.float64), scale)

    def projected(self, rows: slice, seen: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The block's contrasts projected on `seen` (in code units), and each fingerprint's
        energy there (its squared norm, scales applied): what a recorded `Seen` keeps."""
        values = np.matmul(self.codes(rows), seen)
        scale = self.scale[rows][:, :, 0].astype(np.float64)
        energy = (scale ** 2 * np.einsum("krc,krc->kr", values, values, dtype=np.float64))
        return values, energy.sum(axis=1)


def _row_dots(values: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """(k, r) dot products of each fingerprint's contrast rows (k, r, c) with `rows` (r, c):
    one matrix-vector product per row (a product with a two-column matrix would go to the
    threaded kernel, which on a busy runner costs more than the whole read)."""
    rows = np.asarray(rows, dtype=values.dtype)
    return np.stack([values[:, r, :] @ rows[r] for r in range(rows.shape[0])],
                    axis=1).astype(np.float64)


def _parse(texts: list[str], rules: Competition) -> tuple[list[int], _Compact | None,
                                                         dict[int, np.ndarray]]:
    """(indices of the compact ones, their reader, the float16 ones decoded by index)."""
    compact, raws, legacy = [], [], {}
    for index, text in enumerate(texts):
        if text.startswith(PREFIX):
            compact.append(index)
            raws.append(base64.b64decode(text[len(PREFIX):].encode("ascii"), validate=True))
            continue
        view = np.frombuffer(base64.b64decode(text.encode("ascii"), validate=True), "<f2")
        if view.size != rules.n_models * rules.hidden_size or not np.isfinite(view).all():
            raise ValueError("not a fingerprint of this head shape")
        legacy[index] = view.astype(np.float64)
    reader = _Compact(raws, rules.n_models, rules.hidden_size) if raws else None
    return compact, reader, legacy


def decode_all(texts: list[str], rules: Competition) -> np.ndarray:
    """Recorded fingerprints as rows of unit vectors (float32); ValueError naming no line when
    one is not a fingerprint of these rules (`decode` one by one to find it)."""
    compact, reader, legacy = _parse(texts, rules)
    views = np.empty((len(texts), rules.n_models * rules.hidden_size), np.float32)
    basis = contrasts(rules.n_models).T.astype(np.float32)
    for rows, values in reader.blocks() if reader else ():
        views[compact[rows]] = np.matmul(basis, values).reshape(len(values), -1)
    for index, view in legacy.items():
        views[index] = view
    return views


def decode(text: str, rules: Competition) -> np.ndarray:
    """One recorded fingerprint back as a unit vector."""
    return decode_all([text], rules)[0].astype(np.float64)


def energy_on(text: str, rules: Competition, directions: np.ndarray) -> float:
    """A recorded fingerprint's squared norm once projected on `directions`, as `cosines`
    would work it out from the stored codes: kept with the attempt, so that gate 3 need not
    project a season of fingerprints again (the one costly step with a basis)."""
    _, reader, legacy = _parse([text], rules)
    if reader is None:
        view = legacy[0].reshape(rules.n_models, -1)
        return float(np.sum((contrasts(rules.n_models) @ view @ directions.T) ** 2))
    return float(reader.projected(slice(0, 1), directions.T.astype(np.float32))[1][0])


def cosines(mine: np.ndarray, texts: list[str], rules: Competition,
            directions: np.ndarray | None = None,
            energies: list[float | None] | None = None) -> np.ndarray:
    """The cosine of the fingerprint `mine` with each recorded one, as gate 3 compares them,
    computed on the contrasts block by block. With `directions` (the public items' feature
    basis, evaluator/basis.py) both sides are first projected on them; `energies`, where
    given, are the recorded ones' projected energies (`energy_on`), which spare projecting
    them."""
    compact, reader, legacy = _parse(texts, rules)
    known = None if energies is None else np.array(
        [np.nan if energies[i] is None else energies[i] for i in compact], dtype=np.float64)
    found = np.empty(len(texts))
    mine = np.asarray(mine, dtype=np.float64)
    basis = contrasts(rules.n_models)
    target = basis @ mine.reshape(rules.n_models, -1)
    if directions is not None:
        target = target @ directions.T
        target /= max(float(np.linalg.norm(target)), 1e-300)
    target = target.astype(np.float32)
    seen = None if directions is None else directions.T.astype(np.float32)
    back = None if seen is None else target @ seen.T
    for start in range(0, len(compact), BLOCK) if reader else ():
        rows = slice(start, start + BLOCK)
        found[compact[rows]] = reader.cosines(rows, target, seen,
                                              None if known is None else known[rows], back)
    for index, view in legacy.items():
        theirs = basis @ view.reshape(rules.n_models, -1)
        if directions is not None:
            theirs = theirs @ directions.T
            theirs /= max(float(np.linalg.norm(theirs)), 1e-300)
        found[index] = float(np.sum(theirs * target))
    return found
