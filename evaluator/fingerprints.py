"""How the attempts log stores gate 3's fingerprints, and how gate 3 reads a season of them.

A fingerprint (gates.fingerprint) is the model rows centred across the rows, unit norm, so its
n−1 rows of contrasts hold all of it. Where the board has a feature basis (evaluator/basis.py)
the log keeps them projected on it as float16 ("p16:"), which keeps gate 3 nearly flat over a
season; elsewhere, and for a head with nothing on the basis, at 7 bits each ("q7:").
`tinyrouter dev scale` measures what rounding moves.
`cosines` compares a new head with every earlier attempt at once, in blocks.
"""

from __future__ import annotations

import base64
import binascii

import numpy as np

from evaluator.rules import Competition

PREFIX, BITS = "q7:", 7
PROJECTED = "p16:"
LEVELS = 2 ** (BITS - 1) - 1  # codes 0 … 2·LEVELS stand for −LEVELS … LEVELS
BLOCK = 256  # fingerprints decoded at a time: a few MB, whatever the season's size


class OtherBasis(ValueError):
    """A projected fingerprint on another feature basis than the board's, or on none."""


def contrasts(n: int) -> np.ndarray:
    """An orthonormal basis (n−1 rows, Helmert's) of the vectors whose entries sum to zero."""
    basis = np.zeros((n - 1, n))
    for k in range(1, n):
        basis[k - 1, :k], basis[k - 1, k] = 1.0, -k
        basis[k - 1] /= np.sqrt(k * (k + 1))
    return basis


def _contrasts_of(view: np.ndarray, n_models: int) -> np.ndarray:
    """A fingerprint's n−1 rows of contrasts; ValueError when its rows are not centred."""
    rows = np.asarray(view, dtype=np.float64).reshape(n_models, -1)
    if not np.allclose(rows.sum(axis=0), 0.0, atol=1e-6):
        raise ValueError("a fingerprint's rows are centred; this vector's are not")
    return contrasts(n_models) @ rows


def encode(view: np.ndarray, n_models: int) -> str:
    """A fingerprint as the attempts log keeps it."""
    coefficients = _contrasts_of(view, n_models)
    peak = np.abs(coefficients).max(axis=1, keepdims=True)
    scale = np.where(peak > 0, peak / LEVELS, 1.0)
    codes = (np.rint(coefficients / scale) + LEVELS).astype(np.uint8).reshape(-1)
    codes = np.concatenate([codes, np.zeros(-codes.size % 8, np.uint8)])
    bits = np.unpackbits(codes.reshape(-1, 1), axis=1)[:, 8 - BITS:]
    raw = scale.astype("<f4").tobytes() + np.packbits(bits.reshape(-1)).tobytes()
    return PREFIX + base64.b64encode(raw).decode("ascii")


def encode_projected(view: np.ndarray, n_models: int, directions: np.ndarray) -> str:
    """A fingerprint as the attempts log keeps it on a board with a feature basis: its
    contrasts projected on `directions` (k, hidden), unit norm, float16."""
    projected = _contrasts_of(view, n_models) @ np.asarray(directions, dtype=np.float64).T
    norm = float(np.linalg.norm(projected))
    if not norm > 0:
        raise ValueError("this fingerprint has nothing on the feature basis")
    return PROJECTED + base64.b64encode((projected / norm).astype("<f2").tobytes()).decode("ascii")


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

    def cosines(self, rows: slice, target: np.ndarray, seen: np.ndarray | None) -> np.ndarray:
        """The block's cosines with `target` (contrasts of unit norm, in the space `seen`
        projects on when given), without scaling the block itself: each row's dot product and
        energy are taken in code units and scaled after, a few numbers per fingerprint."""
        scale = self.scale[rows][:, :, 0].astype(np.float64)
        if seen is not None:
            values, energy = self.projected(rows, seen)
            dots = (scale * _row_dots(values, target)).sum(axis=1)
            return dots / np.maximum(np.sqrt(energy), 1e-30)
        values = self.codes(rows)
        dots = (scale * _row_dots(values, target)).sum(axis=1)
        return dots * self.unit(rows, np.einsum("krc,krc->kr", values, values,
                                                dtype=np.float64), scale)

    def projected(self, rows: slice, seen: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The block's contrasts projected on `seen` (in code units), and each fingerprint's
        energy there (its squared norm, scales applied)."""
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


def _base64(text: str) -> bytes:
    """Strict base64 (ValueError on anything else, a character outside ASCII included)."""
    return binascii.a2b_base64(text, strict_mode=True)


class _Parsed:
    """Recorded fingerprints sorted by format: the compact ones (indices and reader) and the
    projected ones (indices and raw bytes)."""

    def __init__(self, texts: list[str], rules: Competition) -> None:
        self.rules = rules
        self.compact: list[int] = []
        self.projected: list[int] = []
        raws: list[bytes] = []
        self.projected_raws: list[bytes] = []
        for index, text in enumerate(texts):  # a season of them: kept to a few steps each
            if text.startswith(PROJECTED):
                self.projected.append(index)
                self.projected_raws.append(_base64(text[len(PROJECTED):]))
            elif text.startswith(PREFIX):
                self.compact.append(index)
                raws.append(_base64(text[len(PREFIX):]))
            else:
                raise ValueError(f"a fingerprint starts with {PREFIX!r} or {PROJECTED!r}")
        self.reader = _Compact(raws, rules.n_models, rules.hidden_size) if raws else None

    def projections(self, directions: np.ndarray | None) -> np.ndarray:
        """The projected ones as rows of float32 contrasts ((n−1)·k each); ValueError when
        the board has no basis, or one is not of its shape, not finite or all zero."""
        if directions is None:
            raise OtherBasis("it is projected on a feature basis, and the board has none")
        size = 2 * (self.rules.n_models - 1) * len(directions)
        if any(len(raw) != size for raw in self.projected_raws):
            raise ValueError(f"a projected fingerprint of {size} bytes was expected")
        values = np.frombuffer(b"".join(self.projected_raws), "<f2").astype(np.float32)
        values = values.reshape(len(self.projected_raws), -1)
        if not np.isfinite(values).all() or not (np.abs(values).max(axis=1) > 0).all():
            raise ValueError("a projected fingerprint is not a vector of finite numbers")
        return values


def decode_all(texts: list[str], rules: Competition) -> np.ndarray:
    """Recorded fingerprints as rows of unit vectors (float32); ValueError naming no line when
    one is not a fingerprint of these rules (`decode` one by one to find it) or is projected
    (which keeps only its projection on the feature basis)."""
    parsed = _Parsed(texts, rules)
    if parsed.projected:
        raise ValueError("a projected fingerprint keeps only its projection on the feature basis")
    views = np.empty((len(texts), rules.n_models * rules.hidden_size), np.float32)
    basis = contrasts(rules.n_models).T.astype(np.float32)
    for rows, values in parsed.reader.blocks() if parsed.reader else ():
        views[parsed.compact[rows]] = np.matmul(basis, values).reshape(len(values), -1)
    return views


def decode(text: str, rules: Competition) -> np.ndarray:
    """One recorded fingerprint back as a unit vector."""
    return decode_all([text], rules)[0].astype(np.float64)


def energy_on(text: str, rules: Competition, directions: np.ndarray) -> float:
    """A recorded fingerprint's squared norm once projected on `directions`, as `cosines`
    would work it out from the stored codes."""
    parsed = _Parsed([text], rules)
    if parsed.projected:
        return float(np.sum(parsed.projections(directions).astype(np.float64) ** 2))
    return float(parsed.reader.projected(slice(0, 1), directions.T.astype(np.float32))[1][0])


def target_of(mine: np.ndarray, rules: Competition,
              directions: np.ndarray | None = None) -> np.ndarray:
    """The fingerprint `mine` as gate 3 compares it: its contrasts (n−1, hidden), or with
    `directions` their projection there at unit norm (n−1, k); float32."""
    target = contrasts(rules.n_models) @ np.asarray(mine, dtype=np.float64).reshape(
        rules.n_models, -1)
    if directions is not None:
        target = target @ directions.T
        target /= max(float(np.linalg.norm(target)), 1e-300)
    return target.astype(np.float32)


def projected_cosines(values: np.ndarray, target: np.ndarray) -> np.ndarray:
    """The cosines of projected fingerprints (rows of float32 contrasts on the basis, none all
    zero) with `target` (see `target_of`)."""
    dots = values @ target.reshape(-1)
    return dots / np.sqrt(np.einsum("kc,kc->k", values, values, dtype=np.float64))


def projection_of(text: str, rules: Competition, directions: np.ndarray) -> np.ndarray:
    """A `p16:` fingerprint's float16 values; ValueError when it is not one, or not one of
    this head shape and basis (wrong length, not finite, all zero)."""
    if not text.startswith(PROJECTED):
        raise ValueError("not a projected fingerprint")
    parsed = _Parsed([text], rules)
    parsed.projections(directions)  # the checks gate 3 makes
    return np.frombuffer(parsed.projected_raws[0], "<f2")


def cosines(mine: np.ndarray, texts: list[str], rules: Competition,
            directions: np.ndarray | None = None,
            on_basis: list[bool] | None = None) -> np.ndarray:
    """The cosine of the fingerprint `mine` with each recorded one, as gate 3 compares them,
    computed on the contrasts block by block. With `directions` (the public items' feature
    basis, evaluator/basis.py) both sides are first projected on them; `on_basis`, where
    given, says whether each recorded one names that basis (without it, every projected one
    is taken to be on `directions`).

    ValueError when one is not a fingerprint of these rules, or is projected on another basis
    than `directions` or on none.
    """
    parsed = _Parsed(texts, rules)
    compact, reader = parsed.compact, parsed.reader
    found = np.empty(len(texts))
    target = target_of(mine, rules, directions)
    seen = None if directions is None else directions.T.astype(np.float32)
    for start in range(0, len(compact), BLOCK) if reader else ():
        rows = slice(start, start + BLOCK)
        found[compact[rows]] = reader.cosines(rows, target, seen)
    if parsed.projected:
        if on_basis is not None and not all(on_basis[i] for i in parsed.projected):
            raise OtherBasis("it is projected on another feature basis than the board's")
        found[parsed.projected] = projected_cosines(parsed.projections(directions), target)
    return found
