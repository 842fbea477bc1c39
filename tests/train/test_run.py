import dataclasses
import json
import re

import numpy as np
import pytest
from deferred import deferred

from evaluator.cli import main
from evaluator.errors import TrainingError
from evaluator.loop import TURN_HEADER_RE, WORKER, coordinator_transcript
from evaluator.rules import OFFICIAL
from evaluator.submission import read_weights, theta_from_tensors
from evaluator.submission.weights import tensors_from_theta
from evaluator.train import fitness
from evaluator.train.data import TrainingSet, load_training_set, minibatch, split_aside
from evaluator.train.fitness import (
    argmax_accuracy,
    encoder_featurizer,
    evaluate_population,
    expected_accuracy,
)
from evaluator.train.live import pool_live_fitness
from evaluator.train.roles import fit_roles, fit_rows, role_choices, turn2_transcripts
from evaluator.train.run import RoleData, TrainConfig, initial_theta, run_training
from evaluator.train.select import clear_lead
from evaluator.train.start import fitted_theta, start_targets
from evaluator.types import AnsweredItem, Item, ModelAnswer

TINY = dataclasses.replace(OFFICIAL, hidden_size=8, svf_scale_count=7 * 8)
BENCHES = ("math500", "mmlu")

routers = deferred("evaluator.coordinator.router")


class FakeFeatures:
    """Fixed random features; the first SVF scales stretch them, as a real layer would."""

    def __init__(self, base: np.ndarray):
        self.base = base
        self.calls = 0

    def features(self, index, scales):
        self.calls += 1
        f = self.base[index] * scales[:self.base.shape[1]]
        return f / np.linalg.norm(f, axis=1, keepdims=True)


def routing_problem(n: int = 120, seed: int = 0, rules=TINY):
    """Items whose feature j says whether model j is right: a head can learn to route."""
    rng = np.random.default_rng(seed)
    base = rng.normal(size=(n, rules.hidden_size))
    correct = base[:, :rules.n_models] > 0.3
    rows = [AnsweredItem(Item(BENCHES[i * len(BENCHES) // n], f"q{i}", f"question {i}", "1"),
                         {m: ModelAnswer("…", bool(correct[i, j]))
                          for j, m in enumerate(rules.pool_names)}) for i in range(n)]
    return rows, base


def write_data(folder, rows):
    folder.mkdir(parents=True, exist_ok=True)
    for bench in BENCHES:
        lines = [json.dumps(r.to_dict()) for r in rows if r.item.benchmark == bench]
        (folder / f"{bench}.jsonl").write_text("\n".join(lines) + "\n")
    return folder


@pytest.fixture
def problem(tmp_path):
    rows, base = routing_problem()
    data = load_training_set(write_data(tmp_path / "data", rows), BENCHES, TINY)
    return data, FakeFeatures(base)


def config(generations=5, **kw):
    return TrainConfig.resolve(TINY, BENCHES, generations=generations,
                               popsize=kw.pop("popsize", 8), sigma0=kw.pop("sigma0", 0.3),
                               minibatch=kw.pop("minibatch", 40), **kw)


# ---------------------------------------------------------------- fitness

# three items with features (1,0), (0,1), (0,-1); who is right on each:
FEATS = np.array([[1.0, 0.0], [0.0, 1.0], [0.0, -1.0]])
CORRECT = np.array([[0, 0, 1], [1, 1, 0], [0, 1, 0]], dtype=float)


@pytest.mark.parametrize(("model_rows", "expected", "argmax"), [
    # W = 0: uniform routing; argmax ties fall to the first model
    ([[0, 0], [0, 0], [0, 0]], (1 / 3 + 2 / 3 + 1 / 3) / 3, 1 / 3),
    # a perfect router
    ([[0, 1e3], [0, -1e3], [1e3, 0]], 1.0, 1.0),
    # right on items 1 and 3, undecided between models 0 and 2 on item 2
    ([[0, 0], [0, -1e3], [1e3, 0]], (1 + 0.5 + 1) / 3, 1.0),
    # always wrong where it is sure
    ([[1e3, -1e3], [0, 0], [0, 0]], (0 + 0.5 + 0) / 3, 1 / 3),
])
def test_fitness_on_a_fixture(model_rows, expected, argmax):
    head = np.vstack([np.array(model_rows, dtype=float), np.zeros((3, 2))])
    assert expected_accuracy(head, FEATS, CORRECT, TINY) == pytest.approx(expected)
    assert argmax_accuracy(head, FEATS, CORRECT, TINY) == pytest.approx(argmax)


def category_set(outcomes):
    """A TrainingSet from rows of (benchmark, category, who is right)."""
    rows = [AnsweredItem(Item(b, f"q{i}", "?", "1", category=c),
                         {m: ModelAnswer("…", bool(right[j])) for j, m in enumerate(TINY.pool_names)})
            for i, (b, c, right) in enumerate(outcomes)]
    correct = np.array([r.correct_vector(TINY.pool_names) for r in rows])
    owner = np.array([BENCHES.index(b) for b, _, _ in outcomes])
    return TrainingSet(rows, owner, correct, BENCHES)


def test_targets_pull_each_answer_toward_its_category_rate():
    data = category_set([
        # Algebra: model 0 is right on three of four, model 1 on one
        ("math500", "Algebra", (1, 0, 0)), ("math500", "Algebra", (1, 0, 0)),
        ("math500", "Algebra", (1, 1, 0)), ("math500", "Algebra", (0, 0, 0)),
        # the same category name in another benchmark is another group
        ("mmlu", "Algebra", (0, 0, 1)),
        # rows without a category share their benchmark's rate
        ("mmlu", "", (0, 1, 0)), ("mmlu", "", (0, 0, 0)),
    ])
    assert np.array_equal(data.targets(0.0), data.correct)
    half = data.targets(0.5)
    assert half[3].tolist() == [0.375, 0.125, 0.0]  # (0 + 3/4)/2, (0 + 1/4)/2, 0
    assert half[0].tolist() == [0.875, 0.125, 0.0]
    assert half[4].tolist() == [0.0, 0.0, 1.0]
    assert data.targets(1.0)[5].tolist() == [0.0, 0.5, 0.0]


def test_shrinking_rewards_routing_by_category_over_memorising_answers():
    # model 0 is the Algebra specialist, model 1 the Geometry one, but single answers vary
    outcomes = [("math500", "Algebra", (1, 0, 0))] * 3 + [("math500", "Algebra", (0, 1, 0))] \
        + [("math500", "Geometry", (0, 1, 0))] * 3 + [("math500", "Geometry", (1, 0, 0))]
    data = category_set(outcomes)
    by_category = np.zeros(TINY.head_shape)  # one feature per item (hidden size 8)
    by_category[0, :4] = by_category[1, 4:] = 1e3
    memorised = np.zeros(TINY.head_shape)
    for i, (_, _, right) in enumerate(outcomes):
        memorised[right.index(1), i] = 1e3
    scales = np.ones(TINY.svf_scale_count, np.float32)
    thetas = [theta_from_tensors(h.astype(np.float32), scales) for h in (by_category, memorised)]

    class OneHot:
        def features(self, index, scales):
            return np.eye(TINY.hidden_size)[index]

    index = np.arange(8)
    raw = evaluate_population(thetas, index, data.targets(0.0), OneHot(), TINY)
    shrunk = evaluate_population(thetas, index, data.targets(1.0), OneHot(), TINY)
    assert raw[1] > raw[0]  # on the answers alone, memorising wins
    assert shrunk[0] > shrunk[1]  # on the categories' rates, routing by category wins


def test_minibatch_is_shared_mixed_and_seeded(problem):
    data, _ = problem
    a = minibatch(data, generation=3, seed=0, size=40)
    assert np.array_equal(a, minibatch(data, 3, 0, 40))
    assert not np.array_equal(a, minibatch(data, 4, 0, 40))
    assert np.bincount(data.benchmark_of[a]).tolist() == [20, 20]
    assert len(set(a.tolist())) == 40


# ---------------------------------------------------------------- the CMA-ES loop

def test_cma_es_learns_to_route_a_small_problem(problem, tmp_path):
    data, feats = problem
    summary = run_training(tmp_path / "run", config(60, popsize=12), data, feats, TINY)
    best_single = data.correct.mean(axis=0).max()
    for bench in summary["train"].values():
        assert bench["argmax_acc"] > best_single + 0.1
    history = json.loads((tmp_path / "run" / "history.json").read_text())["generations"]
    assert history[-1]["best"] > history[0]["mean"]
    assert [h["generation"] for h in history] == list(range(60))


def test_run_writes_the_experiment_folder(problem, tmp_path):
    data, feats = problem
    seen = []
    run_training(tmp_path / "run", config(3), data, feats, TINY, on_generation=seen.append)
    run = tmp_path / "run"
    assert {p.name for p in run.iterdir()} >= {"best.safetensors", "history.json",
                                               "summary.json", "checkpoint.json"}
    head, scales = read_weights(run / "best.safetensors", TINY)
    assert head.shape == TINY.head_shape and scales.shape == (TINY.svf_scale_count,)
    assert [e["generation"] for e in seen] == [0, 1, 2]
    summary = json.loads((run / "summary.json").read_text())
    assert summary["optimizer"] == {"name": "sep-cma-es", "popsize": 8, "sigma0": 0.3,
                                    "generations": 3, "seed": 0}


def test_start_is_uniform_routing_with_the_encoder_unchanged():
    theta = initial_theta(TINY)
    assert theta.shape == (TINY.n_params,)
    assert not theta[:TINY.n_head_params].any() and (theta[TINY.n_head_params:] == 1).all()


def test_the_search_starts_from_a_fit_of_each_rows_best_model(problem, tmp_path):
    data, feats = problem
    start = fitted_theta(feats.features(np.arange(len(data.rows)), np.ones(8)),
                         data.targets(TINY.train_shrink), TINY)
    head, scales = tensors_from_theta(start.astype(np.float32), TINY)
    assert not head[TINY.n_models:].any() and (scales == 1).all()  # roles 0, encoder unchanged
    feats_now = feats.features(np.arange(len(data.rows)), scales)
    best_single = data.correct.mean(axis=0).max()
    assert argmax_accuracy(head, feats_now, data.correct, TINY) > best_single + 0.1
    # so the first generation already routes well, where W = 0 starts uniform
    first = {}
    for start_at in ("fit", "zero"):
        run_training(tmp_path / start_at, config(1, start=start_at), data, feats, TINY)
        first[start_at] = json.loads((tmp_path / start_at / "history.json").read_text())
    assert first["fit"]["generations"][0]["mean"] > first["zero"]["generations"][0]["mean"] + 0.05


def _outputs(run):
    history = json.loads((run / "history.json").read_text())["generations"]
    return [{k: v for k, v in h.items() if k != "seconds"} for h in history], \
        (run / "best.safetensors").read_bytes()


def test_deterministic_for_a_seed(problem, tmp_path):
    data, feats = problem
    for name, seed in (("a", 0), ("b", 0), ("c", 1)):
        run_training(tmp_path / name, config(4, seed=seed), data, feats, TINY)
    assert _outputs(tmp_path / "a") == _outputs(tmp_path / "b")
    assert _outputs(tmp_path / "a") != _outputs(tmp_path / "c")


def test_stray_global_randomness_does_not_change_the_run(problem, tmp_path):
    data, feats = problem

    class Noisy(FakeFeatures):
        def features(self, index, scales):
            np.random.random(5)  # another library drawing from numpy's global stream
            return super().features(index, scales)

    run_training(tmp_path / "a", config(4), data, feats, TINY)
    run_training(tmp_path / "b", config(4), data, Noisy(feats.base), TINY)
    assert _outputs(tmp_path / "a") == _outputs(tmp_path / "b")


def test_resume_continues_exactly_where_it_stopped(problem, tmp_path):
    data, feats = problem
    run_training(tmp_path / "straight", config(6), data, feats, TINY)
    run_training(tmp_path / "split", config(3), data, feats, TINY)
    calls = feats.calls
    summary = run_training(tmp_path / "split", config(6), data, feats, TINY, resume=True)
    assert _outputs(tmp_path / "straight") == _outputs(tmp_path / "split")
    # only the three new generations were evaluated (8 candidates and the set-aside rows'
    # score each), besides the start's fit, its set-aside score, its refit on every row when
    # it is the head kept, and the summary
    refit = summary["selection"]["kept_after"] == 0
    assert feats.calls - calls == 3 * (8 + 1) + 3 + refit


# ---------------------------------------------------------------- bad input

def test_existing_run_needs_resume(problem, tmp_path):
    data, feats = problem
    run_training(tmp_path / "run", config(2), data, feats, TINY)
    with pytest.raises(TrainingError, match="--resume"):
        run_training(tmp_path / "run", config(4), data, feats, TINY)


@pytest.mark.parametrize(("damage", "message"), [
    (lambda c: "{not json", "corrupt"),
    (lambda c: json.dumps({**c, "told": [*c["told"][:1], [0.5]]}), "corrupt"),
    (lambda c: json.dumps({**c, "told": [g[::-1] for g in c["told"]]}),
     "does not reproduce"),
    (lambda c: json.dumps({**c, "data_fingerprint": "0" * 64}), "other data"),
    (lambda c: json.dumps({**c, "settings": {**c["settings"], "minibatch": 7}}),
     "other settings"),
])
def test_damaged_checkpoint_is_a_clear_error(problem, tmp_path, damage, message):
    data, feats = problem
    run_training(tmp_path / "run", config(2), data, feats, TINY)
    path = tmp_path / "run" / "checkpoint.json"
    path.write_text(damage(json.loads(path.read_text())))
    with pytest.raises(TrainingError, match=message):
        run_training(tmp_path / "run", config(4), data, feats, TINY, resume=True)


def test_resume_on_recategorised_data_is_refused(problem, tmp_path):
    # the categories decide the shrunk grades, so they are part of the data's identity
    data, feats = problem
    run_training(tmp_path / "run", config(2), data, feats, TINY)
    rows = [dataclasses.replace(r, item=dataclasses.replace(r.item, category="Algebra"))
            for r in data.rows]
    relabelled = dataclasses.replace(data, rows=rows)
    with pytest.raises(TrainingError, match="other data"):
        run_training(tmp_path / "run", config(4), relabelled, feats, TINY, resume=True)


def test_resume_without_a_checkpoint_is_a_clear_error(problem, tmp_path):
    data, feats = problem
    with pytest.raises(TrainingError, match="nothing to resume"):
        run_training(tmp_path / "run", config(2), data, feats, TINY, resume=True)


def test_training_data_for_another_pool_is_refused(tmp_path):
    rows, _ = routing_problem(12)
    other = dataclasses.replace(TINY, pool=TINY.pool[:2])
    folder = write_data(tmp_path / "data", rows)
    with pytest.raises(TrainingError, match="collected for the pool"):
        load_training_set(folder, BENCHES, other)


@pytest.mark.parametrize(("content", "message"), [
    (None, "run `tinyrouter collect` first"),
    ("", "no training rows"),
    ("{\"item\": 3}\n", "is not a training row"),
])
def test_missing_or_broken_data_is_a_clear_error(tmp_path, content, message):
    folder = tmp_path / "data"
    folder.mkdir()
    rows, _ = routing_problem(12)
    write_data(folder, rows)
    if content is None:
        (folder / "mmlu.jsonl").unlink()
    else:
        (folder / "mmlu.jsonl").write_text(content)
    with pytest.raises(TrainingError, match=message):
        load_training_set(folder, BENCHES, TINY)


# ---------------------------------------------------------------- command line

def test_train_command_runs_and_resumes(tmp_path, monkeypatch, capsys):
    rows, base = routing_problem()
    data = write_data(tmp_path / "data", rows)
    competition = tmp_path / "tiny.json"
    competition.write_text(json.dumps({"hidden_size": 8, "svf_scale_count": 56}))
    monkeypatch.setattr(fitness, "encoder_featurizer", lambda enc, d, rules: FakeFeatures(base))
    monkeypatch.setattr("evaluator.coordinator.router.load_router",
                        lambda encoder, rules: routers.Router(None, rules))
    argv = ["--competition", str(competition), "train", "--benchmarks", ",".join(BENCHES),
            "--run-name", "r1", "--data", str(data), "--experiments", str(tmp_path / "exp"),
            "--popsize", "6", "--minibatch", "20", "--no-progress", "--role-rows", "0"]
    assert main([*argv, "--generations", "2"]) == 0
    drawn = re.search(r"^seed (\d+) \(drawn for this run; --seed \1 trains it again\)$",
                      capsys.readouterr().out, re.M)
    assert drawn  # two miners' default runs differ: each draws its own seed
    assert main([*argv, "--generations", "3", "--resume"]) == 0  # and a resume reads it back
    history = json.loads((tmp_path / "exp" / "r1" / "history.json").read_text())
    assert len(history["generations"]) == 3
    out = capsys.readouterr().out
    assert "drawn for this run" not in out
    recorded = json.loads((tmp_path / "exp" / "r1" / "summary.json").read_text())
    assert recorded["optimizer"]["seed"] == int(drawn[1])
    assert f"tinyrouter --competition {competition} pack --run-dir" in out
    summary = json.loads((tmp_path / "exp" / "r1" / "summary.json").read_text())
    kept = summary["selection"]["kept_after"]
    assert ("kept the start, fitted again on every training row: no generation led it beyond "
            f"chance on the {summary['selection']['rows']} rows set aside" if kept == 0
            else f"kept the head after generation {kept} of 3") in out
    # a kept start is what anyone's default run converges on: the run says so
    assert kept != 0 or "the category lookup, which any miner's default run" in out
    assert main([*argv, "--run-name", "r3", "--generations", "2", "--select", "0"]) == 0
    assert "kept the head after the last generation (2): no rows set aside" in \
        capsys.readouterr().out
    assert main([*argv, "--run-name", "r4", "--select", "1"]) == 1
    assert "--select 1.0 must be at least 0 and below 1" in capsys.readouterr().err
    assert main([*argv, "--generations", "3"]) == 1
    assert "--resume" in capsys.readouterr().err
    assert main([*argv, "--generations", "3", "--resume", "--shrink", "0"]) == 1
    assert "other settings" in capsys.readouterr().err
    assert main([*argv, "--run-name", "r2", "--shrink", "1.5"]) == 1
    assert "between 0 and 1" in capsys.readouterr().err


@pytest.fixture
def tiny(tiny_path, tiny_rules):
    """A tiny Qwen3 checkpoint and the rules that fit it."""
    return tiny_path, tiny_rules


@pytest.mark.slow
def test_train_and_summary_through_the_tiny_encoder(tmp_path, tiny):
    encoder, rules = tiny
    rows, _ = routing_problem(24, rules=rules)
    data = load_training_set(write_data(tmp_path / "data", rows), BENCHES, rules)
    featurizer = encoder_featurizer(str(encoder), data, rules)
    summary = run_training(tmp_path / "run", config(2, minibatch=12), data, featurizer,
                                 rules)
    assert summary["n_params"] == rules.n_params
    _, scales = read_weights(tmp_path / "run" / "best.safetensors", rules)
    # the cached features under the trained scales are the full forward pass's
    full = featurizer.cache.encoder.features(
        [coordinator_transcript(r.item.prompt, []) for r in rows[:4]], scales).numpy()
    assert np.allclose(featurizer.features(np.arange(4), scales), full, atol=1e-4)


def corpus_entry(i: int, bench: str):
    from evaluator.benchmarks.corpus import CorpusItem

    if bench == "math500":
        item = Item(bench, f"m{i}", f"Compute {i} + {i}. Put the answer in \\boxed{{}}.",
                    str(2 * i), "algebra" if i % 2 else "geometry")
        return CorpusItem(item, f"So \\boxed{{{2 * i}}}.", f"So \\boxed{{{2 * i + 1}}}.")
    item = Item(bench, f"u{i}", f"Question {i}: which letter?\nA. a\nB. b\nC. c\nD. d",
                "B", "physics" if i % 2 else "law")
    return CorpusItem(item, "Answer: B", "Answer: C")


@pytest.mark.slow
def test_live_training_plays_questions_through_the_pool_and_ledgers_them(tmp_path, tiny):
    from evaluator.pool.ledger import Ledger, verify_ledger
    from evaluator.pool.simulator import Simulator, serve_simulator

    encoder, rules = tiny
    rules = dataclasses.replace(rules, max_turns=2)  # keeps the test quick
    entries = [corpus_entry(i, b) for b in BENCHES for i in range(8)]
    skills = {m: {b: {c: p for c in ("algebra", "geometry", "physics", "law")}
                  for b in BENCHES} for m, p in zip(rules.pool_names, (0.9, 0.5, 0.2),
                                                    strict=True)}
    rows = [AnsweredItem(e.item, {m: ModelAnswer("…", j == 0)
                                  for j, m in enumerate(rules.pool_names)}) for e in entries]
    data = load_training_set(write_data(tmp_path / "data", rows), BENCHES, rules)
    collected = tmp_path / "data" / "ledger.jsonl"
    Ledger(collected).append(rules.pool_names[0], 10, 10, 0.01, "collect-1")
    from evaluator.coordinator.router import load_router

    router = load_router(str(encoder), rules)
    cfg = config(1, popsize=2, minibatch=8, live=True, live_items=1)
    with serve_simulator(Simulator(entries, skills, rules=rules)) as url:
        live = pool_live_fitness(data, router, url, tmp_path / "run" / "ledger.jsonl",
                                 rules, cfg.seed, cfg.live_items)
        run_training(tmp_path / "run", cfg, data,
                     encoder_featurizer(router.encoder, data, rules), rules,
                     ledger_source=collected, live=live)
    history = json.loads((tmp_path / "run" / "history.json").read_text())["generations"]
    assert all(0 <= h["live_mean"] <= 1 for h in history)
    ledger = verify_ledger(tmp_path / "run" / "ledger.jsonl")
    # the collection's entry, then at least one call per candidate and question
    assert ledger.entries >= 1 + 2 * len(BENCHES)
    assert ledger.total_cost_usd > 0.01


# ---------------------------------------------------------------- the head kept

def _history(run):
    return json.loads((run / "history.json").read_text())["generations"]


def test_a_search_that_only_wrecks_its_start_hands_back_the_start_fitted_on_every_row(
        problem, tmp_path):
    data, feats = problem
    # steps this large throw the fitted rows about: no generation routes the set-aside rows
    # as well as the start
    summary = run_training(tmp_path / "run", config(4, sigma0=30.0), data, feats, TINY)
    chosen = summary["selection"]
    assert chosen["kept_after"] == 0 and chosen["rows"] == 24  # 0.2 of 60 rows, twice
    assert all(h["aside"] <= chosen["start_accuracy"] for h in _history(tmp_path / "run"))
    head, scales = read_weights(tmp_path / "run" / "best.safetensors", TINY)
    refit = fitted_theta(feats.features(np.arange(len(data.rows)), np.ones(8)),
                         start_targets(data, TINY.train_shrink), TINY)
    assert np.array_equal(theta_from_tensors(head, scales), refit.astype(np.float32))


def test_the_head_kept_is_the_search_after_a_generation_that_leads_clearly(problem, tmp_path):
    data, feats = problem
    summary = run_training(tmp_path / "long", config(12, start="zero", popsize=12), data,
                           feats, TINY)
    chosen = summary["selection"]
    history = _history(tmp_path / "long")
    kept = [h["generation"] + 1 for h in history if h.get("kept")]
    assert kept and kept[-1] == chosen["kept_after"] > 0
    assert chosen["accuracy"] == history[kept[-1] - 1]["aside"] > chosen["start_accuracy"]
    run_training(tmp_path / "short", config(kept[-1], start="zero", popsize=12), data, feats,
                 TINY)
    assert (tmp_path / "long" / "best.safetensors").read_bytes() == \
        (tmp_path / "short" / "best.safetensors").read_bytes()


def test_a_resumed_run_keeps_choosing_against_the_head_it_had_kept(problem, tmp_path):
    data, feats = problem
    whole = run_training(tmp_path / "straight", config(12, start="zero", popsize=12), data,
                         feats, TINY)
    # the first part ends on the generation the whole run keeps (the eleventh), so the
    # resumed part must read the kept head back to compare generation twelve against it
    assert whole["selection"]["kept_after"] == 11
    run_training(tmp_path / "split", config(11, start="zero", popsize=12), data, feats, TINY)
    again = run_training(tmp_path / "split", config(12, start="zero", popsize=12), data, feats,
                         TINY, resume=True)
    assert again["selection"] == whole["selection"]
    assert _outputs(tmp_path / "straight") == _outputs(tmp_path / "split")


@pytest.mark.parametrize(("wins", "losses", "clear"), [
    (1, 0, False),  # one row: what the best of many noisy generations finds by chance
    (3, 0, False),  # 3 ≤ 2·√3
    (5, 0, True),  # 5 > 2·√5
    (6, 1, False),  # 5 ≤ 2·√7
    (8, 1, True),  # 7 > 2·√9
    (0, 0, False),  # a tie keeps the earlier head
])
def test_a_later_head_is_kept_only_for_a_lead_beyond_chance(wins, losses, clear):
    both = 4  # rows both get right count for neither
    kept = np.array([True] * both + [False] * wins + [True] * losses + [False] * 3)
    right = np.array([True] * both + [True] * wins + [False] * losses + [False] * 3)
    assert clear_lead(right, kept, TINY.train_select_z) is clear


def test_the_search_never_reads_the_rows_set_aside(problem, tmp_path):
    data, feats = problem
    _, aside = split_aside(data, TINY.train_select, seed=0)
    flipped = dataclasses.replace(data, correct=data.correct.copy())
    flipped.correct[aside] = 1 - flipped.correct[aside]
    for name, rows in (("as-collected", data), ("flipped", flipped)):
        run_training(tmp_path / name, config(4), rows, feats, TINY)
    searched = [[{k: h[k] for k in ("mean", "max", "best")} for h in _history(tmp_path / name)]
                for name in ("as-collected", "flipped")]
    assert searched[0] == searched[1]  # the same start, the same fitness, generation by generation
    assert [h["aside"] for h in _history(tmp_path / "as-collected")] != \
        [h["aside"] for h in _history(tmp_path / "flipped")]


def test_a_given_head_is_never_handed_back(problem, tmp_path):
    data, feats = problem
    given = fitted_theta(feats.features(np.arange(len(data.rows)), np.ones(8)),
                         start_targets(data, TINY.train_shrink), TINY)
    summary = run_training(tmp_path / "run", config(3, sigma0=30.0, init="f" * 64), data,
                           feats, TINY, start=given)
    assert summary["selection"]["kept_after"] >= 1
    assert summary["selection"]["start_accuracy"] is None
    head, scales = read_weights(tmp_path / "run" / "best.safetensors", TINY)
    assert not np.array_equal(theta_from_tensors(head, scales), given.astype(np.float32))


def test_without_rows_set_aside_the_last_generation_is_the_head(problem, tmp_path):
    data, feats = problem
    summary = run_training(tmp_path / "run", config(3, select=0), data, feats, TINY)
    assert summary["selection"] == {"share": 0, "rows": 0, "kept_after": 3}
    assert "aside" not in _history(tmp_path / "run")[-1]


@pytest.mark.parametrize("share", [-0.1, 1.0])
def test_a_share_set_aside_outside_0_to_1_is_refused(share):
    with pytest.raises(TrainingError, match="--select"):
        config(select=share)


def test_scales_step_sets_how_far_the_svf_scales_move(problem, tmp_path):
    data, feats = problem
    moved = []
    for name, step in (("wide", 1.0), ("narrow", 0.01)):
        run_training(tmp_path / name, config(3, scales_step=step, select=0), data, feats, TINY)
        _, scales = read_weights(tmp_path / name / "best.safetensors", TINY)
        moved.append(float(np.abs(scales - 1).mean()))
    assert moved[1] < moved[0] / 10


def test_a_generation_in_one_batched_call_scores_as_candidate_by_candidate(tmp_path, tiny):
    from evaluator.coordinator import CachedFeaturizer, load_encoder
    from evaluator.coordinator import head as routing
    from evaluator.submission import tensors_from_theta

    path, rules = tiny
    rows, _ = routing_problem(24, rules=rules)
    data = load_training_set(write_data(tmp_path / "data", rows), BENCHES, rules)
    transcripts = [coordinator_transcript(r.item.prompt, []) for r in data.rows]
    # a budget wide enough that the whole generation runs as one batched pass
    batched = CachedFeaturizer(load_encoder(str(path), rules, "cpu"), transcripts,
                               activation_bytes=1 << 30)

    class OneByOne:  # the same cache, without the batched call
        def features(self, index, scales):
            return batched.features(index, scales)

    rng = np.random.default_rng(3)
    thetas = [initial_theta(rules) + rng.normal(0, 0.5, rules.n_params).astype(np.float32)
              for _ in range(6)]
    index, targets = minibatch(data, generation=0, seed=0, size=12), data.targets(0.5)
    values = evaluate_population(thetas, index, targets, batched, rules)
    assert np.allclose(values, evaluate_population(thetas, index, targets, OneByOne(), rules),
                       atol=1e-6)
    feats = fitness.population_features(batched, index, np.stack([t[rules.n_head_params:]
                                                                  for t in thetas]))
    for theta, rows_k in zip(thetas, feats, strict=True):
        head, scales = tensors_from_theta(theta, rules)
        picks = routing.choices(routing.logits(rows_k, head, rules), rules)
        alone = routing.choices(routing.logits(batched.features(index, scales), head, rules), rules)
        assert all(np.array_equal(a, b) for a, b in zip(picks, alone, strict=True))


# ---------------------------------------------------------------- roles


@pytest.fixture
def role_problem(tmp_path):
    rows, base = routing_problem()
    data = load_training_set(write_data(tmp_path / "data", rows), BENCHES, TINY)
    # every transcript's state shares a direction, and turn 2's (after a Worker block) moves
    # along another, as a real encoder's last-token states do
    first = base.copy()
    first[:, -2] += 6.0
    second = first.copy()
    second[:, -1] += 6.0
    return data, FakeFeatures(first), second


def role_config(generations, role_rows, **kw):
    return TrainConfig.resolve(TINY, BENCHES, generations=generations, popsize=12, sigma0=0.3,
                               minibatch=40, role_rows=role_rows, **kw)


def test_a_turn_2_transcript_shows_one_cached_worker_answer_as_the_loop_would(role_problem):
    data, _, _ = role_problem
    short = dataclasses.replace(OFFICIAL, transcript_output_chars=40)
    for row in data.rows:
        for answer in row.answers.values():
            object.__setattr__(answer, "text", "x" * 100)
    rows = fit_rows(data, 50, seed=0)
    transcripts = turn2_transcripts(data, rows, 0, short)
    headers = [TURN_HEADER_RE.findall(t) for t in transcripts]
    assert all(len(h) == 1 and h[0][:2] == ("1", WORKER) for h in headers)
    assert all(t.startswith("QUERY:\n" + data.rows[i].item.prompt)
               for t, i in zip(transcripts, rows, strict=True))
    assert all("characters omitted" in t and "x" * 100 not in t for t in transcripts)
    # a seeded draw of the shown model, not always the same one
    assert len({h[0][2] for h in headers}) == len(OFFICIAL.pool_names)
    assert turn2_transcripts(data, rows, 0, short) == transcripts
    assert turn2_transcripts(data, rows, 1, short) != transcripts


def test_the_fit_reads_a_seeded_subset_of_the_rows(role_problem):
    data, _, _ = role_problem
    rows = fit_rows(data, 50, seed=0)
    assert len(set(rows)) == 50 and list(rows) == sorted(rows)
    assert np.array_equal(rows, fit_rows(data, 50, 0))
    assert not np.array_equal(rows, fit_rows(data, 50, 1))
    assert np.array_equal(fit_rows(data, 10**6, 0), np.arange(len(data.rows)))


def test_the_role_fit_separates_answering_from_judging(role_problem):
    data, turn1, second = role_problem
    every = np.arange(len(data.rows))
    ones = np.ones(TINY.svf_scale_count, np.float32)
    a, b = turn1.features(every, ones), FakeFeatures(second).features(every, ones)
    rows = fit_roles(a[:60], b[:60])
    head = np.zeros(TINY.head_shape, np.float32)
    head[TINY.n_models:] = rows
    held_out = role_choices(head, a[60:], b[60:], TINY)  # rows the fit never read
    assert held_out == {"turn1_worker": 1.0, "turn2_verifier": 1.0}
    assert np.isfinite(rows).all() and np.linalg.norm(rows) < 100  # the penalty bounds them
    assert np.array_equal(fit_roles(a[:60], b[:60]), rows)  # deterministic


def test_a_trained_head_answers_on_turn_1_and_judges_on_turn_2(role_problem, tmp_path):
    data, turn1, second = role_problem
    rows = fit_rows(data, 60, seed=0)
    roles = RoleData(rows, FakeFeatures(second[rows]))
    fitted = run_training(tmp_path / "roles", role_config(30, 60), data, turn1, TINY,
                          roles=roles)
    plain = run_training(tmp_path / "plain", role_config(30, 0), data, turn1, TINY)
    for bench, without in zip(fitted["train"].values(), plain["train"].values(), strict=True):
        assert bench["roles"]["turn1_worker"] >= 0.95
        assert bench["roles"]["turn2_verifier"] >= 0.95
        # the model rows, and so the routing, are the search's: the fit touches roles only
        assert bench["argmax_acc"] == without["argmax_acc"]
        assert "roles" not in without
    head, scales = read_weights(tmp_path / "plain" / "best.safetensors", TINY)
    left = role_choices(head, *roles.features(turn1, scales), TINY)
    assert min(left.values()) < 0.9  # left to the search, the role rows only drift
    fitted_head, _ = read_weights(tmp_path / "roles" / "best.safetensors", TINY)
    assert np.array_equal(fitted_head[:TINY.n_models], head[:TINY.n_models])


def test_a_role_fit_and_its_transcripts_go_together(role_problem, tmp_path):
    data, turn1, second = role_problem
    with pytest.raises(TrainingError, match="together"):
        run_training(tmp_path / "a", role_config(2, 8), data, turn1, TINY)
    with pytest.raises(TrainingError, match="together"):
        run_training(tmp_path / "b", role_config(2, 0), data, turn1, TINY,
                     roles=RoleData(np.arange(8), FakeFeatures(second[:8])))
    with pytest.raises(TrainingError, match="--role-rows"):
        role_config(2, -1)


def test_the_train_command_fits_the_roles_by_default(tmp_path, monkeypatch, capsys):
    rows, base = routing_problem()
    data = write_data(tmp_path / "data", rows)
    competition = tmp_path / "tiny.json"
    competition.write_text(json.dumps({"hidden_size": 8, "svf_scale_count": 56}))
    seen = []

    def featurizer(encoder, data, rules, transcripts=None):
        seen.append(transcripts)
        feats = base[:len(transcripts)].copy() if transcripts is not None else base.copy()
        feats[:, -2] += 6.0
        feats[:, -1] += 0.0 if transcripts is None else 6.0
        return FakeFeatures(feats)

    monkeypatch.setattr(fitness, "encoder_featurizer", featurizer)
    monkeypatch.setattr("evaluator.coordinator.router.load_router",
                        lambda encoder, rules: routers.Router(None, rules))
    argv = ["--competition", str(competition), "train", "--benchmarks", ",".join(BENCHES),
            "--data", str(data), "--experiments", str(tmp_path / "exp"), "--popsize", "8",
            "--minibatch", "20", "--no-progress", "--generations", "3"]
    assert main([*argv, "--run-name", "r1", "--role-rows", "40"]) == 0
    out = capsys.readouterr().out
    assert "roles fitted on" in out and "Worker on turn 1 for" in out
    summary = json.loads((tmp_path / "exp" / "r1" / "summary.json").read_text())
    assert summary["role_rows"] == 40 and len(seen[1]) == 40
    assert sum(bench["roles"]["rows"] for bench in summary["train"].values()) == 40
    assert main([*argv, "--run-name", "r2"]) == 0
    capsys.readouterr()
    summary = json.loads((tmp_path / "exp" / "r2" / "summary.json").read_text())
    trained = sum(bench["items"] for bench in summary["train"].values())
    assert summary["role_rows"] == OFFICIAL.train_role_rows
    assert len(seen[3]) == min(trained, OFFICIAL.train_role_rows)
    assert main([*argv, "--run-name", "r3", "--role-rows", "0"]) == 0
    assert "roles fitted" not in capsys.readouterr().out
    assert len(seen) == 5  # no turn-2 transcripts when the roles are left alone
