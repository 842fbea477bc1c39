"""Why a verdict is what it is: one sentence per case, from the public record alone."""

import dataclasses

import pytest

from evaluator.explain import explain, explain_gate
from evaluator.records import Attempt
from evaluator.rules import OFFICIAL

ID = {"miner": "bob", "generation": 2, "pr": 7, "head_sha": "a" * 40,
      "evaluated_at": "2026-11-29T12:00:00Z"}


def lost(composite, king, low, high=0.09):
    return {**ID, "outcome": "lost", "composite": composite, "king_composite": king,
            "delta": composite - king, "ci95": [low, high]}


@pytest.mark.parametrize(("record", "says", "delta"), [
    # a loss, rounded to the disclosure precision before anything is said about it
    (lost(0.6301, 0.6093, -0.04), "The interval reaches below zero (-0.04): the +0.02 clears", 0.02),
    (lost(0.6201, 0.6093, 0.013), "Short of the margin: +0.01 where +0.02 is needed.", 0.01),
    (lost(0.6301, 0.6093, 0.003), "The interval does not clear zero (its lower end rounds to "
     "+0.00): the +0.02 clears the margin but could be chance.", 0.02),
    (lost(0.6201, 0.6093, -0.01), "Short of the margin (+0.01 where +0.02 is needed), and the "
     "interval of the difference reaches below zero (-0.01).", 0.01),
    (lost(0.6261, 0.6093, 0.011), "Short of the margin before rounding", 0.02),
    # the published record of a loss has no king composite: Δ is still composite minus it
    ({**ID, "outcome": "lost", "composite": 0.63, "delta": 0.02, "ci95": [-0.04, 0.06]},
     "could be chance", 0.02),
    ({**ID, "outcome": "king", "composite": 0.64, "king_composite": 0.5623, "delta": 0.0777,
      "ci95": [0.01, 0.12]}, "Crowned: +0.0777 over the king re-scored on the same items "
     "(at least +0.02 is needed), and the 95% interval of the difference, +0.0100 to +0.1200, "
     "lies above zero.", 0.0777),
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
    why = explain(lost(0.63014, 0.60931, -0.0412, 0.0587), OFFICIAL)
    assert (why.composite, why.against, why.interval) == (0.63, 0.61, (-0.04, 0.06))
    assert "0.0" not in why.sentence.replace("0.02", "").replace("0.04", "")


def test_the_margin_comes_from_the_rules():
    wide = dataclasses.replace(OFFICIAL, win_margin=0.05)
    assert "+0.05 is needed" in explain(lost(0.6301, 0.5993, 0.01), wide).sentence


@pytest.mark.parametrize(("gate", "says"), [
    (3, "Rejected at gate 3 (duplicate) before any evaluation: a copy of a head"),
    (4, "Rejected at gate 4 (receipt) before any evaluation"),
    (9, "Rejected at gate 9 before any evaluation"),
])
def test_a_head_stopped_at_a_gate_says_which_and_why(gate, says):
    attempt = Attempt("oscar", 1, 3, "b" * 40, "2026-11-29T12:00:00Z", failed_gate=gate)
    why = explain_gate(attempt)
    assert why.sentence.startswith(says) and why.gate == gate and why.composite is None


def test_a_loss_shows_the_interval_beside_the_difference_it_brackets():
    # the published Δ reads the eval half with the overfit factor; the crown test reads every
    # cached item and live question without it, so Δ can lie outside the test's interval
    from evaluator.reports import headline

    test = {"stage": 1, "difference": -0.0712, "se": 0.015, "z": -4.7, "live_items": 20}
    record = {**lost(0.5801, 0.6093, -0.1006, -0.0418), "crown_test": test}
    why = explain(record, OFFICIAL)
    assert (why.delta, why.difference, why.interval) == (-0.03, -0.07, (-0.1, -0.04))
    assert why.interval_words() == ("the crown test's difference -0.07, 95% interval -0.10 to "
                                    "-0.04")
    assert why.to_dict()["crown_difference"] == -0.07
    assert headline(record).endswith("delta -0.03 (crown test difference -0.07, 95% interval "
                                     "-0.10 to -0.04)")
    older = explain(lost(0.6301, 0.6093, -0.04), OFFICIAL)  # recorded before crown tests
    assert older.difference is None
    assert older.interval_words() == "95% interval of the difference -0.04 to +0.09"
