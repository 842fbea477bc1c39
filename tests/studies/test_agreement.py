import pytest

from evaluator.cli import main
from evaluator.rules import OFFICIAL
from evaluator.studies.agreement import summary


def report(high, copies):
    return {"heads": 4, "generations": 30, "items": 225, "seconds": 1.0,
            "independent": {"min": 0.57, "median": 0.63, "max": high},
            "copies": copies, "lowest_copy_past_gate_3": 0.76,
            "threshold": 0.88, "suggested_threshold": round(high + 0.10, 2)}


def row(agreement, cosine, gate_3, behaviour):
    return {"min_agreement": agreement, "max_cosine": cosine, "caught_by_gate_3": gate_3,
            "caught_by_behaviour": behaviour}


def test_the_summary_says_which_check_catches_each_copy_and_whether_honest_heads_are_safe():
    lines = summary(report(0.778, {
        "roles permuted": row(1.0, 1.0, True, True),
        "evading, cosine 0.98": row(0.911, 0.98, False, True),
        "evading, cosine 0.8": row(0.760, 0.8, False, False)}))
    text = "\n".join(lines)
    assert "roles permuted" in text and "caught by gate 3" in text
    assert "caught by the behavioural check" in text
    assert "passes both: routes differently on 24% of items" in text
    assert lines[-1].startswith("the behavioural threshold 0.88 never flags an independent pair")
    assert lines[-1].endswith("0.88")
    flagged = summary(report(0.9, {}))[-1]
    assert "FLAGS" in flagged


@pytest.mark.slow
def test_a_small_measurement_runs_end_to_end(tmp_path, capsys):
    out = tmp_path / "agreement.json"
    assert main(["dev", "agreement", "--heads", "2", "--generations", "2", "--limit", "6",
                 "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "independent pairs agree on" in text and "exact" in text
    assert f"the behavioural threshold {OFFICIAL.duplicate_agreement}" in text
    assert out.stat().st_size > 0


@pytest.mark.parametrize("argv", [["--heads", "1"], ["--generations", "0"], ["--limit", "0"]])
def test_bad_counts_are_refused(argv, capsys):
    assert main(["dev", "agreement", *argv]) == 2
    assert "--heads must be at least 2" in capsys.readouterr().err
