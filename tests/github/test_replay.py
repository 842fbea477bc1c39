"""End to end, offline: fixture events replayed through the workflows' own steps.

Asserts what GitHub would see (comments, labels, merges, closes, dispatches) and what lands
on the remote (the attempt, the leaderboard commit), including hostile pull requests.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from evaluator.cli import main
from evaluator.rules import OFFICIAL

KING_SHA, LOST_SHA = "a" * 40, "b" * 40
EVENTS = Path(__file__).with_name("events")


class World:
    """The fake API, the bare remote and a way to replay a workflow job against them."""

    def __init__(self, fake, remote, make_submission, replayer, tmp: Path) -> None:
        self.fake, self.remote, self.tmp = fake, remote, tmp
        self.make_submission, self.replayer = make_submission, replayer
        self.counter = itertools.count()

    def files(self, login: str, generation: int = 1, seed: int = 0) -> dict[str, bytes | Path]:
        folder = self.make_submission(self.tmp / f"src-{login}-{seed}", login, generation, seed=seed)
        return {f"submissions/{login}/{generation}/{p.name}": p.read_bytes()
                for p in sorted(folder.iterdir())}

    def open_pr(self, number: int, author: str, files: dict, **extra) -> str:
        sha = self.remote.open_pr(number, files)
        self.fake.add_pull(number, author, sha, sorted(files), **extra)
        return sha

    def run(self, workflow: str, job: str, event: dict, bash: bool = False, **kwargs):
        run_dir = self.tmp / f"run-{next(self.counter)}"
        run_dir.mkdir()
        workspace = self.remote.clone(run_dir / "checkout")
        (run_dir / "temp").mkdir()
        runner = self.replayer(workspace, event, run_dir / "temp", bash=bash, **kwargs)
        return runner.run_job(workflow, job), runner

    def gates(self, number: int, sha: str, bash: bool = False, title: str | None = None,
              branch: str | None = None):
        event = load_event("pull_request_target.opened.json")
        pull = event["pull_request"]
        event["number"] = pull["number"] = number
        pull["head"]["sha"] = sha
        pull["title"] = title or pull["title"]
        pull["head"]["ref"] = branch or pull["head"]["ref"]
        return self.run("gates.yml", "gates", event, bash=bash)

    def record(self, number: int, sha: str, record: dict):
        artifact = self.tmp / f"result-{number}-{next(self.counter)}.json"
        artifact.write_text(json.dumps(record))
        return self.run("evaluate.yml", "record", dispatch_event(number),
                        needs={"prepare": {"outputs": {"pr": str(number), "head_sha": sha}}},
                        artifacts={"evaluation-result": artifact})


def load_event(name: str) -> dict:
    return json.loads((EVENTS / name).read_text(encoding="utf-8"))


def dispatch_event(number: int, head_sha: str = "") -> dict:
    event = load_event("workflow_dispatch.evaluate.json")
    event["inputs"] = {"pr": str(number), "head_sha": head_sha}
    return event


@pytest.fixture
def world(fake_github, remote, make_submission, replayer, tmp_path) -> World:
    return World(fake_github, remote, make_submission, replayer, tmp_path)


# ---------------------------------------------------------------- gates.yml

def test_passing_submission_is_commented_labelled_recorded_and_sent_to_evaluation(world):
    sha = world.open_pr(7, "alice", world.files("alice"))
    run, _ = world.gates(7, sha)

    assert run.outcomes["gates"] == "success", run.log
    [body] = world.fake.comment_bodies(7)
    assert body.startswith("<!-- tinyrouter:gates -->") and "Gates passed" in body
    assert world.fake.labels[7] == {"gates-passed"}
    assert world.fake.pulls[7]["state"] == "open"
    assert world.fake.dispatches == [{"workflow": "evaluate.yml", "ref": "main",
                                       "inputs": {"pr": "7", "head_sha": sha}}]
    [attempt] = [json.loads(x) for x in world.remote.show("leaderboard/attempts.jsonl").splitlines()]
    assert (attempt["miner"], attempt["generation"], attempt["pr"], attempt["head_sha"]) == \
        ("alice", 1, 7, sha)
    assert "submissions/alice" not in world.remote.show("submissions")  # data only, never pushed


def test_a_re_run_updates_the_one_comment_and_records_no_second_attempt(world):
    sha = world.open_pr(7, "alice", world.files("alice"))
    world.gates(7, sha)
    main_after_first = world.remote.main_sha()
    run, _ = world.gates(7, sha)

    assert run.outcomes["gates"] == "success", run.log
    assert len(world.fake.comment_bodies(7)) == 1
    assert world.remote.main_sha() == main_after_first
    assert len(world.remote.show("leaderboard/attempts.jsonl").splitlines()) == 1


def test_failing_submission_is_labelled_and_closed_with_the_reason(world):
    files = world.files("alice")
    sha = world.open_pr(8, "bob", files)  # bob submits under alice's login
    run, _ = world.gates(8, sha)

    assert run.outcomes["gates"] == "failure"
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


# ---------------------------------------------------------------- hostile pull requests

@pytest.mark.slow
def test_hostile_title_and_branch_stay_data_through_bash(world, tmp_path):
    canary = tmp_path / "pwned"
    hostile = f"$(touch {canary}) `touch {canary}`"
    sha = world.open_pr(10, "alice",
                  world.files("alice"), title=hostile)
    world.fake.pulls[10]["head"]["ref"] = hostile
    run, _ = world.gates(10, sha, bash=True, title=hostile,
                          branch=hostile)

    assert run.outcomes["gates"] == "success", run.log
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
    workspace = runner.workspace

    copied = workspace / "submissions/mallory/1/weights.safetensors"
    assert copied.is_symlink() and Path(copied.readlink()) == Path("/dev/null")
    assert run.outcomes["gates"] == "failure"
    [body] = world.fake.comment_bodies(12)
    assert "regular file" in body and "runner secret" not in body
    assert world.fake.pulls[12]["state"] == "closed"
    assert world.fake.labels[12] == {"gates-failed"}


def test_paths_outside_the_folder_are_reported_not_copied(world):
    files = world.files("alice")
    files[".github/workflows/evil.yml"] = b"on: push\n"
    files["submissions/$(id)/1/x"] = b"x"
    sha = world.open_pr(13, "alice", files)
    run, runner = world.gates(13, sha)
    workspace = runner.workspace

    assert run.outcomes["gates"] == "failure"
    assert not (workspace / ".github/workflows/evil.yml").exists()
    assert not (workspace / "submissions/$(id)").exists()
    assert "outside" in world.fake.comment_bodies(13)[0]


# ---------------------------------------------------------------- evaluate.yml

def components(score: float) -> dict:
    return {"cached_acc": 0.8, "audit_acc": 0.78, "live_acc": 0.7, "avg_turns": 2.0,
            "efficiency": 0.525, "novelty": 0.5, "overfit_penalty": 1.0, "score": score}


def result_record(outcome: str, miner: str, pr: int, sha: str, king: float | None) -> dict:
    base = {"format": 1, "miner": miner, "generation": 1, "pr": pr, "head_sha": sha,
            "evaluated_at": "2026-11-20T12:00:00Z", "outcome": outcome,
            "benchmark_manifest": "f" * 64, "partition_commitment": "e" * 64}
    if outcome == "lost":
        return {**base, "composite": 0.5, "delta": round(0.5 - king, 2), "ci95": [-0.2, -0.01]}
    return {**base, "composite": 0.6, "king_composite": king, "delta": None, "ci95": None,
            "reason": None, "per_benchmark": {b: components(0.6) for b in OFFICIAL.benchmarks},
            "live_cost_usd": 0.41, "router_card": None}


def test_prepare_pins_the_gated_head(world):
    sha = world.open_pr(20, "alice", world.files("alice"))
    world.fake.labels[20] = {"gates-passed"}
    run, _ = world.run("evaluate.yml", "prepare", dispatch_event(20, sha))

    assert run.outputs == {"pr": "20", "head_sha": sha, "submission": "submissions/alice/1"}


def test_prepare_refuses_a_pr_whose_gates_have_not_passed(world):
    world.open_pr(21, "alice", world.files("alice"))
    run, _ = world.run("evaluate.yml", "prepare", dispatch_event(21))

    assert run.outcomes["pr"] == "failure" and run.outputs["head_sha"] == ""


def test_new_king_is_committed_merged_at_the_head_and_the_site_rebuilt(world):
    sha = KING_SHA
    world.fake.add_pull(30, "alice", sha, ["submissions/alice/1/receipt.json"])
    run, runner = world.record(30, sha,
                                result_record("king", "alice", 30, sha, None))

    assert all(v == "success" for v in run.outcomes.values()), run.log
    king = json.loads(world.remote.show("leaderboard/king.json"))["king"]
    assert (king["miner"], king["pr"], king["head_sha"]) == ("alice", 30, sha)
    assert json.loads(world.remote.show("leaderboard/results/alice/1.json"))["outcome"] == "king"
    assert world.fake.merges == [(30, sha)]
    [body] = world.fake.comment_bodies(30)
    assert body.startswith("<!-- tinyrouter:evaluation -->") and "new king" in body
    assert world.fake.dispatches == [{"workflow": "pages.yml", "ref": "main", "inputs": {}}]
    assert "alice" in (runner.tmp / "summary.md").read_text()


def test_loss_is_committed_and_the_pr_closed_without_merge(world):
    king_sha, lost_sha = KING_SHA, LOST_SHA
    world.fake.add_pull(30, "alice", king_sha, [])
    world.fake.add_pull(31, "bob", lost_sha, [])
    world.record(30, king_sha, result_record("king", "alice", 30, king_sha, None))
    run, _ = world.record(31, lost_sha,
                           result_record("lost", "bob", 31, lost_sha, 0.6))

    assert all(v == "success" for v in run.outcomes.values()), run.log
    assert json.loads(world.remote.show("leaderboard/results/bob/1.json"))["outcome"] == "lost"
    assert json.loads(world.remote.show("leaderboard/king.json"))["king"]["miner"] == "alice"
    assert world.fake.merges == [(30, king_sha)]
    assert world.fake.pulls[31]["state"] == "closed"
    assert "per_benchmark" not in world.fake.comment_bodies(31)[0]


def test_a_head_pushed_after_approval_is_neither_recorded_nor_merged(world):
    sha, main_before = KING_SHA, world.remote.main_sha()
    world.fake.add_pull(32, "alice", "c" * 40, [])  # the PR moved after the evaluation began
    run, _ = world.record(32, sha, result_record("king", "alice", 32, sha, None))

    assert run.outcomes["pr"] == "failure" and run.outcomes["conclude"] == "skipped"
    assert world.fake.merges == [] and world.remote.main_sha() == main_before


def test_merge_is_guarded_by_the_evaluated_sha(world, tmp_path):
    sha = KING_SHA
    world.fake.add_pull(33, "alice", sha, [])
    record = tmp_path / "r.json"
    record.write_text(json.dumps(result_record("king", "alice", 33, sha, None)))
    world.fake.pulls[33]["head"]["sha"] = "d" * 40  # moved between the check and the merge
    assert main(["gh", "conclude", "--pr", "33", "--sha", sha, "--result", str(record)]) == 1
    assert world.fake.merges == [] and world.fake.pulls[33]["state"] == "open"
