"""`tinyrouter basis` on a season's public train items, and gate 3 reading what it wrote."""

import dataclasses
import json

import pytest

from evaluator.basis import BASIS_FILE, read_basis
from evaluator.benchmarks.corpus import load_corpus
from evaluator.benchmarks.sealing import write_train_items
from evaluator.cli import main
from evaluator.gates import context_for


@pytest.fixture
def season(tmp_path, tiny_path, tiny_rules):
    """A sealed folder's public train items and the manifest listing them, a repo around it."""
    hidden, repo = tmp_path / "hidden", tmp_path / "repo"
    hidden.mkdir()
    (repo / "leaderboard").mkdir(parents=True)
    manifest = {"benchmarks": {}}
    for bench in tiny_rules.benchmarks:
        items = [row.item for row in load_corpus(tiny_rules, [bench])][:40]
        write_train_items(hidden, bench, items)
        manifest["benchmarks"][bench] = {"train_ids": [item.id for item in items]}
    (repo / "leaderboard" / "manifest.json").write_text(json.dumps(manifest))
    rules_file = tmp_path / "competition.json"
    rules_file.write_text(json.dumps({"encoder_id": str(tiny_path),
                                      "hidden_size": tiny_rules.hidden_size,
                                      "num_layers": tiny_rules.num_layers,
                                      "svf_layer": tiny_rules.svf_layer,
                                      "svf_scale_count": tiny_rules.svf_scale_count}))
    return hidden, repo, manifest, rules_file


@pytest.mark.slow
def test_basis_writes_what_gate_3_reads(season, tiny_rules, capsys):
    hidden, repo, manifest, rules_file = season
    assert main(["--competition", str(rules_file), "basis", "--benchmark-dir", str(hidden),
                 "--repo", str(repo)]) == 0
    assert "from 120 public train items" in capsys.readouterr().out
    basis = read_basis(repo / "leaderboard" / BASIS_FILE, manifest, tiny_rules)
    assert basis.items == 120 and basis.directions.shape[1] == tiny_rules.hidden_size
    assert 1 <= basis.directions.shape[0] <= tiny_rules.fingerprint_directions
    ctx = context_for(repo, "alice", tiny_rules)
    assert ctx.basis is not None and ctx.basis_error is None
    # the next season's train ids: the committed basis no longer fits, gate 3 fails closed
    manifest["benchmarks"]["mmlu"]["train_ids"].pop()
    (repo / "leaderboard" / "manifest.json").write_text(json.dumps(manifest))
    ctx = context_for(repo, "alice", tiny_rules)
    assert ctx.basis is None and "other train ids" in ctx.basis_error


def test_basis_needs_a_sealed_season(season, tmp_path, capsys):
    hidden, _, _, rules_file = season
    empty = tmp_path / "empty"
    (empty / "leaderboard").mkdir(parents=True)
    assert main(["--competition", str(rules_file), "basis", "--benchmark-dir", str(hidden),
                 "--repo", str(empty)]) != 0
    assert "seal the season first" in capsys.readouterr().err


def test_a_wider_tiny_encoder_for_measuring_wide_heads(tmp_path, tiny_rules):
    from evaluator.coordinator.encoder import competition_for_encoder
    from evaluator.coordinator.tiny import make_tiny

    wide = competition_for_encoder(make_tiny(tmp_path / "wide", hidden_size=256), tiny_rules)
    assert wide.hidden_size == 256 and dataclasses.replace(wide, hidden_size=128) != wide
