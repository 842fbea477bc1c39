"""The GPU job's result, sealed for the record job: AES-256-GCM under a shared 256-bit key.

Anyone may download a public repository's artifacts, so the evaluation job hands its result
over only sealed (`lock`), bound to what it is about (one PR at one head), and the record job
opens it (`unlock`) before it reads a figure: unreadable, and unforgeable, without the key.
(`vault` stays free of this: it runs as a standalone script in the isolation tests.)
"""

from __future__ import annotations

import base64
import binascii
import json
import secrets

from evaluator.errors import VaultError

LOCK_FORMAT, LOCK_CIPHER = 1, "AES-256-GCM"
KEY_BYTES, NONCE_BYTES = 32, 12
# a sealed public result is a few kilobytes; anything far larger is refused before it is parsed
MAX_SEALED_BYTES = 1024 * 1024


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
    if len(sealed) > MAX_SEALED_BYTES:
        raise VaultError(f"it is {len(sealed)} bytes, over the cap of {MAX_SEALED_BYTES} (a "
                         "sealed result is a few kilobytes)")
    try:
        doc = json.loads(sealed)
        if doc.get("format") != LOCK_FORMAT or doc.get("cipher") != LOCK_CIPHER:
            raise ValueError("an unknown format")
        nonce, body = (base64.b64decode(doc[k], validate=True) for k in ("nonce", "ciphertext"))
    except RecursionError as exc:
        raise VaultError(f"not a sealed document of format {LOCK_FORMAT} (nested too deeply "
                         "to read)") from exc
    except (ValueError, KeyError, TypeError, AttributeError, binascii.Error) as exc:
        raise VaultError(f"not a sealed document of format {LOCK_FORMAT} ({exc})") from exc
    if doc.get("about") != about:
        raise VaultError(f"it was sealed for {str(doc.get('about'))[:120]!r}, not {about!r}")
    try:
        return aes.decrypt(nonce, body, about.encode())
    except (InvalidTag, ValueError) as exc:
        raise VaultError(f"it does not open under {name}: it was changed after it was sealed, "
                         "or sealed under another key") from exc
