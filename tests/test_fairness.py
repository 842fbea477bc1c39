"""The fairness Monte Carlo: its matrices, its heads, and figures that answer to the rules."""

from __future__ import annotations

import dataclasses
import itertools
import json
from pathlib import Path

import numpy as np
import pytest

from evaluator import fairness, simulation
from evaluator.cli import main
from evaluator.errors import BaselineError
from evaluator.pool.simulator import bundled_simulator
from evaluator.rules import OFFICIAL
from evaluator.store import validate

PEER = Path(__file__).resolve().parents[2] / "shared" / "data" / "peer-correctness"
TINY = fairness.Budget(honest=40, crown=12, campaign=12, memoriser=6, climbers=1, climb=12)


@pytest.fixture(scope="module")
def demo():
    return simulation.demo_matrix(OFFICIAL)


def test_the_demo_matrix_is_the_simulators_first_worker_answer(demo):
    sim = bundled_simulator(OFFICIAL)
    items = [e for e in sim.entries if e.item.benchmark == "mmlu"]
    assert demo.p["mmlu"].shape == (len(items), OFFICIAL.n_models)
    # the simulator answers a first Worker call with the right text exactly where the matrix says
    for entry, row in list(zip(items, demo.p["mmlu"], strict=True))[:20]:
        for model, p in zip(OFFICIAL.pool_names, row, strict=True):
            messages = [{"role": "system", "content": "You are the Worker."},
                        {"role": "user", "content": entry.item.prompt}]
            assert (sim.answer(model, messages) == entry.right) == bool(p)


def peer_file(tmp_path, bench="math500", per_model=None):
    per_model = per_model or {"a": [1, 0, 1, 1], "b": [0, 0, 0, 1], "c": [1, 1, 1, 1]}
    path = tmp_path / f"{bench}.json"
    path.write_text(json.dumps({"benchmark": bench, "tasks": [
        {"id": "q1", "per_model": per_model}, {"id": "q2", "per_model": per_model}]}))
    return path


def test_a_matrix_file_gives_each_cells_share_of_right_samples(tmp_path):
    matrix = simulation.read_matrix([peer_file(tmp_path)], OFFICIAL)
    assert matrix.p["math500"].tolist() == [[0.75, 0.25, 1.0], [0.75, 0.25, 1.0]]
    assert simulation.rules_for(matrix, OFFICIAL).benchmarks == ("math500",)


@pytest.mark.parametrize(("content", "message"), [
    ("{not json", "cannot read the correctness matrix"),
    (json.dumps({"tasks": []}), "names no 'benchmark'"),
    (json.dumps({"benchmark": "mmlu", "tasks": "x"}), "no 'tasks' list"),
    (json.dumps({"benchmark": "mmlu", "tasks": [{"id": 1, "per_model": {"a": [1], "b": [0]}}]}),
     "one column per pool model"),
])
def test_a_bad_matrix_is_refused_with_what_is_wrong(tmp_path, content, message):
    path = tmp_path / "m.json"
    path.write_text(content)
    with pytest.raises(BaselineError, match=message):
        simulation.read_matrix([path], OFFICIAL)


def test_an_equal_pair_differs_on_the_asked_share_and_neither_head_is_favoured(demo):
    rng = np.random.default_rng(1)
    hidden = simulation.draw_hidden(demo, OFFICIAL, rng)
    base = simulation.best_single(hidden, demo, OFFICIAL)
    differ, edge = [], []
    for _ in range(200):
        king, challenger = simulation.equal_pair(base, 0.3, OFFICIAL, rng)
        differ.append(np.mean(king.pool["math500"] != challenger.pool["math500"]))
        cached = simulation.cached_size(OFFICIAL)
        right = [hidden.p_pool["math500"][np.arange(cached), h.pool["math500"]].mean()
                 for h in (king, challenger)]
        edge.append(right[1] - right[0])
    assert np.mean(differ) == pytest.approx(0.3, abs=0.01)
    assert abs(np.mean(edge)) < 3 * np.std(edge) / np.sqrt(len(edge))


def test_the_improvement_is_calibrated_to_the_asked_advantage(demo):
    rules = dataclasses.replace(OFFICIAL, overfit_penalty_gap=1.0, overfit_reject_gap=1.0)
    advantage, rng = 0.03, np.random.default_rng(2)
    share = advantage / simulation.improvement_slope(demo, 0.1, rules)
    deltas = []
    for _ in range(150):
        hidden = simulation.draw_hidden(demo, rules, rng)
        king, challenger = simulation.equal_pair(simulation.best_single(hidden, demo, rules), 0.1,
                                               rules, rng)
        challenger = simulation.improved(challenger, hidden, share, rules, rng)
        halves = simulation.draw_halves(rules, rng)
        nov = simulation.novelties(challenger, king, halves, rules)
        deltas.append(simulation.score(hidden, challenger, halves, nov, rules).composite
                      - simulation.score(hidden, king, halves, nov, rules).composite)
    assert np.mean(deltas) == pytest.approx(advantage, abs=4 * np.std(deltas) / np.sqrt(150))


@pytest.mark.slow
def test_figures_follow_their_schema_and_the_seed(demo):
    first = fairness.figures(demo, OFFICIAL, TINY, seed=5)
    validate("fairness", first)
    assert first == fairness.figures(demo, OFFICIAL, TINY, seed=5)
    assert first != fairness.figures(demo, OFFICIAL, TINY, seed=6)
    # no scenario the behavioural duplicate check makes impossible: 10% is left out, said so
    near = round(1 - OFFICIAL.duplicate_agreement, 4)
    assert [row["disagreement"] for row in first["false_crown"]] == [near, 0.3, 0.6]
    assert first["left_out"] == [0.1] and first["false_crown"][0]["trials"] == TINY.campaign
    assert min(row["disagreement"] for row in first["power"]) == near
    for row in first["false_crown"] + [r for r in first["power"] if r["crowned"] is not None]:
        assert row["crowned_se"] == pytest.approx(
            np.sqrt(row["crowned"] * (1 - row["crowned"]) / row["trials"]))
        assert row["differ"] >= 1 - OFFICIAL.duplicate_agreement - 0.05
    # a campaign's chance of a false crown only grows with its submissions
    rows = first["campaign"]["independent_rows"]
    assert [r["submissions"] for r in rows] == list(fairness.SUBMISSIONS)
    assert all(a["any"] <= b["any"] for a, b in itertools.pairwise(rows))
    # the trade another final bar would make, on the same scenarios
    other = first["campaign"]["other_bar"]
    assert other["crown_z_final"] == fairness.OTHER_FINAL_Z != OFFICIAL.crown_z_final
    assert other["trials"] == TINY.campaign and other["advantage"] == fairness.PRICED_ADVANTAGE
    assert [r["submissions"] for r in other["independent_rows"]] == list(fairness.SUBMISSIONS)
    live = first["live_sessions"]
    assert live["first_stage"] <= live["near_equal"] <= live["costliest"] <= live["worst"]
    assert live["worst"] == 2 * len(OFFICIAL.benchmarks) * OFFICIAL.live_size


def test_a_larger_audit_half_penalises_honest_heads_less():
    old = dataclasses.replace(OFFICIAL, audit_size=fairness.OLD_AUDIT_SIZE)
    now = fairness.honest_rates(simulation.reference_matrix(OFFICIAL), OFFICIAL, 600,
                                np.random.default_rng(0))
    before = fairness.honest_rates(simulation.reference_matrix(old), old, 600,
                                   np.random.default_rng(0))
    assert now["any"]["penalty"] < before["any"]["penalty"]
    assert now["any"]["reject"] <= before["any"]["reject"]


def test_the_audit_rarely_charges_an_honest_head_and_catches_a_memoriser_more_often(demo):
    rates = fairness.memorisation_rates(demo, OFFICIAL, 300, np.random.default_rng(2))
    router, memoriser = rates["router"], rates["memoriser"]
    assert router["penalty"] <= 0.05 and router["reject"] <= 0.005
    # the memoriser leads where it memorised, not on the never-published audit
    assert memoriser["pool_lead"] > router["pool_lead"] + 0.05
    assert memoriser["audit_lead"] == router["audit_lead"]
    assert memoriser["penalty"] > router["penalty"]


@pytest.mark.parametrize("advantage", [0.0, fairness.MEMORISER_ADVANTAGE])
def test_memorising_the_pool_buys_no_crown_with_live_play(demo, advantage):
    """In the very same trials (hidden sets, partitions, live runs), the challenger that also
    memorised the public pool up to the penalty line is crowned exactly when the same
    challenger honest is: the crown reads only what was never published (a lower bar and no
    margin make crowns common enough to compare in a test)."""
    loose = dataclasses.replace(OFFICIAL, crown_z_first=1.5, crown_z_final=1.5, win_margin=0.0)
    found = fairness.memoriser_crowns(demo, loose, 40, np.random.SeedSequence(3), advantage)
    assert found["honest"]["crowned"] > 0
    assert found["memoriser"] == found["honest"]


def test_the_crown_test_stops_chance_crowns_but_not_a_clear_improvement(demo):
    equal = fairness.crown_rate(demo, OFFICIAL, 100, np.random.default_rng(4), 0.3)
    assert equal["crowned"] <= 0.05 and equal["shared"] <= 0.05
    share = 0.05 / simulation.improvement_slope(demo, 0.3, OFFICIAL)
    better = fairness.crown_rate(demo, OFFICIAL, 40, np.random.default_rng(5), 0.3, share)
    assert better["crowned"] > 0.5 and better["shared"] > 0.5
    # a close match plays the second stage now and then, never more than the live split
    assert OFFICIAL.live_stages[0] <= better["live_items"] <= OFFICIAL.live_size


@pytest.mark.slow
def test_an_independent_re_run_of_the_king_gives_chance_more_to_work_with(demo):
    # the same equal pairs, hidden sets and partitions: re-running the king's live sessions
    # adds noise that sharing them takes away, so an equal challenger is crowned more often
    # (a low crown bar and a zero margin make the rates large enough to compare in a test, and
    # the live part counted whole its noise large enough)
    loose = dataclasses.replace(OFFICIAL, crown_z_first=1.0, crown_z_final=1.0, win_margin=0.0,
                                crown_live_weight=1.0)
    rates = fairness.crown_rate(demo, loose, 300, np.random.default_rng(6), 0.12)
    assert rates["crowned"] > rates["shared"] + rates["crowned_se"]


def test_independent_re_runs_disagree_as_often_as_the_peer_data_says(demo):
    # a 0/1 matrix (the demo's) is softened to exactly the re-run rate; a noisy one is kept
    q = simulation.rerun_chance(demo.p["mmlu"])
    assert float((2 * q * (1 - q)).mean()) == pytest.approx(simulation.RERUN_FLIP)
    assert np.all((q > 0) & (q < 1))
    assert np.array_equal(simulation.rerun_chance(np.full((10, 3), 0.5)), np.full((10, 3), 0.5))
    # and the king's re-run does disagree with the challenger's run that often
    hidden = simulation.draw_hidden(demo, OFFICIAL, np.random.default_rng(7))
    flips = np.mean([np.mean(hidden.live[b] != hidden.rerun[b]) for b in OFFICIAL.benchmarks])
    assert flips == pytest.approx(simulation.RERUN_FLIP, abs=0.03)


@pytest.mark.parametrize(("rate", "trials", "submissions", "at_least_one"), [
    (0.01, 6000, 100, 1 - 0.99 ** 100),
    (0.001, 6000, 300, 1 - 0.999 ** 300),
    (0.0, 6000, 1000, 0.0),
])
def test_a_campaign_compounds_the_per_evaluation_rate(rate, trials, submissions, at_least_one):
    row = next(r for r in fairness.campaign(rate, trials) if r["submissions"] == submissions)
    assert row["any"] == pytest.approx(at_least_one)
    # its standard error by the delta method, and an upper bound even when no trial hit
    se = fairness.standard_error(rate, trials)
    assert row["se"] == pytest.approx(submissions * (1 - rate) ** (submissions - 1) * se)
    assert row["upper"] > row["any"] and row["upper"] >= row["any"] + row["se"]


def test_a_zero_rate_still_has_an_upper_bound_that_shrinks_with_trials():
    assert fairness.standard_error(0.0, 6000) == 0.0
    assert 0 < fairness.upper_bound(0.0, 6000) < fairness.upper_bound(0.0, 600) < 0.01


@pytest.mark.slow
def test_another_final_bar_is_priced_on_the_rules_own_trials(demo):
    """The looser bar sees the very trials the rules' rows ran, so it crowns every challenger
    they crown and more: the trade it shows is the bars', not Monte Carlo noise."""
    rules = dataclasses.replace(OFFICIAL, crown_z_first=2.0, lose_z_first=0.0,
                                crown_z_final=fairness.OTHER_FINAL_Z + 1.0, win_margin=0.0)
    budget = fairness.Budget(honest=1, crown=60, campaign=60, climbers=1)
    seeds = fairness.Paired(*np.random.SeedSequence(3).spawn(2))
    near = round(1 - rules.duplicate_agreement, 4)
    strict = fairness.crown_rate(demo, rules, budget.campaign, np.random.default_rng(seeds.near), near)
    streams = iter(np.random.default_rng(s) for s in range(99))
    priced = next(r for r in fairness.power_rows(demo, rules, budget.crown, streams, seeds)
                  if (r["disagreement"], r["advantage"]) == (fairness.POWER_DISAGREEMENT,
                                                             fairness.PRICED_ADVANTAGE))
    looser = fairness.other_bar(demo, rules, budget, near, seeds)
    assert looser["per_evaluation"] >= strict["crowned"]
    assert looser["crowned"] > priced["crowned"]


def test_a_better_head_too_close_to_the_king_is_left_out_as_a_copy(demo):
    rules = dataclasses.replace(OFFICIAL, duplicate_agreement=0.5)  # half the items must differ
    seeds = fairness.Paired(*np.random.SeedSequence(0).spawn(2))
    rows = fairness.power_rows(demo, rules, 2, iter(np.random.default_rng(s) for s in range(99)),
                               seeds)
    near = [r for r in rows if r["disagreement"] == 0.5]
    assert near and all(r["crowned"] is not None for r in near)
    # the 30% row's heads differ on less than half the items: the gate rejects them
    assert all(r["left_out"] == "duplicate" and r["crowned"] is None
               for r in rows if r["disagreement"] == fairness.POWER_DISAGREEMENT)


def test_the_expected_share_of_differing_choices_is_what_the_heads_show(demo):
    share, rng = 0.4, np.random.default_rng(8)
    seen = []
    for _ in range(40):
        hidden = simulation.draw_hidden(demo, OFFICIAL, rng)
        king, challenger = simulation.equal_pair(simulation.best_single(hidden, demo, OFFICIAL),
                                               0.12, OFFICIAL, rng)
        challenger = simulation.improved(challenger, hidden, share, OFFICIAL, rng)
        seen.append(np.mean([np.mean(king.pool[b] != challenger.pool[b])
                             for b in OFFICIAL.benchmarks]))
    assert np.mean(seen) == pytest.approx(simulation.differing(demo, 0.12, share, OFFICIAL),
                                          abs=0.01)


@pytest.mark.slow
def test_the_command_prints_the_figures_and_writes_the_json(tmp_path, capsys):
    out = tmp_path / "fairness.json"
    assert main(["fairness", "--scale", "0.01", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "equal challenger crowned" in printed and "climber" in printed
    assert "± is the Monte Carlo standard error" in printed and "at least one false crown" in printed
    assert "left out: 10%" in printed and "live sessions per evaluation" in printed
    validate("fairness", json.loads(out.read_text()))


@pytest.mark.slow
def test_the_command_reads_matrix_files_and_refuses_bad_input(tmp_path, capsys):
    path = peer_file(tmp_path, "mmlu")
    assert main(["fairness", "--scale", "0.01", "--matrix", str(path), "--json", "-"]) == 0
    printed = capsys.readouterr()
    data = json.loads(printed.out)  # standard output carries the JSON alone
    assert "equal challenger crowned" in printed.err  # the summary goes to standard error
    assert data["benchmarks"] == ["mmlu"] and data["source"] == "mmlu.json"
    assert main(["fairness", "--scale", "0"]) == 2
    bad = tmp_path / "bad.json"
    bad.write_text("[]")
    assert main(["fairness", "--matrix", str(bad)]) == 1
    assert "names no 'benchmark'" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.skipif(not PEER.is_dir(), reason="peer correctness data not beside the checkout")
def test_the_peer_data_runs(capsys):
    files = sorted(PEER.glob("oracle_matrix_*.json"))
    matrix = simulation.read_matrix(files, OFFICIAL)
    data = fairness.figures(matrix, OFFICIAL, TINY)
    assert data["benchmarks"] == ["math500", "mmlu"]
    validate("fairness", data)


def test_a_climber_is_crowned_only_when_a_loss_shows_the_audit(demo):
    """A campaign keeping whatever published number went up: when a loss publishes only its
    composite and delta (the eval half and live play), what it fits never reaches the crown;
    when a loss also published its crown test's z, which reads the audit, it climbs there. A
    lower bar, no margin and smaller variations keep the test short."""
    loose = dataclasses.replace(OFFICIAL, crown_z_first=1.5, crown_z_final=1.5, win_margin=0.0,
                                duplicate_agreement=0.97)
    blind = fairness.climber(demo, loose, 3, 40, np.random.default_rng(9))
    seeing = fairness.climber(demo, loose, 3, 40, np.random.default_rng(9), sees_test=True)
    assert [row["submissions"] for row in blind] == [40]
    assert blind[-1]["crowned"] == 0 and blind[-1]["beyond"] == 0  # the king never moved
    assert seeing[-1]["crowned"] > 0 and seeing[-1]["beyond"] > 0
