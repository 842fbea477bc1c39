import dataclasses
import json

import numpy as np
import pytest
from deferred import deferred

from evaluator.baselines import gap_closed
from evaluator.cli import main
from evaluator.rules import OFFICIAL
from evaluator.train.data import TrainingSet

training_runs = deferred("evaluator.studies.training_runs")


def tiny_set(correct):
    correct = np.array(correct, dtype=float)
    return TrainingSet(rows=[None] * len(correct), benchmark_of=np.zeros(len(correct), int),
                       correct=correct, benchmarks=("math500",))


@pytest.mark.parametrize(("picks", "accuracy", "gap_closed"), [
    # the router always picks the best single model: no gap closed
    ([0, 0, 0, 0], 0.5, 0.0),
    # it picks a right model whenever there is one: the oracle
    ([0, 0, 1, 1], 1.0, 1.0),
    # right on one of the two items the best model misses: half the gap
    ([0, 0, 1, 0], 0.75, 0.5),
])
def test_routing_report_compares_router_with_best_single_and_oracle(picks, accuracy, gap_closed):
    rules = dataclasses.replace(OFFICIAL, hidden_size=4, svf_scale_count=28)
    data = tiny_set([[1, 0] + [0] * (rules.n_models - 2)] * 2
                    + [[0, 1] + [0] * (rules.n_models - 2)] * 2)
    feats = np.eye(4)
    head = np.zeros(rules.head_shape)
    for row, model in enumerate(picks):
        head[model, row] = 1.0
    report = training_runs.routing_report(head, feats, data, rules)
    bench = report["per_benchmark"]["math500"]
    assert bench["accuracy"] == accuracy
    assert bench["best_single"]["accuracy"] == 0.5
    assert bench["oracle"] == 1.0
    assert bench["gap_closed"] == gap_closed
    assert report["mean"]["gap_closed"] == gap_closed


def test_gap_closed_is_undefined_without_a_gap():
    assert gap_closed(0.7, 0.7, 0.7) is None


def test_meets_target_needs_both_the_margin_and_half_the_gap():
    def report(acc, best, gap):
        return {"mean": {"accuracy": acc, "best_single": best, "gap_closed": gap}}

    assert training_runs.meets_target(report(0.80, 0.60, 0.55))
    assert not training_runs.meets_target(report(0.80, 0.60, 0.45))
    assert not training_runs.meets_target(report(0.64, 0.60, 0.8))


@pytest.mark.slow
def test_bench_training_command_reports_a_short_run(tmp_path, capsys):
    out = tmp_path / "bench.json"
    # small hidden splits and a few items per benchmark keep the run to seconds
    competition = tmp_path / "small.json"
    competition.write_text(json.dumps({"eval_size": 12, "audit_size": 4, "live_size": 2}))
    code = main(["--competition", str(competition), "dev", "training", "--generations", "2",
                 "--limit", "6", "--json", str(out), "--no-progress"])
    assert code == 0
    report = json.loads(out.read_text())
    assert set(report["per_benchmark"]) == set(OFFICIAL.benchmarks)
    for bench in report["per_benchmark"].values():
        assert bench["items"] == 6
        assert 0.0 <= bench["best_single"]["accuracy"] <= bench["oracle"] <= 1.0
        assert 0.0 <= bench["accuracy"] <= bench["oracle"]
    assert report["settings"]["generations"] == 2
    assert report["seconds"]["total"] >= report["seconds"]["training"]
    assert "target" in capsys.readouterr().out
