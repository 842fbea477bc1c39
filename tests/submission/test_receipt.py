"""receipt.json parsed strictly: every defect named."""

import json

import pytest

from evaluator.errors import SubmissionError
from evaluator.rules import OFFICIAL, RECEIPT_FORMAT
from evaluator.submission import load_receipt, parse_receipt
from evaluator.submission.receipt import format_problem

RECEIPT = {
    "format": 1, "miner": "alice", "generation": 1,
    "benchmarks": ["math500", "mmlu", "livecodebench"],
    "pool": list(OFFICIAL.pool_names), "n_params": 13312,
    "optimizer": {"name": "sep-cma-es", "popsize": 32, "sigma0": 0.1, "generations": 60, "seed": 0},
    "fitness_history": [{"generation": 0, "mean": 0.61, "max": 0.70, "best": 0.70}],
    "total_cost_usd": 31.2, "ledger_head": "0" * 64, "weights_sha256": "f" * 64,
    "init_weights_sha256": None, "held_out": None,
    "tinyrouter_version": "0.1.0", "created_at": "2026-11-28T10:00:00Z",
}


def variant(**changes) -> str:
    data = dict(RECEIPT)
    for key, value in changes.items():
        if value is ...:
            data.pop(key)
        else:
            data[key] = value
    return json.dumps(data)


RECEIPT_DEFECTS = [
    # structure
    ("not an object", "[1, 2]", "object"),
    ("not json", "{miner: alice}", "not valid JSON"),
    ("NaN literal", variant(total_cost_usd=0).replace('"total_cost_usd": 0', '"total_cost_usd": NaN'),
     "NaN"),
    ("Infinity literal", variant().replace("31.2", "Infinity"), "Infinity"),
    ("duplicate key", variant()[:-1] + ', "miner": "bob"}', "repeats"),
    ("unknown field", variant(bonus=1), "unknown field"),
    ("missing field", variant(ledger_head=...), "missing 'ledger_head'"),
    # types
    ("string generation", variant(generation="1"), "generation"),
    ("bool n_params", variant(n_params=True), "n_params"),
    ("float format", variant(format=1.0), "format"),
    ("bad login", variant(miner="al ice"), "miner"),
    ("unknown benchmark", variant(benchmarks=["gsm8k"]), "unknown benchmark"),
    ("repeated benchmark", variant(benchmarks=["mmlu", "mmlu"]), "benchmarks"),
    ("negative cost", variant(total_cost_usd=-1), "total_cost_usd"),
    ("short hash", variant(ledger_head="abc"), "ledger_head"),
    ("start point not a hash", variant(init_weights_sha256="king"), "init_weights_sha256"),
    ("uppercase hash", variant(weights_sha256="F" * 64), "weights_sha256"),
    ("bad time", variant(created_at="2026-11-28 10:00"), "created_at"),
    ("impossible date", variant(created_at="2026-13-45T10:00:00Z"), "created_at"),
    ("optimizer extra", variant(optimizer=dict(RECEIPT["optimizer"], lr=1)), "unknown field"),
    ("optimizer zero sigma", variant(optimizer=dict(RECEIPT["optimizer"], sigma0=0)), "sigma0"),
    ("fitness entry not object", variant(fitness_history=[1]), r"fitness_history\[0\]"),
    ("fitness entry missing best", variant(fitness_history=[{"generation": 0, "mean": 1, "max": 1}]),
     "missing 'best'"),
    ("held-out ids not an object", variant(held_out=["mmlu-1"]), "held_out"),
    ("held-out ids repeated", variant(held_out={"mmlu": ["a", "a"]}), "held_out"),
    ("held-out id empty", variant(held_out={"mmlu": [""]}), "held_out"),
    ("held-out id too long", variant(held_out={"mmlu": ["x" * 201]}), "held_out"),
    ("held-out ids of an unknown benchmark", variant(held_out={"gsm8k": ["a"]}),
     "unknown benchmark"),
]


@pytest.mark.parametrize(("case", "text", "message"), RECEIPT_DEFECTS,
                         ids=[c[0] for c in RECEIPT_DEFECTS])
def test_receipt_defects_are_named(case, text, message):
    with pytest.raises(SubmissionError, match=message):
        parse_receipt(text, rules=OFFICIAL)


@pytest.mark.parametrize("field", ["init_weights_sha256", "held_out", "weights_sha256"])
def test_every_field_is_required_even_one_that_may_be_null(field):
    with pytest.raises(SubmissionError, match=f"missing '{field}'"):
        parse_receipt(variant(**{field: ...}), rules=OFFICIAL)
    named = {"mmlu": ["mmlu-1", "mmlu-7"]}
    assert parse_receipt(variant(held_out=named), rules=OFFICIAL).held_out == named


@pytest.mark.parametrize(("found", "problem"), [
    (RECEIPT_FORMAT, None),
    (RECEIPT_FORMAT - 1, "older tinyrouter"),
    (RECEIPT_FORMAT + 1, "newer tinyrouter"),
    ("1", None),  # not a format number at all: gate 4 names it
])
def test_a_receipt_of_another_format_is_told_to_re_pack(tmp_path, found, problem):
    path = tmp_path / "receipt.json"
    path.write_text(variant(format=found))
    reason = format_problem(path)
    assert (reason is None) == (problem is None)
    if problem:
        assert problem in reason and "re-pack with this version" in reason


def test_valid_receipt_parses_and_oversize_is_refused(tmp_path):
    assert parse_receipt(variant(), rules=OFFICIAL).generation == 1
    path = tmp_path / "receipt.json"
    path.write_text(variant(tinyrouter_version="0.1.0") + " " * OFFICIAL.max_receipt_bytes)
    with pytest.raises(SubmissionError, match="at most"):
        load_receipt(path, rules=OFFICIAL)
