"""Secrets held tightly: read once from the environment, then gone from it.

`take(name)` moves a secret out of `os.environ` into this module (so no child process
inherits it, whatever environment it is started with) and makes this process undumpable:
its own user can then neither read its /proc/<pid>/environ (which still shows the
environment it started with) nor its memory, nor ptrace it. Only root can.

`lock`/`unlock` seal a small document under a shared 256-bit key (AES-256-GCM, bound to what
it is about): how the GPU job hands its result to the record job through an artifact that
anyone may download on a public repository, unreadable and unforgeable without the key.
"""

from __future__ import annotations

import base64
import binascii
import ctypes
import json
import logging
import os
import secrets
import sys

from evaluator.errors import VaultError

log = logging.getLogger(__name__)

PR_SET_DUMPABLE, PR_GET_DUMPABLE = 4, 3
_held: dict[str, str] = {}


def take(name: str) -> str:
    """The secret `name` ("" when unset): moved out of the environment on first sight."""
    value = os.environ.pop(name, None)
    if value is not None:
        _held[name] = value
        if value:
            make_undumpable()
    return _held.get(name, "")


def forget() -> None:
    """Drop every secret held (the end of a command run in-process, and tests)."""
    _held.clear()


def make_undumpable() -> None:
    """PR_SET_DUMPABLE 0: no /proc/<pid>/environ, memory or ptrace for this process's own user."""
    if not sys.platform.startswith("linux"):
        return
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_DUMPABLE, ctypes.c_ulong(0), ctypes.c_ulong(0), ctypes.c_ulong(0),
                  ctypes.c_ulong(0)) != 0:
        log.warning("vault: cannot make this process undumpable (errno %d)", ctypes.get_errno())


def dumpable() -> bool:
    """Whether this process is dumpable (readable by its own user under /proc)."""
    if not sys.platform.startswith("linux"):
        return True
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.prctl(PR_GET_DUMPABLE, ctypes.c_ulong(0), ctypes.c_ulong(0), ctypes.c_ulong(0),
                      ctypes.c_ulong(0)) == 1


LOCK_FORMAT, LOCK_CIPHER = 1, "AES-256-GCM"
KEY_BYTES, NONCE_BYTES = 32, 12


def _key(key: str, name: str) -> bytes:
    try:
        raw = base64.b64decode(key.strip(), validate=True)
    except (binascii.Error, ValueError):
        raw = b""
    if len(raw) != KEY_BYTES:
        raise VaultError(f"{name} must be {KEY_BYTES} random bytes in base64 (`openssl rand "
                         f"-base64 {KEY_BYTES}`), the same secret in both environments")
    return raw


def lock(plain: bytes, key: str, about: str, name: str = "the key") -> bytes:
    """`plain` sealed under `key` (base64), bound to `about`: a JSON document."""
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    nonce = secrets.token_bytes(NONCE_BYTES)
    body = AESGCM(_key(key, name)).encrypt(nonce, plain, about.encode())
    return (json.dumps({"format": LOCK_FORMAT, "cipher": LOCK_CIPHER, "about": about,
                        "nonce": base64.b64encode(nonce).decode(),
                        "ciphertext": base64.b64encode(body).decode()},
                       indent=2, sort_keys=True) + "\n").encode()


def unlock(sealed: bytes, key: str, about: str, name: str = "the key") -> bytes:
    """What `lock` sealed, if it was sealed under `key` for `about` and not changed since."""
    from cryptography.exceptions import InvalidTag
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    aes = AESGCM(_key(key, name))
    try:
        doc = json.loads(sealed)
        if doc.get("format") != LOCK_FORMAT or doc.get("cipher") != LOCK_CIPHER:
            raise ValueError("an unknown format")
        nonce, body = (base64.b64decode(doc[k], validate=True) for k in ("nonce", "ciphertext"))
    except (ValueError, KeyError, TypeError, AttributeError, binascii.Error) as exc:
        raise VaultError(f"not a sealed document of format {LOCK_FORMAT} ({exc})") from exc
    if doc.get("about") != about:
        raise VaultError(f"it was sealed for {str(doc.get('about'))[:120]!r}, not {about!r}")
    try:
        return aes.decrypt(nonce, body, about.encode())
    except (InvalidTag, ValueError) as exc:
        raise VaultError(f"it does not open under {name}: it was changed after it was sealed, "
                         "or sealed under another key") from exc
