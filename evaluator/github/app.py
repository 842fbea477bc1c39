"""The repository's GitHub App: the JWT its private key signs, and the per-job installation token.

The record job pushes leaderboard/ and merges a king with this token, which the branch rules
let through (a workflow's own token cannot bypass a ruleset).
"""

from __future__ import annotations

import base64
import json
import re

from evaluator.errors import GitHubError
from evaluator.github.rest import GitHub

# What the App's per-job token may do: push leaderboard/, merge a king, comment and label,
# start workflows. The App must hold these; metadata (read) comes with every App.
APP_PERMISSIONS = {"contents": "write", "pull_requests": "write", "issues": "write",
                   "actions": "write"}
JWT_LIFETIME_S = 540  # GitHub allows ten minutes; the clock may be a minute off either way
TOKEN_RE = re.compile(r"[A-Za-z0-9_.-]{20,255}", re.ASCII)
APP_ID_RE = re.compile(r"[0-9]{1,12}", re.ASCII)


def installation_token(github: GitHub, app_id: str, private_key: str,
                       permissions: dict[str, str] = APP_PERMISSIONS) -> str:
    """A token of the App's installation on `github`'s repository, scoped to it and to
    `permissions`: a JWT the App's private key signs asks GitHub for it (it lasts an hour)."""
    signed = {"Authorization": f"Bearer {app_jwt(app_id, private_key, github.clock())}"}
    installation = github.send("GET", f"/repos/{github.repo}/installation",
                               headers=signed).json()
    number = installation.get("id") if isinstance(installation, dict) else None
    if type(number) is not int:
        raise GitHubError(f"GitHub named no installation of App {app_id} on {github.repo}; "
                          "install the App on this repository")
    answer = github.send("POST", f"/app/installations/{number}/access_tokens", headers=signed,
                         json={"repositories": [github.repo.split("/", 1)[1]],
                               "permissions": dict(permissions)}).json()
    token = answer.get("token") if isinstance(answer, dict) else None
    if not isinstance(token, str) or not TOKEN_RE.fullmatch(token):
        raise GitHubError("GitHub answered the token request without a token")
    return token


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def app_jwt(app_id: str, private_key: str, now: float) -> str:
    """The JSON Web Token (RS256) a GitHub App signs with its private key to act as itself."""
    from cryptography.exceptions import UnsupportedAlgorithm
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import padding, rsa

    if not APP_ID_RE.fullmatch(str(app_id)):
        raise GitHubError(f"the App id {app_id!r} must be the number on the App's settings page")
    try:
        key = serialization.load_pem_private_key(private_key.encode(), password=None)
    except (ValueError, TypeError, UnsupportedAlgorithm) as exc:
        raise GitHubError("the App's private key is not a PEM private key; paste the whole "
                          ".pem file GitHub generated into the secret") from exc
    if not isinstance(key, rsa.RSAPrivateKey):
        raise GitHubError("the App's private key must be the RSA key GitHub generated")
    header = _b64url(json.dumps({"alg": "RS256", "typ": "JWT"}).encode())
    claims = _b64url(json.dumps({"iat": int(now) - 60, "exp": int(now) + JWT_LIFETIME_S,
                                 "iss": str(app_id)}).encode())
    signature = key.sign(f"{header}.{claims}".encode(), padding.PKCS1v15(), hashes.SHA256())
    return f"{header}.{claims}.{_b64url(signature)}"
