"""Offline GitHub: a fake REST API on 127.0.0.1, a bare git remote, and a workflow replayer.

The fake API serves pull requests, comments (with their authors), labels and dispatches
from memory, and the git data a workflow reads (commits, trees, blobs, compare) from the
bare remote, where a merge really lands on main. `script` makes it answer a matching call
with an error first (a rate limit, "base branch was modified"); the `clock` fixture stands
in for the client's sleeps, so waits of a minute take none.

The replayer runs a job of a real workflow file step by step: `run:` lines call the same
`tinyrouter` commands (in-process, or through bash to prove hostile text stays data), the
`${{ }}` expressions in `env:`/`if:` are evaluated from the event, step outputs and job
outputs, and the few actions used are simulated (checkout = the clone already made).
"""

from __future__ import annotations

import base64
import json
import os
import re
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

from evaluator import cli

REPO_ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = REPO_ROOT / ".github" / "workflows"
REPOSITORY = "tinyrouter/tinyrouter"
BOT_LOGIN = "github-actions[bot]"
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
    identity: str = BOT_LOGIN  # who the workflow token is
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

    def script(self, route: str, status: int, message: str = "try again",
               headers: dict | None = None, times: int = 1) -> None:
        """Answer the next `times` calls whose "METHOD /path" fully matches `route` with an
        error (the path without /repos/owner/name)."""
        self.scripted += [(route, status, headers or {}, message)] * times

    def add_pull(self, number: int, author: str, head_sha: str, paths: list[str], **extra) -> None:
        self.pulls[number] = {"number": number, "user": {"login": author}, "state": "open",
                              "merged": False, "head": {"sha": head_sha, "ref": "branch"},
                              "base": {"ref": "main"}, "title": "submission", **extra}
        self.files[number] = [{"filename": p, "status": "added"} for p in paths]
        self.comments.setdefault(number, [])
        self.labels.setdefault(number, set())

    def comment_bodies(self, number: int) -> list[str]:
        return [c["body"] for c in self.comments.get(number, [])]

    def add_comment(self, number: int, body: str, login: str) -> None:
        """A comment someone else wrote (a stranger, a maintainer)."""
        self._comment(number, {"body": body}, login)

    def handle(self, method: str, path: str, query: dict, body: dict | None) -> tuple[int, object]:
        with self.lock:  # one call at a time, as the git remote is one repository
            return self._handle(method, path, query, body)

    def _handle(self, method: str, path: str, query: dict, body: dict | None) -> tuple[int, object]:
        self.calls.append((method, path))
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

    def routes(self):
        return (
            (r"POST /graphql", lambda **_: (200, {"data": {"viewer": {"login": self.identity}}})),
            (r"GET /git/commits/([0-9a-f]+)", lambda sha, **_: self._commit(sha)),
            (r"GET /git/trees/([0-9a-f]+)", lambda sha, **_: self._tree(sha)),
            (r"GET /git/blobs/([0-9a-f]+)", lambda sha, **_: self._blob(sha)),
            (r"GET /compare/([\w.-]+)\.\.\.([0-9a-f]+)", lambda b, h, **_: self._compare(b, h)),
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
            (r"POST /actions/workflows/([^/]+)/dispatches",
             lambda wf, body, **_: (self.dispatches.append({"workflow": wf, **body}) or 204, None)),
        )

    def _pull(self, n: int):
        if n not in self.pulls:
            return 404, {"message": "Not Found"}
        return 200, {**self.pulls[n], "labels": [{"name": x} for x in sorted(self.labels[n])]}

    def _patch_pull(self, n: int, body: dict):
        self.pulls[n]["state"] = body.get("state", self.pulls[n]["state"])
        return 200, self.pulls[n]

    def _page(self, items: list, query: dict):
        per_page, page = int(query.get("per_page", 30)), int(query.get("page", 1))
        return 200, items[(page - 1) * per_page: page * per_page]

    def _merge(self, n: int, body: dict):
        if self.pulls[n]["state"] != "open":
            return 405, {"message": "Pull Request is not mergeable"}
        if body.get("sha") != self.pulls[n]["head"]["sha"]:
            return 409, {"message": "Head branch was modified. Review and try the merge again."}
        if self.git_dir is not None:
            self._merge_into_main(n, body["sha"])
        self.merges.append((n, body["sha"]))
        self.pulls[n].update(state="closed", merged=True)
        return 200, {"merged": True}

    def _comment(self, n: int, body: dict, login: str | None = None):
        comment_id = 1000 + sum(len(c) for c in self.comments.values())
        self.comments[n].append({"id": comment_id, "body": body["body"],
                                 "user": {"login": login or self.identity}})
        return 201, {"id": comment_id}

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

    def _compare(self, base: str, head: str):
        if self._kind(head) != "commit":
            return 404, {"message": "Not Found"}
        since = self._git("merge-base", f"refs/heads/{base}", head).decode().strip()
        fields = self._git("diff", "--name-status", "-z", "--no-renames", since, head).split(b"\0")
        files = [{"status": GIT_STATUSES.get(status.decode()[:1], "modified"),
                  "filename": path.decode("utf-8", "surrogateescape")}
                 for status, path in zip(fields[0::2], fields[1::2], strict=False) if path]
        return 200, {"files": files}

    def _merge_into_main(self, n: int, sha: str) -> None:
        main = self._git("rev-parse", "refs/heads/main").decode().strip()
        tree = self._git("merge-tree", "--write-tree", main, sha).decode().split()[0]
        merged = self._git("commit-tree", tree, "-p", main, "-p", sha, "-m",
                           f"Merge pull request #{n}").decode().strip()
        self._git("update-ref", "refs/heads/main", merged, main)

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


def _handler_for(fake: FakeGitHub):
    class Handler(BaseHTTPRequestHandler):
        def _serve(self) -> None:
            url = urlparse(self.path)
            length = int(self.headers.get("content-length") or 0)
            body = json.loads(self.rfile.read(length)) if length else None
            query = {k: v[0] for k, v in parse_qs(url.query).items()}
            status, payload = fake.handle(self.command, url.path, query, body)
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
    """Stands in for the `time` module in evaluator.github: sleeps are recorded, not slept."""

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
    monkeypatch.setattr("evaluator.github.time", fake)
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


@pytest.fixture
def remote(tmp_path) -> Remote:
    bare, scratch = tmp_path / "remote.git", tmp_path / "scratch"
    git(tmp_path, "init", "--quiet", "--bare", "--initial-branch=main", str(bare))
    git(tmp_path, "init", "--quiet", "--initial-branch=main", str(scratch))
    for folder in ("submissions", "leaderboard"):
        (scratch / folder).mkdir()
        (scratch / folder / ".gitkeep").write_text("")
    git(scratch, "add", "--all")
    git(scratch, "commit", "--quiet", "-m", "base")
    git(scratch, "remote", "add", "origin", str(bare))
    git(scratch, "push", "--quiet", "origin", "main")
    return Remote(bare, scratch)


# ---------------------------------------------------------------- workflow replay

def load_workflow(name: str) -> dict:
    data = yaml.safe_load((WORKFLOWS / name).read_text(encoding="utf-8"))
    data["on"] = data.pop(True, data.get("on"))  # YAML 1.1 reads the key `on` as True
    return data


@dataclass
class JobRun:
    outcomes: dict[str, str]
    outputs: dict[str, str]
    log: list[str]


class Replayer:
    """Runs one job of a workflow against the workspace clone, the fake API and an event."""

    def __init__(self, workspace: Path, event: dict, tmp: Path, bash: bool = False,
                 needs: dict | None = None, artifacts: dict | None = None) -> None:
        self.workspace, self.event, self.tmp, self.bash = workspace, event, tmp, bash
        self.needs, self.artifacts = needs or {}, artifacts or {}
        self.steps: dict[str, dict] = {}

    def context(self, expr: str, job_failed: bool) -> object:
        expr = expr.strip()
        functions = {"always()": True, "!cancelled()": True, "cancelled()": False,
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
        if parts[0] == "needs":
            return self.needs[parts[1]]["outputs"].get(parts[3], "")
        values = {"github.token": "fake-token", "runner.temp": str(self.tmp),
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
            shutil.copy(self.artifacts[step["with"]["name"]], dest / "result.json")
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
