"""The queue: each attempt's status from the attempts log, the results and the queue events, and
the next slot of each miner, which must agree with the rate-limit gate."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest
from conftest import article_of, build_site

from evaluator import lifecycle
from evaluator.files import format_time
from evaluator.gates import GateContext, check_rate_limit
from evaluator.records import Attempt, Result
from evaluator.rules import OFFICIAL
from evaluator.site.queue import build_queue, next_slots
from evaluator.site.state import LeaderboardState
from evaluator.store import Store

T0 = datetime(2026, 10, 1, tzinfo=UTC)


def at(hours: float) -> str:
    return format_time(T0 + timedelta(hours=hours))


def attempt(head: str, hours: float, pr: int = 1, failed: int | None = None,
            miner: str = "amy") -> Attempt:
    return Attempt(miner=miner, generation=1, pr=pr, head_sha=head * 40, at=at(hours),
                   gates_passed=failed is None, failed_gate=failed)


def result(head: str, hours: float, outcome: str, pr: int = 1) -> Result:
    return Result(miner="amy", generation=1, pr=pr, head_sha=head * 40, evaluated_at=at(hours),
                  outcome=outcome)


def event(head: str, hours: float, pr: int = 1, kind: str = "evaluating",
          miner: str = "amy") -> dict:
    found = {"event": kind, "miner": miner, "generation": 1, "pr": pr, "head_sha": head * 40,
             "at": at(hours)}
    return found if kind == "evaluating" else {**found, "reason": f"why {kind}"}


@pytest.mark.parametrize(("attempts", "results", "events", "statuses"), [
    # gates
    ([attempt("a", 0, failed=3)], [], [], ["gate_failed"]),
    ([attempt("a", 0)], [], [], ["waiting"]),
    # being evaluated: an event for this head after its latest result
    ([attempt("a", 0)], [], [event("a", 1)], ["evaluating"]),
    ([attempt("a", 0)], [], [event("b", 1)], ["waiting"]),
    ([attempt("a", 0)], [result("a", 2, "stale")], [event("a", 3)], ["evaluating"]),
    ([attempt("a", 0)], [result("a", 2, "stale")], [event("a", 1)], ["stale"]),
    # results
    ([attempt("a", 0)], [result("a", 2, "lost")], [event("a", 1)], ["recorded"]),
    ([attempt("a", 0)], [result("a", 2, "king")], [], ["recorded"]),
    ([attempt("a", 0)], [result("a", 2, "rejected")], [], ["recorded"]),
    ([attempt("a", 0)], [result("a", 2, "void")], [], ["void"]),
    ([attempt("a", 0)], [result("a", 2, "void")], [event("a", 1)], ["void"]),
    ([attempt("a", 0)], [result("a", 2, "withdrawn")], [event("a", 1)], ["withdrawn"]),
    ([attempt("a", 0)], [result("a", 2, "void"), result("a", 5, "lost")], [], ["recorded"]),
    ([attempt("a", 0)], [result("a", 2, "stale")], [], ["stale"]),
    # an evaluation that ended without a result: settled, whatever came before it
    ([attempt("a", 0)], [], [event("a", 1, kind="declined")], ["declined"]),
    ([attempt("a", 0)], [], [event("a", 1, kind="expired")], ["expired"]),
    ([attempt("a", 0)], [], [event("a", 1), event("a", 2, kind="failed")], ["failed"]),
    ([attempt("a", 0)], [result("a", 2, "stale")], [event("a", 3), event("a", 4, kind="failed")],
     ["failed"]),
    ([attempt("a", 0), attempt("b", 30)], [], [event("a", 1, kind="failed")],
     ["failed", "waiting"]),
    # … but a decisive result recorded after all wins over it, whatever the clocks say
    ([attempt("a", 0)], [result("a", 2, "lost")], [event("a", 3, kind="failed")], ["recorded"]),
    # a result for another head of the same PR is not this head's
    ([attempt("a", 0)], [result("b", 2, "lost")], [], ["waiting"]),
    # a new head on the same pull request replaces an open one, not a recorded one
    ([attempt("a", 0), attempt("b", 30)], [], [], ["superseded", "waiting"]),
    ([attempt("a", 0), attempt("b", 30)], [result("a", 2, "lost")], [], ["recorded", "waiting"]),
])
def test_each_attempt_has_one_status(attempts, results, events, statuses):
    state = LeaderboardState(attempts=attempts, results=results, queue=events)
    queue = build_queue(state, OFFICIAL, T0 + timedelta(days=5))
    found = {e.attempt.head_sha: e.status for e in queue.open + queue.settled}
    assert [found[a.head_sha] for a in attempts] == statuses


def test_a_void_or_withdrawn_head_is_settled_not_open():
    attempts = [attempt("a", 0, pr=1), attempt("b", 1, pr=2)]
    results = [result("a", 2, "void", pr=1), result("b", 3, "withdrawn", pr=2)]
    queue = build_queue(LeaderboardState(attempts=attempts, results=results), OFFICIAL,
                        T0 + timedelta(days=5))
    assert queue.open == [] and [e.status for e in queue.settled] == ["withdrawn", "void"]


@pytest.mark.parametrize("kind", ["declined", "expired", "failed"])
def test_an_evaluation_that_ended_without_a_result_is_settled_with_its_reason_and_refunded(kind):
    attempts = [attempt("a", 0, pr=1), attempt("b", 1, pr=2)]  # the rate limit: one a day
    queue = build_queue(LeaderboardState(attempts=attempts, queue=[event("a", 2, kind=kind)]),
                        OFFICIAL, T0 + timedelta(hours=3))
    assert [(e.status, e.reason) for e in queue.settled] == [(kind, f"why {kind}")]
    assert [e.status for e in queue.open] == ["waiting"]
    assert queue.next_slots == [("amy", at(25))]  # b's slot; a's was given back


def test_open_entries_are_oldest_first_and_settled_ones_newest_first():
    attempts = [attempt("a", 0, pr=1), attempt("b", 1, pr=2), attempt("c", 2, pr=3),
                attempt("d", 3, pr=4, failed=0)]
    results = [result("a", 10, "lost", pr=1)]
    queue = build_queue(LeaderboardState(attempts=attempts, results=results), OFFICIAL,
                        T0 + timedelta(days=5))
    assert [e.attempt.pr for e in queue.open] == [2, 3]
    assert [e.attempt.pr for e in queue.settled] == [1, 4]  # settled at 10 h, then at 3 h
    assert not queue.tracks_evaluations


def test_slots_are_counted_as_the_rate_limit_gate_counts_them():
    attempts = [attempt("a", 0, miner="Amy"), attempt("b", 20, pr=2, miner="amy"),
                attempt("c", 21, pr=3, miner="bo"), attempt("d", 22, pr=4, miner="cy"),
                attempt("e", 22, pr=5, miner="AMY")]
    results = [result("d", 23, "void", pr=4)]  # cy's evaluation was void: refunded
    events = [event("c", 21.5, pr=3, kind="failed", miner="bo")]  # bo's failed: refunded too
    refunded = lifecycle.refunded(results, events)
    assert refunded == {"d" * 40, "c" * 40}
    for rules in (OFFICIAL, dataclasses.replace(OFFICIAL, rate_limit_count=2)):
        for hours in (20.5, 22.5, 23, 24.5, 43, 44.5, 46.5):
            now = T0 + timedelta(hours=hours)
            slots = next_slots(attempts, refunded, rules, now)
            ctx = GateContext(author="x", now=now, rules=rules, attempts=attempts,
                              refunded=refunded)
            for login in ("AMY", "bo", "cy", "dee"):
                reason = check_rate_limit(SimpleNamespace(login=login), ctx)
                opens = slots.get(login.lower())
                assert (reason is None) == (opens is None), (rules.rate_limit_count, hours, login)
                assert opens is None or format_time(opens) in reason


def test_the_queue_page(built_sites):
    page = article_of(built_sites["busy"] / "queue/index.html")
    open_part = page.split("Next slots¶")[0]
    assert "kate" in open_part and "stale: runs again" in open_part
    assert "judy" in open_part and "leo" in open_part
    if hasattr(Store, "queue_events"):  # leo's evaluation started (queue.jsonl)
        assert "waiting for approval" in open_part and "being evaluated" in open_part
    else:
        assert "waiting for evaluation" in open_part and "being evaluated" not in page
    settled = page.split("Settled¶")[1]
    # a head a gate stopped says which gate, what it means and where the detail is
    assert "Rejected at gate 3 (duplicate) before any evaluation: " in settled
    assert "The pull request's comment gives the detail" in settled
    assert "replaced by a newer head" in settled
    assert "The latest 30 of" in settled
    slots = page.split("Next slots¶")[1].split("Settled¶")[0]
    assert "oscar" in slots and "2026-10-21 04:48" in slots  # gated 48.7 days in, + 24 h
    empty = article_of(built_sites["empty"] / "queue/index.html")
    assert "Nothing in the queue" in empty and "Every miner may submit now" in empty
    assert "No attempt has been settled yet" in empty


def queue_page(board) -> str:
    """The Queue page as the site generates it (its Markdown; MkDocs only renders it)."""
    from evaluator.site.pages import generate
    from evaluator.site.state import load_state

    return generate(load_state(board), OFFICIAL).pages["queue.md"]


@pytest.mark.slow  # the busy board's pages generated
def test_a_store_with_queue_events_shows_what_is_being_evaluated(tmp_path, make_state,
                                                                 monkeypatch):
    from evaluator.store import Store

    board = make_state("busy")
    judy = [a for a in Store(board.parent, board=board, lenient=True).attempts()
            if a.miner == "judy"][-1]
    monkeypatch.setattr(Store, "queue_events", lambda self: [
        {"event": "evaluating", "miner": "judy", "generation": judy.generation, "pr": judy.pr,
         "head_sha": judy.head_sha, "at": judy.at}], raising=False)
    page = queue_page(board)
    assert "being evaluated" in page.split("Next slots")[0]
    assert "waiting for approval" in page  # the legend, now that the two can be told apart


@pytest.mark.slow  # the busy board's pages generated
def test_a_store_without_queue_events_says_waiting_for_evaluation(tmp_path, make_state,
                                                                  monkeypatch):
    monkeypatch.delattr(Store, "queue_events", raising=False)
    page = queue_page(make_state("busy"))
    assert "waiting for evaluation" in page.split("Next slots")[0]
    assert "being evaluated" not in page and "waiting for approval" not in page


@pytest.mark.slow
def test_a_failed_evaluation_shows_settled_with_its_reason_as_text(tmp_path, make_state,
                                                                  monkeypatch):
    board = make_state("busy")
    judy = [a for a in Store(board.parent, board=board, lenient=True).attempts()
            if a.miner == "judy"][-1]
    monkeypatch.setattr(Store, "queue_events", lambda self: [
        {"event": "failed", "miner": "judy", "generation": judy.generation, "pr": judy.pr,
         "head_sha": judy.head_sha, "at": "2026-12-01T00:00:00Z",
         "reason": "runner lost | <b>disk</b> full"}], raising=False)
    page = article_of(build_site(tmp_path / "public", board, OFFICIAL) / "queue/index.html")
    settled = page.split("Settled¶")[1].split("What the statuses mean")[0]
    assert "failed: refunded runner lost | <b>disk</b> full" in settled  # text, one cell
    assert "judy" not in page.split("Next slots¶")[0].split("Open¶")[1]
