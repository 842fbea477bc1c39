"""Advisories: each fires on the head or receipt it describes, and stays quiet otherwise."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from evaluator.advisories import (
    COLLAPSE_SHARE,
    ledger_advisories,
    receipt_advisories,
    routing_advisories,
    weight_advisories,
)
from evaluator.pool.ledger import Ledger
from evaluator.rules import OFFICIAL


def ids(found):
    return [a.id for a in found]


@pytest.fixture
def trained(trained_weights):
    head, scales = trained_weights(0)
    return head.astype(np.float64), scales.astype(np.float64)


def roles_alike(h, s):
    h[3:] = h[3]
    return h, s


def models_alike(h, s):
    h[:3] = 0.5
    return h, s


def scales_far(h, s):
    s[: len(s) // 10] = 9.0
    return h, s


def scales_a_little_far(h, s):
    s[: len(s) // 100] = 9.0  # 1 % of them: not worth a word
    return h, s


def scales_through_zero(h, s):
    s[: len(s) // 5] = -0.5  # silenced or flipped directions, as training leaves many
    s[len(s) // 5: len(s) // 3] = 0.01
    return h, s


WEIGHT_CASES = [
    ("a trained head", lambda h, s: (h, s), []),
    ("role rows all alike", roles_alike, ["roles-fixed"]),
    ("model rows all alike", models_alike, ["models-fixed"]),
    ("a tenth of the scales far from 1", scales_far, ["scales-drifted"]),
    ("a few scales far from 1", scales_a_little_far, []),
    ("scales through zero, as training leaves them", scales_through_zero, []),
]


@pytest.mark.parametrize(("case", "change", "expected"), WEIGHT_CASES,
                         ids=[c[0] for c in WEIGHT_CASES])
def test_weight_advisories(trained, case, change, expected):
    head, scales = change(*trained)
    assert ids(weight_advisories(head, scales, OFFICIAL)) == expected


def history(*rows):
    return [{"generation": g, "mean": m, "max": x, "best": b} for g, (m, x, b) in enumerate(rows)]


RECEIPT_CASES = [
    ("as pack writes it", {}, []),
    ("generations disagree", {"optimizer": {"generations": 7}}, ["history-length"]),
    ("best below an earlier max", {"fitness_history": history((0.5, 0.6, 0.6), (0.5, 0.55, 0.55),
                                                               (0.5, 0.58, 0.58))},
     ["history-values"]),
    ("max below its mean", {"fitness_history": history((0.5, 0.4, 0.6), (0.5, 0.6, 0.6),
                                                        (0.5, 0.6, 0.6))}, ["history-values"]),
]


@pytest.mark.parametrize(("case", "change", "expected"), RECEIPT_CASES,
                         ids=[c[0] for c in RECEIPT_CASES])
def test_receipt_advisories(make_receipt_fields, case, change, expected):
    receipt = copy.deepcopy(make_receipt_fields())
    for key, value in change.items():
        receipt[key] = {**receipt[key], **value} if isinstance(value, dict) else value
    assert ids(receipt_advisories(receipt)) == expected


def test_generations_out_of_order_are_named(make_receipt_fields):
    receipt = make_receipt_fields()
    receipt["fitness_history"] = [dict(h, generation=2 - i)
                                  for i, h in enumerate(receipt["fitness_history"])]
    assert "history-order" in ids(receipt_advisories(receipt))


def test_the_ledger_backs_the_receipt_or_says_how_it_does_not(tmp_path, make_receipt_fields):
    receipt_fields = make_receipt_fields
    ledger = Ledger(tmp_path / "ledger.jsonl")
    ledger.append(OFFICIAL.pool_names[0], 10, 5, 0.25, "gen-1")
    entry = ledger.append(OFFICIAL.pool_names[1], 10, 5, 0.5, "gen-2")
    matching = receipt_fields(total_cost_usd=0.75, ledger_head=entry["hash"])
    assert ledger_advisories(matching, tmp_path / "ledger.jsonl") == []
    assert ids(ledger_advisories(receipt_fields(total_cost_usd=0.75),
                                 tmp_path / "ledger.jsonl")) == ["ledger-head"]
    assert ids(ledger_advisories(dict(matching, total_cost_usd=9.0),
                                 tmp_path / "ledger.jsonl")) == ["ledger-cost"]
    (tmp_path / "ledger.jsonl").write_text("edited\n")
    assert ids(ledger_advisories(matching, tmp_path / "ledger.jsonl")) == ["ledger-unreadable"]


def split(share: float, n: int = 200) -> list[str]:
    return ["a"] * round(share * n) + ["b"] * (n - round(share * n))


@pytest.mark.parametrize(("picks", "expected"), [
    (split(COLLAPSE_SHARE), ["routing-collapse"]),
    (split(COLLAPSE_SHARE - 0.01), []),
    (["a", "b", "c"] * 10, []),
])
def test_routing_collapse(picks, expected):
    assert ids(routing_advisories({"mmlu": picks, "math500": []})) == expected
