"""The records' one codec: every record class written byte for byte as the fixture holds it
(written by the hand-written codecs it replaced), read back, refused strictly, read leniently."""

from __future__ import annotations

import copy
import dataclasses
import json
from pathlib import Path

import pytest

from evaluator.codec import decode
from evaluator.errors import LeaderboardError
from evaluator.files import dumps
from evaluator.records import (
    Attempt,
    Crowning,
    HeadRecord,
    HeadRef,
    King,
    Outcome,
    Partition,
    PreviousKing,
    Result,
    Seen,
)
from evaluator.scoring import BenchmarkScore

FIXTURE = Path(__file__).parent / "fixtures" / "records.json"
PRECISION = 0.01
SCORE = BenchmarkScore(cached_acc=0.8133, audit_acc=0.7466667, live_acc=0.65, avg_turns=2.35,
                       efficiency=0.4387, novelty=0.31, overfit_penalty=1.0, score=0.6723)
BENCHES = ("math500", "mmlu", "livecodebench")
PARTITION = Partition(seed="ab" * 32, salt="cd" * 16)
SEEN = Seen("0123456789abcdef")
HEAD = HeadRecord(miner="alice", generation=2, pr=7, head_sha="a" * 40, composite=0.67231,
                  per_benchmark={b: SCORE for b in BENCHES}, live_cost_usd=0.4231,
                  items={"math500": {"eval": [["q1", True]], "live": []}})
TEST = {"stage": 2, "difference": 0.03117, "se": 0.01201, "z": 2.5953, "live_items": 40}


def result(outcome: str, **more) -> Result:
    base = dict(miner="alice", generation=2, pr=7, head_sha="a" * 40,
                evaluated_at="2026-11-30T10:00:00Z", outcome=outcome,
                benchmark_manifest="f" * 64, partition_commitment=PARTITION.commitment,
                isolation="bubblewrap", partition=PARTITION)
    if outcome in ("king", "lost", "void"):
        base.update(composite=0.67231, king_composite=0.65012, delta=0.02219,
                    ci95=(0.00412, 0.04187), live_cost_usd=0.4231, crown_test=dict(TEST),
                    per_benchmark={b: SCORE for b in BENCHES},
                    router_card={"mix": {"qwen": 0.5}, "cost_usd": 0.01},
                    against=HeadRef("bob", 1, 6, "b" * 40))
    if outcome not in ("king", "lost"):
        base.update(reason=f"{outcome}: a reason")
    return Result(**{**base, **more})


KING = King(miner="alice", generation=2, pr=7, head_sha="a" * 40, composite=0.67231,
            per_benchmark={b: SCORE for b in BENCHES}, crowned_at="2026-11-30T10:00:00Z",
            ci95=(0.00412, 0.04187), previous=PreviousKing("bob", 1, 0.65012))
FIRST = King(miner="seed", generation=1, pr=None, head_sha=None, composite=0.6, per_benchmark={},
             crowned_at="2026-11-01T00:00:00Z")

# (fixture key, the record, how it is written)
WRITTEN = [
    ("BenchmarkScore", SCORE, "to_dict"),
    ("Partition", PARTITION, "to_dict"),
    ("Seen", SEEN, "to_dict"),
    ("Attempt", Attempt("alice", 2, 7, "a" * 40, "2026-11-30T09:00:00Z", "b" * 64, "q7:AAAA",
                        True, None), "to_dict"),
    ("Attempt.failed", Attempt("bob", 1, 8, "c" * 40, "2026-11-30T09:00:00Z", None, None, False,
                               2), "to_dict"),
    ("Attempt.seen", Attempt("carol", 3, 9, "d" * 40, "2026-11-30T09:00:00Z", "e" * 64,
                             "q7:AAAA", True, None, SEEN), "to_dict"),
    ("HeadRecord", HEAD, "to_dict"),
    ("King", KING, "to_dict"),
    ("King.first", FIRST, "to_dict"),
    ("PreviousKing", PreviousKing("bob", 1, None), "to_dict"),
    ("Crowning", Crowning.of(result("king").public(PRECISION)), "to_dict"),
    *[(f"Result.{o}.public", result(o), "public") for o in Outcome],
    ("Result.king.private", result("king", challenger_run=HEAD, king_run=HEAD), "private"),
    ("Result.rejected.private", result("rejected", partition=None), "private"),
]


def written(record, how: str) -> dict:
    return record.to_dict() if how == "to_dict" else getattr(record, how)(PRECISION)


def test_every_record_writes_the_fixture_byte_for_byte():
    assert dumps({key: written(r, how) for key, r, how in WRITTEN}) == FIXTURE.read_text("utf-8")


@pytest.mark.parametrize(("key", "record", "how"), WRITTEN, ids=[w[0] for w in WRITTEN])
def test_a_record_reads_back_strictly_and_writes_the_same_bytes(key, record, how):
    on_disk = json.loads(FIXTURE.read_text("utf-8"))[key]
    again = type(record).from_dict(copy.deepcopy(on_disk), strict=True)
    assert dumps(written(again, how)) == dumps(on_disk)
    if how != "public":  # a public view leaves undisclosed fields out
        assert again == record


def _attempt() -> dict:
    return json.loads(FIXTURE.read_text("utf-8"))["Attempt.seen"]


def _king() -> dict:
    return json.loads(FIXTURE.read_text("utf-8"))["King"]


def _result() -> dict:
    return json.loads(FIXTURE.read_text("utf-8"))["Result.king.public"]


@pytest.mark.parametrize(("cls", "data", "refused"), [
    # a field missing, at the top or nested
    (Attempt, {k: v for k, v in _attempt().items() if k != "at"}, "at is missing"),
    (Crowning, {k: v for k, v in json.loads(FIXTURE.read_text("utf-8"))["Crowning"].items()
                if k != "delta"}, "delta is missing"),  # None has to be written, not left out
    (King, {**_king(), "previous": {"miner": "bob", "generation": 1}},
     "previous.composite is missing"),
    # a field it does not know
    (Attempt, {**_attempt(), "extra": 1}, "extra is not a field of Attempt"),
    (Attempt, {**_attempt(), "gates": {"passed": True, "failed": None, "why": ""}},
     "gates.why is not a field of Attempt"),
    (Result, {**_result(), "public": {}, "seed": "x"}, "seed is not a field of Result"),
    # a number that is not finite
    (King, {**_king(), "composite": float("nan")}, "composite should be a finite number"),
    (Result, {**_result(), "ci95": [0.0, float("inf")]}, "ci95 should be a finite number"),
    (Result, {**_result(), "per_benchmark": {"mmlu": {**SCORE.to_dict(), "score": float("nan")}}},
     "per_benchmark.mmlu.score should be a finite number"),
    # a value of the wrong type
    (Attempt, {**_attempt(), "generation": "2"}, "generation should be int, not str"),
    (Attempt, {**_attempt(), "generation": True}, "generation should be int, not bool"),
    (Attempt, {**_attempt(), "gates": {"passed": "yes", "failed": None}},
     "gates.passed should be bool"),
    (Attempt, {**_attempt(), "gates": []}, "gates should be a JSON object"),
    (Attempt, {**_attempt(), "seen": {"basis": 16}}, "seen.basis should be str"),
    (Result, {**_result(), "outcome": "crowned"}, "outcome should be one of king, lost"),
    (Result, {**_result(), "ci95": [0.1]}, "ci95 should be a list of 2"),
    (Crowning, {**json.loads(FIXTURE.read_text("utf-8"))["Crowning"], "scores": {"mmlu": "x"}},
     "scores.mmlu should be a finite number"),
    (Partition, ["ab", "cd"], "Partition should be a JSON object"),
])
def test_strict_reading_refuses_and_names_the_field(cls, data, refused):
    with pytest.raises(LeaderboardError, match=refused):
        decode(cls, data, strict=True)


@pytest.mark.parametrize(("cls", "data", "reads"), [
    # a top-level field of the wrong type reads as None, else as the text, 0 or its default
    (Result, {"miner": "x", "outcome": "lost", "composite": "high", "ci95": [1]},
     dict(miner="x", outcome=Outcome.LOST, composite=None, ci95=None, generation=0)),
    (Result, {"outcome": "crowned"}, dict(miner="None", outcome="crowned", evaluated_at="None")),
    (Attempt, {"miner": "m", "gates": "yes", "seen": {"basis": 16}},
     dict(gates_passed=False, failed_gate=None, seen=None, pr=None)),
    # a nested record reads whole or not at all; a dict leaves out what it cannot read
    (Result, {"per_benchmark": {"mmlu": SCORE.to_dict(), "math500": {"score": 0.5}}},
     dict(per_benchmark={"mmlu": SCORE})),
    (Result, {"partition": {"seed": "ab"}}, dict(partition=None)),
    (Result, {"challenger": {**HEAD.to_dict(), "later_field": 1}}, dict(challenger_run=HEAD)),
    (Crowning, {"scores": {"mmlu": 0.5, "math500": "x"}}, dict(scores={"mmlu": 0.5})),
    (King, {"previous": {"miner": "bob"}}, dict(previous=None, per_benchmark={})),
])
def test_lenient_reading_shows_what_a_file_holds(cls, data, reads):
    record = decode(cls, data, strict=False)
    assert {name: getattr(record, name) for name in reads} == reads


def _outcome(cls, data, strict):
    try:
        return decode(cls, copy.deepcopy(data), strict=strict)
    except LeaderboardError as exc:
        return str(exc)


def test_the_identity_is_defined_once():
    identity = ("miner", "generation", "pr", "head_sha")
    for cls in (Attempt, HeadRecord, Result, King, Crowning):
        assert issubclass(cls, HeadRef)
        assert tuple(cls.__dataclass_fields__)[:4] == identity
        assert not set(identity) & set(vars(cls).get("__annotations__", {}))
    assert result("lost").ref == HeadRef("alice", 2, 7, "a" * 40)
    assert result("lost").key == KING.key == ("alice", 2, 7, "a" * 40)


def test_an_outcome_is_its_text_on_disk():
    assert json.dumps(Outcome.KING) == '"king"' and f"{Outcome.STALE}" == "stale"
    assert Result.from_dict(_result()).outcome is Outcome.KING


@dataclasses.dataclass(frozen=True)
class Checked:
    x: int

    def __post_init__(self) -> None:
        if self.x < 0:
            raise ValueError("x must not be negative")


def test_a_record_that_refuses_its_values_is_refused_when_read():
    with pytest.raises(LeaderboardError, match="must not be negative"):
        decode(Checked, {"x": -1})
