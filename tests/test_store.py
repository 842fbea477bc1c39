"""The store: where files live, strict reading, the attempts log, queue events and generations."""

import json
import re

import pytest

from evaluator.errors import LeaderboardError
from evaluator.files import canonical_json, dumps
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


def test_a_gates_pass_is_looked_up_by_pr_and_exact_head(repo):
    store = Store(repo)
    passed = Attempt("alice", 1, 7, "b" * 40, "2026-11-29T12:00:00Z", gates_passed=True)
    failed = Attempt("bob", 1, 8, "c" * 40, "2026-11-29T12:00:00Z", failed_gate=3)
    store.record_attempt(passed)
    store.record_attempt(failed)
    assert store.gates_pass(7, "b" * 40) == passed
    assert store.gates_pass(7, "d" * 40) is None  # another head of the same PR
    assert store.gates_pass(8, "c" * 40) is None  # recorded, but its gates failed
    assert store.gates_pass(None, "b" * 40) is None


def test_a_new_head_on_the_same_pr_is_a_new_attempt(repo):
    store = Store(repo)
    assert store.record_attempt(Attempt("alice", 1, 7, "b" * 40, "2026-11-29T12:00:00Z"))
    assert store.record_attempt(Attempt("alice", 1, 7, "c" * 40, "2026-11-29T13:00:00Z"))
    assert [a.head_sha for a in store.attempts()] == ["b" * 40, "c" * 40]


def result(outcome, at, sha="b" * 40):
    return {"format": 1, "miner": "alice", "generation": 1, "pr": 7, "head_sha": sha,
            "evaluated_at": at, "outcome": outcome, "reason": f"{outcome}: why",
            "composite": None, "delta": None, "benchmark_manifest": None,
            "partition_commitment": None, "isolation": None, "not_compared": None}


def test_decided_ignores_void_and_stale_results(repo):
    store = Store(repo)
    store.write_result(result("void", "2026-11-29T12:00:00Z"))
    store.write_result(result("stale", "2026-11-29T13:00:00Z"))
    assert store.decided(7, "b" * 40) is None
    store.write_result(result("rejected", "2026-11-29T14:00:00Z"))
    assert store.decided(7, "b" * 40).outcome == "rejected"
    assert store.decided(7, "c" * 40) is None


EVENT = {"event": "evaluating", "miner": "alice", "generation": 1, "pr": 7, "head_sha": "b" * 40,
         "at": "2026-11-29T12:00:00Z"}


def test_queue_events_are_appended_and_read_back_in_order(repo):
    store = Store(repo)
    assert store.queue_events() == []
    store.record_queue_event(EVENT)
    store.record_queue_event({**EVENT, "at": "2026-11-29T13:00:00Z"})
    assert [e["at"] for e in store.queue_events()] == ["2026-11-29T12:00:00Z",
                                                        "2026-11-29T13:00:00Z"]


def test_queue_events_of_a_kind_this_code_does_not_know_are_kept(repo):
    (repo / "leaderboard/queue.jsonl").write_text(
        json.dumps({**EVENT, "event": "runner-lost", "runner": "gpu-2"}) + "\n")
    assert Store(repo).queue_events()[0]["runner"] == "gpu-2"


@pytest.mark.parametrize("bad", [{**EVENT, "head_sha": "HEAD"}, {**EVENT, "event": "a b"},
                                 {k: v for k, v in EVENT.items() if k != "pr"},
                                 # an evaluation that ended without a result says why
                                 {**EVENT, "event": "failed"},
                                 {**EVENT, "event": "declined", "reason": ""},
                                 {**EVENT, "event": "expired", "reason": "two\nlines"},
                                 {**EVENT, "event": "failed", "reason": "x" * 301}])
def test_a_malformed_queue_event_is_refused(repo, bad):
    with pytest.raises(LeaderboardError, match="queue"):
        Store(repo).record_queue_event(bad)
    (repo / "leaderboard/queue.jsonl").write_text(json.dumps(bad) + "\n")
    with pytest.raises(LeaderboardError, match=r"queue\.jsonl line 1"):
        Store(repo).queue_events()
    assert Store(repo, lenient=True).queue_events() == [bad]  # the site shows it anyway


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


# what a hand edit or a writer bug could leave in a state file: numbers no reader can use
UNUSABLE_NUMBERS = ["Infinity", "-Infinity", "NaN", "1e400"]


@pytest.mark.parametrize("number", UNUSABLE_NUMBERS)
def test_a_state_file_with_a_number_that_is_not_finite_is_refused(repo, number):
    store = Store(repo)
    store.record_attempt(Attempt("alice", 1, 7, "b" * 40, "2026-11-29T12:00:00Z"))
    path = repo / "leaderboard/attempts.jsonl"
    path.write_text(path.read_text().replace('"pr": 7', f'"pr": 7, "cost": {number}'))
    with pytest.raises(LeaderboardError, match=r"attempts\.jsonl:1 is not valid JSON"):
        store.attempts()


@pytest.mark.parametrize("number", [float("inf"), float("nan")])
def test_no_state_file_is_written_with_a_number_that_is_not_finite(repo, number):
    with pytest.raises(ValueError, match="Out of range float"):
        dumps({"live_cost_usd": number})
    with pytest.raises(ValueError, match="Out of range float"):
        canonical_json({"cost_usd": number})


@pytest.mark.parametrize("text", [
    # as the store writes it: one parse for the whole log
    '{"miner": "alice", "pr": 1}\n{"miner": "bob", "pr": 2}\n',
    # CRLF endings, a missing last newline
    '{"miner": "alice", "pr": 1}\r\n{"miner": "bob", "pr": 2}',
    # a blank line, a line of spaces
    '{"miner": "alice", "pr": 1}\n\n  \n{"miner": "bob", "pr": 2}\n',
    # a character that splitlines would split on, inside a string
    '{"miner": "al\u2028ice", "pr": 1}\n',
    # a repeated key: JSON's rule (the last wins), kept
    '{"fingerprint": "x", "miner": "erin", "fingerprint": "q7:REVG"}\n',
])
def test_a_log_reads_as_its_lines_parsed_one_by_one(repo, text):
    path = repo / "leaderboard" / "attempts.jsonl"
    path.write_text(text, encoding="utf-8", newline="")
    expected = [json.loads(line) for line in text.split("\n") if line.strip()]
    from evaluator.store import read_json_lines

    assert read_json_lines(path) == expected


@pytest.mark.parametrize(("text", "named"), [
    ('{"miner": "alice"}, {"miner": "bob"}\n{"miner": "carol"}\n', ":1 "),  # two on a line
    ('{"miner": "alice"}\n{"miner":\n "bob"}\n', ":2 "),  # one object over two lines
    ('{"miner": "alice"}\n[1]\n', ":2 should be a JSON object"),
    ('{"miner": "alice"}\n{"cost": NaN}\n', ":2 is not valid JSON"),
])
def test_a_log_line_that_is_not_one_object_is_named(repo, text, named):
    path = repo / "leaderboard" / "attempts.jsonl"
    path.write_text(text, encoding="utf-8")
    from evaluator.store import read_json_lines

    with pytest.raises(LeaderboardError, match=re.escape(named)):
        read_json_lines(path)


def void_of(miner, generation, sha, at):
    return {**result("void", at, sha), "miner": miner, "generation": generation}


def test_the_gates_read_only_their_own_miners_refunds(repo):
    """A void refunds its head; the gates ask for one miner's (any letter case of the
    folder), so a season of other miners' results is not read."""
    store = Store(repo)
    store.write_result(void_of("Alice", 1, "a" * 40, "2026-11-29T12:00:00Z"))
    store.write_result(void_of("bob", 1, "b" * 40, "2026-11-29T12:00:00Z"))
    assert store.refunded_heads("alice") == {"a" * 40}
    assert store.refunded_heads("BOB") == {"b" * 40}
    assert store.refunded_heads("carol") == frozenset()
    assert store.refunded_heads() == {"a" * 40, "b" * 40}


def test_a_decided_generation_is_found_whatever_the_folders_letter_case(repo):
    store = Store(repo)
    store.write_result({**result("rejected", "2026-11-29T12:00:00Z"), "miner": "Alice"})
    assert store.decided_generation("alice", 1).outcome == "rejected"
    assert store.decided_generation("alice", 2) is None
    assert store.decided_generation("bob", 1) is None


@pytest.mark.parametrize("kind", ["declined", "expired", "failed"])
def test_an_evaluation_that_ended_without_a_result_refunds_and_ends_its_head(repo, kind):
    store = Store(repo)
    store.record_queue_event({**EVENT, "event": kind, "reason": "why"})
    assert store.refunded_heads() == {"b" * 40} == store.refunded_heads("ALICE")  # as the gates
    assert store.refunded_heads("bob") == frozenset()
    assert store.ended(7, "b" * 40) == (kind, "why")  # never evaluated again
    assert store.ended(7, "c" * 40) is None
    store.write_result(result("rejected", "2026-11-28T12:00:00Z"))  # decisive after all: wins
    assert store.refunded_heads() == frozenset()
    assert store.ended(7, "b" * 40) == ("rejected", "rejected: why")
