"""The PR comment and job summary templates: per outcome, what they say and what they must not."""

import dataclasses
import re

import pytest

from evaluator.reports import render_result
from evaluator.rules import OFFICIAL

BENCHES = OFFICIAL.benchmarks
HOSTILE = "<img src=x onerror=alert(1)> [x](javascript:alert(1))"


def part(score):
    return {"cached_acc": 0.812, "audit_acc": 0.79, "live_acc": 0.75, "avg_turns": 2.4,
            "efficiency": 0.4875, "novelty": 0.32, "overfit_penalty": 1.0, "score": score}


IDENTITY = {"format": 1, "miner": "alice", "generation": 2, "pr": 12, "head_sha": "a" * 40,
            "evaluated_at": "2026-11-29T12:00:00Z", "benchmark_manifest": "f" * 64,
            "partition_commitment": "c" * 64}
KING = {**IDENTITY, "outcome": "king", "composite": 0.7134, "king_composite": 0.69,
        "delta": 0.0234, "ci95": [0.005, 0.055], "reason": None,
        "crown_test": {"stage": 1, "difference": 0.03, "weighted": 0.03, "se": 0.0085, "z": 3.52,
                       "live_items": 20, "live_sessions": 120},
        "per_benchmark": {b: part(0.7134) for b in BENCHES}, "live_cost_usd": 0.41}
FIRST = {**KING, "king_composite": None, "delta": None, "ci95": None, "crown_test": None}
LOST = {**IDENTITY, "outcome": "lost", "composite": 0.7, "delta": 0.01, "ci95": None,
        "crown_test": {"stage": 1, "live_items": 20, "live_sessions": 120}}
REJECTED = {**IDENTITY, "outcome": "rejected", "composite": None, "delta": None,
            "reason": f"gate 4 (receipt): receipt.json: miner is {HOSTILE}"}


@pytest.mark.parametrize(("template", "result", "says"), [
    # a new king: the full breakdown in the summary, the delta in the comment
    ("summary", KING, ["New king", "| mmlu | 0.812 | 0.79 | 0.750 | 2.40 | 0.487 | 0.320",
                       "+0.0050 to +0.0550", "$0.4100"]),
    ("comment", KING, ["is the new king", "+0.0234", "0.6900", "+0.0050 to +0.0550"]),
    ("summary", FIRST, ["no king reigned"]),
    ("comment", FIRST, ["**0.7134**"]),
    # a loss: the composite, the delta and what it missed, at two decimals; none of its crown
    # test's figures (they read the never-published audit)
    ("summary", LOST, ["Not crowned", "0.70", "+0.01", "the crown test's figures read the items "
                       "never published: a loss shows none", "+0.02", "tells it from chance"]),
    ("summary", {**LOST, "crown_test": {"stage": 2, "live_items": 60, "live_sessions": 360}},
     ["Not crowned after live stage 2 of 2", "did not show a lead of \\+0.02 or more"]),
    ("comment", LOST, ["did not take the crown", "+0.01", "a loss shows none"]),
    # a rejection: the gate and its reason
    ("summary", REJECTED, ["Rejected", "gate 4 \\(receipt\\)"]),
    ("comment", REJECTED, ["was rejected", "No score is published"]),
])
def test_reports_say_what_the_outcome_allows(template, result, says):
    text = render_result(template, result, OFFICIAL)
    for phrase in says:
        assert phrase in text
    assert "&#39;" not in text and "&amp;" not in text  # Markdown, not HTML: quotes stay quotes
    if result["outcome"] != "king":
        assert "0.812" not in text and "novelty" not in text and "cached" not in text
    if result["outcome"] == "lost":  # nothing finer than the disclosure precision
        assert not re.search(r"\d\.\d{3}", text)


@pytest.mark.parametrize("template", ["summary", "comment"])
def test_untrusted_text_is_escaped(template):
    text = render_result(template, REJECTED, OFFICIAL)
    assert "<img" not in text and "](javascript" not in text


def test_margin_in_reports_comes_from_the_rules():
    wide = dataclasses.replace(OFFICIAL, win_margin=0.05)
    assert "+0.05" in render_result("comment", LOST, wide)
