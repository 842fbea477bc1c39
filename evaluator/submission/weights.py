"""weights.safetensors, read without trusting it, and the θ layout `[head row-major | scales]`.

The parser reads the safetensors header by hand under a size cap before touching any data,
and accepts exactly the two float32 tensors of the rules' shapes, contiguous, nothing else.
"""

from __future__ import annotations

import hashlib
import math
import struct
from pathlib import Path
from typing import Any

import numpy as np
from safetensors.numpy import save_file

from evaluator.errors import SubmissionError
from evaluator.files import loads_strict
from evaluator.rules import HEAD_TENSOR, SCALES_TENSOR, Competition


def sha256_file(path: str | Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 16), b""):
            digest.update(chunk)
    return digest.hexdigest()


# ---------------------------------------------------------------- θ layout

def tensors_from_theta(theta: np.ndarray, rules: Competition) -> tuple[np.ndarray, np.ndarray]:
    """Split θ = [head row-major | SVF scales] into (head, scales)."""
    theta = np.asarray(theta, dtype=np.float32).reshape(-1)
    if theta.size != rules.n_params:
        raise SubmissionError(f"θ has {theta.size} numbers, the rules want {rules.n_params}")
    head = theta[: rules.n_head_params].reshape(rules.head_shape).copy()
    return head, theta[rules.n_head_params:].copy()


def theta_from_tensors(head: np.ndarray, scales: np.ndarray) -> np.ndarray:
    return np.concatenate([np.asarray(head, np.float32).reshape(-1),
                           np.asarray(scales, np.float32).reshape(-1)])


# ---------------------------------------------------------------- reading

def _expected_tensors(rules: Competition) -> dict[str, tuple[int, ...]]:
    return {HEAD_TENSOR: rules.head_shape, SCALES_TENSOR: (rules.svf_scale_count,)}


def _check_entry(name: str, entry: Any, shape: tuple[int, ...]) -> tuple[int, int]:
    if not isinstance(entry, dict) or set(entry) != {"dtype", "shape", "data_offsets"}:
        raise SubmissionError(f"tensor {name!r} needs exactly dtype, shape and data_offsets")
    if entry["dtype"] != "F32":
        raise SubmissionError(f"tensor {name!r} must be float32 (F32), not {entry['dtype']!r}")
    if (not isinstance(entry["shape"], list) or not all(type(v) is int for v in entry["shape"])
            or entry["shape"] != list(shape)):
        raise SubmissionError(f"tensor {name!r} must have shape {list(shape)}, "
                              f"not {entry['shape']!r}")
    offsets = entry["data_offsets"]
    if not isinstance(offsets, list) or len(offsets) != 2 or not all(type(v) is int for v in offsets):
        raise SubmissionError(f"tensor {name!r} has malformed data_offsets")
    if offsets[1] - offsets[0] != 4 * math.prod(shape):
        raise SubmissionError(f"tensor {name!r} offsets do not match its shape")
    return offsets[0], offsets[1]


def _check_header(header: Any, data_size: int, rules: Competition) -> dict[str, tuple[int, int]]:
    if not isinstance(header, dict):
        raise SubmissionError("the safetensors header is not a JSON object")
    meta = header.pop("__metadata__", {})
    if not isinstance(meta, dict) or not all(isinstance(v, str) for v in meta.values()):
        raise SubmissionError("__metadata__ must map names to strings")
    expected = _expected_tensors(rules)
    if set(header) != set(expected):
        raise SubmissionError(f"the weights must hold exactly the tensors {sorted(expected)}, "
                              f"found {sorted(map(str, header))}")
    spans = {name: _check_entry(name, header[name], shape) for name, shape in expected.items()}
    position = 0
    for begin, end in sorted(spans.values()):
        if begin != position:
            raise SubmissionError("tensor data offsets overlap or leave gaps")
        position = end
    if position != data_size:
        raise SubmissionError(f"the file holds {data_size} data bytes but the header "
                              f"describes {position} (truncated or padded)")
    return spans


def read_weights(path: str | Path, rules: Competition) -> tuple[np.ndarray, np.ndarray]:
    """Parse weights.safetensors without trusting it; returns (head, scales) as float32."""
    path = Path(path)
    try:
        size = path.stat().st_size
        if size > rules.max_weights_bytes:
            raise SubmissionError(f"{path.name} is {size} bytes; at most "
                                  f"{rules.max_weights_bytes} are allowed")
        blob = path.read_bytes()
    except OSError as exc:
        raise SubmissionError(f"cannot read {path.name}: {exc.strerror}") from exc
    if len(blob) < 8:
        raise SubmissionError(f"{path.name} is too short to be a safetensors file")
    (header_len,) = struct.unpack("<Q", blob[:8])
    if header_len > rules.max_safetensors_header_bytes:
        raise SubmissionError(f"the safetensors header claims {header_len} bytes; at most "
                              f"{rules.max_safetensors_header_bytes} are allowed")
    if 8 + header_len > len(blob):
        raise SubmissionError("the safetensors header runs past the end of the file")
    try:
        header = loads_strict(blob[8:8 + header_len].rstrip(b" "), "the safetensors header")
    except ValueError as exc:
        raise SubmissionError(str(exc)) from exc
    data = blob[8 + header_len:]
    spans = _check_header(header, len(data), rules)
    tensors = {name: np.frombuffer(data[begin:end], dtype="<f4").astype(np.float32)
               for name, (begin, end) in spans.items()}
    return tensors[HEAD_TENSOR].reshape(rules.head_shape), tensors[SCALES_TENSOR]


def read_theta(path: str | Path, rules: Competition) -> np.ndarray:
    """θ of a weights file (see `read_weights`)."""
    return theta_from_tensors(*read_weights(path, rules))


def write_weights(path: str | Path, head: np.ndarray, scales: np.ndarray) -> None:
    save_file({HEAD_TENSOR: np.ascontiguousarray(head, dtype=np.float32),
               SCALES_TENSOR: np.ascontiguousarray(scales, dtype=np.float32)}, str(path))
