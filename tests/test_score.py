"""`tinyrouter score` and `train --init`, through the tiny encoder, as a miner runs them."""

from __future__ import annotations

import json

import numpy as np
import pytest

from evaluator.cli import main
from evaluator.loop import coordinator_transcript
from evaluator.records import King
from evaluator.store import Store
from evaluator.types import AnsweredItem, Item, ModelAnswer

pytestmark = pytest.mark.slow
BENCHES = ("math500", "mmlu")
TOPICS = ("algebra", "geometry", "physics")


def a_king(miner: str, generation: int) -> King:
    from evaluator.rules import OFFICIAL
    from evaluator.scoring import BenchmarkScore

    parts = BenchmarkScore(0.6, 0.6, 0.5, 2.0, 0.375, 0.5, 1.0, 0.52)
    return King(miner, generation, 9, "b" * 40, 0.52, dict.fromkeys(OFFICIAL.benchmarks, parts),
                "2026-11-20T12:00:00Z")


def rows(n: int = 40) -> list[AnsweredItem]:
    """Questions on three topics; model k answers topic k right."""
    from evaluator.rules import OFFICIAL

    out = []
    for bench in BENCHES:
        for i in range(n):
            topic = TOPICS[i % 3]
            item = Item(bench, f"{bench}-{i}", f"A {topic} question, number {i}: solve it.", "1",
                        topic)
            out.append(AnsweredItem(item, {m: ModelAnswer("…", k == i % 3)
                                           for k, m in enumerate(OFFICIAL.pool_names)}))
    return out


@pytest.fixture(scope="module")
def world(tmp_path_factory, make_submission_module, tiny_path, tiny_rules):
    from evaluator.coordinator.encoder import encoder_overrides
    from evaluator.pool.ledger import Ledger
    from evaluator.rules import OFFICIAL

    tmp = tmp_path_factory.mktemp("score")
    encoder, rules = tiny_path, tiny_rules
    (tmp / "rules.json").write_text(json.dumps(encoder_overrides(encoder)))
    data = tmp / "data"
    data.mkdir()
    for bench in BENCHES:
        (data / f"{bench}.jsonl").write_text("".join(
            json.dumps(r.to_dict()) + "\n" for r in rows() if r.item.benchmark == bench))
    Ledger(data / "ledger.jsonl").append(OFFICIAL.pool_names[0], 100, 20, 0.0004, "gen-1")
    repo = tmp / "repo"
    (repo / "leaderboard").mkdir(parents=True)
    king = make_submission_module(repo, "bob", 1, seed=3, rules=rules)
    Store(repo).write_king(a_king("bob", 1))
    base = ["--competition", str(tmp / "rules.json")]
    train = [*base, "train", "--benchmarks", ",".join(BENCHES), "--data", str(data),
             "--encoder", str(encoder), "--experiments", str(tmp / "exp"), "--generations", "3",
             "--popsize", "6", "--minibatch", "12", "--no-progress", "--seed", "0"]
    assert main([*train, "--run-name", "held", "--holdout", "0.25"]) == 0
    assert main([*train, "--run-name", "all", "--holdout", "0"]) == 0
    # a second board whose king's receipt names the rows it never trained on
    declared = tmp / "declared"
    (declared / "leaderboard").mkdir(parents=True)
    make_submission_module(declared, "bob", 1, seed=3, rules=rules,
                           held_out={b: [f"{b}-{i}" for i in range(0, 40, 2)] for b in BENCHES})
    Store(declared).write_king(a_king("bob", 1))
    return {"tmp": tmp, "rules": rules, "encoder": encoder, "data": data, "repo": repo,
            "king": king, "base": base, "train": train, "declared": declared,
            "make": make_submission_module}


@pytest.fixture(scope="module")
def make_submission_module():
    from evaluator.submission import write_submission

    def make(repo, login, generation, seed, rules, held_out=None):
        rng = np.random.default_rng(seed)
        head = rng.normal(0, 0.05, rules.head_shape).astype(np.float32)
        scales = (1 + rng.normal(0, 0.01, rules.svf_scale_count)).astype(np.float32)
        fields = {"benchmarks": list(BENCHES),
                  "optimizer": {"name": "sep-cma-es", "popsize": 8, "sigma0": 0.1,
                                "generations": 3, "seed": 0},
                  "fitness_history": [{"generation": g, "mean": 0.5, "max": 0.6, "best": 0.6}
                                      for g in range(3)],
                  "total_cost_usd": 1.0, "ledger_head": "ab" * 32, "init_weights_sha256": None,
                  "tinyrouter_version": "0.1.0", "created_at": "2026-11-28T10:00:00Z",
                  "held_out": held_out}
        return write_submission(repo, login, generation, head, scales, fields, rules=rules)

    return make


def score(world, *argv):
    out = world["tmp"] / "score-out.json"
    code = main([*world["base"], "score", *map(str, argv), "--json", str(out),
                 "--encoder", str(world["encoder"])])
    return code, json.loads(out.read_text()) if code == 0 else None


def test_a_run_is_scored_on_the_rows_it_kept_out(world, capsys):
    run = world["tmp"] / "exp" / "held"
    code, report = score(world, run)
    assert code == 0
    held = json.loads((run / "holdout.json").read_text())["ids"]
    from evaluator.coordinator.router import load_router

    router = load_router(str(world["encoder"]), world["rules"])
    from evaluator.heads import resolve_head

    head = resolve_head(str(run), run, world["rules"])
    for bench in BENCHES:
        got = report["per_benchmark"][bench]
        assert got["rows"] == len(held[bench]) == 10
        assert got["fit"]["rows"] == 30
        # what the evaluator would grade: the turn-1 model's answer, row by row
        by_id = {r.item.id: r for r in rows()}
        picked = router.decide([coordinator_transcript(by_id[i].item.prompt, [])
                                for i in held[bench]], head.theta)
        expected = np.mean([by_id[i].answers[d.model].correct
                            for i, d in zip(held[bench], picked, strict=True)])
        assert got["cached_acc"] == pytest.approx(expected)
        low, high = got["cached_ci95"]
        assert low <= got["cached_acc"] <= high
    assert report["composite"] is None and not report["live_measured"]
    assert json.loads((run / "score.json").read_text()) == report
    assert "not measured (--live N)" in capsys.readouterr().out


def test_a_run_is_set_beside_the_simplest_routers_learnt_on_the_rows_it_fitted(world, capsys):
    run = world["tmp"] / "exp" / "held"
    code, report = score(world, run)
    out = capsys.readouterr().out
    assert code == 0
    held = json.loads((run / "holdout.json").read_text())["ids"]
    for bench in BENCHES:
        got = report["per_benchmark"][bench]
        found = got["simplest"]
        # model k is right on topic k: the lookup learnt on the fitted rows is never wrong
        assert found["lookup"] == found["oracle"] == 1.0
        fitted = [r for r in rows() if r.item.benchmark == bench and r.item.id not in held[bench]]
        counts = [sum(r.answers[m].correct for r in fitted) for m in world["rules"].pool_names]
        best = world["rules"].pool_names[int(np.argmax(counts))]
        expected = np.mean([r.answers[best].correct for r in rows() if r.item.id in held[bench]])
        assert found["best_single"] == {"model": best, "accuracy": pytest.approx(expected)}
        assert found["captured"]["lookup"] == 1.0
        assert found["captured"]["head"] == pytest.approx(
            (got["cached_acc"] - expected) / (1 - expected))
    assert out.count("category lookup 1.000") == len(BENCHES)
    worse = [b for b in BENCHES if report["per_benchmark"][b]["cached_acc"] < 1.0]
    assert out.count("the head routes worse than the lookup") == len(worse)


def test_against_the_king_the_crown_rule_is_applied_to_the_paired_rows(world, capsys):
    code, report = score(world, world["tmp"] / "exp" / "held", "--king", "--repo", world["repo"])
    assert code == 0
    king = report["king"]
    assert king["head"] == "the king (bob generation 1)"
    low, high = king["ci95"]
    assert low <= king["delta"] <= high
    # the evaluator's verdict function, with the last live stage's rule
    rules = world["rules"]
    assert king["would_crown"] == (king["delta"] >= rules.win_margin
                                   and king["z"] > rules.crown_z_final)
    assert king["verdict"].startswith("crowned" if king["would_crown"] else "lost")
    assert 0 <= king["agreement"] <= 1
    out = capsys.readouterr().out
    assert "yours − the king (bob generation 1)" in out and "take the crown" in out
    # the king most likely trained on these rows: the lean is measured and said
    per = report["per_benchmark"]
    gap = np.mean([per[b]["fit"]["cached_acc"] - per[b]["cached_acc"] for b in BENCHES])
    rules = world["rules"]
    assert king["king_bias"] == pytest.approx(max(0, (1 - rules.train_holdout)
                                                  * rules.weight_cached * gap))
    shifted = king["delta"] + king["king_bias"]
    assert king["would_crown_unbiased"] == (shifted >= rules.win_margin
                                            and king["z"] * shifted / king["delta"]
                                            > rules.crown_z_final)
    assert "leans toward the king by about" in out


def test_against_a_king_that_names_its_held_out_rows_the_comparison_is_on_unseen_rows(
        world, capsys):
    """The king's receipt names the rows it never trained on; a challenger who holds them out
    too (train --holdout-king) is compared with it on those rows alone, and nothing leans."""
    declared = world["declared"]
    kings = {b: {f"{b}-{i}" for i in range(0, 40, 2)} for b in BENCHES}
    assert main([*world["train"], "--run-name", "beside", "--holdout", "0.25",
                 "--holdout-king", "--repo", str(declared)]) == 0
    run = world["tmp"] / "exp" / "beside"
    held = json.loads((run / "holdout.json").read_text())["ids"]
    for bench in BENCHES:
        assert kings[bench] <= set(held[bench]) and len(held[bench]) < 40  # some left to train
    capsys.readouterr()
    code, report = score(world, run, "--king", "--repo", declared)
    assert code == 0
    king = report["king"]
    assert king["unseen_rows"] == dict.fromkeys(BENCHES, 20) and king["king_bias"] == 0
    rules = world["rules"]
    assert king["would_crown"] == (king["delta"] >= rules.win_margin
                                   and king["z"] > rules.crown_z_final)
    assert report["per_benchmark"]["math500"]["rows"] == len(held["math500"])  # its own: all
    out = capsys.readouterr().out
    assert "compared on rows neither head trained on (math500 20, mmlu 20)" in out
    assert "so the delta leans neither way" in out
    assert "leans toward the king" not in out
    # a run that did not hold them all out is compared where the two held-out sets meet
    code, report = score(world, world["tmp"] / "exp" / "held", "--king", "--repo", declared)
    ids = json.loads((world["tmp"] / "exp" / "held" / "holdout.json").read_text())["ids"]
    assert code == 0 and report["king"]["unseen_rows"] == {
        b: len(kings[b] & set(ids[b])) for b in BENCHES}
    # a king that names most of the rows is not believed: a challenger is not starved of rows
    greedy = world["tmp"] / "greedy"
    (greedy / "leaderboard").mkdir(parents=True)
    world["make"](greedy, "bob", 1, seed=3, rules=world["rules"],
               held_out={b: [f"{b}-{i}" for i in range(30)] for b in BENCHES})
    Store(greedy).write_king(a_king("bob", 1))
    capsys.readouterr()
    assert main([*world["train"], "--run-name", "starved", "--holdout-king",
                 "--repo", str(greedy)]) == 1
    assert "names 30 of your 40 math500 rows as never trained on" in capsys.readouterr().err
    # a king that names none: --holdout-king says so, and score prints the lean instead
    assert main([*world["train"], "--run-name", "nothing", "--holdout-king",
                 "--repo", str(world["repo"])]) == 2
    assert "declares no held-out rows in its receipt" in capsys.readouterr().err


def test_each_next_step_train_and_pack_print_runs_as_printed(world, capsys, monkeypatch):
    """A miner in a checkout of main copies what `train` prints next, then what `pack` prints:
    each command runs as printed (the login filled in) and the packed head passes preflight."""
    import shlex

    declared = world["declared"]
    monkeypatch.chdir(declared)
    capsys.readouterr()
    assert main([*world["train"], "--run-name", "hinted", "--holdout-king"]) == 0
    out = capsys.readouterr().out.splitlines()
    at = next(i for i, line in enumerate(out) if line.startswith("next: "))
    hints = [out[at].removeprefix("next: "), out[at + 1].strip()]
    assert "--king" in hints[0] and "<your GitHub login>" in hints[1]
    for hint in hints:
        argv = shlex.split(hint.replace("<your GitHub login>", "dora"))
        assert argv[0] == "tinyrouter" and main(argv[1:]) == 0, hint
    printed = capsys.readouterr().out
    assert "compared on rows neither head trained on" in printed
    preflight = next(line for line in printed.splitlines() if line.startswith("next: "))
    argv = shlex.split(preflight.removeprefix("next: "))
    assert "preflight" in argv and main(argv[1:]) == 0
    assert "all gates passed" in capsys.readouterr().out


@pytest.mark.parametrize(("argv", "code", "message"), [
    (["{exp}/all"], 1, "kept no held-out rows"),
    (["{repo}/submissions/bob/1"], 2, "name the rows to score it on with --data"),
    (["{tmp}/nowhere"], 2, "is not a training run"),
    (["{tmp}/bad.safetensors", "--data", "{data}"], 2, "bad.safetensors"),
    (["{exp}/held", "--king", "--repo", "{tmp}/empty-repo"], 2, "has no leaderboard/king.json"),
    (["{exp}/held", "--king", "--repo", "{tmp}/no-king"], 2, "has no king yet"),
    (["{exp}/held", "--king", "--repo", "{tmp}/lost-king"], 2, "pull the main branch"),
])
def test_bad_input_is_named(world, capsys, argv, code, message):
    tmp = world["tmp"]
    (tmp / "bad.safetensors").write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{}")
    (tmp / "empty-repo" / "leaderboard").mkdir(parents=True, exist_ok=True)
    (tmp / "lost-king" / "leaderboard").mkdir(parents=True, exist_ok=True)
    (tmp / "no-king" / "leaderboard").mkdir(parents=True, exist_ok=True)
    (tmp / "no-king" / "leaderboard" / "king.json").write_text('{"format": 1, "king": null}')
    Store(tmp / "lost-king").write_king(a_king("carol", 2))
    values = {"exp": tmp / "exp", "repo": world["repo"], "tmp": tmp, "data": world["data"]}
    assert score(world, *(a.format(**values) for a in argv))[0] == code
    assert message in capsys.readouterr().err


def test_a_submission_folder_is_scored_on_the_rows_named(world):
    code, report = score(world, world["repo"] / "submissions" / "bob" / "1", "--data",
                         world["data"])
    assert code == 0
    assert report["per_benchmark"]["mmlu"]["rows"] == 40
    assert "fit" not in report["per_benchmark"]["mmlu"]
    code, report = score(world, world["repo"] / "submissions" / "bob" / "1", "--data",
                         world["data"], "--king", "--repo", world["repo"])
    assert code == 0 and report["king"]["king_bias"] is None


def test_live_play_is_measured_and_ledgered_when_asked(world):
    from types import SimpleNamespace

    from evaluator.pool.simulator import Simulator, serve_simulator

    corpus = [SimpleNamespace(item=r.item, right="Answer: 1", wrong="Answer: 2") for r in rows()]
    run = world["tmp"] / "exp" / "held"
    ledger = run / "ledger.jsonl"
    before = ledger.read_text().count("\n") if ledger.exists() else 0
    with serve_simulator(Simulator(corpus, {}, world["rules"])) as url:
        code, report = score(world, run, "--live", "2", "--pool-url", url)
    assert code == 0 and report["live_measured"]
    live = report["per_benchmark"]["math500"]["live"]
    assert live["questions"] == 2 and 1 <= live["avg_turns"] <= world["rules"].max_turns
    assert report["composite"] is not None
    assert ledger.read_text().count("\n") > before


def test_training_can_start_from_the_king(world, capsys):
    capsys.readouterr()
    # a step this small cannot move the head far from where it started
    assert main([*world["train"], "--run-name", "warm", "--init", "king", "--sigma0", "1e-6",
                 "--repo", str(world["repo"])]) == 0
    out = capsys.readouterr().out
    assert "started from the king (bob generation 1)" in out
    assert "against its start: model-row cosine" in out
    summary = json.loads((world["tmp"] / "exp" / "warm" / "summary.json").read_text())
    from evaluator.submission.weights import sha256_file

    assert summary["init_weights_sha256"] == sha256_file(world["king"] / "weights.safetensors")
    assert "still a duplicate of the head it started from" in out
    assert main([*world["base"], "pack", "--run-dir", str(world["tmp"] / "exp" / "warm"),
                 "--miner-name", "alice", "--repo", str(world["repo"])]) == 0
    receipt = json.loads((world["repo"] / "submissions/alice/1/receipt.json").read_text())
    assert receipt["init_weights_sha256"] == summary["init_weights_sha256"]
    # the receipt names the rows the head never trained on, as the run kept them out
    held = json.loads((world["tmp"] / "exp" / "warm" / "holdout.json").read_text())["ids"]
    assert receipt["held_out"] == {b: sorted(ids) for b, ids in held.items()}


def test_pack_puts_the_score_in_the_readme_while_it_matches_the_weights(world):
    from evaluator.train.pack import pack

    run = world["tmp"] / "exp" / "held"
    assert score(world, run)[0] == 0  # without --king, as `train` suggests
    assert "Cached part of the composite" in (pack(run, "dave", world["repo"], world["rules"])
                                              / "README.md").read_text()
    assert score(world, run, "--king", "--repo", world["repo"])[0] == 0
    folder = pack(run, "dave", world["repo"], world["rules"])
    readme = (folder / "README.md").read_text()
    assert "Scored on held-out rows" in readme and "bob generation 1" in readme
    (run / "score.json").write_text(json.dumps({"weights_sha256": "0" * 64}))  # another head's
    again = pack(run, "erin", world["repo"], world["rules"])
    assert folder.name == "1"  # packed again: the unsubmitted first folder was replaced
    assert "Scored on held-out rows" not in (again / "README.md").read_text()


def test_diff_shows_where_your_head_routes_differently_on_the_rows_score_compares(world,
                                                                                    capsys):
    out, scored = world["tmp"] / "diff.json", world["tmp"] / "scored.json"
    run = str(world["tmp"] / "exp" / "held")
    assert main([*world["base"], "diff", run, "king", "--repo", str(world["repo"]),
                 "--encoder", str(world["encoder"]), "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    assert (report["yours"], report["theirs"]) == ("run held", "the king (bob generation 1)")
    assert report["rows"]["which"] == "held_out"
    held = json.loads((world["tmp"] / "exp" / "held" / "holdout.json").read_text())["ids"]
    math = report["per_benchmark"]["math500"]
    assert math["rows"] == len(held["math500"]) and set(math["by_category"]) <= set(TOPICS)
    for group in math["by_category"].values():
        assert all(sum(mix.values()) == pytest.approx(1) for mix in group["models"].values())
        assert group["difference"] == pytest.approx(group["accuracy"]["yours"]
                                                    - group["accuracy"]["theirs"])
    same = [g["same_model"] * g["rows"] for g in math["by_category"].values()]
    assert math["same_model"] == pytest.approx(sum(same) / math["rows"])
    text = capsys.readouterr().out
    assert "yours  = run held" in text and "theirs = the king (bob generation 1)" in text
    assert "compared on this run's held-out rows" in text and "positive: yours is better" in text
    # the same rows and the same direction as score --king: its cached delta is diff's
    # difference at the cached weight
    assert main([*world["base"], "score", run, "--king", "--repo", str(world["repo"]),
                 "--encoder", str(world["encoder"]), "--json", str(scored)]) == 0
    king = json.loads(scored.read_text())["king"]
    assert king["rows"] == report["rows"]
    assert king["delta"] == pytest.approx(world["rules"].weight_cached * report["difference"])
    assert "yours − the king (bob generation 1) (cached part only): " in capsys.readouterr().out
    # a head compared with itself agrees everywhere and differs by nothing
    assert main([*world["base"], "diff", "king", "king", "--repo", str(world["repo"]),
                 "--data", str(world["data"]), "--encoder", str(world["encoder"]),
                 "--json", str(out)]) == 0
    same = json.loads(out.read_text())
    assert same["per_benchmark"]["mmlu"]["same_decision"] == 1.0 and same["difference"] == 0
    assert same["rows"]["which"] == "data" and same["per_benchmark"]["mmlu"]["rows"] == 40


def test_a_run_remembers_its_data_wherever_it_is_scored_from(world, monkeypatch, tmp_path):
    monkeypatch.chdir(world["tmp"])
    train = [a if a != str(world["data"]) else "data" for a in world["train"]]
    assert main([*train, "--run-name", "relative", "--holdout", "0.25"]) == 0
    monkeypatch.chdir(tmp_path)
    code, report = score(world, world["tmp"] / "exp" / "relative")
    assert code == 0 and report["data"] == str(world["data"].resolve())
