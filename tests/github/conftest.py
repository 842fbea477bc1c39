"""Offline GitHub: a fake REST API on 127.0.0.1, a bare git remote, and a workflow replayer.

The fake API serves pull requests, comments (with their authors), labels and dispatches
from memory, and the git data a workflow reads (commits, trees, blobs, compare) from the
bare remote, where a merge really lands on the PR's base branch. `script` makes it answer a
matching call with an error first (a rate limit, "base branch was modified"); the `clock`
fixture stands in for the client's sleeps, so waits of a minute take none.

It is as strict as GitHub where the workflows depend on it: every call acts as the actor its
token names (a job's workflow token with that job's permissions, the App's installation
token, a maintainer), a write the token's permissions do not cover is refused, and the
branch ruleset is enforced on the merge API and, through a pre-receive hook on the bare
remote, on `git push`: an actor not on its bypass list gets GitHub's status and message.
A required check waits for a fork's CI run until a maintainer approves it. A ruleset whose
bypass list names the GitHub Actions integration is refused as GitHub refuses it. The App
mints installation tokens from a JWT its private key signs (RS256, checked here). Pushes
by anything but a workflow token start the push workflows they match (`triggered`).

The replayer runs a job of a real workflow file step by step: `run:` lines call the same
`tinyrouter` commands (in-process, or through bash to prove hostile text stays data), the
`${{ }}` expressions in `env:`/`if:` are evaluated from the event, step outputs and job
outputs, and the few actions used are simulated (checkout = the clone already made).
"""

from __future__ import annotations

import base64
import copy
import fnmatch
import functools
import json
import os
import re
import secrets as token_source
import shlex
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlparse

import pytest
import yaml
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from evaluator import cli

REPO_ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = REPO_ROOT / ".github" / "workflows"
REPOSITORY = "tinyrouter/tinyrouter"
BOT_LOGIN = "github-actions[bot]"  # who a workflow's own token is
ACTIONS_INTEGRATION_ID = 15368  # the GitHub Actions integration, as a ruleset names it
APP_ID, APP_SLUG, INSTALLATION_ID = 424242, "tinyrouter-bot", 5150
APP_LOGIN = f"{APP_SLUG}[bot]"
MAINTAINER, MAINTAINER_TOKEN = "maintainer", "maintainer-token"
RESULT_KEY = base64.b64encode(bytes(range(32))).decode()  # `openssl rand -base64 32`, in tests
CI_CHECKS = ("Lint and test (Python 3.11)", "Lint and test (Python 3.12)")
RULE_VIOLATION = "Repository rule violations found"
NOT_ACCESSIBLE = "Resource not accessible by integration"
GIT_STATUSES = {"A": "added", "M": "modified", "D": "removed", "T": "changed"}
GIT_IDENTITY = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
                "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"}


# ---------------------------------------------------------------- fake REST API

@dataclass
class FakeGitHub:
    """What GitHub would hold and see. `fail` queues (status, headers) answers to give the
    next calls, whatever they are; `script` queues them for calls matching a route."""

    url: str = ""
    git_dir: Path | None = None  # the bare remote the git data comes from, merges go to
    pulls: dict[int, dict] = field(default_factory=dict)
    files: dict[int, list[dict]] = field(default_factory=dict)
    comments: dict[int, list[dict]] = field(default_factory=dict)
    labels: dict[int, set[str]] = field(default_factory=dict)
    merges: list[tuple[int, str]] = field(default_factory=list)
    dispatches: list[dict] = field(default_factory=list)
    calls: list[tuple[str, str]] = field(default_factory=list)
    fail: list[tuple[int, dict]] = field(default_factory=list)
    scripted: list[tuple[str, int, dict, str]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    # token → {"login", "integration" (the app id a ruleset names, or None), "permissions"}
    tokens: dict[str, dict] = field(default_factory=lambda: {MAINTAINER_TOKEN: {
        "login": MAINTAINER, "integration": None, "permissions": "admin"}})
    ruleset: dict | None = None  # the active ruleset on main, as created through the API
    checks: dict[str, dict[str, str]] = field(default_factory=dict)  # head SHA → check → state
    pushes: list[dict] = field(default_factory=list)  # accepted pushes and merges to branches
    events: list[tuple[str, int]] = field(default_factory=list)  # (action, PR): reopened, …
    app_installed: bool = True
    reviews: dict[int, list[dict]] = field(default_factory=dict)  # run id → deployment reviews
    actor_now: dict | None = None  # who the call being answered acts as
    attestations: list[dict] = field(default_factory=list)  # what actions/attest signed
    # GitHub's clock, to the second as its API shows it: each PR event moves it on
    now: float = 1_800_000_000.0
    shown: dict[str, str] = field(default_factory=dict)  # head SHA → when a PR first showed it
    runs: dict[int, dict] = field(default_factory=dict)  # workflow run id → the run

    def tick(self) -> str:
        """GitHub's time for the next event, as its API writes it."""
        self.now += 5
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.now))

    def gates_run(self, sha: str) -> int:
        """The run GitHub starts for a pull request event that showed `sha`: created then."""
        run_id = 7000 + len(self.runs)
        self.runs[run_id] = {"id": run_id, "event": "pull_request_target", "run_attempt": 1,
                             "created_at": self.shown[sha], "head_sha": sha}
        return run_id

    # -------------------------------------------------------- actors and their tokens

    def workflow_token(self, permissions: dict[str, str]) -> str:
        """A job's GITHUB_TOKEN: github-actions[bot] with exactly the job's permissions."""
        token = f"ghs_workflow{token_source.token_hex(12)}"
        self.tokens[token] = {"login": BOT_LOGIN, "integration": ACTIONS_INTEGRATION_ID,
                              "permissions": dict(permissions)}
        return token

    @property
    def app_secrets(self) -> dict[str, str]:
        """The secrets the guide has a maintainer add to the environments: the App's id and
        private key, and the key that hands the GPU job's result to the record job."""
        return {"TINYROUTER_APP_ID": str(APP_ID), "TINYROUTER_APP_PRIVATE_KEY": app_key_pem(),
                "TINYROUTER_RESULT_KEY": RESULT_KEY}

    def actor(self, token: str | None) -> dict | None:
        return self.tokens.get(token or "")

    def may(self, actor: dict | None, scopes: tuple[str, ...]) -> bool:
        """Whether the actor's token may write through any of `scopes`."""
        if actor is None:
            return False
        granted = actor["permissions"]
        return granted == "admin" or any(granted.get(s) == "write" for s in scopes)

    def bypasses(self, actor: dict | None) -> bool:
        if self.ruleset is None:
            return True
        if actor is not None and actor["permissions"] == "admin":
            return any(b["actor_type"] == "RepositoryRole" for b in self.ruleset["bypass_actors"])
        return actor is not None and any(
            b["actor_type"] == "Integration" and b["actor_id"] == actor["integration"]
            for b in self.ruleset["bypass_actors"])

    def protected(self, ref: str) -> bool:
        return self.ruleset is not None and ref in \
            self.ruleset["conditions"]["ref_name"]["include"]

    def violations(self, head_sha: str) -> list[str]:
        """What the ruleset still asks of a pull request at `head_sha` before a merge."""
        found = []
        for rule in (self.ruleset or {}).get("rules", []):
            if rule["type"] == "required_status_checks":
                for check in rule["parameters"]["required_status_checks"]:
                    state = self.checks.get(head_sha, {}).get(check["context"], "expected")
                    if state != "success":  # an unapproved fork run has reported nothing
                        found.append(f'Required status check "{check["context"]}" is expected.')
            if rule["type"] == "pull_request" and \
                    rule["parameters"].get("required_approving_review_count", 0) > 0:
                found.append("At least 1 approving review is required by reviewers with write "
                             "access.")
        return found

    def approve_fork_run(self, number: int) -> None:
        """A maintainer approves the fork PR's CI run, which then passes."""
        sha = self.pulls[number]["head"]["sha"]
        self.checks[sha] = dict.fromkeys(CI_CHECKS, "success")

    def triggered(self, workflows: Path) -> list[str]:
        """The push workflows GitHub would start for the accepted pushes so far: none for a
        push a workflow's own token made."""
        started = []
        for push in self.pushes:
            if push["login"] == BOT_LOGIN:
                continue
            for path in sorted(workflows.glob("*.yml")):
                on = load_workflow(path.name)["on"]
                spec = on.get("push") if isinstance(on, dict) else None
                if spec is None or not _matches(push, spec):
                    continue
                started.append(path.name)
        return started

    def script(self, route: str, status: int, message: str = "try again",
               headers: dict | None = None, times: int = 1) -> None:
        """Answer the next `times` calls whose "METHOD /path" fully matches `route` with an
        error (the path without /repos/owner/name)."""
        self.scripted += [(route, status, headers or {}, message)] * times

    def add_pull(self, number: int, author: str, head_sha: str, paths: list[str],
                 fork: bool = True, **extra) -> None:
        """A PR (from a fork, as miners' are: its CI run waits for a maintainer's approval)."""
        opened = self.tick()
        self.pulls[number] = {"number": number, "user": {"login": author}, "state": "open",
                              "merged": False, "created_at": opened, "updated_at": opened,
                              "head": {"sha": head_sha, "ref": "branch", "repo": {"fork": fork}},
                              "base": {"ref": "main"}, "title": "submission", **extra}
        self.shown.setdefault(head_sha, opened)
        self.new_head(number, head_sha)
        self.files[number] = [{"filename": p, "status": "added"} for p in paths]
        self.comments.setdefault(number, [])
        self.labels.setdefault(number, set())

    def new_head(self, number: int, sha: str) -> None:
        """The PR's head is `sha`: its CI run starts, or waits for approval on a fork."""
        self.pulls[number]["head"]["sha"] = sha
        if sha not in self.shown:
            self.shown[sha] = self.pulls[number]["updated_at"] = self.tick()
        fork = self.pulls[number]["head"]["repo"]["fork"]
        self.checks[sha] = dict.fromkeys(CI_CHECKS, "action_required" if fork else "success")

    def comment_bodies(self, number: int) -> list[str]:
        return [c["body"] for c in self.comments.get(number, [])]

    def add_comment(self, number: int, body: str, login: str) -> None:
        """A comment someone else wrote (a stranger, a maintainer)."""
        self.comments[number].append({"id": self._next_comment_id(), "body": body,
                                      "user": {"login": login}})

    def handle(self, method: str, path: str, query: dict, body: dict | None,
               token: str | None = None) -> tuple[int, object]:
        with self.lock:  # one call at a time, as the git remote is one repository
            return self._handle(method, path, query, body, token)

    def _handle(self, method: str, path: str, query: dict, body: dict | None,
                token: str | None = None) -> tuple[int, object]:
        self.calls.append((method, path))
        if path == "/_hook/push":  # the bare remote's pre-receive hook asks
            return self._hook_push(body)
        if path.startswith("/app/") or path == f"/repos/{REPOSITORY}/installation":
            return self._app(method, path, token, body)
        if token and token not in self.tokens:
            return 401, {"message": "Bad credentials"}
        self.actor_now = self.actor(token)
        denied = self._denied(method, path)
        if denied:
            return denied
        if self.fail:
            status, headers = self.fail.pop(0)
            return status, {"message": "try again", "_headers": headers}
        route = f"{method} {path.removeprefix(f'/repos/{REPOSITORY}')}"
        for index, (pattern, status, headers, message) in enumerate(self.scripted):
            if re.fullmatch(pattern, route):
                del self.scripted[index]
                return status, {"message": message, "_headers": headers}
        for pattern, handler in self.routes():
            match = re.fullmatch(pattern, route)
            if match:
                return handler(*match.groups(), query=query, body=body)
        return 404, {"message": f"no route {route}"}

    def _denied(self, method: str, path: str) -> tuple[int, dict] | None:
        """A write the token does not cover: GitHub's 401 without a token, 403 without the
        permission."""
        if method == "GET" or path == "/graphql":
            return None
        route = path.removeprefix(f"/repos/{REPOSITORY}")
        scopes = (("actions",) if "/actions/" in route else
                  ("contents",) if route.endswith("/merge") else
                  ("administration",) if route.startswith("/rulesets") else
                  ("pull_requests",) if route.startswith("/pulls/") else
                  ("issues", "pull_requests"))
        if self.actor_now is None:
            return 401, {"message": "Requires authentication"}
        if not self.may(self.actor_now, scopes):
            return 403, {"message": NOT_ACCESSIBLE}
        return None

    def routes(self):
        return (
            (r"POST /graphql", lambda **_: self._viewer()),
            (r"POST /rulesets", lambda body, **_: self._create_ruleset(body)),
            (r"GET /git/commits/([0-9a-f]+)", lambda sha, **_: self._commit(sha)),
            (r"GET /git/trees/([0-9a-f]+)", lambda sha, **_: self._tree(sha)),
            (r"GET /git/blobs/([0-9a-f]+)", lambda sha, **_: self._blob(sha)),
            (r"GET /compare/([\w.-]+)\.\.\.([0-9a-f]+)", lambda b, h, **_: self._compare(b, h)),
            (r"GET /contents/(.+)", lambda path, query, **_: self._contents(unquote(path), query)),
            (r"GET /pulls", lambda query, **_: self._pulls(query)),
            (r"GET /pulls/(\d+)", lambda n, **_: self._pull(int(n))),
            (r"PATCH /pulls/(\d+)", lambda n, body, **_: self._patch_pull(int(n), body)),
            (r"GET /pulls/(\d+)/files", lambda n, query, **_: self._page(self.files[int(n)], query)),
            (r"PUT /pulls/(\d+)/merge", lambda n, body, **_: self._merge(int(n), body)),
            (r"GET /issues/(\d+)/comments",
             lambda n, query, **_: self._page(self.comments[int(n)], query)),
            (r"POST /issues/(\d+)/comments", lambda n, body, **_: self._comment(int(n), body)),
            (r"PATCH /issues/comments/(\d+)", lambda i, body, **_: self._edit(int(i), body)),
            (r"POST /issues/(\d+)/labels", lambda n, body, **_: self._label(int(n), body)),
            (r"DELETE /issues/(\d+)/labels/(.+)", lambda n, name, **_: self._unlabel(int(n), name)),
            (r"GET /actions/runs/(\d+)", lambda run, **_: self._run(int(run))),
            (r"GET /actions/runs/(\d+)/approvals",
             lambda run, query, **_: self._approvals(int(run), query)),
            (r"POST /actions/workflows/([^/]+)/dispatches",
             lambda wf, body, **_: (self.dispatches.append({"workflow": wf, **body}) or 204, None)),
        )

    def review(self, run_id: int, state: str, comment: str = "") -> None:
        """A reviewer of the `evaluation` environment approves or rejects the run's jobs."""
        self.reviews.setdefault(run_id, []).append({
            "state": state, "comment": comment, "user": {"login": MAINTAINER},
            "environments": [{"name": "evaluation"}]})

    def _approvals(self, run_id: int, query: dict):
        granted = (self.actor_now or {}).get("permissions")
        if granted != "admin" and not (granted or {}).get("actions"):
            return 403, {"message": NOT_ACCESSIBLE}  # actions: read, at least
        return self._page(self.reviews.get(run_id, []), query)  # 30 a page unless asked

    def _pulls(self, query: dict):
        """GET /repos/{owner}/{repo}/pulls: open ones by default, oldest first when asked."""
        state = query.get("state", "open")
        found = [self._pull(n)[1] for n in sorted(self.pulls)
                 if state == "all" or self.pulls[n]["state"] == state]
        if query.get("direction", "desc") == "desc":  # GitHub: newest first unless asked
            found.reverse()
        return self._page(found, query)

    def _run(self, run_id: int):
        granted = (self.actor_now or {}).get("permissions")
        if granted != "admin" and not (granted or {}).get("actions"):
            return 403, {"message": NOT_ACCESSIBLE}  # actions: read, at least
        if run_id not in self.runs:
            return 404, {"message": "Not Found"}
        return 200, self.runs[run_id]

    def _pull(self, n: int):
        if n not in self.pulls:
            return 404, {"message": "Not Found"}
        return 200, {**self.pulls[n], "labels": [{"name": x} for x in sorted(self.labels[n])]}

    def _patch_pull(self, n: int, body: dict):
        pull = self.pulls[n]
        if "base" in body:
            if self._kind(f"refs/heads/{body['base']}") is None:
                return 422, {"message": "Validation Failed",
                             "errors": [f"Proposed base branch '{body['base']}' was not found"]}
            pull["base"]["ref"] = body["base"]
            self.events.append(("edited", n))
        state = body.get("state", pull["state"])
        if state != pull["state"]:
            if pull["merged"]:
                return 422, {"message": "Validation Failed",
                             "errors": ["state cannot be changed. The pull request cannot be "
                                        "reopened because it has been merged."]}
            pull["state"] = state
            self.events.append(("reopened" if state == "open" else "closed", n))
        return 200, pull

    def _page(self, items: list, query: dict):
        per_page = min(int(query.get("per_page", 30)), 100)  # GitHub gives 100 at most
        page = int(query.get("page", 1))
        return 200, items[(page - 1) * per_page: page * per_page]

    def _merge(self, n: int, body: dict):
        pull = self.pulls[n]
        if pull["state"] != "open":
            return 405, {"message": "Pull Request is not mergeable"}
        if body.get("sha") != pull["head"]["sha"]:
            return 409, {"message": "Head branch was modified. Review and try the merge again."}
        base = pull["base"]["ref"]
        if self.protected(f"refs/heads/{base}") and not self.bypasses(self.actor_now):
            found = self.violations(body["sha"])
            if found:
                return 405, {"message": f"{RULE_VIOLATION}\n\n" + "\n\n".join(found) + "\n"}
        if self.git_dir is not None:
            self._merge_into(base, n, body["sha"])
        self.merges.append((n, body["sha"]))
        pull.update(state="closed", merged=True)
        return 200, {"merged": True}

    def _next_comment_id(self) -> int:
        return 1000 + sum(len(c) for c in self.comments.values())

    def _comment(self, n: int, body: dict):
        comment_id = self._next_comment_id()
        self.comments[n].append({"id": comment_id, "body": body["body"],
                                 "user": {"login": self.actor_now["login"]}})
        return 201, {"id": comment_id}

    def _viewer(self):
        if self.actor_now is None:
            return 401, {"message": "This endpoint requires you to be authenticated."}
        return 200, {"data": {"viewer": {"login": self.actor_now["login"]}}}

    # -------------------------------------------------------- rulesets, the App, pushes

    def _create_ruleset(self, body: dict):
        """POST /repos/{owner}/{repo}/rulesets, as the guide's ruleset is entered."""
        for actor in body.get("bypass_actors", []):
            if actor["actor_type"] == "Integration" and actor["actor_id"] == ACTIONS_INTEGRATION_ID:
                return 422, {"message": "Validation Failed", "errors": [
                    "Actor GitHub Actions integration must be part of the ruleset source or "
                    "owner organization"]}
            if actor["actor_type"] == "Integration" and (actor["actor_id"] != APP_ID
                                                         or not self.app_installed):
                return 422, {"message": "Validation Failed",
                             "errors": [f"Actor {actor['actor_id']} is not installed"]}
        self.ruleset = body
        return 201, {"id": 1, **body}

    def _app(self, method: str, path: str, token: str | None, body: dict | None):
        """The App's own endpoints: a JWT the App's key signed, not a token, authenticates."""
        claims = verify_app_jwt(token or "")
        if claims is None:
            return 401, {"message": "A JSON web token could not be decoded"}
        if path == f"/repos/{REPOSITORY}/installation" and method == "GET":
            if not self.app_installed:
                return 404, {"message": "Not Found"}
            return 200, {"id": INSTALLATION_ID, "app_id": APP_ID, "app_slug": APP_SLUG}
        if path == f"/app/installations/{INSTALLATION_ID}/access_tokens" and method == "POST":
            if (body or {}).get("repositories") not in (None, [REPOSITORY.split("/")[1]]):
                return 422, {"message": "There is at least one repository that does not exist "
                                        "or is not accessible to the parent installation."}
            token = f"ghs_app{token_source.token_hex(16)}"
            self.tokens[token] = {"login": APP_LOGIN, "integration": APP_ID,
                                  "permissions": dict((body or {}).get("permissions") or {})}
            return 201, {"token": token, "expires_at": "2099-01-01T00:00:00Z",
                         "permissions": self.tokens[token]["permissions"]}
        return 404, {"message": "Not Found"}

    def _hook_push(self, body: dict):
        """The pre-receive hook: may the pusher's token update these refs?"""
        actor = self.actor(body.get("token"))
        for update in body["updates"]:
            ref = update["ref"]
            if ref.startswith("refs/pull/"):
                continue  # the test's stand-in for a miner pushing to their fork
            if actor is None:
                return 200, {"ok": False, "message": "remote: Invalid username or password."}
            if not self.may(actor, ("contents",)):
                return 200, {"ok": False, "message": f"remote: Permission to {REPOSITORY}.git "
                                                     f"denied to {actor['login']}."}
            if self.protected(ref) and not self.bypasses(actor):
                return 200, {"ok": False, "message": "\n".join([
                    f"remote: error: GH013: {RULE_VIOLATION} for {ref}.",
                    "remote: - Changes must be made through a pull request."])}
        for update in body["updates"]:
            if update["ref"].startswith("refs/heads/"):
                self.pushes.append({"login": actor["login"], "ref": update["ref"],
                                    "paths": update["paths"]})
        return 200, {"ok": True}

    def set_up_as_the_guide_says(self, bypass_id: int = APP_ID) -> tuple[int, dict]:
        """A maintainer creates the guide's ruleset through the API; GitHub's answer."""
        return self.handle("POST", f"/repos/{REPOSITORY}/rulesets", {},
                           guide_ruleset(bypass_id), MAINTAINER_TOKEN)

    def attach(self, git_dir: Path) -> None:
        """Serve git data from `git_dir` and enforce the ruleset on pushes to it."""
        self.git_dir = git_dir
        hook = git_dir / "hooks" / "pre-receive"
        hook.write_text(f"#!{sys.executable}\n" + PRE_RECEIVE.replace("@URL@", self.url))
        hook.chmod(0o755)

    # -------------------------------------------------------- git data, from the bare remote

    def _git(self, *args: str) -> bytes:
        return subprocess.run(["git", "-C", str(self.git_dir), *args], check=True,
                              capture_output=True, env={**os.environ, **GIT_IDENTITY}).stdout

    def _kind(self, sha: str) -> str | None:
        found = subprocess.run(["git", "-C", str(self.git_dir), "cat-file", "-t", sha],
                               capture_output=True, text=True)
        return found.stdout.strip() if found.returncode == 0 else None

    def _commit(self, sha: str):
        if self._kind(sha) != "commit":
            return 404, {"message": "Not Found"}
        tree = self._git("rev-parse", f"{sha}^{{tree}}").decode().strip()
        return 200, {"sha": sha, "tree": {"sha": tree}}

    def _tree(self, sha: str):
        if self._kind(sha) != "tree":
            return 404, {"message": "Not Found"}
        entries = []
        for record in filter(None, self._git("ls-tree", "-z", "--long", sha).split(b"\0")):
            meta, name = record.split(b"\t", 1)
            mode, kind, oid, size = meta.decode().split()
            entries.append({"path": name.decode("utf-8", "surrogateescape"), "mode": mode,
                            "type": kind, "sha": oid,
                            **({"size": int(size)} if kind == "blob" else {})})
        return 200, {"sha": sha, "tree": entries, "truncated": False}

    def _blob(self, sha: str):
        if self._kind(sha) != "blob":
            return 404, {"message": "Not Found"}
        content = self._git("cat-file", "blob", sha)
        return 200, {"sha": sha, "size": len(content), "encoding": "base64",
                     "content": base64.encodebytes(content).decode()}

    def _contents(self, path: str, query: dict):
        """GET /repos/{owner}/{repo}/contents/{path}?ref=: a file's bytes in base64 (or a
        folder's listing, or a link's target), 404 where the ref or the path is not."""
        ref = query.get("ref", "refs/heads/main")
        if self._kind(ref) != "commit":
            return 404, {"message": f"No commit found for the ref {ref}"}
        listed = self._git("ls-tree", "-z", "--long", ref, "--", path).split(b"\0")[0]
        if not listed:
            return 404, {"message": "Not Found"}
        meta, _ = listed.split(b"\t", 1)
        mode, kind, oid, _ = meta.decode().split()
        if kind == "tree":
            return 200, [{"name": e["path"], "path": f"{path}/{e['path']}", "sha": e["sha"],
                          "type": "dir" if e["type"] == "tree" else "file"}
                         for e in self._tree(oid)[1]["tree"]]
        content = self._git("cat-file", "blob", oid)
        if mode == "120000":
            return 200, {"type": "symlink", "target": content.decode(), "path": path,
                         "sha": oid, "size": len(content)}
        return 200, {"type": "file", "encoding": "base64", "size": len(content),
                     "name": path.rsplit("/", 1)[-1], "path": path, "sha": oid,
                     "content": base64.encodebytes(content).decode()}

    def _compare(self, base: str, head: str):
        if self._kind(head) != "commit":
            return 404, {"message": "Not Found"}
        since = self._git("merge-base", f"refs/heads/{base}", head).decode().strip()
        fields = self._git("diff", "--name-status", "-z", "--no-renames", since, head).split(b"\0")
        files = [{"status": GIT_STATUSES.get(status.decode()[:1], "modified"),
                  "filename": path.decode("utf-8", "surrogateescape")}
                 for status, path in zip(fields[0::2], fields[1::2], strict=False) if path]
        return 200, {"files": files}

    def _merge_into(self, base: str, n: int, sha: str) -> None:
        ref = f"refs/heads/{base}"
        tip = self._git("rev-parse", ref).decode().strip()
        tree = self._git("merge-tree", "--write-tree", tip, sha).decode().split()[0]
        merged = self._git("commit-tree", tree, "-p", tip, "-p", sha, "-m",
                           f"Merge pull request #{n}").decode().strip()
        self._git("update-ref", ref, merged, tip)
        paths = self._git("diff", "--name-only", tip, merged).decode().split()
        self.pushes.append({"login": self.actor_now["login"], "ref": ref, "paths": paths})

    def _edit(self, comment_id: int, body: dict):
        for comments in self.comments.values():
            for comment in comments:
                if comment["id"] == comment_id:
                    comment["body"] = body["body"]
                    return 200, comment
        return 404, {"message": "Not Found"}

    def _label(self, n: int, body: dict):
        self.labels[n].update(body["labels"])
        return 200, [{"name": x} for x in sorted(self.labels[n])]

    def _unlabel(self, n: int, name: str):
        if unquote(name) not in self.labels[n]:
            return 404, {"message": "Label does not exist"}
        self.labels[n].discard(unquote(name))
        return 200, []


@functools.cache
def app_key_pem() -> str:
    """The App's private key, as GitHub hands it out (PEM, RSA 2048)."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption()).decode()


@functools.cache
def _app_public_key():
    return serialization.load_pem_private_key(app_key_pem().encode(), None).public_key()


def _unb64(part: str) -> bytes:
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


def verify_app_jwt(token: str) -> dict | None:
    """The claims of a JWT the App's key signed with RS256, for this App and still valid, as
    GitHub checks it (at most ten minutes long, issued no later than a minute from now)."""
    try:
        header, claims, signature = token.split(".")
        if json.loads(_unb64(header)) != {"alg": "RS256", "typ": "JWT"}:
            return None
        _app_public_key().verify(_unb64(signature), f"{header}.{claims}".encode(), padding.PKCS1v15(),
                      hashes.SHA256())
        data = json.loads(_unb64(claims))
    except Exception:  # anything that is not a good signature is a bad token
        return None
    now = time.time()
    if str(data.get("iss")) != str(APP_ID) or not data["iat"] <= now + 60 < data["exp"] + 60 \
            or data["exp"] - data["iat"] > 600:
        return None
    return data


# The bare remote's pre-receive hook: asks the fake whether the pusher may update the refs.
PRE_RECEIVE = """
import json, os, subprocess, sys, urllib.request
updates = []
for line in sys.stdin.read().splitlines():
    old, new, ref = line.split()
    zero = set(old) == {"0"}
    paths = subprocess.run(["git", "diff", "--name-only", new] if zero else
                           ["git", "diff", "--name-only", old, new],
                           capture_output=True, text=True).stdout.split()
    updates.append({"ref": ref, "paths": paths})
body = json.dumps({"token": os.environ.get("GITHUB_TOKEN"), "updates": updates}).encode()
request = urllib.request.Request("@URL@/_hook/push", data=body, method="POST",
                                 headers={"content-type": "application/json"})
answer = json.load(urllib.request.urlopen(request))
if not answer["ok"]:
    print(answer["message"], file=sys.stderr)
    sys.exit(1)
"""


def _matches(push: dict, spec: dict | None) -> bool:
    """Whether a push matches a workflow's `on.push` filter (branches, paths, paths-ignore)."""
    spec = spec or {}
    branch = push["ref"].removeprefix("refs/heads/")
    if "branches" in spec and branch not in spec["branches"]:
        return False
    paths = push["paths"]
    if "paths" in spec:
        return any(fnmatch.fnmatch(p, g.replace("**", "*")) for p in paths for g in spec["paths"])
    if "paths-ignore" in spec:
        return any(not any(fnmatch.fnmatch(p, g.replace("**", "*")) for g in spec["paths-ignore"])
                   for p in paths)
    return True


def guide_ruleset(bypass_id: int = APP_ID) -> dict:
    """The ruleset on main as the maintaining guide has it entered: the App (by default) on
    the bypass list, a pull request with a code owner's review, the CI checks, no force push,
    no deletion."""
    return {"name": "main", "target": "branch", "enforcement": "active",
            "conditions": {"ref_name": {"include": ["refs/heads/main"], "exclude": []}},
            "bypass_actors": [{"actor_type": "Integration", "actor_id": bypass_id,
                               "bypass_mode": "always"}],
            "rules": [{"type": "deletion"}, {"type": "non_fast_forward"},
                      {"type": "pull_request", "parameters": {
                          "required_approving_review_count": 1,
                          "require_code_owner_review": True}},
                      {"type": "required_status_checks", "parameters": {
                          "required_status_checks": [{"context": c} for c in CI_CHECKS]}}]}


def _handler_for(fake: FakeGitHub):
    class Handler(BaseHTTPRequestHandler):
        def _serve(self) -> None:
            url = urlparse(self.path)
            length = int(self.headers.get("content-length") or 0)
            body = json.loads(self.rfile.read(length)) if length else None
            query = {k: v[0] for k, v in parse_qs(url.query).items()}
            auth = self.headers.get("authorization") or ""
            token = auth.split(" ", 1)[1] if auth.lower().startswith(("bearer ", "token ")) \
                else None
            status, payload = fake.handle(self.command, url.path, query, body, token)
            headers = payload.pop("_headers", {}) if isinstance(payload, dict) else {}
            data = b"" if payload is None else json.dumps(payload).encode()
            self.send_response(status)
            for key, value in headers.items():
                self.send_header(key, value)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _serve

        def log_message(self, *args) -> None:
            pass

    return Handler


class FakeClock:
    """Stands in for the `time` module in evaluator.github's client and pushes and in a held
    head's waits: sleeps are recorded, not slept."""

    def __init__(self) -> None:
        self.now, self.sleeps = time.time(), []

    def time(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


@pytest.fixture
def clock(monkeypatch) -> FakeClock:
    fake = FakeClock()
    monkeypatch.setattr("evaluator.github.rest.time", fake)
    monkeypatch.setattr("evaluator.github.pushes.time", fake)
    monkeypatch.setattr("evaluator.precedence.time", fake)
    return fake


@pytest.fixture
def fake_github(monkeypatch, clock):
    fake = FakeGitHub()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(fake))
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02},
                              daemon=True)
    thread.start()
    fake.url = f"http://127.0.0.1:{server.server_address[1]}"
    monkeypatch.setenv("GITHUB_API_URL", fake.url)
    monkeypatch.setenv("GITHUB_REPOSITORY", REPOSITORY)
    monkeypatch.delenv("GITHUB_GRAPHQL_URL", raising=False)
    yield fake
    server.shutdown()
    server.server_close()


# ---------------------------------------------------------------- git remote and PR heads

def git(cwd: Path, *args: str) -> str:
    env = {**os.environ, **GIT_IDENTITY}
    env.pop("GITHUB_TOKEN", None)
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True,
                          text=True).stdout.strip()


@dataclass
class Remote:
    """A bare repository standing in for github.com, and a scratch clone to author commits."""

    bare: Path
    scratch: Path

    def clone(self, dest: Path) -> Path:
        git(dest.parent, "clone", "--quiet", str(self.bare), dest.name)
        return dest

    def main_sha(self) -> str:
        return git(self.bare, "rev-parse", "refs/heads/main")

    def show(self, path: str, ref: str = "main") -> str:
        return git(self.bare, "show", f"{ref}:{path}")

    def open_pr(self, number: int, files: dict[str, bytes | Path]) -> str:
        """Commit `files` on a branch off main (a Path value = a symlink to it); returns its SHA."""
        git(self.scratch, "fetch", "--quiet", "origin", "main")
        git(self.scratch, "checkout", "--quiet", "-B", f"pr{number}", "FETCH_HEAD")
        return self.push_to_pr(number, files)

    def push_to_pr(self, number: int, files: dict[str, bytes | Path]) -> str:
        """Another commit on the PR's branch (a miner pushing again); returns its SHA."""
        git(self.scratch, "checkout", "--quiet", f"pr{number}")
        for rel, content in files.items():
            dest = self.scratch / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, Path):
                dest.symlink_to(content)
            else:
                dest.write_bytes(content)
        git(self.scratch, "add", "--all")
        git(self.scratch, "commit", "--quiet", "-m", f"PR {number}")
        git(self.scratch, "push", "--quiet", "origin", f"HEAD:refs/pull/{number}/head")
        return git(self.scratch, "rev-parse", "HEAD")


@pytest.fixture(scope="session")
def template_remote(tmp_path_factory) -> Remote:
    """The remote every test starts from, built once: a base commit on main."""
    root = tmp_path_factory.mktemp("template-remote")
    bare, scratch = root / "remote.git", root / "scratch"
    git(root, "init", "--quiet", "--bare", "--initial-branch=main", str(bare))
    git(root, "init", "--quiet", "--initial-branch=main", str(scratch))
    for folder in ("submissions", "leaderboard"):
        (scratch / folder).mkdir()
        (scratch / folder / ".gitkeep").write_text("")
    git(scratch, "add", "--all")
    git(scratch, "commit", "--quiet", "-m", "base")
    git(scratch, "remote", "add", "origin", str(bare))
    git(scratch, "push", "--quiet", "origin", "main")
    return Remote(bare, scratch)


@pytest.fixture
def remote(tmp_path, template_remote) -> Remote:
    """A copy of the template remote of this test's own, its scratch clone pointing at it."""
    bare = Path(shutil.copytree(template_remote.bare, tmp_path / "remote.git", symlinks=True))
    scratch = Path(shutil.copytree(template_remote.scratch, tmp_path / "scratch", symlinks=True))
    config = scratch / ".git" / "config"
    config.write_text(config.read_text().replace(str(template_remote.bare), str(bare)))
    return Remote(bare, scratch)


# ---------------------------------------------------------------- workflow replay

def load_workflow(name: str) -> dict:
    return copy.deepcopy(_parsed_workflow(name))


@functools.cache
def _parsed_workflow(name: str) -> dict:
    data = yaml.safe_load((WORKFLOWS / name).read_text(encoding="utf-8"))
    data["on"] = data.pop(True, data.get("on"))  # YAML 1.1 reads the key `on` as True
    return data


@dataclass
class JobRun:
    outcomes: dict[str, str]
    outputs: dict[str, str]
    log: list[str]
    ran: bool = True  # False: the job's own `if:` skipped it


class Replayer:
    """Runs one job of a workflow against the workspace clone, the fake API and an event."""

    def __init__(self, workspace: Path, event: dict, tmp: Path, bash: bool = False,
                 needs: dict | None = None, artifacts: dict | None = None,
                 github: FakeGitHub | None = None, run_id: int = 4242) -> None:
        self.workspace, self.event, self.tmp, self.bash = workspace, event, tmp, bash
        self.run_id, self.cancelled = run_id, False
        self.needs, self.artifacts = needs or {}, artifacts or {}
        self.steps: dict[str, dict] = {}
        self.github = github  # mints each job's workflow token, holds the secrets and variables
        self.token = "no-token"
        self.workflow = ""

    def context(self, expr: str, job_failed: bool) -> object:
        expr = expr.strip()
        functions = {"always()": True, "!cancelled()": not self.cancelled,
                     "cancelled()": self.cancelled,
                     "failure()": job_failed, "success()": not job_failed}
        if expr in functions:
            return functions[expr]
        for op in (" && ", " || "):
            if op in expr:
                left, right = expr.split(op, 1)
                a, b = self.context(left, job_failed), self.context(right, job_failed)
                return (a and b) if op == " && " else (a or b)
        for op in (" == ", " != "):
            if op in expr:
                left, right = expr.split(op, 1)
                equal = self.context(left, job_failed) == self.context(right, job_failed)
                return equal if op == " == " else not equal
        if expr.startswith("'"):
            return expr.strip("'")
        if expr.startswith("!"):
            return not self.context(expr[1:], job_failed)
        return self.lookup(expr)

    def lookup(self, name: str) -> object:
        parts = name.split(".")
        if parts[0] == "steps":
            step = self.steps.get(parts[1], {"outcome": "skipped", "outputs": {}})
            return step["outputs"].get(parts[3], "") if parts[2] == "outputs" else step[parts[2]]
        if parts[0] == "needs":  # a job's result, "success" unless the test says otherwise
            needed = self.needs[parts[1]]
            return needed.get("result", "success") if parts[2] == "result" else \
                needed["outputs"].get(parts[3], "")
        if parts[0] in ("secrets", "vars"):
            store = {} if self.github is None or parts[0] == "vars" else self.github.app_secrets
            return store.get(parts[1], "")  # GitHub expands an unset one to ""
        if parts[0] == "github" and parts[1] == "event_name":
            return self.event.get("_name", "")
        values = {"github.token": self.token, "runner.temp": str(self.tmp),
                  "github.run_id": str(self.run_id),
                  "github.server_url": "https://github.com", "github.repository": REPOSITORY}
        if name in values:
            return values[name]
        if parts[0] == "inputs":
            return self.event.get("inputs", {}).get(parts[1], "")
        raise AssertionError(f"the replayer does not know {name!r}")

    def expand(self, text: str, job_failed: bool = False) -> str:
        return re.sub(r"\$\{\{(.*?)\}\}", lambda m: str(self.context(m.group(1), job_failed)),
                      str(text))

    def run_job(self, workflow: str, job: str) -> JobRun:
        spec = load_workflow(workflow)["jobs"][job]
        self.workflow = workflow
        results = [needed.get("result", "success") for needed in self.needs.values()]
        self.cancelled = "cancelled" in results
        condition = str(spec.get("if", "success()")).removeprefix("${{").removesuffix("}}")
        explicit = re.search(r"always\(\)|cancelled\(\)|failure\(\)|success\(\)", condition)
        failed = any(r in ("failure", "cancelled") for r in results)
        if not (self.context(condition, "failure" in results) and (explicit or not failed)):
            return JobRun({}, {}, [f"{job}: skipped by its if"], ran=False)
        if self.github is not None:
            self.token = self.github.workflow_token(spec.get("permissions") or {})
        env_base = {k: self.expand(v) for k, v in spec.get("env", {}).items()}
        failed, log = False, []
        for index, step in enumerate(spec["steps"]):
            step_id = step.get("id", f"step{index}")
            condition = str(step.get("if", "")).removeprefix("${{").removesuffix("}}")
            if condition:
                explicit = re.search(r"always\(\)|cancelled\(\)|failure\(\)|success\(\)", condition)
                runs = bool(self.context(condition, failed)) and (explicit or not failed)
            else:
                runs = not failed
            if not runs:
                self.steps[step_id] = {"outcome": "skipped", "outputs": {}}
                continue
            env = {**env_base, **{k: self.expand(v) for k, v in step.get("env", {}).items()}}
            ok, outputs = self.run_step(step, env, log)
            self.steps[step_id] = {"outcome": "success" if ok else "failure", "outputs": outputs}
            failed = failed or (not ok and not step.get("continue-on-error"))
        outputs = {k: self.expand(v) for k, v in spec.get("outputs", {}).items()}
        return JobRun({k: v["outcome"] for k, v in self.steps.items()}, outputs, log)

    def run_step(self, step: dict, env: dict, log: list[str]) -> tuple[bool, dict]:
        uses = step.get("uses", "")
        if uses.startswith("actions/download-artifact@"):
            dest = Path(self.expand(step["with"]["path"]))
            dest.mkdir(parents=True, exist_ok=True)
            shutil.copy(self.artifacts[step["with"]["name"]], dest)  # under its own name
        if uses.startswith("actions/attest@"):
            return self._attest(Path(self.expand(step["with"]["subject-checksums"]))), {}
        if uses or step["run"].startswith("python -m pip install"):
            return True, {}
        output_file = self.tmp / f"output-{len(self.steps)}"
        output_file.write_text("")
        env = {**env, "RUNNER_TEMP": str(self.tmp), "GITHUB_OUTPUT": str(output_file),
               "GITHUB_STEP_SUMMARY": str(self.tmp / "summary.md"),
               "GITHUB_EVENT_PATH": str(self.tmp / "event.json")}
        (self.tmp / "event.json").write_text(json.dumps(self.event))
        ok = self._bash(step["run"], env, log) if self.bash else self._inprocess(step["run"], env, log)
        outputs = dict(line.split("=", 1) for line in output_file.read_text().splitlines() if line)
        return ok, outputs

    def _attest(self, checksums: Path) -> bool:
        """GitHub's artifact attestation of each subject in a checksums file. Refused as GitHub
        refuses it: with no OIDC token to sign with (`id-token: write`), no right to store it
        (`attestations: write`), or a subject that is not a digest and a name."""
        granted = (self.github.actor(self.token) or {}).get("permissions") or {}
        if granted.get("id-token") != "write" or granted.get("attestations") != "write":
            return False
        try:
            lines = checksums.read_text(encoding="utf-8").splitlines()
        except OSError:
            return False
        subjects = [line.split("  ", 1) for line in lines]
        if not subjects or not all(len(s) == 2 and re.fullmatch(r"[0-9a-f]{64}", s[0])
                                   for s in subjects):
            return False
        self.github.attestations += [{"name": name, "sha256": digest, "workflow": self.workflow}
                                     for digest, name in subjects]
        return True

    def _bash(self, script: str, env: dict, log: list[str]) -> bool:
        path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
        result = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", script], cwd=self.workspace,
                                env={**os.environ, **env, "PATH": path}, capture_output=True,
                                text=True, timeout=300)
        log.append(result.stdout + result.stderr)
        return result.returncode == 0

    def _inprocess(self, script: str, env: dict, log: list[str]) -> bool:
        with pytest.MonkeyPatch.context() as patch:
            for key, value in env.items():
                patch.setenv(key, value)
            patch.chdir(self.workspace)
            for command in script.split(" && "):
                words = [os.path.expandvars(w) for w in shlex.split(command.replace("\\\n", " "))]
                assert words[0] == "tinyrouter", f"step runs {words[0]!r}, not tinyrouter"
                code = cli.main(words[1:])
                log.append(f"{' '.join(words)} -> {code}")
                if code != 0:
                    return False
        return True


@pytest.fixture
def replayer():
    """The `Replayer` class: replayer(workspace, event, tmp, bash=…, needs=…, artifacts=…)."""
    return Replayer
