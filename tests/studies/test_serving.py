"""`tinyrouter dev serving`: the routing overhead of served requests at a few batch sizes."""

from __future__ import annotations

import json

import pytest

from evaluator.cli import main


@pytest.mark.slow
def test_it_times_decisions_and_requests_at_each_batch_size(tmp_path, capsys):
    out = tmp_path / "serving.json"
    assert main(["dev", "serving", "--batch-sizes", "1,3", "--requests", "3", "--turns", "2",
                 "--threads", "1", "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    assert [row["batch_size"] for row in report["rows"]] == [1, 3]
    for row in report["rows"]:
        assert row["requests"] == 3
        assert 0 < row["decision_ms_p50"] <= row["decision_ms_p95"]
        assert row["request_ms_p50"] >= row["decision_ms_p50"]  # two decisions a request
        assert row["decisions_per_s"] == pytest.approx(2 * row["requests_per_s"])
    assert report["rows"][0]["transcripts_per_pass"] == 1  # one session at a time
    assert "request p50" in capsys.readouterr().out


@pytest.mark.parametrize(("argv", "says"), [
    (["--batch-sizes", "0,4"], "--batch-sizes wants positive whole numbers"),
    (["--batch-sizes", "four"], "--batch-sizes wants positive whole numbers"),
    (["--turns", "0"], "--turns must be at least 1"),
])
def test_bad_options_are_refused_before_anything_loads(argv, says, capsys):
    assert main(["dev", "serving", *argv]) == 2
    assert says in capsys.readouterr().err
