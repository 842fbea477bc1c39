"""The typed records: the disclosure rule applied once, and the schema checked against it."""

from __future__ import annotations

import dataclasses

import pytest

from evaluator.records import (
    KING,
    LOST,
    PUBLIC_FIELDS,
    REJECTED,
    STALE,
    VOID,
    Attempt,
    Crowning,
    King,
    Partition,
    Result,
    disclosed,
)
from evaluator.rules import OFFICIAL
from evaluator.scoring import BenchmarkScore
from evaluator.store import schema, validate

PRECISION = OFFICIAL.disclosure_precision
SCORE = BenchmarkScore(cached_acc=0.8133, audit_acc=0.7466667, live_acc=0.65, avg_turns=2.35,
                       efficiency=0.4387, novelty=0.31, overfit_penalty=1.0, score=0.6723)
PARTITION = Partition(seed="ab" * 32, salt="cd" * 16)


def result(outcome: str, **fields) -> Result:
    base = dict(miner="alice", generation=2, pr=7, head_sha="a" * 40,
                evaluated_at="2026-11-30T10:00:00Z", outcome=outcome,
                benchmark_manifest="f" * 64, partition=PARTITION,
                partition_commitment=PARTITION.commitment)
    if outcome in (KING, LOST, VOID):  # a void evaluation may have measured before it failed
        base.update(composite=0.67231, king_composite=0.65012, delta=0.02219,
                    ci95=(0.00412, 0.04187), live_cost_usd=0.4231,
                    per_benchmark={b: SCORE for b in OFFICIAL.benchmarks},
                    crown_test={"stage": 1, "difference": 0.02219, "weighted": 0.021, "se": 0.006,
                                "z": 3.5, "live_items": 20, "live_sessions": 120})
    else:
        base.update(reason="gate 5 (overfit): on mmlu …")
    if outcome == VOID:
        base.update(reason="void: the pool failed on 4 of 60 live questions")
    return Result(**{**base, **fields})


@pytest.mark.parametrize(("outcome", "branch"), [
    (KING, "king"), (LOST, "lost"), (REJECTED, "unscored"), (VOID, "unscored"), (STALE, "unscored")])
def test_every_public_view_matches_its_schema_branch(outcome, branch):
    public = result(outcome).public(PRECISION)
    validate("result", public)
    assert tuple(public) == PUBLIC_FIELDS[outcome]
    branch = schema("result")["$defs"][branch]
    assert set(branch["properties"]) == set(PUBLIC_FIELDS[outcome])
    assert set(branch["required"]) == set(PUBLIC_FIELDS[outcome])


@pytest.mark.parametrize(("outcome", "absent"), [
    # a loss: no components, not even the king's re-scored composite
    (LOST, ("per_benchmark", "king_composite", "live_cost_usd", "reason")),
    # a rejection: the reason only
    (REJECTED, ("per_benchmark", "king_composite", "ci95", "live_cost_usd")),
    # a void evaluation: nothing it measured before it failed
    (VOID, ("per_benchmark", "king_composite", "ci95", "live_cost_usd")),
])
def test_what_a_public_record_does_not_carry(outcome, absent):
    public = result(outcome).public(PRECISION)
    for name in absent:
        assert name not in public


def test_a_void_record_publishes_no_score_even_when_one_was_measured():
    public = result(VOID).public(PRECISION)
    assert public["composite"] is None and public["delta"] is None and "void" in public["reason"]


def test_a_loss_is_published_at_the_disclosure_precision():
    public = result(LOST, delta=-0.01377, ci95=(-0.0462, 0.0188)).public(PRECISION)
    assert (public["composite"], public["delta"], public["ci95"]) == (0.67, -0.01, None)


def test_a_king_shows_everything_but_its_audit_digits():
    public = result(KING).public(PRECISION)
    math = public["per_benchmark"]["math500"]
    assert math["audit_acc"] == 0.75 and math["cached_acc"] == SCORE.cached_acc
    assert public["composite"] == 0.67231 and public["ci95"] == [0.00412, 0.04187]


def test_the_private_record_keeps_the_seed_and_the_public_one_its_commitment():
    private = result(KING).private(PRECISION)
    assert private["partition"] == {"seed": PARTITION.seed, "salt": PARTITION.salt}
    assert private["public"] == result(KING).public(PRECISION)
    assert private["public"]["partition_commitment"] == PARTITION.commitment
    assert PARTITION.seed not in str(private["public"])
    assert Result.from_dict(private).partition == PARTITION


def test_partitions_are_fresh_and_commit_to_their_seed():
    first, second = Partition.draw(), Partition.draw()
    assert first.seed != second.seed and first.commitment != second.commitment
    other_salt = dataclasses.replace(first, salt=second.salt)
    assert other_salt.commitment != first.commitment


@pytest.mark.parametrize(("value", "shown"), [
    (0.6749, 0.67),
    (0.675001, 0.68),
    (-0.0049, 0.0),  # and never a negative zero
    ([0.0123, -0.0187], [0.01, -0.02]),
    (None, None),
])
def test_disclosed(value, shown):
    assert disclosed(value, 0.01) == shown


def test_records_read_back_what_they_wrote():
    public = result(KING).public(PRECISION)
    again = Result.from_dict(public)
    assert again.public(PRECISION) == public
    king = King.crowned(public, None)
    assert King.from_dict(king.to_dict()) == king and king.ci95 == (0.00412, 0.04187)
    crowning = Crowning.of(public)
    assert Crowning.from_dict(crowning.to_dict()) == crowning
    attempt = Attempt("alice", 2, 7, "a" * 40, "2026-11-30T09:00:00Z", "b" * 64, "q7:AAAA", True, None)
    assert Attempt.from_dict(attempt.to_dict()) == attempt
    validate("attempt", attempt.to_dict())


def test_a_loose_file_reads_as_what_it_holds():
    loose = Result.from_dict({"miner": "x", "outcome": "lost", "composite": "high", "ci95": [1]},
                             strict=False)
    assert (loose.composite, loose.ci95, loose.generation) == (None, None, 0)
    assert loose.public(PRECISION)["composite"] is None


def test_a_rounded_zero_has_no_sign():
    assert str(disclosed(-0.0049, 0.01)) == "0.0"


@pytest.mark.parametrize(("history", "refunded"), [
    ([VOID], True),
    ([VOID, LOST], False),  # evaluated again to a decision: the attempt counts once more
    ([LOST, VOID], False),  # a decision wins over a void, whatever the clocks say
    ([VOID, STALE], True),  # a stale run decides nothing
    ([KING], False),
    (["withdrawn"], False),  # the author's doing: the slot stays spent
    ([VOID, "withdrawn"], True),
])
def test_an_attempt_is_refunded_when_void_and_never_decided(history, refunded):
    from evaluator.records import refunded_heads

    results = [dataclasses.replace(result(outcome), evaluated_at=f"2026-11-30T1{i}:00:00Z")
               for i, outcome in enumerate(history)]
    assert (("a" * 40) in refunded_heads(reversed(results))) is refunded
