"""Read and write a submission folder safely: weights, receipt, θ layout.

Everything here treats the files as hostile: the weights parser reads the
safetensors header by hand under a size cap before touching any data, and the
receipt parser rejects unknown fields, duplicate keys, NaN literals and wrong types.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import shutil
import struct
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from evaluator.errors import SubmissionError
from evaluator.files import dumps
from evaluator.rules import (
    FORMAT_VERSION,
    HEAD_TENSOR,
    NAME_PATTERN,
    OFFICIAL,
    README_FILE,
    RECEIPT_FILE,
    SCALES_TENSOR,
    SHA256_PATTERN,
    WEIGHTS_FILE,
    Competition,
)

ISO_Z_PATTERN = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?Z$")


def sha256_file(path: str | Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 16), b""):
            digest.update(chunk)
    return digest.hexdigest()


# ---------------------------------------------------------------- θ layout

def tensors_from_theta(theta: np.ndarray, rules: Competition = OFFICIAL) -> tuple[np.ndarray, np.ndarray]:
    """Split θ = [head row-major | SVF scales] into (head, scales)."""
    theta = np.asarray(theta, dtype=np.float32).reshape(-1)
    if theta.size != rules.n_params:
        raise SubmissionError(f"θ has {theta.size} numbers, the rules want {rules.n_params}")
    head = theta[: rules.n_head_params].reshape(rules.head_shape).copy()
    return head, theta[rules.n_head_params:].copy()


def theta_from_tensors(head: np.ndarray, scales: np.ndarray) -> np.ndarray:
    return np.concatenate([np.asarray(head, np.float32).reshape(-1),
                           np.asarray(scales, np.float32).reshape(-1)])


# ---------------------------------------------------------------- weights

def _strict_json(raw: bytes | str, what: str) -> Any:
    def no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        keys = [k for k, _ in pairs]
        dupes = sorted({k for k in keys if keys.count(k) > 1})
        if dupes:
            raise SubmissionError(f"{what} repeats the key(s) {', '.join(map(repr, dupes))}")
        return dict(pairs)

    def no_constant(name: str) -> Any:
        raise SubmissionError(f"{what} contains {name}, which is not valid JSON")

    try:
        text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
        return json.loads(text, object_pairs_hook=no_duplicates, parse_constant=no_constant)
    except UnicodeDecodeError as exc:
        raise SubmissionError(f"{what} is not UTF-8 text") from exc
    except json.JSONDecodeError as exc:
        raise SubmissionError(f"{what} is not valid JSON ({exc.msg} at line {exc.lineno})") from exc
    except RecursionError as exc:
        raise SubmissionError(f"{what} is nested too deeply") from exc


def _expected_tensors(rules: Competition) -> dict[str, tuple[int, ...]]:
    return {HEAD_TENSOR: rules.head_shape, SCALES_TENSOR: (rules.svf_scale_count,)}


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
    spans: dict[str, tuple[int, int]] = {}
    for name, shape in expected.items():
        entry = header[name]
        if not isinstance(entry, dict) or set(entry) != {"dtype", "shape", "data_offsets"}:
            raise SubmissionError(f"tensor {name!r} needs exactly dtype, shape and data_offsets")
        if entry["dtype"] != "F32":
            raise SubmissionError(f"tensor {name!r} must be float32 (F32), not {entry['dtype']!r}")
        if (not isinstance(entry["shape"], list) or not all(type(v) is int for v in entry["shape"])
                or entry["shape"] != list(shape)):
            raise SubmissionError(f"tensor {name!r} must have shape {list(shape)}, "
                                  f"not {entry['shape']!r}")
        offsets = entry["data_offsets"]
        if (not isinstance(offsets, list) or len(offsets) != 2
                or not all(type(v) is int for v in offsets)):
            raise SubmissionError(f"tensor {name!r} has malformed data_offsets")
        if offsets[1] - offsets[0] != 4 * math.prod(shape):
            raise SubmissionError(f"tensor {name!r} offsets do not match its shape")
        spans[name] = (offsets[0], offsets[1])
    position = 0
    for begin, end in sorted(spans.values()):
        if begin != position:
            raise SubmissionError("tensor data offsets overlap or leave gaps")
        position = end
    if position != data_size:
        raise SubmissionError(f"the file holds {data_size} data bytes but the header "
                              f"describes {position} (truncated or padded)")
    return spans


def read_weights(path: str | Path, rules: Competition = OFFICIAL) -> tuple[np.ndarray, np.ndarray]:
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
    header = _strict_json(blob[8:8 + header_len].rstrip(b" "), "the safetensors header")
    data = blob[8 + header_len:]
    spans = _check_header(header, len(data), rules)
    tensors = {name: np.frombuffer(data[begin:end], dtype="<f4").astype(np.float32)
               for name, (begin, end) in spans.items()}
    return tensors[HEAD_TENSOR].reshape(rules.head_shape), tensors[SCALES_TENSOR]


def write_weights(path: str | Path, head: np.ndarray, scales: np.ndarray) -> None:
    from safetensors.numpy import save_file

    save_file({HEAD_TENSOR: np.ascontiguousarray(head, dtype=np.float32),
               SCALES_TENSOR: np.ascontiguousarray(scales, dtype=np.float32)}, str(path))


# ---------------------------------------------------------------- receipt

@dataclass(frozen=True)
class Receipt:
    """A parsed, schema-valid receipt.json (semantic checks are gate 4's)."""

    data: dict[str, Any]

    def __getattr__(self, name: str) -> Any:
        try:
            return self.data[name]
        except KeyError:
            raise AttributeError(name) from None


def _is_int(v: Any) -> bool:
    return type(v) is int


def _is_number(v: Any) -> bool:
    return type(v) in (int, float) and math.isfinite(v)


def _is_sha(v: Any) -> bool:
    return isinstance(v, str) and bool(SHA256_PATTERN.match(v))


def _is_time(v: Any) -> bool:
    if not isinstance(v, str) or not ISO_Z_PATTERN.match(v):
        return False
    try:
        datetime.fromisoformat(v[:-1])
    except ValueError:
        return False
    return True


def _is_str_list(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(x, str) for x in v)


Check = Callable[[Any], bool]
OPTIMIZER_FIELDS: dict[str, tuple[Check, str]] = {
    "name": (lambda v: isinstance(v, str) and 0 < len(v) <= 64, "a short string"),
    "popsize": (lambda v: _is_int(v) and v >= 1, "a positive integer"),
    "sigma0": (lambda v: _is_number(v) and v > 0, "a positive number"),
    "generations": (lambda v: _is_int(v) and v >= 1, "a positive integer"),
    "seed": (_is_int, "an integer"),
}
FITNESS_FIELDS: dict[str, tuple[Check, str]] = {
    "generation": (lambda v: _is_int(v) and v >= 0, "a non-negative integer"),
    "mean": (_is_number, "a finite number"),
    "max": (_is_number, "a finite number"),
    "best": (_is_number, "a finite number"),
}
RECEIPT_FIELDS: dict[str, tuple[Check, str]] = {
    "format": (lambda v: v == FORMAT_VERSION and _is_int(v), f"the integer {FORMAT_VERSION}"),
    "miner": (lambda v: isinstance(v, str) and bool(NAME_PATTERN.match(v)), "a GitHub login"),
    "generation": (lambda v: _is_int(v) and v >= 1, "a positive integer"),
    "benchmarks": (lambda v: _is_str_list(v) and 0 < len(v) == len(set(v)),
                   "a non-empty list of distinct benchmark names"),
    "pool": (lambda v: _is_str_list(v) and len(v) > 0, "a list of pool model names"),
    "n_params": (_is_int, "an integer"),
    "optimizer": (lambda v: isinstance(v, dict), "an object"),
    "fitness_history": (lambda v: isinstance(v, list), "a list"),
    "total_cost_usd": (lambda v: _is_number(v) and v >= 0, "a non-negative number"),
    "ledger_head": (_is_sha, "a SHA-256 hex digest"),
    "weights_sha256": (_is_sha, "a SHA-256 hex digest"),
    "tinyrouter_version": (lambda v: isinstance(v, str) and 0 < len(v) <= 32, "a version string"),
    "created_at": (_is_time, "a UTC time like 2026-11-28T10:00:00Z"),
}


def _check_object(obj: dict[str, Any], fields: dict[str, tuple[Check, str]], where: str) -> None:
    unknown = sorted(set(obj) - set(fields))
    if unknown:
        raise SubmissionError(f"{where} has unknown field(s) {', '.join(map(repr, unknown))}")
    missing = [name for name in fields if name not in obj]
    if missing:
        raise SubmissionError(f"{where} is missing {', '.join(map(repr, missing))}")
    for name, (check, expected) in fields.items():
        if not check(obj[name]):
            raise SubmissionError(f"{where}: {name!r} must be {expected}")


def parse_receipt(raw: bytes | str, rules: Competition = OFFICIAL) -> Receipt:
    data = _strict_json(raw, "receipt.json")
    if not isinstance(data, dict):
        raise SubmissionError("receipt.json must be a JSON object")
    _check_object(data, RECEIPT_FIELDS, "receipt.json")
    unknown = sorted(set(data["benchmarks"]) - set(rules.benchmarks))
    if unknown:
        raise SubmissionError(f"receipt.json: unknown benchmark(s) {', '.join(unknown)}")
    _check_object(data["optimizer"], OPTIMIZER_FIELDS, "receipt.json optimizer")
    for i, entry in enumerate(data["fitness_history"]):
        if not isinstance(entry, dict):
            raise SubmissionError(f"receipt.json fitness_history[{i}] must be an object")
        _check_object(entry, FITNESS_FIELDS, f"receipt.json fitness_history[{i}]")
    return Receipt(data)


def load_receipt(path: str | Path, rules: Competition = OFFICIAL) -> Receipt:
    path = Path(path)
    try:
        size = path.stat().st_size
        if size > rules.max_receipt_bytes:
            raise SubmissionError(f"receipt.json is {size} bytes; at most "
                                  f"{rules.max_receipt_bytes} are allowed")
        return parse_receipt(path.read_bytes(), rules)
    except OSError as exc:
        raise SubmissionError(f"cannot read receipt.json: {exc.strerror}") from exc


# ---------------------------------------------------------------- folder

def write_submission(repo_dir: str | Path, login: str, generation: int, head: np.ndarray,
                     scales: np.ndarray, receipt_fields: dict[str, Any],
                     readme: str | None = None, rules: Competition = OFFICIAL) -> Path:
    """Write submissions/<login>/<generation>/ whole or not at all; returns the folder.

    `receipt_fields` gives everything but miner, generation, n_params, pool, format and
    weights_sha256, which are filled in here so they cannot disagree with the files.
    """
    if not NAME_PATTERN.match(login):
        raise SubmissionError(f"{login!r} is not a valid GitHub login")
    folder = Path(repo_dir) / "submissions" / login / str(generation)
    if folder.exists():
        raise SubmissionError(f"{folder} already exists; pick the next generation")
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=folder.parent, prefix=f".{generation}."))
    try:
        write_weights(staging / WEIGHTS_FILE, head, scales)
        receipt = dict(receipt_fields, format=FORMAT_VERSION, miner=login, generation=generation,
                       n_params=rules.n_params, pool=list(rules.pool_names),
                       weights_sha256=sha256_file(staging / WEIGHTS_FILE))
        text = dumps(receipt)
        parse_receipt(text, rules)
        (staging / RECEIPT_FILE).write_text(text, encoding="utf-8")
        if readme is not None:
            (staging / README_FILE).write_text(readme, encoding="utf-8")
        os.replace(staging, folder)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return folder
