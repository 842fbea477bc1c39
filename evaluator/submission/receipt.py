"""receipt.json: the training receipt, parsed strictly (semantic checks are gate 4's).

The parser rejects unknown fields, duplicate keys, NaN literals and wrong types, so a
receipt that parses has exactly the shape below, every field present. A new field raises
`RECEIPT_FORMAT`, and `format_problem` refuses a receipt of another format at gate 0, before
the rate limit spends a slot.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evaluator.errors import SubmissionError
from evaluator.files import is_utc_time, loads_strict
from evaluator.rules import RECEIPT_FILE, RECEIPT_FORMAT, Competition, is_name, is_sha256


@dataclass(frozen=True)
class Receipt:
    """A parsed, schema-valid receipt.json."""

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


def _is_str_list(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(x, str) for x in v)


def _is_held_out(v: Any) -> bool:
    return isinstance(v, dict) and all(
        _is_str_list(ids) and len(ids) == len(set(ids))
        and all(0 < len(i) <= MAX_ID_CHARS for i in ids) for ids in v.values())


FieldCheck = Callable[[Any], bool]
OPTIMIZER_FIELDS: dict[str, tuple[FieldCheck, str]] = {
    "name": (lambda v: isinstance(v, str) and 0 < len(v) <= 64, "a short string"),
    "popsize": (lambda v: _is_int(v) and v >= 1, "a positive integer"),
    "sigma0": (lambda v: _is_number(v) and v > 0, "a positive number"),
    "generations": (lambda v: _is_int(v) and v >= 1, "a positive integer"),
    "seed": (_is_int, "an integer"),
}
FITNESS_FIELDS: dict[str, tuple[FieldCheck, str]] = {
    "generation": (lambda v: _is_int(v) and v >= 0, "a non-negative integer"),
    "mean": (_is_number, "a finite number"),
    "max": (_is_number, "a finite number"),
    "best": (_is_number, "a finite number"),
}
RECEIPT_FIELDS: dict[str, tuple[FieldCheck, str]] = {
    "format": (lambda v: v == RECEIPT_FORMAT and _is_int(v), f"the integer {RECEIPT_FORMAT}"),
    "miner": (is_name, "a GitHub login"),
    "generation": (lambda v: _is_int(v) and v >= 1, "a positive integer"),
    "benchmarks": (lambda v: _is_str_list(v) and 0 < len(v) == len(set(v)),
                   "a non-empty list of distinct benchmark names"),
    "pool": (lambda v: _is_str_list(v) and len(v) > 0, "a list of pool model names"),
    "n_params": (_is_int, "an integer"),
    "optimizer": (lambda v: isinstance(v, dict), "an object"),
    "fitness_history": (lambda v: isinstance(v, list), "a list"),
    "total_cost_usd": (lambda v: _is_number(v) and v >= 0, "a non-negative number"),
    "ledger_head": (is_sha256, "a SHA-256 hex digest"),
    "weights_sha256": (is_sha256, "a SHA-256 hex digest"),
    # the weights of the head training started from (`train --init`), null for W = 0
    "init_weights_sha256": (lambda v: v is None or is_sha256(v),
                            "null or a SHA-256 hex digest"),
    # the public train ids the head never trained on (its run's held-out rows), per benchmark,
    # or null: what lets a challenger's `score --king` compare on rows neither head has seen
    "held_out": (lambda v: v is None or _is_held_out(v),
                 "null or an object of benchmark names to lists of distinct item ids"),
    "tinyrouter_version": (lambda v: isinstance(v, str) and 0 < len(v) <= 32, "a version string"),
    "created_at": (is_utc_time, "a UTC time like 2026-11-28T10:00:00Z"),
}
MAX_ID_CHARS = 200  # an item id in `held_out`


def _check_object(obj: dict[str, Any], fields: dict[str, tuple[FieldCheck, str]], where: str) -> None:
    unknown = sorted(set(obj) - set(fields))
    if unknown:
        raise SubmissionError(f"{where} has unknown field(s) {', '.join(map(repr, unknown))}")
    missing = [name for name in fields if name not in obj]
    if missing:
        raise SubmissionError(f"{where} is missing {', '.join(map(repr, missing))}")
    for name, (check, expected) in fields.items():
        if not check(obj[name]):
            raise SubmissionError(f"{where}: {name!r} must be {expected}")


def parse_receipt(raw: bytes | str, rules: Competition) -> Receipt:
    try:
        data = loads_strict(raw, RECEIPT_FILE)
    except ValueError as exc:
        raise SubmissionError(str(exc)) from exc
    if not isinstance(data, dict):
        raise SubmissionError(f"{RECEIPT_FILE} must be a JSON object")
    _check_object(data, RECEIPT_FIELDS, RECEIPT_FILE)
    unknown = sorted((set(data["benchmarks"]) | set(data["held_out"] or ()))
                     - set(rules.benchmarks))
    if unknown:
        raise SubmissionError(f"{RECEIPT_FILE}: unknown benchmark(s) {', '.join(unknown)}")
    _check_object(data["optimizer"], OPTIMIZER_FIELDS, f"{RECEIPT_FILE} optimizer")
    for i, entry in enumerate(data["fitness_history"]):
        if not isinstance(entry, dict):
            raise SubmissionError(f"{RECEIPT_FILE} fitness_history[{i}] must be an object")
        _check_object(entry, FITNESS_FIELDS, f"{RECEIPT_FILE} fitness_history[{i}]")
    return Receipt(data)


def load_receipt(path: str | Path, rules: Competition) -> Receipt:
    path = Path(path)
    try:
        size = path.stat().st_size
        if size > rules.max_receipt_bytes:
            raise SubmissionError(f"{RECEIPT_FILE} is {size} bytes; at most "
                                  f"{rules.max_receipt_bytes} are allowed")
        return parse_receipt(path.read_bytes(), rules)
    except OSError as exc:
        raise SubmissionError(f"cannot read {RECEIPT_FILE}: {exc.strerror}") from exc


def format_problem(path: str | Path) -> str | None:
    """Why the receipt at `path` is of a format this version does not read, else None.

    Only the format is judged here (gate 0, before any slot is spent); every other defect of
    the receipt is gate 4's. A file that is not a JSON object with a format is left to gate 4.
    """
    try:
        data = loads_strict(Path(path).read_bytes(), RECEIPT_FILE)
    except (OSError, ValueError):
        return None
    found = data.get("format") if isinstance(data, dict) else None
    if not _is_int(found) or found == RECEIPT_FORMAT:
        return None
    age = "an older" if found < RECEIPT_FORMAT else "a newer"
    return (f"{RECEIPT_FILE} is in receipt format {found}, written by {age} tinyrouter; this "
            f"version reads format {RECEIPT_FORMAT}: re-pack with this version "
            "(`tinyrouter pack`), which spends no slot")
