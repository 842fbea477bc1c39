"""Reading the leaderboard: missing files are the empty state, corrupt ones a clear error."""

from __future__ import annotations

import re

import pytest

from evaluator.errors import LeaderboardError
from evaluator.site.state import load_state


def test_missing_folder_is_the_empty_state(tmp_path):
    state = load_state(tmp_path / "nowhere")
    assert state.king is None and state.kings == [] and state.results == []
    assert state.attempts == [] and state.manifest is None and state.miners() == []


def test_one_king(make_state):
    state = load_state(make_state("one_king"))
    assert state.king.miner == "alice" and len(state.kings) == 1
    assert [m.name for m in state.miners()] == ["alice"]
    assert set(state.benchmarks) == {"math500", "mmlu", "livecodebench"}


def test_results_are_newest_first_and_grouped_by_miner(make_state, hostile):
    state = load_state(make_state("busy"))
    times = [r.evaluated_at for r in state.results]
    assert times == sorted(times, reverse=True) and len(times) == 54
    miners = {m.name: m for m in state.miners()}
    assert hostile["name"] in miners
    assert sum(m.crowns for m in miners.values()) == len(state.kings) == 6
    assert sum(len(m.results) for m in miners.values()) == len(state.results)


@pytest.mark.parametrize(("name", "content", "message"), [
    # not JSON at all
    ("king.json", "{not json", "king.json is not valid JSON"),
    # JSON of the wrong shape
    ("history.json", "[]", "history.json should hold a JSON dict"),
    ("results/bob/1.json", "3", "1.json should hold a JSON dict"),
    # one bad line in the attempts log
    ("attempts.jsonl", '{"miner": "a"}\nnope\n', "attempts.jsonl:2 is not valid JSON"),
])
def test_corrupt_files_are_named(tmp_path, name, content, message):
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content, encoding="utf-8")
    with pytest.raises(LeaderboardError, match=re.escape(message)):
        load_state(tmp_path)


def test_case_variants_of_a_login_are_one_miner_named_as_last_seen():
    from evaluator.records import Attempt, Result
    from evaluator.site.state import LeaderboardState

    state = LeaderboardState(
        results=[Result(miner="BoB", generation=2, pr=2, head_sha=None,
                        evaluated_at="2026-09-03T00:00:00Z", outcome="lost"),
                 Result(miner="bob", generation=1, pr=1, head_sha=None,
                        evaluated_at="2026-09-02T00:00:00Z", outcome="lost")],
        attempts=[Attempt(miner="Bob", generation=1, pr=1, head_sha=None,
                          at="2026-09-01T00:00:00Z")])
    [bob] = state.miners()
    assert (bob.id, bob.name, len(bob.results), len(bob.attempts)) == ("bob", "BoB", 2, 1)
    assert state.display_names() == {"bob": "BoB"}
