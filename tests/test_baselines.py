import dataclasses
import json
from pathlib import Path

import pytest

from evaluator import baselines
from evaluator.baselines import crossfit_item, oracle_report
from evaluator.cli import main
from evaluator.errors import BaselineError
from evaluator.rules import OFFICIAL
from evaluator.types import AnsweredItem, Item, ModelAnswer

PEER = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "peer-correctness"
POOL = OFFICIAL.pool_names


def matrix(rows: list[dict[str, list[int]]]) -> dict:
    return {"tasks": [{"id": f"q{i}", "answer": "x", "per_model": r} for i, r in enumerate(rows)]}


def answered(i: int, flags: tuple[int, ...], benchmark: str = "math500") -> AnsweredItem:
    item = Item(benchmark, f"q{i}", "What is 1+1?", "2")
    return AnsweredItem(item, {m: ModelAnswer("…", bool(f)) for m, f in zip(POOL, flags, strict=True)})


# Three models, two samples each, worked out by hand:
#   a: 1.0, .5, 0, .5 -> 0.5    b: 0, 0, 1.0, .5 -> 0.375    c: 0 everywhere
HAND = matrix([
    {"a": [1, 1], "b": [0, 0], "c": [0, 0]},
    {"a": [1, 0], "b": [0, 0], "c": [0, 0]},
    {"a": [0, 0], "b": [1, 1], "c": [0, 0]},
    {"a": [0, 1], "b": [1, 0], "c": [0, 0]},
])


@pytest.mark.parametrize(("cells", "preference", "expected"), [
    # one model always right, whatever the split
    ([[1, 1], [0, 0]], [0, 1], 1.0),
    ([[0, 0], [1, 1]], [0, 1], 1.0),
    ([[0, 0, 0, 0, 0], [1, 1, 1, 1, 1], [0, 0, 0, 0, 0]], [0, 1, 2], 1.0),
    # indistinguishable models: the preferred (best single) model is kept
    ([[1, 1], [1, 1]], [1, 0], 1.0),
    ([[0, 0], [0, 0]], [0, 1], 0.0),
    ([[1, 0], [1, 1]], [0, 1], 0.5),
    ([[1, 0], [1, 1]], [1, 0], 1.0),
    # the winner's curse: a lucky half predicts an unlucky other half
    ([[1, 0], [0, 1]], [0, 1], 0.25),
    ([[1, 0], [0, 0]], [0, 1], 0.5),
])
def test_crossfit_item_by_hand(cells, preference, expected):
    assert crossfit_item(cells, preference) == pytest.approx(expected)


def test_crossfit_needs_two_samples():
    with pytest.raises(BaselineError, match="at least 2 samples"):
        crossfit_item([[1], [0]], [0, 1])


def test_oracle_report_on_a_hand_made_matrix():
    report = oracle_report(baselines.matrix_from_json(HAND), OFFICIAL)
    assert report["per_model_accuracy"] == pytest.approx({"a": 0.5, "b": 0.375, "c": 0.0})
    assert report["best_single"] == {"model": "a", "accuracy": pytest.approx(0.5)}
    assert report["random"] == pytest.approx((0.5 + 0.375) / 3)
    assert report["oracle_naive"] == pytest.approx((1 + 0.5 + 1 + 0.5) / 4)
    # per item: 1, 0.5, 1, and (a preferred) a|b halves 0/1: 0.25
    assert report["oracle_crossfit"] == pytest.approx((1 + 0.5 + 1 + 0.25) / 4)
    assert report["headroom"] == pytest.approx(report["oracle_crossfit"] - 0.5)
    for key in ("best_single", "random", "oracle_naive", "oracle_crossfit", "headroom"):
        lo, hi = report["ci95"][key]
        point = report[key]["accuracy"] if key == "best_single" else report[key]
        assert lo <= point <= hi


def test_crossfit_sits_between_best_single_and_naive_oracle_on_real_like_data():
    rows = [{"a": [1, 1, 1, 0], "b": [0, 1, 0, 0]}, {"a": [0, 0, 1, 0], "b": [1, 1, 1, 1]},
            {"a": [1, 1, 1, 1], "b": [1, 1, 1, 0]}, {"a": [0, 1, 0, 1], "b": [0, 0, 1, 0]}]
    report = oracle_report(baselines.matrix_from_json(matrix(rows)), rules=OFFICIAL)
    assert report["best_single"]["accuracy"] < report["oracle_crossfit"] < report["oracle_naive"]


def test_single_sample_data_has_no_crossfit_but_every_other_figure():
    items = [answered(0, (1, 0, 0)), answered(1, (0, 1, 0)), answered(2, (1, 1, 0))]
    report = oracle_report(baselines.matrix_from_answered(items, POOL), rules=OFFICIAL)
    assert report["oracle_naive"] == pytest.approx(1.0)
    assert report["oracle_crossfit"] is None and report["ci95"]["headroom"] is None


def test_from_answered_gives_the_manifest_baselines():
    items = [answered(0, (1, 0, 0)), answered(1, (1, 1, 0)), answered(2, (0, 0, 0)),
             answered(3, (0, 0, 1))]
    result = baselines.from_answered(items, POOL)
    assert set(result) == {"per_model", "best_single", "random", "oracle", "by_category",
                           "cost_per_1k_usd"}
    assert result["per_model"] == pytest.approx(dict(zip(POOL, (0.5, 0.25, 0.25), strict=True)))
    assert result["best_single"] == {"model": POOL[0], "accuracy": 0.5}
    assert result["random"] == pytest.approx(4 / 12)
    assert result["oracle"] == pytest.approx(0.75)


def test_answers_from_another_pool_are_refused():
    item = AnsweredItem(Item("mmlu", "1", "?", "A"), {"gpt-x": ModelAnswer("A", True)})
    with pytest.raises(BaselineError, match="another pool"):
        baselines.from_answered([item], POOL)


@pytest.mark.parametrize("data", [
    # no tasks at all
    {}, {"tasks": []}, [],
    # malformed per-model outcomes
    matrix([{"a": []}]), matrix([{"a": [2]}]), matrix([{"a": ["1"]}]), matrix([{"a": 1}]),
    # tasks disagree on the models
    matrix([{"a": [1], "b": [0]}, {"a": [1]}]),
    {"tasks": [{"id": "x"}]},
])
def test_malformed_matrices_are_clear_errors(data):
    with pytest.raises(BaselineError):
        baselines.matrix_from_json(data)


def test_random_router_is_seeded_and_near_its_expectation():
    items = [answered(i, (i % 2, 1, 0)) for i in range(300)]
    accs = baselines.random_router_accuracies(items, POOL, seeds=5)
    assert accs == baselines.random_router_accuracies(items, POOL, seeds=5)
    assert sum(accs) / 5 == pytest.approx(0.5, abs=0.05)


# ---------------------------------------------------------------- command line

def write_data(folder: Path) -> Path:
    folder.mkdir()
    for bench, flags in (("math500", (1, 0, 0)), ("mmlu", (0, 1, 1))):
        rows = [answered(i, flags, bench).to_dict() for i in range(4)]
        (folder / f"{bench}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder


def test_oracle_command_writes_the_report(tmp_path, capsys):
    path = tmp_path / "m.json"
    path.write_text(json.dumps(HAND))
    assert main(["baseline", "oracle", "--matrix", str(path), "--json",
                 str(tmp_path / "out.json")]) == 0
    out = json.loads((tmp_path / "out.json").read_text())
    assert out["oracle_crossfit"] == pytest.approx(0.6875)
    assert "best single (a)" in capsys.readouterr().out


def test_always_and_random_commands_on_training_data(tmp_path, capsys):
    data = write_data(tmp_path / "data")
    assert main(["baseline", "always-model", "--model", POOL[1], "--data", str(data),
                 "--json", str(tmp_path / "a.json")]) == 0
    assert json.loads((tmp_path / "a.json").read_text())["accuracy"] == {"math500": 0.0,
                                                                        "mmlu": 1.0}
    assert main(["baseline", "random", "--seeds", "3", "--data", str(data)]) == 0
    assert "mmlu" in capsys.readouterr().out


@pytest.mark.parametrize(("argv", "code", "prefix"), [
    # what the command line asks for is impossible: exit 2
    (["always-model", "--model", "gpt-x", "--data", "DATA"], 2, "usage error:"),
    (["oracle"], 2, "usage error:"),
    (["random", "--seeds", "0", "--data", "DATA"], 2, "usage error:"),
    (["oracle", "--data", "DATA", "--benchmarks", "nope"], 2, "usage error:"),
    # the data is not there: exit 1
    (["oracle", "--data", "DATA", "--benchmarks", "livecodebench"], 1, "error:"),
])
def test_bad_baseline_requests_are_refused(argv, code, prefix, tmp_path, capsys):
    data = write_data(tmp_path / "data")
    assert main(["baseline", *[str(data) if a == "DATA" else a for a in argv]]) == code
    assert capsys.readouterr().err.startswith(prefix)


@pytest.mark.skipif(not PEER.is_dir(), reason="peer correctness data not beside the checkout")
@pytest.mark.parametrize("bench", ["math500", "mmlu"])
def test_peer_data_ceiling_is_below_naive_and_near_best_single(bench):
    report = oracle_report(baselines.load_matrix(PEER / f"oracle_matrix_{bench}.json"),
                           rules=OFFICIAL)
    assert report["n_items"] == 120
    assert report["best_single"]["accuracy"] <= report["oracle_crossfit"] < report["oracle_naive"]


def test_baselines_from_a_sealed_benchmark(tmp_path, monkeypatch, capsys):
    from evaluator.benchmarks.sealing import KdfParams, seal_split, sealed_path

    flags = [(1, 0, 0), (1, 1, 0), (0, 0, 1), (0, 0, 0), (1, 1, 1), (0, 1, 0), (0, 0, 0)]
    rows = [answered(i, f) for i, f in enumerate(flags)]
    sealed = tmp_path / "sealed"
    seal_split(sealed_path(sealed, "math500", "pool"), [r.to_dict() for r in rows[:6]],
               "math500", "pool", "pw", KdfParams(log2_n=10, r=1))
    seal_split(sealed_path(sealed, "math500", "live"), [rows[6].item.to_dict()],
               "math500", "live", "pw", KdfParams(log2_n=10, r=1))
    audit = [answered(7 + i, f).to_dict() for i, f in enumerate([(1, 0, 0), (0, 1, 1)])]
    seal_split(sealed_path(sealed, "math500", "audit"), audit, "math500", "audit", "pw",
               KdfParams(log2_n=10, r=1))
    rules = tmp_path / "rules.json"
    rules.write_text(json.dumps({"eval_size": 3, "audit_size": 2, "live_size": 1}))  # a pool of 6
    monkeypatch.setenv("BENCHMARK_PASSWORD", "pw")
    base = ["--competition", str(rules), "baseline"]
    source = ["--sealed", str(tmp_path / "sealed"), "--benchmarks", "math500"]
    assert main([*base, "always-model", "--model", POOL[0], *source]) == 0
    assert "math500        0.5000" in capsys.readouterr().out
    assert main([*base, "oracle", *source]) == 0
    assert "oracle (naive)" in capsys.readouterr().out
    monkeypatch.setenv("BENCHMARK_PASSWORD", "wrong")
    assert main([*base, "oracle", *source]) == 1
    assert "cannot decrypt" in capsys.readouterr().err


def test_manifest_baselines_split_by_category_and_price_each_model():
    flags = [(1, 0, 0), (1, 1, 0), (0, 0, 1), (0, 1, 1)]
    rows = [answered(i, f) for i, f in enumerate(flags)]
    rows = [AnsweredItem(dataclasses.replace(r.item, category="odd" if i % 2 else "even"),
                         {m: dataclasses.replace(a, cost_usd=0.002 * (k + 1))
                          for k, (m, a) in enumerate(r.answers.items())})
            for i, r in enumerate(rows)]
    base = baselines.from_answered(rows, POOL)
    assert base["by_category"]["even"]["items"] == 2
    assert base["by_category"]["even"]["per_model"][POOL[0]] == 0.5  # rows 0 and 2
    assert base["by_category"]["odd"]["oracle"] == 1.0
    assert base["cost_per_1k_usd"] == {POOL[0]: 2.0, POOL[1]: 4.0, POOL[2]: 6.0}


def test_the_simplest_routers_are_learnt_on_fitted_rows_and_scored_on_held_ones():
    def row(i: int, category: str, flags: tuple[int, ...]) -> AnsweredItem:
        item = Item("math500", f"q{i}", "What is 1+1?", "2", category)
        return AnsweredItem(item, {m: ModelAnswer("…", bool(f))
                                   for m, f in zip(POOL, flags, strict=True)})

    # on the fitted rows: model 0 is right on geometry, model 1 on algebra and overall
    fitted = [row(0, "geometry", (1, 0, 0)), row(1, "geometry", (1, 1, 0)),
              row(2, "algebra", (0, 1, 0)), row(3, "algebra", (0, 1, 1)),
              row(4, "algebra", (0, 1, 0))]
    # held out: geometry goes to model 0, algebra to 1, an unseen category to the best single (1)
    held = [row(5, "geometry", (1, 0, 0)), row(6, "algebra", (0, 0, 1)),
            row(7, "number theory", (0, 1, 0)), row(8, "geometry", (0, 0, 1))]
    found = baselines.simplest_routers(fitted, held, POOL)
    assert found["best_single"] == {"model": POOL[1], "accuracy": 0.25}
    assert found["lookup"] == 0.5  # rows 5 and 7
    assert found["oracle"] == 1.0
