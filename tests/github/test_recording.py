"""The record job's steps called as the library (`evaluator.recording`), against the fake GitHub
and a bare remote, with the App's token as the record job has it (the workflow replays in
test_replay.py drive the same steps through `tinyrouter gh record`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import APP_ID, app_key_pem

from evaluator import recording
from evaluator.errors import GitHubError
from evaluator.github import GitHub, installation_token, publish, sync
from evaluator.recording import EVALUATION_MARKER, Board
from evaluator.records import Attempt, HeadRef, Outcome
from evaluator.rules import OFFICIAL
from evaluator.store import Store

pytestmark = pytest.mark.slow  # each test replays workflow jobs or encodes


def scores(composite: float) -> dict:
    return {"cached_acc": 0.8, "audit_acc": 0.78, "live_acc": 0.7, "avg_turns": 2.0,
            "efficiency": 0.525, "novelty": 0.5, "overfit_penalty": 1.0, "score": composite}


def crowned(miner: str, pr: int, sha: str) -> dict:
    """A crown scored when no king reigned."""
    return {"format": 1, "miner": miner, "generation": 1, "pr": pr, "head_sha": sha,
            "evaluated_at": "2026-11-20T12:00:00Z", "outcome": "king",
            "benchmark_manifest": "f" * 64, "partition_commitment": "e" * 64, "composite": 0.6,
            "king_composite": None, "delta": None, "ci95": None, "reason": None,
            "per_benchmark": {b: scores(0.6) for b in OFFICIAL.benchmarks},
            "live_cost_usd": 0.41, "router_card": None, "crown_test": None, "against": None,
            "isolation": None, "not_compared": None}


def lost(miner: str, pr: int, sha: str) -> dict:
    return {"format": 1, "miner": miner, "generation": 1, "pr": pr, "head_sha": sha,
            "evaluated_at": "2026-11-20T12:00:00Z", "outcome": "lost",
            "benchmark_manifest": "f" * 64, "partition_commitment": "e" * 64, "composite": 0.5,
            "delta": -0.1, "ci95": None,
            "crown_test": {"stage": 2, "live_items": 60, "live_sessions": 360},
            "against": None, "isolation": None, "not_compared": None}


class Desk:
    """The record job's world: the fake API, the bare remote, a checkout of main, the client."""

    def __init__(self, fake, remote, make_submission, tmp: Path, monkeypatch) -> None:
        fake.attach(remote.bare)
        fake.set_up_as_the_guide_says()
        monkeypatch.setenv("GITHUB_TOKEN", installation_token(GitHub.from_env(), str(APP_ID),
                                                              app_key_pem()))
        self.fake, self.remote, self.tmp = fake, remote, tmp
        self.make_submission = make_submission
        self.github = GitHub.from_env()
        self.board = Board(remote.clone(tmp / "checkout"))
        self.said: list[str] = []

    def open(self, number: int, login: str, seed: int = 0) -> str:
        """A pull request whose gates passed: its attempt is on main, as the gates job leaves
        it (the record job records only a head its gates passed)."""
        folder = self.make_submission(self.tmp / f"src-{number}", login, 1, seed=seed)
        files = {f"submissions/{login}/1/{p.name}": p.read_bytes() for p in folder.iterdir()}
        sha = self.remote.open_pr(number, files)
        self.fake.add_pull(number, login, sha, sorted(files), fork=False)
        gates = self.remote.clone(self.tmp / f"gates-{number}")
        publish(gates, ["leaderboard"], f"leaderboard: attempt of PR #{number}",
                lambda: Store(gates).record_attempt(Attempt(
                    login, 1, number, sha, "2026-11-20T11:00:00Z", gates_passed=True)))
        sync(self.board.repo)  # the record job checks out main as it is when it starts
        return sha

    def record(self, result: dict, base: str | None = None) -> recording.Recording:
        job = recording.start(self.github, self.board, OFFICIAL, result, result["pr"],
                              result["head_sha"], base, tell=lambda *lines: self.said.extend(lines))
        recording.record(job)
        return job

    def on_main(self, path: str):
        return json.loads(self.remote.show(f"leaderboard/{path}"))


@pytest.fixture
def desk(fake_github, remote, make_submission, tmp_path, monkeypatch) -> Desk:
    return Desk(fake_github, remote, make_submission, tmp_path, monkeypatch)


def test_a_crown_is_merged_published_and_commented(desk):
    sha = desk.open(60, "alice")
    job = desk.record(crowned("alice", 60, sha), base=desk.remote.main_sha())
    assert job.outcome is Outcome.KING and not job.already
    assert job.head == HeadRef("alice", 1, 60, sha)
    assert desk.fake.merges == [(60, sha)]
    assert desk.on_main("king.json")["king"]["head_sha"] == sha
    assert desk.on_main("results/alice/1.json") == job.record
    assert EVALUATION_MARKER in desk.fake.comment_bodies(60)[0]
    assert f"merged PR #60 at {sha[:12]}" in desk.said and "leaderboard/ pushed" in desk.said


def test_recording_again_changes_nothing(desk):
    sha = desk.open(61, "alice")
    first = desk.record(crowned("alice", 61, sha))
    main = desk.remote.main_sha()
    again = desk.record(crowned("alice", 61, sha))
    assert again.already and again.record == first.record
    assert desk.remote.main_sha() == main and desk.fake.merges == [(61, sha)]
    assert len(desk.fake.comment_bodies(61)) == 1  # updated, not posted twice


def test_a_loss_closes_its_pull_request(desk):
    king = desk.open(62, "alice")
    desk.record(crowned("alice", 62, king))
    sha = desk.open(63, "bob", seed=1)
    job = desk.record(lost("bob", 63, sha), base=desk.remote.main_sha())
    assert job.outcome is Outcome.LOST
    assert desk.fake.pulls[63]["state"] == "closed" and desk.fake.merges == [(62, king)]
    assert desk.on_main("results/bob/1.json")["outcome"] == "lost"


def test_a_crown_scored_against_a_king_since_replaced_is_stale_and_runs_again(desk):
    base = desk.remote.main_sha()
    desk.record(crowned("alice", 64, desk.open(64, "alice")))
    sha = desk.open(65, "bob", seed=1)
    job = desk.record(crowned("bob", 65, sha), base=base)  # scored when no king reigned
    assert job.outcome is Outcome.STALE and desk.fake.merges[-1][0] == 64
    assert desk.fake.dispatches[-1]["inputs"] == {"pr": "65", "head_sha": sha}
    assert desk.fake.pulls[65]["state"] == "open"


def test_a_head_moved_after_the_approval_is_withdrawn_unmerged(desk):
    sha = desk.open(66, "alice")
    desk.fake.new_head(66, desk.remote.push_to_pr(66, {"notes.txt": b"later"}))
    job = desk.record(crowned("alice", 66, sha))
    assert job.outcome is Outcome.WITHDRAWN and desk.fake.merges == []
    listing = desk.remote.show("leaderboard/results/alice").split()
    assert [name.split(".")[1] for name in listing if name.endswith(".json")] == ["withdrawn"]


def test_start_refuses_a_result_for_another_head(desk):
    sha = desk.open(67, "alice")
    with pytest.raises(GitHubError, match="not PR #67 at"):
        recording.start(desk.github, desk.board, OFFICIAL, crowned("alice", 67, "b" * 40), 67,
                        sha)
