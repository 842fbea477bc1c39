"""The coordinator's commands: `encoder make-tiny` and the `bench coordinator` smoke run."""

from __future__ import annotations

import json

import pytest

from evaluator.cli import main
from evaluator.coordinator.encoder import load_encoder
from evaluator.rules import Competition

BENCH_FIELDS = ("naive_s", "cached_s", "prefix_s", "per_theta_naive_s", "per_theta_cached_s",
                "per_theta_ratio", "generation_ratio", "decisions_equal", "limit_ratio",
                "svf_form_naive", "svf_form_cached")


def test_make_tiny_writes_a_checkpoint_and_its_rules(tmp_path, capsys):
    out = tmp_path / "tiny"
    assert main(["encoder", "make-tiny", str(out), "--seed", "3"]) == 0
    assert "--competition" in capsys.readouterr().out
    rules = Competition.load(out / "competition.json")
    assert (rules.hidden_size, rules.svf_scale_count, rules.encoder_id) == (128, 768, str(out))
    assert load_encoder(str(out), rules, "cpu").svf.count == 768


def test_bench_tiny_reports_every_field(tmp_path, capsys):
    out = tmp_path / "bench.json"
    argv = ["bench", "coordinator", "--shape", "tiny", "-N", "3", "-K", "2", "-R", "1",
            "--threads", "1", "--json", str(out)]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    result = json.loads(out.read_text())
    for field in BENCH_FIELDS:
        assert field in result and f"{field}:" in printed
    assert result["decisions_equal"] is True
    assert result["limit_ratio"] > 1
    assert result["svf_form_cached"]["q_proj"].startswith("factored")


@pytest.mark.parametrize("flag", ["--questions", "--candidates", "--tokens", "--repeats"])
def test_bench_refuses_empty_runs(flag, capsys):
    assert main(["bench", "coordinator", flag, "0"]) == 2
    assert f"{flag} must be at least 1" in capsys.readouterr().err
