"""The store: where files live, strict reading, the attempts log and generations."""

import pytest

from evaluator.errors import LeaderboardError
from evaluator.records import Attempt
from evaluator.store import Store, parse_submission_path


def test_next_generation_counts_merged_folders_and_attempts(repo, make_submission):
    make_submission(repo, "alice", 1)
    make_submission(repo, "alice", 2, seed=1)
    assert Store(repo).next_generation("ALICE") == 3
    attempts = [Attempt("alice", 3, 11, None, "2026-11-01T00:00:00Z")]
    assert Store(repo).next_generation("alice", attempts) == 4
    assert Store(repo).next_generation("alice", attempts, pr=11) == 3  # a re-run keeps its generation
    assert Store(repo).next_generation("bob", attempts) == 1


def test_recorded_attempt_is_idempotent_per_pr(repo):
    first = Attempt("alice", 1, 7, "b" * 40, "2026-11-29T12:00:00Z")
    store = Store(repo)
    assert store.record_attempt(first) is True
    assert store.record_attempt(first) is False
    assert store.attempts() == [first]


def test_a_broken_attempts_line_is_named_not_skipped(repo):
    store = Store(repo)
    store.record_attempt(Attempt("alice", 1, 7, "b" * 40, "2026-11-29T12:00:00Z"))
    with (repo / "leaderboard/attempts.jsonl").open("a") as handle:
        handle.write("{broken\n")
    with pytest.raises(LeaderboardError, match=r"attempts\.jsonl:2 is not valid JSON"):
        store.attempts()




@pytest.mark.parametrize(("path", "parsed"), [
    ("submissions/alice/1", ("alice", 1)),
    ("submissions/a-b_c/12", ("a-b_c", 12)),
    # not exactly one submission folder
    ("submissions/alice/1/", None),
    ("submissions/alice", None),
    ("submissions//alice/1", None),
    ("other/alice/1", None),
    ("submissions/alice/0", None),
    ("submissions/alice/1\n", None),
    ("submissions/al ice/1", None),
    ("submissions/alice/\u0661", None),  # an Arabic-Indic digit one
])
def test_parse_submission_path(path, parsed):
    assert parse_submission_path(path) == parsed
