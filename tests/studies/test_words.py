"""`tinyrouter dev words`: the start against the category lookup, on the encoder's features and
on the words themselves."""

from __future__ import annotations

import json

import pytest

from evaluator.benchmarks.corpus import load_corpus, load_personas, skill
from evaluator.cli import main
from evaluator.rules import OFFICIAL
from evaluator.types import AnsweredItem, ModelAnswer


@pytest.fixture(scope="module")
def workspace(tmp_path_factory, tiny_path):
    """The tiny encoder's rules and 40 corpus questions a benchmark, each graded right for
    exactly its category's best persona: the lookup is then the best router there is."""
    from evaluator.coordinator.encoder import encoder_overrides

    tmp = tmp_path_factory.mktemp("words")
    (tmp / "rules.json").write_text(json.dumps(encoder_overrides(tiny_path)))
    personas = load_personas(OFFICIAL)
    (tmp / "data").mkdir()
    for bench in OFFICIAL.benchmarks:
        lines = []
        for entry in load_corpus(OFFICIAL, [bench])[::7][:40]:
            skills = [skill(personas, model, entry.item) for model in OFFICIAL.pool_names]
            answers = {model: ModelAnswer("…", s == max(skills))
                       for model, s in zip(OFFICIAL.pool_names, skills, strict=True)}
            lines.append(json.dumps(AnsweredItem(entry.item, answers).to_dict()) + "\n")
        (tmp / "data" / f"{bench}.jsonl").write_text("".join(lines))
    return tmp


def test_both_fits_are_scored_against_the_lookup_on_unseen_questions(workspace, capsys):
    out = workspace / "words.json"
    assert main(["--competition", str(workspace / "rules.json"), "dev", "words", "--data",
                 str(workspace / "data"), "--splits", "2", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    report = json.loads(out.read_text())
    assert report["rows"] == 120 and report["splits"] == 2
    assert "the rules' encoder" in text and "an exact bag of the words" in text
    # the grades name each category's best persona, so the lookup routes as the skills do
    for row in report["features"].values():
        assert row["difference"] <= 1e-9
        assert row["accuracy"] == pytest.approx(report["lookup"] + row["difference"])
        # a linear head on either reads the topic: it routes better than any single model
        assert row["accuracy"] > report["best_single"] + 0.05


def test_no_splits_is_refused(workspace, capsys):
    assert main(["--competition", str(workspace / "rules.json"), "dev", "words", "--data",
                 str(workspace / "data"), "--splits", "0"]) == 2
    assert "--splits must be at least 1" in capsys.readouterr().err
