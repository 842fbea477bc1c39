"""The coordinator's commands: `encoder make-tiny` and the `dev coordinator` smoke run."""

from __future__ import annotations

import json

import pytest

from evaluator.cli import main
from evaluator.rules import Competition

BENCH_FIELDS = ("naive_s", "cached_s", "batched_s", "prefix_s", "per_theta_naive_s",
                "per_theta_cached_s", "per_theta_batched_s", "per_theta_ratio", "generation_ratio",
                "generation_ratio_with_prefix", "per_candidate_generation_ratio",
                "batching_speedup", "decisions_equal", "max_feature_diff_batched", "limit_ratio",
                "limit_ratio_with_prefix", "candidates_per_pass", "svf_form_naive",
                "svf_form_cached")


@pytest.mark.slow
def test_make_tiny_writes_a_checkpoint_and_its_rules(tmp_path, capsys):
    from evaluator.coordinator.encoder import load_encoder

    out = tmp_path / "tiny"
    assert main(["encoder", "make-tiny", str(out), "--seed", "3"]) == 0
    assert "--competition" in capsys.readouterr().out
    rules = Competition.load(out / "competition.json")
    assert (rules.hidden_size, rules.svf_scale_count, rules.encoder_id) == (128, 896, str(out))
    assert load_encoder(str(out), rules, "cpu").svf.count == 896


@pytest.mark.slow
def test_bench_tiny_reports_every_field(tmp_path, capsys):
    out = tmp_path / "bench.json"
    argv = ["dev", "coordinator", "--shape", "tiny", "-N", "3", "-K", "2", "-R", "1",
            "--threads", "1", "--json", str(out)]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    result = json.loads(out.read_text())
    for field in BENCH_FIELDS:
        assert field in result and f"{field}:" in printed
    assert result["decisions_equal"] is True
    assert result["max_feature_diff_batched"] < 1e-5
    assert result["limit_ratio"] > result["limit_ratio_with_prefix"] > 1
    # the prefix build is a cost the generation ratio leaves out and the other one counts
    assert result["generation_ratio"] > result["generation_ratio_with_prefix"]
    assert result["svf_form_cached"]["q_proj"].startswith("factored")


@pytest.mark.parametrize("flag", ["--questions", "--candidates", "--tokens", "--repeats"])
def test_bench_refuses_empty_runs(flag, capsys):
    assert main(["dev", "coordinator", flag, "0"]) == 2
    assert f"{flag} must be at least 1" in capsys.readouterr().err


@pytest.mark.slow
def test_bench_batches_a_generation_within_the_given_budget(tmp_path):
    out = tmp_path / "bench.json"
    argv = ["dev", "coordinator", "-N", "2", "-K", "3", "-R", "1", "--activation-mib", "64",
            "--json", str(out)]
    assert main(argv) == 0
    result = json.loads(out.read_text())
    assert result["candidates_per_pass"] == 3
    assert result["decisions_equal"] is True


def test_bench_refuses_a_negative_budget(capsys):
    assert main(["dev", "coordinator", "--activation-mib", "-1"]) == 2
    assert "--activation-mib must not be negative" in capsys.readouterr().err
