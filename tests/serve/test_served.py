"""Which head a server routes through: the king only with the weights the board recorded."""

from __future__ import annotations

import json

import numpy as np
import pytest
from kings import crown

from evaluator.errors import LeaderboardError, UsageError
from evaluator.files import parse_time
from evaluator.rules import WEIGHTS_FILE
from evaluator.serve import head_at, king_of
from evaluator.submission import write_weights
from evaluator.train.run import BEST_FILE, HISTORY_FILE, SUMMARY_FILE


def other_weights(folder, rules) -> None:
    """Weights the board never saw, in the king's folder (a stale pull, a hand edit)."""
    rng = np.random.default_rng(99)
    write_weights(folder / WEIGHTS_FILE, rng.normal(size=rules.head_shape),
                  np.ones(rules.svf_scale_count))


@pytest.fixture
def board(repo, tiny_rules, king_weights, make_receipt_fields):
    def make(**options):
        return crown(repo, tiny_rules, king_weights, make_receipt_fields, **options)

    return make


@pytest.mark.parametrize(("options", "tamper", "refusal"), [
    # a king crowned through a pull request: its gates pass records the weights' digest
    ({}, False, None),
    ({}, True, "not the crowned weights"),
    ({"record_attempt": False}, False, "records no gates pass"),
    # a king seeded without one: its receipt's digest, which gate 4 checked
    ({"pr": None}, False, None),
    ({"pr": None}, True, "its receipt.json records"),
])
def test_the_king_is_served_only_with_the_weights_the_board_recorded(
        board, repo, tiny_rules, options, tamper, refusal):
    folder = board(**options)
    if tamper:
        other_weights(folder, tiny_rules)
    if refusal is None:
        served = king_of(repo, tiny_rules)
        assert (served.model_id, served.owner) == ("tinyrouter/alice-1", "alice")
        assert served.created == int(parse_time("2026-11-11T12:00:00Z").timestamp())
        assert served.head.path == folder / WEIGHTS_FILE
    else:
        with pytest.raises(LeaderboardError, match=refusal):
            king_of(repo, tiny_rules)


def test_no_king_is_a_usage_error(repo, tiny_rules):
    with pytest.raises(UsageError, match=r"no leaderboard/king\.json"):
        king_of(repo, tiny_rules)


def test_any_head_is_served_under_the_name_of_where_it_lies(board, repo, tiny_rules,
                                                            king_weights, tmp_path):
    folder = board()
    assert head_at(str(folder), tiny_rules).model_id == "tinyrouter/alice-1"  # its receipt
    run = tmp_path / "experiments" / "first"
    run.mkdir(parents=True)
    write_weights(run / BEST_FILE, *king_weights)
    (run / SUMMARY_FILE).write_text(json.dumps({"encoder": "demo/encoder"}))
    (run / HISTORY_FILE).write_text(json.dumps({"generations": []}))
    served = head_at(str(run), tiny_rules)
    assert (served.model_id, served.encoder) == ("tinyrouter/run-first", "demo/encoder")
    assert head_at(str(run / BEST_FILE), tiny_rules).model_id == "tinyrouter/best"
    with pytest.raises(UsageError, match="--king REPO"):
        head_at("king", tiny_rules)
