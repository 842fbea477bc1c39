"""`tinyrouter dev scale`: synthetic boards that validate, and every command timed on each."""

import json

import pytest

from evaluator.cli import main
from evaluator.gates import context_for
from evaluator.leaderboard import check_result, validate_state
from evaluator.rules import OFFICIAL
from evaluator.store import Store
from evaluator.studies.scale import build_board


def test_a_synthetic_board_is_a_valid_leaderboard(tmp_path):
    result = build_board(tmp_path, 5, OFFICIAL)
    assert validate_state(tmp_path, OFFICIAL).results == 6  # the king's and five losses
    store = Store(tmp_path)
    assert len(store.attempts()) == 5 and store.king().miner == "alice"
    assert all(a.fingerprint.startswith("p16:") and a.seen for a in store.attempts())
    check_result(json.loads(result.read_text()), OFFICIAL)
    # the board carries the gates' index of its log, as the record step leaves a season's
    ctx = context_for(tmp_path, "newcomer", OFFICIAL)
    assert ctx.index is not None and len(ctx.index.rows) == 5 and ctx.attempts == []


@pytest.mark.slow
def test_every_command_is_timed_on_every_board(tmp_path, capsys):
    out = tmp_path / "scale.json"
    assert main(["dev", "scale", "--sizes", "3,1", "--repeats", "1", "--heads", "2",
                 "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["sizes"] == [1, 3]
    assert set(report["commands"]) == {"gates (one new head)", "leaderboard apply",
                                       "leaderboard validate", "site build"}
    for row in report["commands"].values():
        assert set(row["median_s"]) == {"1", "3"} and row["growth"] > 0
    assert report["attempts_bytes_per_line"]["3"] > report["index_bytes_per_line"]["3"] > 0
    assert report["duplicates"]["same_decision"] == report["duplicates"]["copies"] > 0
    on_basis = report["duplicates"]["on_basis"]
    assert on_basis["same_decision"] == on_basis["copies"] > 0  # the projected log decides alike
    assert on_basis["largest_shift_near_the_line"] < 1e-4
    assert "×3/1" in capsys.readouterr().out


@pytest.mark.parametrize("argv", [["--repeats", "0"], ["--sizes", "ten"], ["--sizes", "0"]])
def test_bad_options_are_usage_errors(argv):
    assert main(["dev", "scale", *argv]) == 2
