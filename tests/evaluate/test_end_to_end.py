"""The whole evaluation with the real parts: tiny encoder, sealed benchmark, loopback pool.

A first head is crowned, a second is scored against it, both results are applied twice,
and the public records are checked against the private components and the formula.
"""

import dataclasses
import json

import numpy as np
import pytest

from evaluator import cli
from evaluator.baselines import from_answered
from evaluator.benchmarks.sealing import (
    KdfParams,
    build_manifest,
    seal_split,
    sealed_path,
    write_train_items,
)
from evaluator.files import write_json
from evaluator.leaderboard import check_result
from evaluator.loop import coordinator_transcript
from evaluator.rules import ROLES
from evaluator.scoring import bench_score, efficiency
from evaluator.store import Store
from evaluator.types import AnsweredItem, Item, ModelAnswer

pytestmark = pytest.mark.slow

PASSWORD = "end-to-end"
SIZES = {"eval_size": 6, "audit_size": 4, "live_size": 2}
# on six eval and four audit questions any head's overfit gap is a coin toss; the gate has its
# own tables (test_scoring, test_evaluate_cli), here it only must not stop the first crown
LENIENT = {"overfit_reject_gap": 1.0}
CATEGORIES = ("algebra", "geometry")


def responses(bench: str, i: int) -> tuple[object, str, str]:
    """(reference, right response, wrong response) in each benchmark's answer format."""
    if bench == "math500":
        return str(i + 4), f"Adding up gives \\boxed{{{i + 4}}}.", f"So \\boxed{{{i + 5}}}."
    if bench == "mmlu":
        return "B", "The second option fits.\nAnswer: B", "The third option fits.\nAnswer: C"
    tests = {"tests": [{"input": f"{i} 3\n", "output": f"{i + 3}\n", "testtype": "stdin"}],
             "fn_name": None}
    return (tests, "```python\na, b = map(int, input().split())\nprint(a + b)\n```",
            "```python\na, b = map(int, input().split())\nprint(a - b)\n```")


def corpus_and_sets(rules):
    entries, sets = [], {}
    for bench in rules.benchmarks:
        sets[bench] = {}
        for split, size in rules.sealed_sizes.items():
            rows = []
            for i in range(size):
                reference, right, wrong = responses(bench, i)
                category = CATEGORIES[i % 2]
                item = Item(bench, f"{bench}-{split}-{i}", reference=reference, category=category,
                            prompt=f"Question {bench} {split} {i} about {category}: solve it.")
                entries.append(dataclasses.make_dataclass("Entry", ["item", "right", "wrong"])(
                    item, right, wrong))
                answers = {m: ModelAnswer(text=right if k == i % 3 else wrong,
                                          correct=k == i % 3)
                           for k, m in enumerate(rules.pool_names)}
                rows.append(item if split == "live" else AnsweredItem(item, answers))
            sets[bench][split] = rows
    return entries, sets


@pytest.fixture(scope="module")
def world(tmp_path_factory, tiny_path, tiny_rules):
    from evaluator.pool.simulator import Simulator, serve_simulator

    tmp = tmp_path_factory.mktemp("e2e")
    encoder = tiny_path
    rules = dataclasses.replace(tiny_rules, **SIZES, **LENIENT)
    overrides = {k: getattr(rules, k) for k in ("encoder_id", "hidden_size", "num_layers",
                                                "svf_layer", "svf_scale_count", *SIZES,
                                                *LENIENT)}
    (tmp / "competition.json").write_text(json.dumps(overrides))
    entries, sets = corpus_and_sets(rules)
    manifest = {}
    for bench, splits in sets.items():
        public = {split: {"count": len(rows), "commitment": seal_split(
            sealed_path(tmp / "sealed", bench, split), [r.to_dict() for r in rows], bench, split,
            PASSWORD, KdfParams(log2_n=10, r=1))} for split, rows in splits.items()}
        train = [row.item for row in splits["pool"][:6]]  # stands in: public, as far as routing goes
        write_train_items(tmp / "sealed", bench, [dataclasses.replace(i, id=f"train-{i.id}")
                                                  for i in train])
        manifest[bench] = {"splits": public, "train_ids": [f"train-{i.id}" for i in train],
                           "baselines": from_answered(splits["pool"], rules.pool_names)}
    personas = {m: {b: {c: 0.9 if k == j else 0.2 for j, c in enumerate(CATEGORIES)}
                    for b in rules.benchmarks} for k, m in enumerate(rules.pool_names)}
    with serve_simulator(Simulator(entries, personas, seed=0, rules=rules)) as url:
        yield {"tmp": tmp, "rules": rules, "encoder": encoder, "pool": url, "sets": sets,
               "manifest": build_manifest(manifest)}


def run(world, *argv):
    return cli.main(["--competition", str(world["tmp"] / "competition.json"), *map(str, argv)])


def test_crown_then_challenge(world, repo, make_submission, monkeypatch, capsys):
    rules = world["rules"]
    monkeypatch.setenv("BENCHMARK_PASSWORD", PASSWORD)
    write_json(repo / "leaderboard" / "manifest.json", world["manifest"])
    for k, login in enumerate(("alice", "bob")):
        make_submission(repo, login, 1, seed=k + 1, rules=rules)
    records = {}
    for pr, login in enumerate(("alice", "bob"), start=1):
        out, private = world["tmp"] / f"{login}.json", world["tmp"] / f"{login}.full.json"
        assert run(world, "evaluate", "--repo", repo, "--submission", f"submissions/{login}/1",
                   "--benchmark-dir", world["tmp"] / "sealed", "--encoder", world["encoder"],
                   "--pool-url", world["pool"], "--pr", pr, "--head-sha", f"{pr}" * 40,
                   "--out", out, "--private-out", private) == 0, capsys.readouterr().err
        for _ in range(2):
            assert run(world, "leaderboard", "apply", out, "--repo", repo) == 0
        records[login] = (json.loads(out.read_text()), json.loads(private.read_text()))
    assert run(world, "leaderboard", "validate", "--repo", repo) == 0

    first, second = records["alice"][0], records["bob"][0]
    assert first["outcome"] == "king"
    assert second["outcome"] in ("king", "lost")
    for public, private in records.values():
        check_result(public, rules)
        recompute(private, rules)
    bob = records["bob"][1]
    assert bob["king"]["miner"] == "alice"
    assert bob["live_cost_usd"] > 0
    king = Store(repo).king()
    assert king.miner == ("bob" if second["outcome"] == "king" else "alice")
    assert len(Store(repo).history()) == (2 if second["outcome"] == "king" else 1)


def recompute(private: dict, rules) -> None:
    """The composite from the private components with the seed's formula, items included."""
    for side in ("challenger", "king"):
        head = private[side]
        if head is None:
            continue
        scores = []
        for bench, c in head["per_benchmark"].items():
            items = head["items"][bench]
            assert c["cached_acc"] == pytest.approx(np.mean([x["correct"] for x in items["eval"]]))
            assert c["live_acc"] == pytest.approx(np.mean([x["correct"] for x in items["live"]]))
            assert c["avg_turns"] == pytest.approx(np.mean([x["n_turns"] for x in items["live"]]))
            eff = efficiency(c["avg_turns"], c["live_acc"], rules)
            score = bench_score(c["cached_acc"], c["live_acc"], eff, c["novelty"],
                                c["overfit_penalty"], rules)
            assert c["score"] == pytest.approx(score)
            scores.append(score)
        assert head["composite"] == pytest.approx(np.mean(scores))


def test_the_cached_router_decides_like_the_full_forward(world):
    from evaluator.coordinator.router import load_router

    rules = world["rules"]
    router = load_router(str(world["encoder"]), rules)
    rng = np.random.default_rng(0)
    transcripts = [coordinator_transcript(r.item.prompt, []) for r in world["sets"]["mmlu"]["pool"]]
    for _ in range(3):
        theta = np.concatenate([rng.normal(0, 1, rules.n_head_params),
                                1 + rng.normal(0, 0.3, rules.svf_scale_count)])
        decisions = router.decide(transcripts, theta, reuse=True)
        assert decisions == router.decide(transcripts, theta)
        assert {d.role for d in decisions} <= set(ROLES)
