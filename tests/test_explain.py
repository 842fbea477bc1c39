"""Why a verdict is what it is: one sentence per case, from the public record alone."""

import dataclasses

import pytest

from evaluator.explain import explain, explain_gate
from evaluator.records import Attempt
from evaluator.rules import OFFICIAL

ID = {"miner": "bob", "generation": 2, "pr": 7, "head_sha": "a" * 40,
      "evaluated_at": "2026-11-29T12:00:00Z"}


def lost(composite, king, stage=2):
    """A loss as the evaluation records it: its crown test's figures and interval read the
    never-published audit, and the disclosure rule keeps only where the test ended."""
    return {**ID, "outcome": "lost", "composite": composite, "king_composite": king,
            "delta": composite - king, "ci95": [-0.04, 0.09],
            "crown_test": {"stage": stage, "difference": 0.0312, "se": 0.01, "z": 2.7,
                           "live_items": 20 * stage, "live_sessions": 120 * stage}}


@pytest.mark.parametrize(("record", "says", "delta"), [
    # a loss, rounded to the disclosure precision, and said to end where its test did
    (lost(0.6301, 0.6093), "Not crowned after live stage 2 of 2: the crown test did not show a "
     "lead of +0.02 or more, beyond chance, on the items that were never published.", 0.02),
    (lost(0.6201, 0.6093, stage=1), "Not crowned after live stage 1 of 2", 0.01),
    ({**ID, "outcome": "king", "composite": 0.64, "king_composite": 0.5623, "delta": 0.0777,
      "ci95": [0.01, 0.12], "crown_test": {"stage": 1, "difference": 0.065, "se": 0.018,
                                           "z": 3.61, "live_items": 20, "live_sessions": 120}},
     "Crowned after live stage 1 of 2: +0.0777 over the king re-scored on the same items; the "
     "difference without the overfit factor, +0.0650, reaches the margin of +0.02 and its z of "
     "3.61 clears 3.29.", 0.0777),
    ({**ID, "outcome": "king", "composite": 0.64}, "the first head to pass every check", None),
    ({**ID, "outcome": "rejected", "reason": "gate 5 (overfit): math500 gap 0.19 > 0.15"},
     "Rejected at gate 5 (overfit): math500 gap 0.19 > 0.15.", None),
    ({**ID, "outcome": "rejected", "reason": "behaviour: routes like the king."},
     "Rejected: behaviour: routes like the king.", None),
    ({**ID, "outcome": "void", "reason": "void: the pool failed"},
     "Void: the pool failed; no score, and the attempt is refunded.", None),
    ({**ID, "outcome": "stale", "reason": "the king changed while it ran"},
     "Stale: the king changed while it ran; it is evaluated again against the new king.", None),
])
def test_each_verdict_says_why(record, says, delta):
    why = explain(record, OFFICIAL)
    assert says in why.sentence
    assert why.delta == delta
    if delta is not None:
        assert round(why.composite - why.against, why.places) == pytest.approx(delta)


def test_a_loss_says_nothing_finer_than_the_disclosure_precision():
    why = explain(lost(0.63014, 0.60931), OFFICIAL)
    assert (why.composite, why.against, why.interval, why.difference) == (0.63, 0.61, None, None)
    assert "0.0312" not in why.sentence and "2.7" not in why.sentence


def test_the_margin_comes_from_the_rules():
    wide = dataclasses.replace(OFFICIAL, win_margin=0.05)
    assert "a lead of +0.05 or more" in explain(lost(0.6301, 0.5993), wide).sentence


@pytest.mark.parametrize(("gate", "says"), [
    (3, "Rejected at gate 3 (duplicate) before any evaluation: a copy of a head"),
    (4, "Rejected at gate 4 (receipt) before any evaluation"),
    (9, "Rejected at gate 9 before any evaluation"),
])
def test_a_head_stopped_at_a_gate_says_which_and_why(gate, says):
    attempt = Attempt("oscar", 1, 3, "b" * 40, "2026-11-29T12:00:00Z", failed_gate=gate)
    why = explain_gate(attempt)
    assert why.sentence.startswith(says) and why.gate == gate and why.composite is None


def test_a_loss_shows_none_of_its_crown_tests_figures():
    """The crown test reads the never-published audit: a campaign keeping whichever loss's
    test figures went up would climb there, so a loss publishes its composite and delta (the
    eval half and live play) and where its test ended, no difference, z or interval."""
    from evaluator.records import Result
    from evaluator.reports import headline

    record = Result.from_dict(lost(0.5801, 0.6093, stage=1)).public(OFFICIAL.disclosure_precision)
    assert record["ci95"] is None
    assert record["crown_test"] == {"stage": 1, "live_items": 20, "live_sessions": 120}
    why = explain(record, OFFICIAL)
    assert (why.delta, why.difference, why.interval) == (-0.03, None, None)
    assert "a loss shows none" in why.interval_words()
    assert headline(record).endswith("not crowned after live stage 1: composite 0.58, delta -0.03")
