"""End to end, offline: fixture events replayed through the workflows' own steps.

Asserts what GitHub would see (comments, labels, merges, closes, dispatches) and what lands
on the remote (the attempts, the leaderboard commits, merged folders), including hostile pull
requests, racing jobs, crashes between steps and GitHub's rate limits.
"""

from __future__ import annotations

import base64
import hashlib
import itertools
import json
import os
import re
import shlex
import shutil
import subprocess
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest
import yaml

from evaluator.cli import main
from evaluator.errors import GitHubError
from evaluator.files import dumps_line, parse_time, write_atomic
from evaluator.pool.ledger import Ledger
from evaluator.recording import RECORD_STEPS
from evaluator.records import Attempt
from evaluator.rules import OFFICIAL, RECEIPT_FORMAT
from evaluator.store import Store
from evaluator.submission import sha256_file
from evaluator.train.data import TrainingSet
from evaluator.train.run import TrainConfig, run_training
from evaluator.types import AnsweredItem, Item, ModelAnswer

pytestmark = pytest.mark.slow  # each test replays workflow jobs or encodes

EVENTS = Path(__file__).with_name("events")
WORKFLOWS = Path(__file__).resolve().parents[2] / ".github" / "workflows"
CI_CHECKS = ("Lint and test (Python 3.11)", "Lint and test (Python 3.12)")
GATES_TRIGGERS = yaml.safe_load((WORKFLOWS / "gates.yml").read_text(encoding="utf-8"))[True][
    "pull_request_target"]["types"]  # YAML 1.1 reads the key `on` as True
STRANGER = "mallory"
RUN_ID = 4242  # the evaluate.yml run the failure path replays


class World:
    """The fake API, the bare remote and a way to replay a workflow job against them."""

    def __init__(self, fake, remote, make_submission, replayer, tmp: Path) -> None:
        self.fake, self.remote, self.tmp = fake, remote, tmp
        fake.attach(remote.bare)
        fake.set_up_as_the_guide_says()
        self.make_submission, self.replayer = make_submission, replayer
        self.counter = itertools.count()

    def files(self, login: str, generation: int = 1, seed: int = 0,
              **overrides) -> dict[str, bytes | Path]:
        folder = self.make_submission(self.tmp / f"src-{login}-{seed}-{next(self.counter)}",
                                      login, generation, seed=seed, **overrides)
        return {f"submissions/{login}/{generation}/{p.name}": p.read_bytes()
                for p in sorted(folder.iterdir())}

    def open_pr(self, number: int, author: str, files: dict, **extra) -> str:
        sha = self.remote.open_pr(number, files)
        self.fake.add_pull(number, author, sha, sorted(files), **extra)
        return sha

    def push(self, number: int, files: dict) -> str:
        """The author pushes again: a new head on the same PR."""
        sha = self.remote.push_to_pr(number, files)
        self.fake.new_head(number, sha)
        return sha

    def author_edits(self, number: int, **body) -> int:
        """The PR's author changes it through the API (close, reopen, another base)."""
        author = self.fake.pulls[number]["user"]["login"]
        self.fake.tokens[f"{author}-token"] = {"login": author, "integration": None,
                                               "permissions": {"pull_requests": "write"}}
        status, _ = self.fake.handle("PATCH", f"/repos/tinyrouter/tinyrouter/pulls/{number}", {},
                                     body, f"{author}-token")
        return status

    def submit(self, number: int, login: str, seed: int = 0) -> str:
        """A PR that passes the gates (its attempt recorded on main); its head SHA."""
        sha = self.open_pr(number, login, self.files(login, seed=seed))
        run, runner = self.gates(number, sha)
        assert passed(runner) == "true", run.log
        return sha

    def run(self, workflow: str, job: str, event: dict, bash: bool = False, **kwargs):
        run_dir = self.tmp / f"run-{next(self.counter)}"
        run_dir.mkdir()
        workspace = self.remote.clone(run_dir / "checkout")
        (run_dir / "temp").mkdir()
        runner = self.replayer(workspace, event, run_dir / "temp", bash=bash, github=self.fake,
                               **kwargs)
        return runner.run_job(workflow, job), runner

    def gates(self, number: int, sha: str, bash: bool = False, title: str | None = None,
              branch: str | None = None, action: str = "opened"):
        event = load_event("pull_request_target.opened.json")
        assert action in GATES_TRIGGERS
        event["action"] = action
        pull = event["pull_request"]
        event["number"] = pull["number"] = number
        pull["head"]["sha"] = sha
        pull["title"] = title or pull["title"]
        pull["head"]["ref"] = branch or pull["head"]["ref"]
        return self.run("gates.yml", "gates", event, bash=bash, run_id=self.fake.gates_run(sha))

    def prepare(self, number: int, sha: str = ""):
        return self.run("evaluate.yml", "prepare", dispatch_event(number, sha))

    def record(self, number: int, sha: str, record: dict, base: str | None = None,
               sealed: bytes | None = None):
        """The record job, for an evaluation that ran on main at `base` (default: now), given
        the GPU job's artifact (default: `record` sealed as that job seals it)."""
        artifact = self.tmp / f"upload-{number}-{next(self.counter)}" / "result.sealed"
        artifact.parent.mkdir()
        artifact.write_bytes(self.sealed(record, number, sha) if sealed is None else sealed)
        return self.run("evaluate.yml", "record", dispatch_event(number),
                        needs={"prepare": {"outputs": {"pr": str(number), "head_sha": sha}},
                               "evaluate": {"outputs": {"base_sha": base or
                                                        self.remote.main_sha()}}},
                        artifacts={"evaluation-result": artifact})

    def attest(self, number: int, sha: str):
        """The attest job, after the record job of PR `number` at `sha` succeeded."""
        return self.run("evaluate.yml", "attest", dispatch_event(number),
                        needs={"prepare": {"outputs": {"pr": str(number), "head_sha": sha}},
                               "record": {"outputs": {}}})

    def sealed(self, record: dict, number: int, sha: str) -> bytes:
        """The artifact the GPU job uploads: its result sealed for the record job."""
        result = self.tmp / f"clear-{next(self.counter)}.json"
        result.write_text(json.dumps(record))
        sealed = result.with_suffix(".sealed")
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("TINYROUTER_RESULT_KEY", self.fake.app_secrets["TINYROUTER_RESULT_KEY"])
            assert main(["gh", "encrypt-result", "--pr", str(number), "--head-sha", sha,
                         "--result", str(result), "--out", str(sealed)]) == 0
        return sealed.read_bytes()

    def unfinished(self, number: int, sha: str, evaluated: str = "failure",
                   prepared: str = "success"):
        """The failure path: the GPU job of run RUN_ID ended `evaluated`."""
        return self.run("evaluate.yml", "unfinished", dispatch_event(number, sha),
                        needs={"prepare": {"result": prepared,
                                           "outputs": {"pr": str(number), "head_sha": sha}},
                               "evaluate": {"result": evaluated, "outputs": {}}}, run_id=RUN_ID)

    # -------------------------------------------------------- what the remote holds

    def merge_by_hand(self, checkout: Path, message: str) -> None:
        """A maintainer's change on a checkout of main, committed and merged through a pull
        request (what lands on main is the same)."""
        git_env = {**os.environ, "GIT_AUTHOR_NAME": "m", "GIT_AUTHOR_EMAIL": "m@example.com",
                   "GIT_COMMITTER_NAME": "m", "GIT_COMMITTER_EMAIL": "m@example.com"}
        subprocess.run(["git", "-C", str(checkout), "commit", "-qam", message], check=True,
                       env=git_env)
        ruleset, self.fake.ruleset = self.fake.ruleset, None  # the pull request's merge
        try:
            subprocess.run(["git", "-C", str(checkout), "push", "-q", "origin", "HEAD:main"],
                           check=True, env={**git_env, "GITHUB_TOKEN": "maintainer-token"})
        finally:
            self.fake.ruleset = ruleset

    def show(self, path: str) -> str | None:
        """A file or folder listing of leaderboard/ on main, or None where there is none."""
        try:
            return self.remote.show(f"leaderboard/{path}")
        except subprocess.CalledProcessError:
            return None

    def board(self, path: str):
        text = self.show(path)
        if text is None:
            return None
        return [json.loads(x) for x in text.splitlines()] if path.endswith(".jsonl") else \
            json.loads(text)

    def king(self) -> str | None:
        return ((self.board("king.json") or {}).get("king") or {}).get("miner")

    def results(self, miner: str) -> list[str]:
        listing = self.show(f"results/{miner}") or ""
        return sorted(n for n in listing.splitlines() if n.endswith(".json"))

    def state(self) -> dict:
        """Everything a crash and a re-run must leave as a clean run does."""
        files = sorted((self.show("") or "").splitlines())
        return {"leaderboard": {f: self.show(f) for f in files if f.endswith((".json", ".jsonl"))},
                "results": {m: self.results(m) for m in ("alice", "bob")},
                "merges": list(self.fake.merges), "dispatches": list(self.fake.dispatches),
                "pulls": {n: p["state"] for n, p in self.fake.pulls.items()},
                "comments": {n: len(c) for n, c in self.fake.comments.items()}}


def load_event(name: str) -> dict:
    return json.loads((EVENTS / name).read_text(encoding="utf-8"))


def dispatch_event(number: int, head_sha: str = "") -> dict:
    event = load_event("workflow_dispatch.evaluate.json")
    event["inputs"] = {"pr": str(number), "head_sha": head_sha}
    return event


def passed(runner) -> str:
    """The gates step's verdict: "true", "false", or "" when the gates could not run."""
    return runner.steps.get("gates", {}).get("outputs", {}).get("passed", "")


def interleave(monkeypatch, during) -> None:
    """The first time this job pushes, `during()` (another job) runs first and pushes before it,
    as when two jobs finish at once."""
    import evaluator.github.pushes

    real, started = evaluator.github.pushes._push, []

    def push(repo, remote, branch):
        if not started:
            started.append(True)
            during()
        return real(repo, remote, branch)

    monkeypatch.setattr("evaluator.github.pushes._push", push)


@pytest.fixture
def world(fake_github, remote, make_submission, replayer, tmp_path) -> World:
    return World(fake_github, remote, make_submission, replayer, tmp_path)


# ---------------------------------------------------------------- gates.yml

def test_passing_submission_is_commented_labelled_recorded_and_sent_to_evaluation(world):
    sha = world.open_pr(7, "alice", world.files("alice"))
    run, runner = world.gates(7, sha)

    assert run.outcomes["gates"] == "success" and passed(runner) == "true", run.log
    [body] = world.fake.comment_bodies(7)
    assert body.startswith("<!-- tinyrouter:gates -->") and "Gates passed" in body
    assert world.fake.labels[7] == {"gates-passed"}
    assert world.fake.pulls[7]["state"] == "open"
    assert world.fake.dispatches == [{"workflow": "evaluate.yml", "ref": "main",
                                       "inputs": {"pr": "7", "head_sha": sha}}]
    [attempt] = world.board("attempts.jsonl")
    assert (attempt["miner"], attempt["generation"], attempt["pr"], attempt["head_sha"]) == \
        ("alice", 1, 7, sha)
    assert "submissions/alice" not in world.remote.show("submissions")  # data only, never pushed


def test_a_re_run_of_the_same_head_updates_the_one_comment_and_is_free(world):
    sha = world.submit(7, "alice")
    main_after_first = world.remote.main_sha()
    run, runner = world.gates(7, sha)

    assert passed(runner) == "true", run.log
    assert len(world.fake.comment_bodies(7)) == 1
    assert world.remote.main_sha() == main_after_first
    assert len(world.board("attempts.jsonl")) == 1


def test_a_new_head_on_the_same_pr_is_a_new_attempt_under_the_rate_limit(world):
    world.submit(7, "alice")
    newer = world.push(7, world.files("alice", seed=3))
    run, runner = world.gates(7, newer)

    assert passed(runner) == "false", run.log
    assert "next slot opens at" in world.fake.comment_bodies(7)[0]
    assert world.fake.pulls[7]["state"] == "closed"
    assert [a["head_sha"] for a in world.board("attempts.jsonl")] != [newer]


def test_failing_submission_is_labelled_and_closed_with_the_reason(world):
    sha = world.open_pr(8, "bob", world.files("alice"))  # bob submits under alice's login
    run, runner = world.gates(8, sha)

    assert run.outcomes["gates"] == "success" and passed(runner) == "false", run.log
    [body] = world.fake.comment_bodies(8)
    assert "PR author" in body and "bob" in body
    assert world.fake.labels[8] == {"gates-failed"}
    assert world.fake.pulls[8]["state"] == "closed"
    assert world.fake.dispatches == [] and world.fake.merges == []


def test_a_moved_head_stops_the_run_before_any_write(world):
    sha = world.open_pr(9, "alice", world.files("alice"))
    world.fake.pulls[9]["head"]["sha"] = "f" * 40  # pushed again after the event
    run, _ = world.gates(9, sha)

    assert run.outcomes["pr"] == "failure"
    assert world.fake.comment_bodies(9) == [] and world.fake.labels[9] == set()
    assert world.fake.pulls[9]["state"] == "open"


def test_a_strangers_marker_comment_is_never_taken_for_the_bots(world):
    sha = world.open_pr(7, "alice", world.files("alice"))
    forged = "<!-- tinyrouter:gates -->\n### ✅ Gates passed"
    world.fake.add_comment(7, forged, STRANGER)
    world.gates(7, sha)
    world.gates(7, sha)  # a re-run edits the bot's own comment, again not the stranger's

    stranger, bot = world.fake.comments[7]
    assert (stranger["user"]["login"], stranger["body"]) == (STRANGER, forged)
    assert bot["user"]["login"] == "tinyrouter-bot[bot]" and "Gates passed" in bot["body"]
    assert ("POST", "/graphql") in world.fake.calls  # the identity is asked, not assumed


# ---------------------------------------------------------------- following the advice

class Features:
    """Stands in for the encoder: fixed random features, moved a little by the SVF scales."""

    def __init__(self, n: int, hidden: int) -> None:
        self.base = np.random.default_rng(0).normal(size=(n, hidden))

    def features(self, index, scales):
        f = self.base[index] * scales[:self.base.shape[1]]
        return f / np.linalg.norm(f, axis=1, keepdims=True)


@pytest.fixture(scope="session")
def trained_run(tmp_path_factory) -> Path:
    """A miner's finished training run (tiny data, the official head), trained once."""
    tmp_path = tmp_path_factory.mktemp("miner")
    benches = ("math500", "mmlu", "livecodebench")
    rows = [AnsweredItem(Item(benches[i // 10], f"q{i}", f"question {i}", "1"),
                         {m: ModelAnswer("…", (i + j) % 3 == 0)
                          for j, m in enumerate(OFFICIAL.pool_names)}) for i in range(30)]
    data = TrainingSet(rows, np.repeat(np.arange(3), 10),
                       np.array([r.correct_vector(OFFICIAL.pool_names) for r in rows]), benches)
    ledger = tmp_path / "collected-ledger.jsonl"
    Ledger(ledger).append("qwen3.5-35b-a3b", 100, 50, 0.42, "req-1")
    config = TrainConfig.resolve(OFFICIAL, benches, generations=3, popsize=6, minibatch=12)
    run_dir = tmp_path / "experiments" / "r1"
    run_training(run_dir, config, data, Features(30, OFFICIAL.hidden_size), OFFICIAL,
                 ledger_source=ledger)
    return run_dir


@pytest.fixture
def miner_run(tmp_path, trained_run) -> Path:
    """That run, ready for `pack`, in a folder of this test's own."""
    return Path(shutil.copytree(trained_run, tmp_path / "experiments" / trained_run.name))


def _steps(body: str) -> dict:
    """The next step a failed gates comment gives, as the commands and times it names."""
    found = {"folder": re.search(r"adds\s+only `([^`]+)/`", body),
             "pack": re.search(r"`(tinyrouter pack [^`]+)`", body),
             "preflight": re.search(r"`(tinyrouter preflight [^`]+)`", body),
             "from": re.search(r"From (\S+), when your next submission slot opens", body)}
    return {k: m and m.group(1) for k, m in found.items()}


def follow(world, monkeypatch, number: int, author: str, failed: dict, run_dir: Path):
    """Do exactly what the failed PR's comment says, as its miner, and gate the new PR."""
    step = _steps(world.fake.comment_bodies(failed["pr"])[-1])
    if step["from"]:  # the miner waits until then
        monkeypatch.setattr("evaluator.commands.gates.utc_now", lambda: parse_time(step["from"]))
    checkout = world.remote.clone(world.tmp / f"miner-{next(world.counter)}")  # up-to-date main
    monkeypatch.chdir(checkout)
    if step["pack"]:
        argv = shlex.split(step["pack"].replace("experiments/YOUR-RUN", str(run_dir)))
        assert main(argv[1:]) == 0
    else:  # the same folder, fixed: only its own files
        for path, content in failed["files"].items():
            if path.startswith(step["folder"] + "/"):
                (checkout / path).parent.mkdir(parents=True, exist_ok=True)
                (checkout / path).write_bytes(content)
    assert main(shlex.split(step["preflight"])[1:]) == 0
    folder = checkout / step["folder"]
    files = {f"{step['folder']}/{p.name}": p.read_bytes() for p in sorted(folder.iterdir())}
    sha = world.open_pr(number, author, files)
    run, runner = world.gates(number, sha)
    return step, run, runner


def _stray_file(world):
    files = {**world.files("alice"), "docs/notes.md": b"hello"}
    return {"pr": 80, "author": "alice", "files": files}


def _generation_skipped(world):
    return {"pr": 80, "author": "alice", "files": world.files("alice", generation=2)}


def _second_pr_within_a_day(world):
    world.submit(79, "alice", seed=1)
    return {"pr": 80, "author": "alice", "files": world.files("alice", generation=2, seed=2)}


def _new_head_on_a_gated_pr(world):
    world.submit(80, "alice", seed=1)
    return {"pr": 80, "author": "alice", "files": world.files("alice", seed=2), "push": True}


def _zero_head(world):
    return {"pr": 80, "author": "alice",
            "files": world.files("alice", head=np.zeros(OFFICIAL.head_shape, np.float32))}


def _copied_head(world):
    world.submit(79, "alice", seed=1)
    return {"pr": 80, "author": "bob", "files": world.files("bob", seed=1)}


def _free_receipt(world):
    return {"pr": 80, "author": "alice", "files": world.files("alice", total_cost_usd=0.0)}


FAILURES = [
    # no attempt recorded (gates 0 and 1): nothing spent, the same folder when its name is right
    ("gate 0, a file outside the folder", _stray_file, 0, "same folder, now"),
    ("gate 0, a generation skipped", _generation_skipped, 0, "pack submissions/alice/1, now"),
    ("gate 1, a second PR within the window", _second_pr_within_a_day, 1, "same folder, later"),
    ("gate 1, a new head on a gated PR", _new_head_on_a_gated_pr, 1,
     "pack submissions/alice/2, later"),
    # the attempt recorded (gates 2–4): slot and generation spent, a fresh pack one on
    ("gate 2, an all-zero head", _zero_head, 2, "pack submissions/alice/2, later"),
    ("gate 3, a copied head", _copied_head, 3, "pack submissions/bob/2, later"),
    ("gate 4, a receipt with no cost", _free_receipt, 4, "pack submissions/alice/2, later"),
]


@pytest.mark.parametrize(("case", "make", "gate", "advice"), FAILURES,
                         ids=[f[0] for f in FAILURES])
def test_following_a_failed_gates_advice_passes_the_gates(world, monkeypatch, miner_run, case,
                                                          make, gate, advice):
    failed = make(world)
    if failed.get("push"):
        sha = world.push(failed["pr"], failed["files"])
    else:
        sha = world.open_pr(failed["pr"], failed["author"], failed["files"])
    run, runner = world.gates(failed["pr"], sha)
    assert passed(runner) == "false", run.log
    body = world.fake.comment_bodies(failed["pr"])[-1]
    assert f"Gate {gate} " in body and world.fake.pulls[failed["pr"]]["state"] == "closed"
    assert ("No attempt was recorded" in body) == (gate < 2)

    step, run, runner = follow(world, monkeypatch, 90, failed["author"], failed, miner_run)
    how = f"pack {step['folder']}" if step["pack"] else "same folder"
    assert f"{how}, {'later' if step['from'] else 'now'}" == advice
    assert passed(runner) == "true", run.log
    assert "Gates passed" in world.fake.comment_bodies(90)[0]


def test_a_gates_comment_shows_advisories_apart_and_they_never_block(world):
    head = np.random.default_rng(3).normal(0, 0.1, OFFICIAL.head_shape).astype(np.float32)
    head[OFFICIAL.n_models:] = head[OFFICIAL.n_models]  # the role rows cannot change a turn
    sha = world.open_pr(81, "alice", world.files("alice", head=head))
    run, runner = world.gates(81, sha)

    assert passed(runner) == "true", run.log
    [body] = world.fake.comment_bodies(81)
    verdict, advisories = body.split("#### Advisories (these never block)")
    assert "Gates passed" in verdict and "roles\\-fixed" in advisories
    assert world.fake.labels[81] == {"gates-passed"} and len(world.fake.dispatches) == 1


def _receipt_as(files: dict, **changes) -> dict:
    """The folder with its receipt edited."""
    path = next(p for p in files if p.endswith("/receipt.json"))
    receipt = json.loads(files[path]) | changes
    return {**files, path: json.dumps(receipt, indent=2).encode()}


def test_a_receipt_of_an_older_format_is_refused_before_the_slot_is_spent(world):
    files = _receipt_as(world.files("alice"), format=RECEIPT_FORMAT - 1)
    sha = world.open_pr(7, "alice", files)
    run, runner = world.gates(7, sha)

    assert passed(runner) == "false", run.log
    body = world.fake.comment_bodies(7)[0]
    assert "Gate 0 " in body and "with this version" in body, body
    assert not world.board("attempts.jsonl")  # no slot spent


def test_a_copy_of_a_head_stopped_at_gate_4_is_caught_and_never_locks_its_author_out(
        world, monkeypatch):
    first = world.open_pr(7, "alice", world.files("alice", seed=1, total_cost_usd=0.0))
    run, runner = world.gates(7, first)
    assert passed(runner) == "false" and "Gate 4 " in world.fake.comment_bodies(7)[0], run.log

    copy = world.open_pr(8, "bob", world.files("bob", seed=1))  # her weights, a valid receipt
    run, runner = world.gates(8, copy)
    assert passed(runner) == "false", run.log
    assert "Gate 3 (duplicate) failed" in world.fake.comment_bodies(8)[0]

    later = parse_time(world.board("attempts.jsonl")[0]["at"]) + timedelta(hours=25)
    monkeypatch.setattr("evaluator.commands.gates.utc_now", lambda: later)
    fixed = world.open_pr(9, "alice", world.files("alice", generation=2, seed=1))
    run, runner = world.gates(9, fixed)
    assert passed(runner) == "true", run.log


def test_the_evaluation_copies_in_the_earlier_attempts_it_compares_routing_with(world):
    world.submit(7, "alice", seed=1)
    world.submit(8, "carol", seed=3)
    bob = world.submit(9, "bob", seed=2)
    attempts = world.board("attempts.jsonl")
    checkout, cache = world.remote.clone(world.tmp / "evaluator"), world.tmp / "heads"
    assert main(["gh", "fetch-earlier", "--repo", str(checkout), "--pr", "8", "--head-sha",
                 attempts[1]["head_sha"], "--submission", "submissions/carol/1", "--out",
                 str(cache)]) == 0
    assert sorted(p.name for p in cache.iterdir()) == [f"{attempts[0]['weights_sha256']}"
                                                       ".safetensors"]  # only earlier
    assert main(["gh", "fetch-earlier", "--repo", str(checkout), "--pr", "9", "--head-sha", bob,
                 "--submission", "submissions/bob/1", "--out", str(cache)]) == 0
    assert sorted(p.name for p in cache.iterdir()) == sorted(
        f"{a['weights_sha256']}.safetensors" for a in attempts[:2])
    assert sha256_file(cache / f"{attempts[0]['weights_sha256']}.safetensors") == \
        attempts[0]["weights_sha256"]


def test_an_evaluation_fetches_only_heads_new_since_the_last_and_skips_a_lost_one(world, capsys):
    """A season of 10,000 earlier attempts, their heads kept in the runner's head cache by an
    earlier evaluation but for two new ones and one whose commit GitHub no longer has: the
    evaluation fetches the two, in one call each, lists the lost one as not compared, and
    goes on."""
    world.submit(7, "alice", seed=1)
    bob = world.submit(9, "bob", seed=2)
    checkout, cache = world.remote.clone(world.tmp / "evaluator"), world.tmp / "heads"
    log = checkout / "leaderboard" / "attempts.jsonl"
    lines = log.read_text().splitlines(keepends=True)
    season = []
    for i in range(10_000):
        weights = f"an earlier head {i}".encode()
        digest = hashlib.sha256(weights).hexdigest()
        season.append(dumps_line(Attempt(
            miner=f"m{i}", generation=1, pr=1000 + i, head_sha=f"{i:040x}",
            at="2026-11-01T00:00:00Z", weights_sha256=digest, gates_passed=True).to_dict()))
        if i != 4242:  # its commit is gone: never fetched, not to be had
            write_atomic(cache / f"{digest}.safetensors", weights)
    log.write_text("".join(line + "\n" for line in season) + "".join(lines))
    calls = len(world.fake.calls)
    assert main(["gh", "fetch-earlier", "--repo", str(checkout), "--pr", "9", "--head-sha", bob,
                 "--submission", "submissions/bob/1", "--out", str(cache)]) == 0
    made = world.fake.calls[calls:]
    assert len(made) <= 50 and len(made) == 2, made  # alice's head, and the lost one's try
    out = capsys.readouterr().out
    assert "not compared: the attempt of PR #5242 (m4242): GitHub answered 404" in out
    assert "10001 earlier head(s) to compare: 1 fetched, 9999 already kept, 1 not to be had" in out
    calls = len(world.fake.calls)
    assert main(["gh", "fetch-earlier", "--repo", str(checkout), "--pr", "9", "--head-sha", bob,
                 "--submission", "submissions/bob/1", "--out", str(cache)]) == 0
    assert len(world.fake.calls) - calls == 1  # the next evaluation: only the lost one is asked


# ---------------------------------------------------------------- racing jobs

def test_racing_prs_of_one_miner_get_one_slot(world, monkeypatch):
    first = world.open_pr(7, "alice", world.files("alice", seed=1))
    second = world.open_pr(8, "alice", world.files("alice", seed=2))
    interleave(monkeypatch, lambda: world.gates(8, second))
    run, runner = world.gates(7, first)  # PR 8's run pushed its attempt while this one ran

    assert passed(runner) == "false", run.log
    assert [a["pr"] for a in world.board("attempts.jsonl")] == [8]
    assert world.fake.labels == {7: {"gates-failed"}, 8: {"gates-passed"}}
    assert world.fake.pulls[7]["state"] == "closed"
    assert [d["inputs"]["pr"] for d in world.fake.dispatches] == ["8"]


def test_racing_prs_of_two_miners_both_keep_their_attempts(world, monkeypatch):
    first = world.open_pr(7, "alice", world.files("alice", seed=1))
    second = world.open_pr(8, "bob", world.files("bob", seed=2))
    interleave(monkeypatch, lambda: world.gates(8, second))
    run, runner = world.gates(7, first)

    assert passed(runner) == "true", run.log
    assert sorted(a["pr"] for a in world.board("attempts.jsonl")) == [7, 8]  # no line lost


@pytest.mark.parametrize("first", ["original", "copy"])
def test_the_original_wins_whichever_gates_job_runs_first(world, monkeypatch, clock, capsys,
                                                          first):
    """A copy opened seconds after its original, the same weights: GitHub showed the original
    first, so it is the original, whichever gates job starts or pushes first. A copy whose job
    runs first is held, re-reading main, until the original's gates have run."""
    original = world.open_pr(7, "alice", world.files("alice", seed=1))
    copied = world.open_pr(8, "bob", world.files("bob", seed=1))  # the same weights
    assert world.fake.shown[original] < world.fake.shown[copied]
    if first == "original":
        run, runner = world.gates(7, original)
        assert passed(runner) == "true", run.log
        run, runner = world.gates(8, copied)
    else:
        ran = []
        monkeypatch.setattr("evaluator.precedence.pause", lambda *a: ran or ran.append(
            world.gates(7, original)))
        run, runner = world.gates(8, copied)  # held until the original's gates have run
        assert "held: the head routes like that of PR #7 (alice)" in capsys.readouterr().out

    assert passed(runner) == "false", run.log
    assert "Gate 3 (duplicate) failed" in world.fake.comment_bodies(8)[-1]
    assert "(alice," in world.fake.comment_bodies(8)[-1]
    assert world.fake.labels[7] == {"gates-passed"} and world.fake.pulls[7]["state"] == "open"
    attempts = {a["pr"]: a for a in world.board("attempts.jsonl")}
    assert attempts[7]["gates"]["passed"] and not attempts[8]["gates"]["passed"]
    assert attempts[7]["shown_at"] == world.fake.shown[original]


def test_a_head_held_past_its_budget_fails_its_job_and_records_nothing(world, clock):
    """The original's gates never ran (their job failed): the copy's job stops, recording
    nothing, and says to run it again once they have."""
    world.open_pr(7, "alice", world.files("alice", seed=1))
    copied = world.open_pr(8, "bob", world.files("bob", seed=1))
    run, runner = world.gates(8, copied)
    assert run.outcomes["gates"] == "failure" and passed(runner) == ""
    assert world.board("attempts.jsonl") is None and world.fake.comment_bodies(8) == []
    assert sum(clock.sleeps) >= 900


# ---------------------------------------------------------------- hostile pull requests

@pytest.mark.slow
def test_hostile_title_and_branch_stay_data_through_bash(world, tmp_path):
    canary = tmp_path / "pwned"
    hostile = f"$(touch {canary}) `touch {canary}`"
    sha = world.open_pr(10, "alice", world.files("alice"), title=hostile)
    world.fake.pulls[10]["head"]["ref"] = hostile
    run, runner = world.gates(10, sha, bash=True, title=hostile, branch=hostile)

    assert passed(runner) == "true", run.log
    assert not canary.exists()
    assert world.fake.labels[10] == {"gates-passed"}


def test_hostile_login_from_the_api_is_refused(world):
    sha = world.open_pr(11, "alice", world.files("alice"))
    world.fake.pulls[11]["user"]["login"] = "x$(id)"
    run, _ = world.gates(11, sha)

    assert run.outcomes["pr"] == "failure"
    assert run.outcomes["gates"] == "skipped"
    assert world.fake.comment_bodies(11) == []


def test_fork_submission_with_a_symlink_is_refused_and_never_followed(world, tmp_path):
    files = world.files("mallory")
    secret = tmp_path / "secret.txt"
    secret.write_text("runner secret")
    files["submissions/mallory/1/weights.safetensors"] = secret  # a link, not the weights
    sha = world.open_pr(12, "mallory", files)
    run, runner = world.gates(12, sha)

    copied = runner.workspace / "submissions/mallory/1/weights.safetensors"
    assert copied.is_symlink() and Path(copied.readlink()) == Path("/dev/null")
    assert passed(runner) == "false", run.log
    [body] = world.fake.comment_bodies(12)
    assert "regular file" in body and "runner secret" not in body
    assert world.fake.pulls[12]["state"] == "closed"
    assert world.fake.labels[12] == {"gates-failed"}


def test_paths_outside_the_folder_are_reported_and_never_read(world):
    files = world.files("alice")
    files[".github/workflows/evil.yml"] = b"on: push\n"
    files["submissions/$(id)/1/x"] = b"x"
    files["data/huge.bin"] = os.urandom(2 << 20)  # stands in for a 1 GB blob elsewhere
    sha = world.open_pr(13, "alice", files)
    run, runner = world.gates(13, sha)

    assert passed(runner) == "false", run.log
    assert not (runner.workspace / ".github/workflows/evil.yml").exists()
    assert not (runner.workspace / "submissions/$(id)").exists()
    assert "outside" in world.fake.comment_bodies(13)[0]
    blobs = [path for method, path in world.fake.calls if "/git/blobs/" in path]
    assert len(blobs) == 3  # the folder's three files, nothing else in the PR


ODD_NAMES = [
    # the name a PR adds → what the gates comment says; nothing crashes, the PR is closed
    ("non-UTF-8 file name", "submissions/alice/1/" + os.fsdecode(b"\xff\xfe.md"),
     "is not valid UTF-8"),
    ("folder named 1 and a newline", "submissions/alice/1\n/README.md", "U+000A"),
    ("file name with an escape sequence", "submissions/alice/1/README\x1b[2J.md", "U+001B"),
    ("look-alike file name", "submissions/alice/1/RE\u0410DME.md", "not ASCII"),
    ("workflow command in a file name", "submissions/alice/1/x\n::add-mask::y", "U+000A"),
]


@pytest.mark.parametrize(("case", "path", "reason"), ODD_NAMES, ids=[r[0] for r in ODD_NAMES])
def test_odd_names_fail_gate_0_with_a_reason(world, case, path, reason):
    files = {**world.files("alice"), path: b"x"}
    sha = world.open_pr(14, "alice", files)
    run, runner = world.gates(14, sha)

    assert run.outcomes["changes"] == run.outcomes["fetch"] == "success", run.log  # no crash
    assert passed(runner) == "false", run.log
    [body] = world.fake.comment_bodies(14)
    assert "Gate 0 (scope) failed" in body and reason in body.replace("\\", "")  # unescaped
    assert world.fake.labels[14] == {"gates-failed"}
    assert world.fake.pulls[14]["state"] == "closed"
    assert world.board("attempts.jsonl") is None  # a scope failure takes no slot


def test_workflow_commands_in_a_receipt_stay_log_text(world, capsys):
    files = world.files("alice")
    receipt = "submissions/alice/1/receipt.json"
    data = json.loads(files[receipt])
    data["benchmarks"] = ["mmlu", "x\n::add-mask::hunter2", "##[error]forged", "::notice::y"]
    files[receipt] = json.dumps(data).encode()
    sha = world.open_pr(15, "alice", files)
    capsys.readouterr()
    run, runner = world.gates(15, sha)

    assert passed(runner) == "false", run.log
    out = capsys.readouterr()
    printed = (out.out + out.err).splitlines()
    assert "::error title=Gate 4 (receipt)::" in out.out
    for line in printed:  # the runner trims leading space, then reads `::name…` or `##[name…`
        assert not line.lstrip().startswith("##["), line
        if line.lstrip().startswith("::"):  # only ours: a stop, its resume token, the error,
            # and the mask of the App token the fake minted for this job
            name = re.match(r"::([^ :]*)", line.lstrip()).group(1)
            if name == "add-mask":
                assert line.removeprefix("::add-mask::") in world.fake.tokens, line
                continue
            assert name in ("stop-commands", "error") or re.fullmatch(r"[0-9a-f]{32}", name), line


# ---------------------------------------------------------------- GitHub's rate limits

def test_a_secondary_rate_limit_waits_a_minute_then_doubles(world, clock):
    sha = world.open_pr(7, "alice", world.files("alice"))
    world.fake.script(r"POST /issues/\d+/comments", 403, "You have exceeded a secondary rate "
                      "limit. Please wait a few minutes before you try again.", times=2)
    run, _ = world.gates(7, sha)

    assert run.outcomes["comment"] == "success", run.log
    assert len(world.fake.comment_bodies(7)) == 1
    assert [s for s in clock.sleeps if s >= 60] == [60.0, 120.0]


def test_a_primary_rate_limit_waits_until_its_reset(world, clock):
    sha = world.open_pr(7, "alice", world.files("alice"))
    reset = int(clock.now) + 90
    world.fake.script(r"GET /pulls/7", 403, "API rate limit exceeded",
                      {"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(reset)})
    run, runner = world.gates(7, sha)

    assert passed(runner) == "true", run.log
    assert clock.sleeps[0] == pytest.approx(91, abs=1)


def test_a_rate_limit_beyond_the_budget_fails_the_step_clearly(world, clock):
    sha = world.open_pr(7, "alice", world.files("alice"))
    world.fake.script(r"GET /pulls/7", 429, "slow down", {"retry-after": "3600"})
    run, _ = world.gates(7, sha)

    assert run.outcomes["pr"] == "failure" and clock.sleeps == []
    assert world.fake.comment_bodies(7) == []


def test_a_crash_after_the_attempt_is_pushed_is_finished_by_a_re_run(world):
    sha = world.open_pr(7, "alice", world.files("alice"))
    world.fake.script(r"GET /issues/7/comments", 500, "boom", times=5)  # the comment step dies
    run, _ = world.gates(7, sha)
    assert run.outcomes["comment"] == "failure" and world.fake.dispatches == []

    run, runner = world.gates(7, sha)
    assert passed(runner) == "true", run.log
    assert len(world.board("attempts.jsonl")) == 1
    assert len(world.fake.comment_bodies(7)) == 1 and len(world.fake.dispatches) == 1


# ---------------------------------------------------------------- evaluate.yml: prepare

def components(score: float) -> dict:
    return {"cached_acc": 0.8, "audit_acc": 0.78, "live_acc": 0.7, "avg_turns": 2.0,
            "efficiency": 0.525, "novelty": 0.5, "overfit_penalty": 1.0, "score": score}


def crown(miner: str, pr: int, sha: str, composite: float = 0.6,
          at: str = "2026-11-20T12:00:00Z") -> dict:
    """A crown scored when no king reigned."""
    return {"format": 1, "miner": miner, "generation": 1, "pr": pr, "head_sha": sha,
            "evaluated_at": at, "outcome": "king", "benchmark_manifest": "f" * 64,
            "partition_commitment": "e" * 64, "composite": composite, "king_composite": None,
            "delta": None, "ci95": None, "reason": None,
            "per_benchmark": {b: components(composite) for b in OFFICIAL.benchmarks},
            "live_cost_usd": 0.41, "router_card": None, "crown_test": None, "against": None,
            "isolation": None, "not_compared": None}


def loss(miner: str, pr: int, sha: str, at: str = "2026-11-20T12:00:00Z") -> dict:
    return {"format": 1, "miner": miner, "generation": 1, "pr": pr, "head_sha": sha,
            "evaluated_at": at, "outcome": "lost", "benchmark_manifest": "f" * 64,
            "partition_commitment": "e" * 64, "composite": 0.5, "delta": -0.1,
            "ci95": None, "crown_test": {"stage": 2, "live_items": 60, "live_sessions": 360},
            "against": None, "isolation": None, "not_compared": None}


def test_prepare_pins_a_head_whose_gates_pass_is_recorded(world):
    sha = world.submit(20, "alice")
    run, _ = world.prepare(20, sha)

    assert run.outputs == {"pr": "20", "author": "alice", "head_sha": sha,
                           "submission": "submissions/alice/1"}


def test_prepare_refuses_a_head_the_gates_never_passed_whatever_its_label_says(world):
    world.submit(21, "alice")
    newer = world.push(21, world.files("alice", seed=4))  # pushed after the gates ran
    assert world.fake.labels[21] == {"gates-passed"}  # the label survives the push
    run, _ = world.prepare(21)

    assert run.outcomes["pr"] == "failure" and run.outputs["head_sha"] == ""
    assert newer not in json.dumps(world.board("attempts.jsonl"))


def test_prepare_refuses_a_head_already_decided(world):
    sha = world.submit(22, "alice")
    world.record(22, sha, crown("alice", 22, sha))
    run, _ = world.prepare(22, sha)

    assert run.outcomes["pr"] == "failure"


# ---------------------------------------------------------------- evaluate.yml: record

def test_new_king_is_merged_at_the_head_then_recorded_and_the_site_rebuilt(world):
    sha = world.submit(30, "alice")
    run, runner = world.record(30, sha, crown("alice", 30, sha))

    assert all(v == "success" for v in run.outcomes.values()), run.log
    assert world.fake.merges == [(30, sha)]
    assert "weights.safetensors" in world.remote.show("submissions/alice/1")  # on main
    king = world.board("king.json")["king"]
    assert (king["miner"], king["pr"], king["head_sha"]) == ("alice", 30, sha)
    assert world.board("results/alice/1.json")["outcome"] == "king"
    _, body = world.fake.comment_bodies(30)  # the gates comment, then the evaluation
    assert body.startswith("<!-- tinyrouter:evaluation -->") and "new king" in body
    assert world.fake.checks[sha] == dict.fromkeys(CI_CHECKS, "action_required")  # no wait
    assert world.fake.triggered(WORKFLOWS).count("pages.yml") == 2  # the attempt, the crown
    assert "alice" in (runner.tmp / "summary.md").read_text()


def test_loss_is_recorded_and_the_pr_closed_without_merge(world):
    king_sha = world.submit(30, "alice", seed=1)
    world.record(30, king_sha, crown("alice", 30, king_sha))
    lost_sha = world.submit(31, "bob", seed=2)
    run, _ = world.record(31, lost_sha, loss("bob", 31, lost_sha))

    assert all(v == "success" for v in run.outcomes.values()), run.log
    assert world.board("results/bob/1.json")["outcome"] == "lost"
    assert world.king() == "alice"
    assert world.fake.merges == [(30, king_sha)]
    assert world.fake.pulls[31]["state"] == "closed"
    assert "per_benchmark" not in world.fake.comment_bodies(31)[-1]


def test_the_recorded_result_and_its_leaderboard_commit_are_attested_as_anyone_checks_them(
        world):
    king_sha = world.submit(30, "alice", seed=1)
    world.record(30, king_sha, crown("alice", 30, king_sha))
    lost_sha = world.submit(31, "bob", seed=2)
    world.record(31, lost_sha, loss("bob", 31, lost_sha))
    run, _ = world.attest(31, lost_sha)

    assert all(v == "success" for v in run.outcomes.values()), run.log
    # what a visitor checks on a clone: the file's digest, and the listing of leaderboard/ at
    # the commit that recorded it (the Maintaining guide's commands)
    clone = world.remote.clone(world.tmp / "visitor")
    path = "leaderboard/results/bob/1.json"

    def git_out(*args: str) -> bytes:
        return subprocess.run(["git", *args], cwd=clone, check=True, capture_output=True).stdout

    commit = git_out("log", "-1", "--format=%H", "--", path).decode().strip()
    digest = hashlib.sha256((clone / path).read_bytes()).hexdigest()
    listing = hashlib.sha256(git_out("ls-tree", "-r", commit, "leaderboard")).hexdigest()
    assert world.fake.attestations == [
        {"name": path, "sha256": digest, "workflow": "evaluate.yml"},
        {"name": f"leaderboard@{commit}", "sha256": listing, "workflow": "evaluate.yml"}]
    assert f"{digest}  results/bob/1.json" in (clone / "leaderboard/results.sha256").read_text()
    assert main(["leaderboard", "validate", "--repo", str(clone)]) == 0


def test_github_refuses_an_attestation_without_its_two_permissions(world, replayer, tmp_path):
    checksums = tmp_path / "subjects.sha256"
    checksums.write_text(f"{'ab' * 32}  leaderboard/results/bob/1.json\n")
    step = {"uses": "actions/attest@" + "0" * 40, "with": {"subject-checksums": str(checksums)}}
    for granted, signed in (({"contents": "read", "id-token": "write"}, False),
                            ({"contents": "read", "attestations": "write"}, False),
                            ({"id-token": "write", "attestations": "write"}, True)):
        runner = replayer(tmp_path, {}, tmp_path, github=world.fake)
        runner.token = world.fake.workflow_token(granted)
        assert runner.run_step(step, {}, [])[0] is signed
    assert len(world.fake.attestations) == 1


AUTHOR_ACTIONS = {
    "a new head": lambda world, n: world.push(n, world.files("alice", seed=5)),
    "a close": lambda world, n: world.author_edits(n, state="closed"),
    "another base": lambda world, n: (world.fake._git("branch", "other", "main"),
                                      world.author_edits(n, base="other")),
}


@pytest.mark.parametrize("outcome", ["king", "lost"])
@pytest.mark.parametrize("action", sorted(AUTHOR_ACTIONS))
def test_an_author_who_changes_the_pr_after_approval_withdraws_it(world, action, outcome):
    """Neither merged (into any branch) nor crowned nor refunded, and no score published:
    not the breakdown a king's comment shows, not a loser's composite."""
    sha = world.submit(32, "alice")
    AUTHOR_ACTIONS[action](world, 32)  # while the GPU ran
    record = crown("alice", 32, sha) if outcome == "king" else loss("alice", 32, sha)
    run, _ = world.record(32, sha, record)

    assert all(v == "success" for v in run.outcomes.values()), run.log
    assert world.fake.merges == [] and world.king() is None
    [withdrawn] = world.results("alice")
    assert withdrawn.startswith("1.withdrawn.")
    public = world.board(f"results/alice/{withdrawn}")
    assert public["composite"] is None and "per_benchmark" not in public
    assert "after its evaluation was approved" in public["reason"]
    body = world.fake.comment_bodies(32)[-1]
    assert "withdrawn" in body and "0.6" not in body and "0.5" not in body
    assert Store(world.remote.clone(world.tmp / "board")).refunded_heads() == frozenset()
    prepared, _ = world.prepare(32, sha)
    assert prepared.outcomes["pr"] == "failure"  # and it is never evaluated again


def test_base_moved_during_merge_is_retried_with_backoff(world, clock):
    sha = world.submit(33, "alice")
    world.fake.script(r"PUT /pulls/33/merge", 405,
                      "Base branch was modified. Review and try the merge again.", times=2)
    world.fake.script(r"PUT /pulls/33/merge", 409, "Base branch was modified.")
    run, _ = world.record(33, sha, crown("alice", 33, sha))

    assert all(v == "success" for v in run.outcomes.values()), run.log
    assert world.fake.merges == [(33, sha)] and world.king() == "alice"
    assert clock.sleeps == [2.0, 4.0, 8.0]


def test_a_merge_refused_for_good_is_recorded_void_and_nothing_crowned(world, clock):
    sha = world.submit(34, "alice")
    world.fake.script(r"PUT /pulls/34/merge", 405, "Base branch was modified.", times=500)
    run, _ = world.record(34, sha, crown("alice", 34, sha))

    assert all(v == "success" for v in run.outcomes.values()), run.log
    assert sum(clock.sleeps) <= 300  # a bounded time
    assert world.fake.merges == [] and world.king() is None
    [void] = world.results("alice")
    assert "merge was refused" in world.board(f"results/alice/{void}")["reason"]
    assert Store(world.remote.clone(world.tmp / "board")).refunded_heads() == {sha}


def test_merge_command_is_guarded_by_the_evaluated_sha(world):
    sha = world.submit(35, "alice")
    world.push(35, world.files("alice", seed=6))
    assert main(["gh", "merge", "--pr", "35", "--sha", sha]) == 1
    assert world.fake.merges == [] and world.fake.pulls[35]["state"] == "open"


def test_a_result_scored_against_a_replaced_king_is_stale_and_evaluated_again(world):
    base = world.remote.main_sha()  # both evaluations start here: no king yet
    alice = world.submit(40, "alice", seed=1)
    bob = world.submit(41, "bob", seed=2)
    world.record(40, alice, crown("alice", 40, alice), base=base)
    attempts = world.board("attempts.jsonl")
    run, _ = world.record(41, bob, crown("bob", 41, bob), base=base)

    assert all(v == "success" for v in run.outcomes.values()), run.log
    [stale] = world.results("bob")
    assert stale.startswith("1.stale.") and world.king() == "alice"
    assert "alice generation 1 was crowned while it ran" in \
        world.board(f"results/bob/{stale}")["reason"]
    assert world.fake.pulls[41]["state"] == "open"
    assert {"workflow": "evaluate.yml", "ref": "main",
            "inputs": {"pr": "41", "head_sha": bob}} in world.fake.dispatches
    assert world.board("attempts.jsonl") == attempts  # the slot is not charged again
    prepared, _ = world.prepare(41, bob)
    assert prepared.outputs["head_sha"] == bob  # the dispatched re-run may start


# ---------------------------------------------------------------- crashes and scale-out

def crash_after(monkeypatch, name: str) -> None:
    """The record job dies right after its step `name` (a runner lost, a timeout)."""
    import evaluator.recording as recording

    def dead(job):
        raise GitHubError("the runner went away")

    steps = list(recording.RECORD_STEPS)
    index = [n for n, _ in steps].index(name)
    steps.insert(index + 1, ("crash", dead))
    monkeypatch.setattr(recording, "RECORD_STEPS", tuple(steps))


def _challenge(world, outcome):
    """alice and bob gated at once; alice's result recorded or not; bob's result to record."""
    base = world.remote.main_sha()
    king = world.submit(50, "alice", seed=1)
    challenger = world.submit(51, "bob", seed=2)
    if outcome == "king":  # bob is crowned, no king reigning
        return challenger, crown("bob", 51, challenger), base
    world.record(50, king, crown("alice", 50, king), base=base)
    if outcome == "lost":  # bob scored against alice, who reigns
        return challenger, loss("bob", 51, challenger), world.remote.main_sha()
    return challenger, crown("bob", 51, challenger), base  # bob crowned against no king: stale


CRASH_POINTS = [name for name, _ in RECORD_STEPS][:-1]  # after the last one, nothing is left
EXPECTED = {  # outcome → (the king, bob's result file, bob's PR, re-runs of bob dispatched)
    "king": ("bob", "1.json", "closed", 0),
    "lost": ("alice", "1.json", "closed", 0),
    "stale": ("alice", "1.stale.", "open", 1),
}


@pytest.mark.parametrize("outcome", sorted(EXPECTED))
@pytest.mark.parametrize("step", CRASH_POINTS)
def test_a_crash_between_record_steps_then_a_re_run_ends_consistent(world, monkeypatch,
                                                                  outcome, step):
    sha, record, base = _challenge(world, outcome)
    with monkeypatch.context() as patch:
        crash_after(patch, step)
        crashed, _ = world.record(51, sha, record, base=base)
    assert crashed.outcomes["record"] == "failure"
    rerun, _ = world.record(51, sha, record, base=base)
    assert all(v == "success" for v in rerun.outcomes.values()), rerun.log
    after = world.state()
    again, _ = world.record(51, sha, record, base=base)  # and once more: nothing changes
    assert all(v == "success" for v in again.outcomes.values()), again.log
    assert {k: v for k, v in world.state().items() if k != "dispatches"} == \
        {k: v for k, v in after.items() if k != "dispatches"}

    king, result, state, reruns = EXPECTED[outcome]
    assert world.king() == king
    assert [r[:len(result)] for r in world.results("bob")] == [result]
    assert [n for n, _ in world.fake.merges] == ([51] if outcome == "king" else [50])
    assert world.fake.pulls[51]["state"] == state
    assert len(world.fake.comment_bodies(51)) == 2  # the gates' and the evaluation's
    dispatched = [d for d in world.fake.dispatches if d["workflow"] == "evaluate.yml"
                  and d["inputs"]["pr"] == "51"]
    assert len(dispatched) - 1 >= reruns  # after the gates' own dispatch, at least once


def test_two_evaluations_whose_record_jobs_interleave_leave_one_king(world, monkeypatch):
    """Two GPU runners finish at once: both crowned against no king. Exactly one king results;
    the other is recorded stale, evaluated again against it, and no file is lost."""
    base = world.remote.main_sha()
    alice = world.submit(60, "alice", seed=1)
    bob = world.submit(61, "bob", seed=2)
    with monkeypatch.context() as patch:
        interleave(patch, lambda: world.record(61, bob, crown("bob", 61, bob), base=base))
        run, _ = world.record(60, alice, crown("alice", 60, alice), base=base)
    assert all(v == "success" for v in run.outcomes.values()), run.log

    assert world.king() == "bob"
    assert [k["miner"] for k in world.board("history.json")["kings"]] == ["bob"]
    [stale] = world.results("alice")
    assert stale.startswith("1.stale.")
    assert {"workflow": "evaluate.yml", "ref": "main",
            "inputs": {"pr": "60", "head_sha": alice}} in world.fake.dispatches
    # alice merged first, then went stale: her re-run may start, and is scored against bob
    prepared, _ = world.prepare(60, alice)
    assert prepared.outputs["head_sha"] == alice
    again = loss("alice", 60, alice, at="2026-11-22T00:00:00Z")
    run, _ = world.record(60, alice, again)
    assert all(v == "success" for v in run.outcomes.values()), run.log
    assert world.king() == "bob"
    assert world.results("alice") == ["1.json", stale]
    assert world.results("bob") == ["1.json"]
    assert sorted(a["pr"] for a in world.board("attempts.jsonl")) == [60, 61]


# ---------------------------------------------------------------- the queue

def test_an_approved_evaluation_is_announced_on_the_queue(world):
    sha = world.submit(70, "alice")
    run, _ = world.run("evaluate.yml", "announce", dispatch_event(70, sha),
                            needs={"prepare": {"outputs": {"pr": "70", "head_sha": sha,
                                                           "submission": "submissions/alice/1"}}})
    assert all(v == "success" for v in run.outcomes.values()), run.log
    [event] = world.board("queue.jsonl")
    assert {k: event[k] for k in ("event", "miner", "generation", "pr", "head_sha")} == {
        "event": "evaluating", "miner": "alice", "generation": 1, "pr": 70, "head_sha": sha}
    clone = world.remote.clone(world.tmp / "reader")
    assert Store(clone).queue_events() == [event]


# ---------------------------------------------------------------- the token that can do the job

def test_the_guides_ruleset_takes_the_app_and_github_refuses_the_actions_integration(world):
    status, answer = world.fake.set_up_as_the_guide_says(15368)  # "GitHub Actions"
    assert status == 422 and "Actor GitHub Actions integration must be part of the ruleset " \
        "source or owner organization" in answer["errors"][0]
    status, _ = world.fake.set_up_as_the_guide_says()  # the App, as the guide says
    assert status == 201


def test_the_workflow_token_can_neither_push_to_main_nor_merge_a_forks_king(world, clock):
    """What the workflows did before the App: every write to main is refused by the ruleset."""
    import evaluator.github as gh

    sha = world.submit(36, "alice")
    token = world.fake.workflow_token({"contents": "write", "pull-requests": "write"})
    checkout = world.remote.clone(world.tmp / "with-workflow-token")
    (checkout / "leaderboard" / "note.txt").write_text("x")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("GITHUB_TOKEN", token)
        with pytest.raises(GitHubError, match="GH013: Repository rule violations"):
            gh.publish(checkout, ["leaderboard"], "note", lambda: (checkout / "leaderboard" /
                                                                   "note.txt").write_text("x"))
        client = gh.GitHub.from_env()
        with pytest.raises(gh.MergeRefused, match="Required status check"):
            client.merge(36, sha, budget_s=10)
    assert world.fake.merges == [] and world.fake.pulls[36]["state"] == "open"


def test_every_push_to_leaderboard_starts_the_sites_build(world):
    sha = world.submit(37, "alice")  # the gates push the attempt
    assert world.fake.triggered(WORKFLOWS) == ["pages.yml"]
    world.run("evaluate.yml", "announce", dispatch_event(37, sha),
              needs={"prepare": {"outputs": {"pr": "37", "head_sha": sha,
                                             "submission": "submissions/alice/1"}}})
    assert world.fake.triggered(WORKFLOWS) == ["pages.yml", "pages.yml"]
    assert {p["login"] for p in world.fake.pushes} == {"tinyrouter-bot[bot]"}


def test_app_token_masks_the_token_then_hands_it_to_the_next_steps(world, tmp_path, monkeypatch,
                                                                   capsys):
    output = tmp_path / "output"
    output.write_text("")
    for key, value in world.fake.app_secrets.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("GITHUB_OUTPUT", str(output))
    assert main(["gh", "app-token"]) == 0
    [line] = output.read_text().splitlines()
    token = line.removeprefix("token=")
    assert world.fake.tokens[token]["login"] == "tinyrouter-bot[bot]"
    printed = capsys.readouterr().out
    assert printed.startswith(f"::add-mask::{token}\n") and printed.count(token) == 1


@pytest.mark.parametrize(("key", "expected"), [
    ("stranger", "A JSON web token could not be decoded"),  # another App's key
    ("", "must be set"),
    ("not a key", "not a PEM private key"),
])
def test_app_token_without_the_apps_key_fails_clearly(world, tmp_path, monkeypatch, capsys, key,
                                                      expected):
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    if key == "stranger":
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048).private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption()).decode()
    monkeypatch.setenv("TINYROUTER_APP_ID", "424242")
    monkeypatch.setenv("TINYROUTER_APP_PRIVATE_KEY", key)
    monkeypatch.setenv("GITHUB_OUTPUT", str(tmp_path / "output"))
    assert main(["gh", "app-token"]) == 1
    assert expected in capsys.readouterr().err
    assert not (tmp_path / "output").exists()


# ---------------------------------------------------------------- attempts that cannot be gamed

def test_a_king_whose_folder_is_not_on_the_branch_is_refused_by_apply(world, capsys):
    sha = world.submit(38, "alice")
    checkout = world.remote.clone(world.tmp / "maintainer")
    result = world.tmp / "crown.json"
    result.write_text(json.dumps(crown("alice", 38, sha)))
    assert main(["leaderboard", "apply", str(result), "--repo", str(checkout)]) == 1
    assert "not in this checkout of the published branch" in capsys.readouterr().err
    assert not (checkout / "leaderboard" / "king.json").exists()


def test_reopening_a_decided_pr_with_a_new_head_fails_gate_0_and_spends_nothing(world):
    sha = world.submit(39, "alice")
    world.record(39, sha, loss("alice", 39, sha))
    assert world.fake.pulls[39]["state"] == "closed"
    attempts = world.board("attempts.jsonl")
    newer = world.push(39, world.files("alice", seed=7))
    assert world.author_edits(39, state="open") == 200
    run, runner = world.gates(39, newer, action="reopened")

    assert passed(runner) == "false", run.log
    body = world.fake.comment_bodies(39)[0]  # the gates comment, updated
    assert "Gate 0 (scope) failed" in body and "already has a decisive result" in body
    assert [d for d in world.fake.dispatches if d["inputs"].get("head_sha") == newer] == []
    assert world.board("attempts.jsonl") == attempts  # gate 0 takes no slot


def void(miner: str, pr: int, sha: str, at: str = "2026-11-20T12:00:00Z") -> dict:
    """A result the evaluator itself voided (the pool refused its calls)."""
    return {"format": 1, "miner": miner, "generation": 1, "pr": pr, "head_sha": sha,
            "evaluated_at": at, "outcome": "void", "benchmark_manifest": "f" * 64,
            "partition_commitment": None, "composite": None, "delta": None,
            "reason": "void: the pool refused the evaluator's calls", "isolation": None,
            "not_compared": None}


def test_a_void_is_refunded_and_never_also_evaluated_again(world):
    sha = world.submit(42, "alice")
    run, _ = world.record(42, sha, void("alice", 42, sha))
    assert all(v == "success" for v in run.outcomes.values()), run.log
    assert "slot is refunded" in world.fake.comment_bodies(42)[-1]

    prepared, _ = world.prepare(42, sha)  # the re-run the refund replaces
    assert prepared.outcomes["pr"] == "failure"
    newer = world.push(42, world.files("alice", seed=8))  # the refunded slot, used at once
    run, runner = world.gates(42, newer, action="synchronize")
    assert passed(runner) == "true", run.log


def test_a_decisive_result_wins_over_a_void_of_the_same_head_whatever_the_clocks(world):
    sha = world.submit(43, "alice")
    world.record(43, sha, void("alice", 43, sha, at="2026-11-21T12:00:00Z"))  # clock ahead
    run, _ = world.record(43, sha, loss("alice", 43, sha, at="2026-11-20T12:00:00Z"))
    assert all(v == "success" for v in run.outcomes.values()), run.log

    assert world.board("results/alice/1.json")["outcome"] == "lost"
    assert Store(world.remote.clone(world.tmp / "board")).refunded_heads() == frozenset()
    newer = world.open_pr(44, "alice", world.files("alice", generation=2, seed=9))
    run, runner = world.gates(44, newer)
    assert passed(runner) == "false" and "next slot opens" in world.fake.comment_bodies(44)[-1]


# ---------------------------------------------------------------- evaluations without a result

UNFINISHED = [  # the run's deployment reviews, how the GPU job ended → the queue's state, why
    ([("rejected", "the pool is down\ntoday")], "failure", "declined",
     "a maintainer declined to evaluate this head: the pool is down today"),
    ([], "cancelled", "declined", "the run was cancelled before anyone approved its evaluation"),
    ([], "failure", "expired", "nobody approved its evaluation and GitHub failed the waiting job"),
    ([("approved", "")], "failure", "failed", "the evaluation job was approved, then failed"),
    ([("approved", "")], "cancelled", "failed", "approved, then was cancelled before a result"),
]


@pytest.mark.parametrize(("reviews", "evaluated", "state", "why"), UNFINISHED,
                         ids=[row[2] + "-" + row[1] for row in UNFINISHED])
def test_an_evaluation_that_ends_without_a_result_is_settled_refunded_and_told(
        world, reviews, evaluated, state, why):
    sha = world.submit(80, "alice")
    for review, comment in reviews:
        world.fake.review(RUN_ID, review, comment)
    run, _ = world.unfinished(80, sha, evaluated)

    assert run.ran and all(v == "success" for v in run.outcomes.values()), run.log
    [event] = world.board("queue.jsonl")
    assert (event["event"], event["pr"], event["head_sha"]) == (state, 80, sha)
    assert event["reason"].startswith(why) or why in event["reason"]
    body = world.fake.comment_bodies(80)[-1]
    assert body.startswith("<!-- tinyrouter:evaluation -->") and "slot is refunded" in body
    assert "push a new commit" in body and world.fake.pulls[80]["state"] == "open"
    assert {p["login"] for p in world.fake.pushes} == {"tinyrouter-bot[bot]"}  # the site rebuilt
    assert Store(world.remote.clone(world.tmp / "board")).refunded_heads() == {sha}

    prepared, _ = world.prepare(80, sha)  # this head is not evaluated again …
    assert prepared.outcomes["pr"] == "failure"
    newer = world.push(80, world.files("alice", seed=8))  # … its author's slot is back at once
    run, runner = world.gates(80, newer, action="synchronize")
    assert passed(runner) == "true", run.log


def test_the_failure_path_reads_every_page_of_the_runs_reviews(world):
    """A rejection past the first page of reviews still declines: a run approved in many
    environments, then rejected in the last, is not read as a failed approved run."""
    sha = world.submit(79, "alice")
    for _ in range(100):
        world.fake.review(RUN_ID, "approved")
    world.fake.review(RUN_ID, "rejected", "not this one")
    run, _ = world.unfinished(79, sha, "failure")
    assert world.board("queue.jsonl")[0]["event"] == "declined", run.log


def test_the_failure_path_runs_only_when_the_gpu_job_left_no_result(world):
    sha = world.submit(81, "alice")
    main_before = world.remote.main_sha()
    for evaluated, prepared in (("success", "success"), ("skipped", "failure")):
        run, _ = world.unfinished(81, sha, evaluated, prepared)
        assert not run.ran, run.log
    assert world.remote.main_sha() == main_before and world.board("queue.jsonl") is None


def test_a_re_run_of_the_failure_path_changes_nothing(world):
    sha = world.submit(82, "alice")
    world.unfinished(82, sha)
    after = world.state()
    run, _ = world.unfinished(82, sha)
    assert all(v == "success" for v in run.outcomes.values()), run.log
    assert world.state() == after and len(world.board("queue.jsonl")) == 1


def test_the_failure_path_never_overwrites_a_decisive_result(world, capsys):
    sha = world.submit(83, "alice")
    world.record(83, sha, loss("alice", 83, sha))
    after = world.state()
    run, _ = world.unfinished(83, sha)
    assert run.outcomes["mark"] == "failure"
    assert "is already lost; it is not marked expired" in capsys.readouterr().err
    assert world.state() == after


def test_the_failure_path_reads_the_reviews_with_the_apps_token_only(world):
    """GitHub refuses the run's reviews to a token without `actions`; the App's token has it."""
    sha = world.submit(84, "alice")
    token = world.fake.workflow_token({"contents": "read"})
    status, _ = world.fake.handle("GET", f"/repos/tinyrouter/tinyrouter/actions/runs/{RUN_ID}"
                                  "/approvals", {}, None, token)
    assert status == 403
    world.fake.review(RUN_ID, "approved")
    run, _ = world.unfinished(84, sha)
    assert world.board("queue.jsonl")[0]["event"] == "failed", run.log


# ---------------------------------------------------------------- one life per head

def _refused(world, capsys, number: int, sha: str, record: dict, why: str) -> None:
    before = world.state()
    run, _ = world.record(number, sha, record)
    assert run.outcomes["record"] == "failure", run.log
    err = capsys.readouterr().err
    assert "refuses this result and records nothing" in err and why in err, err
    assert world.state() == before


def test_a_re_run_after_a_refund_was_spent_records_nothing(world, capsys):
    """A failed head's slot is refunded and its author's next pull request is gated on it;
    a "Re-run failed jobs" of the first evaluation then hands the record job a decisive
    result, which would count two submissions in one slot: it is refused."""
    sha = world.submit(85, "alice")
    world.fake.review(RUN_ID, "approved")
    world.unfinished(85, sha)
    newer = world.open_pr(86, "alice", world.files("alice", generation=2, seed=8))
    run, runner = world.gates(86, newer)
    assert passed(runner) == "true", run.log  # gated on the refund
    _refused(world, capsys, 85, sha, loss("alice", 85, sha), "is marked failed")
    assert main(["leaderboard", "lift", "--repo", str(world.remote.clone(world.tmp / "lift")),
                 "--pr", "85", "--head-sha", sha, "--reason", "re-run"]) == 1
    assert "its refund was spent by PR #86" in capsys.readouterr().err


def test_a_lifted_mark_lets_the_heads_next_result_count(world, capsys):
    sha = world.submit(87, "alice")
    world.fake.review(RUN_ID, "approved")
    world.unfinished(87, sha)
    _refused(world, capsys, 87, sha, loss("alice", 87, sha), "is marked failed")
    checkout = world.remote.clone(world.tmp / "lift")
    assert main(["leaderboard", "lift", "--repo", str(checkout), "--pr", "87", "--head-sha",
                 sha, "--reason", "the runner is fixed; evaluated again"]) == 0
    assert "its slot counts again for alice" in capsys.readouterr().out
    world.merge_by_hand(checkout, "leaderboard: lift the mark of PR #87")
    run, _ = world.record(87, sha, loss("alice", 87, sha))
    assert all(v == "success" for v in run.outcomes.values()), run.log
    assert world.board("results/alice/1.json")["outcome"] == "lost"
    assert Store(world.remote.clone(world.tmp / "board")).refunded_heads() == frozenset()


def test_a_void_head_re_run_after_its_refund_was_spent_records_nothing(world, capsys):
    sha = world.submit(88, "alice")
    world.record(88, sha, void("alice", 88, sha))
    newer = world.open_pr(89, "alice", world.files("alice", generation=2, seed=8))
    run, runner = world.gates(89, newer)
    assert passed(runner) == "true", run.log
    _refused(world, capsys, 88, sha, loss("alice", 88, sha, at="2026-11-21T12:00:00Z"),
             "was void and its refund is spent: PR #89")


def test_a_result_naming_another_miners_generation_is_refused(world, capsys):
    """The sealed result is bound to the PR and head; the miner and generation it names must
    be those of that head's gated attempt, or it would burn another miner's generation."""
    sha = world.submit(91, "alice")
    world.submit(92, "bob", seed=2)
    forged = {**loss("bob", 91, sha)}
    _refused(world, capsys, 91, sha, forged, "is alice generation 1")
    assert world.results("bob") == []


# ---------------------------------------------------------------- the sealed hand-over

def test_the_artifact_shows_no_figure_and_only_the_record_job_opens_it(world):
    sha = world.submit(90, "alice")
    record = crown("alice", 90, sha, composite=0.6)
    sealed = world.sealed(record, 90, sha)
    for clear in (b"composite", b"per_benchmark", b"0.6", b"0.78", b"0.525", b"king"):
        assert clear not in sealed  # what anyone downloading the artifact gets
    run, _ = world.record(90, sha, record, sealed=sealed)
    assert all(v == "success" for v in run.outcomes.values()), run.log
    assert world.board("results/alice/1.json")["composite"] == 0.6 and world.king() == "alice"


def _tampered(sealed: bytes) -> bytes:
    doc = json.loads(sealed)
    body = bytearray(base64.b64decode(doc["ciphertext"]))
    body[5] ^= 1  # one bit of the figures
    doc["ciphertext"] = base64.b64encode(bytes(body)).decode()
    return json.dumps(doc).encode()


@pytest.mark.parametrize(("forge", "says"), [
    (lambda world, sha: _tampered(world.sealed(crown("alice", 91, sha), 91, sha)),
     "it was changed after it was sealed, or sealed under another key"),
    # another PR's genuine artifact, swapped in
    (lambda world, sha: world.sealed(crown("alice", 92, sha), 92, sha),
     "it was sealed for 'tinyrouter evaluation result of PR #92"),
    # the result in clear, as the GPU job uploaded it before
    (lambda world, sha: json.dumps(crown("alice", 91, sha)).encode(),
     "not a sealed document of format 1"),
    # nested deeper than a parser's recursion goes, or larger than any result
    (lambda world, sha: b"[" * 200_000 + b"]" * 200_000, "nested too deeply to read"),
    (lambda world, sha: b" " * (2 << 20), "over the cap of 1048576"),
])
def test_a_tampered_or_foreign_artifact_is_refused_and_nothing_recorded(world, capsys, forge,
                                                                          says):
    sha = world.submit(91, "alice")
    before = world.state()
    run, _ = world.record(91, sha, {}, sealed=forge(world, sha))

    assert run.outcomes["validate"] == "skipped" and run.outcomes["record"] == "skipped"
    err = capsys.readouterr().err
    assert "the evaluation artifact is refused" in err and says in err
    assert "nothing is recorded" in err and "Re-run the evaluation" in err
    assert world.state() == before and world.fake.merges == []


@pytest.mark.parametrize(("key", "says"), [
    ("", "TINYROUTER_RESULT_KEY must be set: the same secret in the `evaluation` and "
         "`leaderboard` environments"),
    ("not a key", "must be 32 random bytes in base64 (`openssl rand -base64 32`)"),
    (base64.b64encode(b"k" * 32).decode(), "or sealed under another key"),
])
def test_the_record_job_without_the_right_key_fails_clearly(world, tmp_path, monkeypatch,
                                                            capsys, key, says):
    from evaluator import vault

    sha = world.submit(93, "alice")
    sealed = tmp_path / "result.sealed"
    sealed.write_bytes(world.sealed(loss("alice", 93, sha), 93, sha))
    vault.forget()
    monkeypatch.setenv("TINYROUTER_RESULT_KEY", key)
    assert main(["gh", "decrypt-result", "--pr", "93", "--head-sha", sha, "--sealed",
                 str(sealed), "--out", str(tmp_path / "result.json")]) == 1
    assert says in capsys.readouterr().err
    assert not (tmp_path / "result.json").exists()
