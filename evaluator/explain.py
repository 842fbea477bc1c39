"""Why a verdict is what it is, in one place: every page, download and comment says it this way.

`explain` reads only a result's public record (the disclosure rule applied first), so what it
says never reveals more than the record does. Its numbers are the disclosed ones, and its Δ is
the disclosed composite minus the disclosed composite of the king it was judged against, so
the three always add up where they are shown side by side. `explain_gate` does the same for a
head that a gate stopped before any evaluation (an attempt with no result).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from evaluator.gates import GATES
from evaluator.records import KING, LOST, REJECTED, STALE, VOID, WITHDRAWN, Attempt, Result
from evaluator.rules import Competition

FULL_PLACES = 4  # a king's figures are published in full; shown to this many decimals
GATE_WHY = {  # gate name → what stopping there means, in the miner's words
    "scope": "the pull request changes files outside its own submission folder",
    "rate limit": "the miner's rate-limit slot was not open yet",
    "weight sanity": "the weights file is not a valid head",
    "duplicate": "a copy of a head already submitted (the king's or another miner's)",
    "receipt": "the training receipt does not hold up",
}


@dataclass(frozen=True)
class Explanation:
    """A verdict as published: the outcome, the disclosed figures and one sentence of why.

    `against` is the king's composite the head was judged against (re-scored in the same run,
    on the same items); `places` the decimals every figure is disclosed to. `interval` is the
    95% interval of the crown test's difference (every cached item and live question, without
    the overfit factor), which is `difference`, its centre, where the record carries its crown
    test: Δ, the published composites' difference, need not lie inside it."""

    outcome: str
    composite: float | None
    against: float | None
    delta: float | None
    interval: tuple[float, float] | None
    places: int
    sentence: str
    gate: int | None = None  # the gate that stopped it, for a head never evaluated
    difference: float | None = None

    COLUMNS = ("shown_composite", "judged_against", "shown_delta", "crown_difference",
               "ci95_low", "ci95_high", "why")

    def to_dict(self) -> dict[str, Any]:
        """The columns a download carries beside the record."""
        low, high = self.interval or (None, None)
        return {"shown_composite": self.composite, "judged_against": self.against,
                "shown_delta": self.delta, "crown_difference": self.difference,
                "ci95_low": low, "ci95_high": high, "why": self.sentence}

    def interval_words(self) -> str:
        """The interval as a sentence's parenthesis says it: with the difference it brackets."""
        if self.interval is None and self.outcome == LOST:
            return "the crown test's figures read the items never published: a loss shows none"
        if self.interval is None:
            return "no interval recorded"
        low, high = (_signed(v, self.places) for v in self.interval)
        if self.difference is None:
            return f"95% interval of the difference {low} to {high}"
        return (f"the crown test's difference {_signed(self.difference, self.places)}, 95% "
                f"interval {low} to {high}")


def _places(precision: float) -> int:
    return max(0, round(-math.log10(precision)))


def _round(value: float | None, places: int) -> float | None:
    return None if value is None else round(value, places) + 0.0


def _signed(value: float, places: int) -> str:
    return f"{round(value, places) + 0.0:+.{places}f}"


def _clause(reason: str | None, prefix: str) -> str:
    """The recorded reason without a repeated outcome word, as the end of a sentence."""
    text = " ".join((reason or "no reason was recorded").split()).rstrip(".")
    if text.lower().startswith(prefix + ":"):
        text = text[len(prefix) + 1:].strip()
    return text


def _sentence(outcome: str, delta: float | None, test: dict[str, Any] | None, places: int,
              rules: Competition) -> str:
    """The verdict of a king or a loss, from its published crown test (`evaluator.verdict`)."""
    if test is None and outcome == KING:
        return "Crowned: the first head to pass every check, with no king to beat."
    where = "" if test is None else f" after live stage {test['stage']} of {len(rules.live_stages)}"
    if test is None or "z" not in test or outcome != KING:  # a loss shows none of its figures
        return (f"Not crowned{where}: the crown test did not show a lead of "
                f"{rules.win_margin:+g} or more, beyond chance, on the items that were never "
                "published.")
    over = ("" if delta is None
            else f"{_signed(delta, places)} over the king re-scored on the same items; ")
    return (f"Crowned{where}: {over}the difference without the overfit factor, "
            f"{_signed(test['difference'], places)}, reaches the margin of "
            f"{rules.win_margin:+g} and its z of {test['z']:.2f} clears "
            f"{rules.crown_bar(int(test['stage']))}.")


def explain(record: Result | dict[str, Any], rules: Competition) -> Explanation:
    """The published verdict of one evaluation (a Result, or its public or private record)."""
    result = record if isinstance(record, Result) else Result.from_dict(record)
    public = Result.from_dict(result.public(rules.disclosure_precision))
    outcome = public.outcome
    places = _places(rules.disclosure_precision) if outcome == LOST else FULL_PLACES
    if outcome not in (KING, LOST):
        words = {VOID: ("Void", "no score, and the attempt is refunded"),
                 STALE: ("Stale", "it is evaluated again against the new king"),
                 WITHDRAWN: ("Withdrawn", "nothing about its score is published, and the "
                                          "attempt stays spent")}
        if outcome in words:
            label, then = words[outcome]
            sentence = f"{label}: {_clause(public.reason, outcome)}; {then}."
        else:
            reason = _clause(public.reason, REJECTED)
            sentence = (f"Rejected at {reason}." if reason.lower().startswith("gate ")
                        else f"Rejected: {reason}.")
        return Explanation(outcome, None, None, None, None, places, sentence)
    composite = _round(public.composite, places)
    against = public.king_composite
    if against is None and public.delta is not None and public.composite is not None:
        against = public.composite - public.delta  # a loss publishes only its delta
    against = _round(against, places)
    delta = (None if composite is None or against is None
             else _round(composite - against, places))
    interval = (None if public.ci95 is None
                else (_round(public.ci95[0], places), _round(public.ci95[1], places)))
    sentence = _sentence(outcome, delta, public.crown_test, places, rules)
    difference = (_round(public.crown_test["difference"], places)
                  if public.crown_test and interval is not None else None)
    return Explanation(outcome, composite, against, delta, interval, places, sentence,
                       difference=difference)


def _gate_name(gate: int | None) -> str | None:
    return next((g.name for g in GATES if g.number == gate), None)


def gate_label(gate: int | None) -> str:
    """"gate 3 (duplicate)": a gate by number and name, as every page names it."""
    name = _gate_name(gate)
    return "a gate" if gate is None else f"gate {gate} ({name})" if name else f"gate {gate}"


def explain_gate(attempt: Attempt) -> Explanation:
    """A head a gate stopped before any evaluation: no score, the gate and what it means."""
    gate = attempt.failed_gate
    what = GATE_WHY.get(_gate_name(gate) or "", "it did not pass")
    where = gate_label(gate)
    return Explanation(REJECTED, None, None, None, None, FULL_PLACES,
                       f"Rejected at {where} before any evaluation: {what}. The pull "
                       f"request's comment gives the detail.", gate=gate)
