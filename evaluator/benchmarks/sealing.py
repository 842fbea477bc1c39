"""Sealed hidden benchmarks: one encrypted file per (benchmark, split) and a public manifest.

A sealed file is `MAGIC`, one header line of canonical JSON (format, benchmark, split, KDF
and its random salt, nonce), then AES-256-GCM ciphertext. The key comes from the password
through scrypt (memory-hard); the magic and header are the associated data, so a renamed,
swapped, edited or truncated file fails to open. The plaintext holds the rows and the
split's commitment salt and exists only in memory.

The manifest commits to each split with sha256(salt ‖ canonical JSON of its rows): a reveal
at retirement (rows + salt) can be checked, but nobody can confirm a guessed split before.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import secrets
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.scrypt import Scrypt

from evaluator import vault
from evaluator.baselines import from_answered
from evaluator.benchmarks.splits import Private, draw_private, draw_splits
from evaluator.errors import BenchmarkError
from evaluator.files import canonical_json, format_time, utc_now, write_atomic, write_json
from evaluator.rules import (
    ANSWERED_SPLITS,
    AUDIT_SPLIT,
    FORMAT_VERSION,
    LIVE_SPLIT,
    POOL_SPLIT,
    SEALED_SPLITS,
    Competition,
)
from evaluator.types import AnsweredItem, Item

log = logging.getLogger(__name__)

PASSWORD_ENV = "BENCHMARK_PASSWORD"
MIN_PASSWORD_CHARS = 16  # a shorter password falls to an offline guess against the public files
DIR_ENV = "TINYROUTER_BENCHMARK_DIR"
SEALED_SUFFIX = ".sealed"
SEAL_FORMAT = 1
MAGIC = b"TINYROUTER SEALED BENCHMARK\n"
MAX_HEADER_BYTES = 1024
Answerer = Callable[[list[Item]], list[AnsweredItem]]


@dataclass(frozen=True)
class KdfParams:
    """scrypt cost: memory = 128·2^log2_n·r bytes. Official: 2^17, r 8 (128 MiB, ~0.3 s)."""

    log2_n: int = 17
    r: int = 8
    p: int = 1

    def check(self) -> None:
        # Bounds stop a forged header from asking for gigabytes before the tag is checked.
        if not (10 <= self.log2_n <= 20 and 1 <= self.r <= 8 and 1 <= self.p <= 4):
            raise BenchmarkError(f"scrypt parameters out of bounds: {self}")


OFFICIAL_KDF = KdfParams()


@dataclass(frozen=True)
class SealedSplit:
    """A decrypted split: its rows (plain dicts) and the salt of its commitment."""

    rows: list[dict[str, Any]]
    salt: str

    @property
    def commitment(self) -> str:
        return commitment(self.rows, bytes.fromhex(self.salt))


def commitment(rows: list[dict[str, Any]], salt: bytes) -> str:
    """sha256(salt ‖ canonical JSON of the rows), hex: the manifest's per-split commitment."""
    return hashlib.sha256(salt + canonical_json(rows).encode()).hexdigest()


def password_from_env(new: bool = False) -> str:
    """The password, moved out of the environment (see `vault`); `new`: about to seal with it,
    so a weak one is refused."""
    password = vault.take(PASSWORD_ENV)
    if not password:
        raise BenchmarkError(f"set {PASSWORD_ENV}: the sealed benchmark's password "
                             f"(an environment secret, never stored in the repository)")
    if new and len(password) < MIN_PASSWORD_CHARS:
        raise BenchmarkError(f"{PASSWORD_ENV} is too weak to seal with: use a secret of at least "
                             f"{MIN_PASSWORD_CHARS} characters (e.g. the output of `openssl rand "
                             f"-hex 32`); the sealed files are public to anyone who can guess it")
    return password


def sealed_path(directory: str | Path, benchmark: str, split: str) -> Path:
    return Path(directory) / f"{benchmark}.{split}{SEALED_SUFFIX}"


# The public train items beside the sealed files, in the clear: the runner compares two heads'
# routing on them (the behavioural duplicate check) without fetching the dataset again.
TRAIN_SUFFIX = ".train.jsonl"


def train_path(directory: str | Path, benchmark: str) -> Path:
    return Path(directory) / f"{benchmark}{TRAIN_SUFFIX}"


def write_train_items(directory: str | Path, benchmark: str, items: Sequence[Item]) -> None:
    write_atomic(train_path(directory, benchmark),
                 "".join(canonical_json(item.to_dict()) + "\n" for item in items))


def open_train_items(directory: str | Path, manifest: Mapping[str, Any],
                     rules: Competition) -> dict[str, list[Item]]:
    """Each benchmark's public train items, checked against the manifest's train ids."""
    found = {}
    for benchmark in rules.benchmarks:
        path = train_path(directory, benchmark)
        try:
            items = [Item.from_dict(json.loads(line))
                     for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise BenchmarkError(f"cannot read the public train items {path.name}: {exc}; "
                                 f"seal the benchmark again") from exc
        listed = (manifest.get("benchmarks", {}).get(benchmark) or {}).get("train_ids")
        if [item.id for item in items] != listed:
            raise BenchmarkError(f"{path.name} does not hold the manifest's {benchmark} train "
                                 "ids: the file is from another seal")
        found[benchmark] = items
    return found


def _key(password: str, salt: bytes, kdf: KdfParams) -> bytes:
    kdf.check()
    return Scrypt(salt=salt, length=32, n=2 ** kdf.log2_n, r=kdf.r, p=kdf.p).derive(
        password.encode("utf-8"))


def seal_split(path: str | Path, rows: list[dict[str, Any]], benchmark: str, split: str,
               password: str, kdf: KdfParams = OFFICIAL_KDF) -> str:
    """Encrypt one split's rows into `path` (atomically); returns its commitment."""
    sealed = SealedSplit(rows=rows, salt=secrets.token_hex(32))
    kdf_salt, nonce = secrets.token_bytes(16), secrets.token_bytes(12)
    header = {"format": SEAL_FORMAT, "benchmark": benchmark, "split": split,
              "cipher": "AES-256-GCM", "nonce": nonce.hex(),
              "kdf": {"name": "scrypt", "log2_n": kdf.log2_n, "r": kdf.r, "p": kdf.p,
                      "salt": kdf_salt.hex()}}
    preamble = MAGIC + canonical_json(header).encode() + b"\n"
    payload = canonical_json({"commitment_salt": sealed.salt, "rows": rows}).encode()
    body = AESGCM(_key(password, kdf_salt, kdf)).encrypt(nonce, payload, preamble)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "wb") as handle:
        handle.write(preamble + body)
    os.replace(tmp, path)
    return sealed.commitment


@dataclass(frozen=True)
class _Header:
    fields: dict[str, Any]
    kdf: KdfParams
    salt: bytes
    nonce: bytes
    preamble: bytes  # magic + header line: the associated data


def _read_header(raw: bytes, name: str) -> tuple[_Header, bytes]:
    if not raw.startswith(MAGIC):
        raise BenchmarkError(f"{name} is not a sealed TinyRouter benchmark file")
    end = raw.find(b"\n", len(MAGIC), len(MAGIC) + MAX_HEADER_BYTES)
    if end < 0:
        raise BenchmarkError(f"{name} has a damaged header (truncated or edited)")
    try:
        fields = json.loads(raw[len(MAGIC):end])
        kdf = fields["kdf"]
        header = _Header(fields, KdfParams(int(kdf["log2_n"]), int(kdf["r"]), int(kdf["p"])),
                         bytes.fromhex(kdf["salt"]), bytes.fromhex(fields["nonce"]),
                         raw[:end + 1])
    except (ValueError, KeyError, TypeError) as exc:
        raise BenchmarkError(f"{name} has a damaged header (truncated or edited)") from exc
    try:
        header.kdf.check()
    except BenchmarkError as exc:
        raise BenchmarkError(f"{name} has an edited header: {exc}") from exc
    return header, raw[end + 1:]


def open_split(path: str | Path, benchmark: str, split: str, password: str) -> SealedSplit:
    """Decrypt one sealed split in memory; any mismatch or tampering is a BenchmarkError."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise BenchmarkError(f"cannot read {path}: {exc.strerror or exc}; run `tinyrouter "
                             f"seal` or point {DIR_ENV} at the sealed benchmark") from exc
    header, body = _read_header(raw, path.name)
    found = header.fields
    if found.get("format") != SEAL_FORMAT:
        raise BenchmarkError(f"{path.name} is sealed in format {found.get('format')!r}; "
                             f"this tinyrouter reads format {SEAL_FORMAT}")
    if (found.get("benchmark"), found.get("split")) != (benchmark, split):
        raise BenchmarkError(f"{path.name} holds {found.get('benchmark')}/{found.get('split')}"
                             f", not {benchmark}/{split}: the file was renamed or swapped")
    try:
        payload = AESGCM(_key(password, header.salt, header.kdf)).decrypt(
            header.nonce, body, header.preamble)
    except (InvalidTag, ValueError) as exc:
        raise BenchmarkError(f"cannot decrypt {path.name}: wrong {PASSWORD_ENV}, or the file "
                             f"was modified or truncated") from exc
    data = json.loads(payload)
    return SealedSplit(rows=data["rows"], salt=data["commitment_salt"])


# Opening and checking a sealed benchmark ----------------------------------------------------


def _parse_rows(benchmark: str, split: str, sealed: SealedSplit,
                rules: Competition) -> list[AnsweredItem] | list[Item]:
    where = f"{benchmark} {split}"
    if len(sealed.rows) != rules.sealed_sizes[split]:
        raise BenchmarkError(f"{where} holds {len(sealed.rows)} items; the rules want "
                             f"{rules.sealed_sizes[split]}")
    try:
        if split in ANSWERED_SPLITS:
            parsed = [AnsweredItem.from_dict(row) for row in sealed.rows]
            items = [row.item for row in parsed]
        else:
            parsed = items = [Item.from_dict(row) for row in sealed.rows]
    except (KeyError, TypeError, ValueError) as exc:
        raise BenchmarkError(f"{where} has a malformed row ({exc})") from exc
    if any(item.benchmark != benchmark for item in items):
        raise BenchmarkError(f"{where} contains items of another benchmark")
    for row in parsed if split in ANSWERED_SPLITS else ():
        missing = [m for m in rules.pool_names if m not in row.answers]
        if missing:
            raise BenchmarkError(f"{where}: item {row.item.id} has no cached answer from "
                                 f"{', '.join(missing)}; the pool changed since sealing")
    return parsed


def _item_ids(rows: list[AnsweredItem] | list[Item]) -> list[str]:
    return [row.item.id if isinstance(row, AnsweredItem) else row.id for row in rows]


def _open_all(directory: str | Path, password: str, rules: Competition,
              benchmarks: Sequence[str]) -> dict[str, dict[str, tuple[SealedSplit, list]]]:
    opened: dict[str, dict[str, tuple[SealedSplit, list]]] = {}
    for benchmark in benchmarks:
        opened[benchmark] = {}
        seen: set[str] = set()
        for split in SEALED_SPLITS:
            sealed = open_split(sealed_path(directory, benchmark, split), benchmark, split,
                                password)
            parsed = _parse_rows(benchmark, split, sealed, rules)
            ids = set(_item_ids(parsed))
            if len(ids) != len(parsed) or ids & seen:
                raise BenchmarkError(f"{benchmark} {split} repeats items of its own or "
                                     f"another split; the splits must be disjoint")
            seen |= ids
            opened[benchmark][split] = (sealed, parsed)
    return opened


def open_benchmark(directory: str | Path, password: str, rules: Competition,
                   benchmarks: Sequence[str] | None = None) -> dict[str, dict[str, list]]:
    """Every split of every benchmark: AnsweredItems for the pool, Items for live."""
    opened = _open_all(directory, password, rules, benchmarks or rules.benchmarks)
    return {b: {s: parsed for s, (_, parsed) in splits.items()} for b, splits in opened.items()}


def open_verified(directory: str | Path, password: str, manifest: Mapping[str, Any],
                  rules: Competition) -> dict[str, dict[str, list]]:
    """`open_benchmark`, refused unless every split matches the manifest's count and
    commitment: an older seal or a swapped file is not scored against this manifest."""
    opened = _open_all(directory, password, rules, rules.benchmarks)
    _check_against(manifest, opened, rules)
    open_train_items(directory, manifest, rules)
    return {b: {s: parsed for s, (_, parsed) in splits.items()} for b, splits in opened.items()}


def _check_against(manifest: Mapping[str, Any], opened: dict[str, dict[str, tuple]],
                   rules: Competition) -> None:
    check_manifest_hash(manifest)
    listed = manifest.get("benchmarks", {})
    missing = [b for b in rules.benchmarks if b not in listed]
    if missing:
        raise BenchmarkError(f"the manifest has no entry for {', '.join(missing)}")
    for benchmark, splits in opened.items():
        entry = listed[benchmark]
        for split, (sealed, parsed) in splits.items():
            public = entry["splits"].get(split, {})
            if public.get("count") != len(parsed):
                raise BenchmarkError(f"{benchmark} {split}: {len(parsed)} items sealed, the "
                                     f"manifest says {public.get('count')}")
            if public.get("commitment") != sealed.commitment:
                raise BenchmarkError(f"{benchmark} {split}: the sealed items do not match the "
                                     f"manifest's commitment (an older seal, or a swapped file)")
        hidden = {i for _, parsed in splits.values() for i in _item_ids(parsed)}
        if hidden & set(entry.get("train_ids", [])):
            raise BenchmarkError(f"{benchmark}: the public train ids include hidden items")
        if entry.get("baselines") != from_answered(splits[POOL_SPLIT][1], rules.pool_names):
            raise BenchmarkError(f"{benchmark}: the manifest's baselines do not match the "
                                 f"scored pool's cached answers")


def verify_benchmark(directory: str | Path, password: str, manifest: Mapping[str, Any],
                     rules: Competition) -> dict[str, dict[str, int]]:
    """Decrypt everything and check it against the rules and the manifest; returns counts."""
    opened = _open_all(directory, password, rules, rules.benchmarks)
    _check_against(manifest, opened, rules)
    open_train_items(directory, manifest, rules)
    return {benchmark: {split: len(parsed) for split, (_, parsed) in splits.items()}
            for benchmark, splits in opened.items()}


def reveal_split(directory: str | Path, benchmark: str, split: str, password: str
                 ) -> dict[str, Any]:
    """A retired split in the open: its rows and commitment salt, checkable by anyone."""
    sealed = open_split(sealed_path(directory, benchmark, split), benchmark, split, password)
    return {"benchmark": benchmark, "split": split, "commitment_salt": sealed.salt,
            "rows": sealed.rows}


def check_revealed(record: Mapping[str, Any], manifest: Mapping[str, Any]) -> int:
    """Check a revealed split against the manifest's count and commitment; returns its count."""
    check_manifest_hash(manifest)
    try:
        where = f"{record['benchmark']} {record['split']}"
        public = manifest["benchmarks"][record["benchmark"]]["splits"][record["split"]]
        rows, salt = record["rows"], bytes.fromhex(record["commitment_salt"])
    except (KeyError, TypeError, ValueError) as exc:
        raise BenchmarkError(f"not a revealed split of this manifest ({exc})") from exc
    if len(rows) != public["count"] or commitment(rows, salt) != public["commitment"]:
        raise BenchmarkError(f"the revealed {where} does not match the manifest's commitment")
    return len(rows)


# The public manifest ---------------------------------------------------------------------


def manifest_hash(manifest: Mapping[str, Any]) -> str:
    """sha256 of the canonical JSON of the manifest without its `manifest_hash` field."""
    return hashlib.sha256(canonical_json(
        {k: v for k, v in manifest.items() if k != "manifest_hash"}).encode()).hexdigest()


def check_manifest_hash(manifest: Mapping[str, Any]) -> None:
    if manifest.get("manifest_hash") != manifest_hash(manifest):
        raise BenchmarkError("the manifest's manifest_hash does not match its content; "
                             "it was edited after sealing")


def build_manifest(entries: Mapping[str, dict[str, Any]], sealed_at: str | None = None
                   ) -> dict[str, Any]:
    sealed_at = sealed_at or format_time(utc_now())
    manifest = {"format": FORMAT_VERSION, "benchmarks": dict(sorted(entries.items())),
                "sealed_at": sealed_at}
    manifest["manifest_hash"] = manifest_hash(manifest)
    return manifest


def load_manifest(path: str | Path) -> dict[str, Any]:
    """A manifest from disk, with its hash checked."""
    try:
        manifest = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise BenchmarkError(f"cannot read the manifest {path}: {exc}") from exc
    if not isinstance(manifest, dict):
        raise BenchmarkError(f"{path} is not a benchmark manifest")
    check_manifest_hash(manifest)
    return manifest


# Sealing ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Likeness:
    """The best single model of the pool (by its cached answers there), its accuracy on the
    pool and on the audit, and how many standard errors of their difference apart they are."""

    model: str
    pool: float
    audit: float
    z: float


def likeness(pool: Sequence[AnsweredItem], audit: Sequence[AnsweredItem],
             rules: Competition) -> Likeness:
    """How far the audit's difficulty is from the pool's, read on the best single model."""
    hits = {m: sum(r.answers[m].correct for r in pool) for m in rules.pool_names}
    model = max(rules.pool_names, key=lambda m: hits[m])  # pool order breaks ties
    a = hits[model] / len(pool)
    b = sum(r.answers[model].correct for r in audit) / len(audit)
    se = math.sqrt(a * (1 - a) / len(pool) + b * (1 - b) / len(audit))
    z = (a - b) / se if se > 0 else (0.0 if a == b else math.copysign(math.inf, a - b))
    return Likeness(model, a, b, z)


def check_audit_like_pool(benchmark: str, pool: Sequence[AnsweredItem],
                          audit: Sequence[AnsweredItem], rules: Competition) -> Likeness:
    """Refuse a seal whose audit is not drawn like its pool: the crown reads the audit alone, so
    an audit harder or easier than the pool would read a real gain there as a smaller or
    larger one. Nothing is sealed; the maintainer draws the private source again to match."""
    found = likeness(pool, audit, rules)
    if abs(found.z) > rules.audit_match_z:
        harder = "harder" if found.z > 0 else "easier"
        raise BenchmarkError(
            f"{benchmark}: the audit (the private source) is {harder} than the pool: the best "
            f"single model, {found.model}, is right on {found.pool:.1%} of the pool and "
            f"{found.audit:.1%} of the audit, {abs(found.z):.1f} standard errors apart (the "
            f"limit is {rules.audit_match_z}); nothing was sealed. Build the private source "
            "like the public dataset, in the same subjects and levels at the same shares "
            "(Maintaining guide, \"A private source like the pool\"), and seal again")
    return found


def seal_one(items: Sequence[Item], answer: Answerer, out_dir: str | Path, password: str,
             seed: str, rules: Competition, private: Private, kdf: KdfParams = OFFICIAL_KDF
             ) -> dict[str, Any]:
    """Draw, answer, and seal one benchmark with its private source (the audit and the live
    questions); returns its manifest entry."""
    splits = draw_splits(items, seed, rules)
    benchmark = splits.benchmark
    drawn = draw_private(private.items, items, benchmark, seed, rules)
    rows: dict[str, list] = {LIVE_SPLIT: drawn[LIVE_SPLIT]}
    for split, todo in ((POOL_SPLIT, list(splits.hidden[POOL_SPLIT])),
                        (AUDIT_SPLIT, drawn[AUDIT_SPLIT])):
        rows[split] = answer(todo)
        if [row.item.id for row in rows[split]] != [item.id for item in todo]:
            raise BenchmarkError(f"{benchmark}: the cached answers do not match the items asked")
    check_audit_like_pool(benchmark, rows[POOL_SPLIT], rows[AUDIT_SPLIT], rules)
    public = {split: {"count": len(rows[split]),
                      "commitment": seal_split(sealed_path(out_dir, benchmark, split),
                                               [r.to_dict() for r in rows[split]],
                                               benchmark, split, password, kdf)}
              for split in SEALED_SPLITS}
    log.info("%s: sealed %s", benchmark,
             ", ".join(f"{s} {public[s]['count']}" for s in SEALED_SPLITS))
    write_train_items(out_dir, benchmark, splits.train)
    return {"splits": public, "train_ids": splits.train_ids,
            "baselines": from_answered(rows[POOL_SPLIT], rules.pool_names),
            "private": {"about": private.about}}


def seal_benchmarks(items: Mapping[str, Sequence[Item]], answer: Answerer, out_dir: str | Path,
                    manifest_path: str | Path, password: str, seed: str,
                    rules: Competition, privates: Mapping[str, Private],
                    kdf: KdfParams = OFFICIAL_KDF) -> dict[str, Any]:
    """Seal each benchmark and write the manifest (keeping other benchmarks' entries)."""
    manifest_path = Path(manifest_path)
    entries = {}
    if manifest_path.exists():
        entries = dict(load_manifest(manifest_path)["benchmarks"])
    for benchmark, bench_items in items.items():
        entries[benchmark] = seal_one(bench_items, answer, out_dir, password, seed, rules,
                                      privates[benchmark], kdf)
    manifest = build_manifest(entries)
    write_json(manifest_path, manifest)
    return manifest
