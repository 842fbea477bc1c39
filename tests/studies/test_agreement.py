import pytest

from evaluator.cli import main
from evaluator.rules import OFFICIAL
from evaluator.studies.agreement import summary


def report(flagged, copies):
    return {"heads": 6, "generations": 6, "items": 408, "seconds": 1.0,
            "independent": {"max_cosine": 0.9954, "max_agreement": 1.0, "max_own_share": 0.508,
                            "flagged": flagged},
            "copies": copies,
            "thresholds": {"duplicate_cosine": 0.9999, "duplicate_agreement": 0.88,
                           "duplicate_own_share": 0.61, "duplicate_own_items": 10},
            "suggested": {"duplicate_cosine": 0.9996, "duplicate_own_share": 0.61}}


def row(cosine, agreement, own, gate_3, behaviour, with_own=6):
    return {"min_cosine": cosine, "min_agreement": agreement, "min_own_share": own,
            "caught_by_gate_3": gate_3, "caught_by_behaviour": behaviour,
            "with_own_choices": with_own, "of": 6}


def test_the_summary_says_which_check_catches_each_copy_and_whether_honest_heads_are_safe():
    lines = summary(report([], {
        "roles permuted": row(1.0, 1.0, 1.0, 6, 0),
        "evading, cosine 0.99": row(0.99, 0.985, 0.932, 0, 2, with_own=2),
        "evading, cosine 0.8": row(0.8, 0.762, 0.814, 0, 0, with_own=2)}))
    text = "\n".join(lines)
    assert "roles permuted" in text and "gate 3 6, behaviour 0, neither 0 of 6" in text
    assert "gate 3 0, behaviour 2, neither 4 of 6 (4 of the originals make no own choices)" in text
    assert "own choices made up to 0.508" in text
    assert lines[-1].startswith("the thresholds in force (cosine 0.9999, same model 0.88, own "
                                "choices 0.61) flags no independent pair")
    assert lines[-1].endswith("suggests cosine 0.9996 and own choices 0.610")
    assert "FLAGS 1 independent pair(s)" in summary(report([["a", "b"]], {}))[-1]


@pytest.mark.slow
def test_a_small_measurement_runs_end_to_end(tmp_path, capsys):
    out = tmp_path / "agreement.json"
    assert main(["dev", "agreement", "--heads", "2", "--generations", "2", "--limit", "6",
                 "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "independent pairs: gate 3 cosine up to" in text and "exact" in text
    assert f"(cosine {OFFICIAL.duplicate_cosine}, same model {OFFICIAL.duplicate_agreement}" in text
    assert out.stat().st_size > 0


@pytest.mark.parametrize("argv", [["--heads", "1"], ["--generations", "0"], ["--limit", "0"]])
def test_bad_counts_are_refused(argv, capsys):
    assert main(["dev", "agreement", *argv]) == 2
    assert "--heads must be at least 2" in capsys.readouterr().err
