"""`tinyrouter seal` then `tinyrouter collect`, end to end against the pool simulator on loopback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evaluator import cli
from evaluator.benchmarks.corpus import CorpusItem
from evaluator.benchmarks.mmlu import MMLU
from evaluator.benchmarks.sealing import PASSWORD_ENV, load_manifest, open_benchmark
from evaluator.benchmarks.splits import SEED_ENV
from evaluator.collect import read_answered
from evaluator.pool.ledger import verify_ledger
from evaluator.pool.simulator import Simulator, serve_simulator
from evaluator.rules import Competition

N_ITEMS = 32
N_PRIVATE = 5  # the audit's 3 and the live split's 2
SMALL = {"eval_size": 6, "audit_size": 3, "live_size": 2, "benchmarks": ["mmlu"]}
PASSWORD = "correct horse battery staple"


@pytest.fixture
def world(tmp_path: Path, monkeypatch):
    """A repo, a local MMLU source, small rules, the secrets and a running pool simulator."""
    rows = [{"question": f"Question {i}: which option is listed as number {i % 4 + 1}?",
             "subject": "astronomy", "choices": ["one", "two", "three", "four"],
             "answer": i % 4} for i in range(N_ITEMS)]
    source, private = tmp_path / "source", tmp_path / "private"
    private_rows = [{"question": f"Never published {i}: which option is listed as number "
                               f"{i % 4 + 1}?", "subject": "astronomy",
                   "choices": ["one", "two", "three", "four"], "answer": i % 4}
                  for i in range(N_PRIVATE)]
    for folder, upstream in ((source, rows), (private, private_rows)):
        (folder / "mmlu" / "all").mkdir(parents=True)
        (folder / "mmlu" / "all" / "test-00000-of-00001.jsonl").write_text(
            "".join(json.dumps(r) + "\n" for r in upstream))
    (private / "about.json").write_text(json.dumps({"mmlu": "5 questions written for the test"}))
    rules_file = tmp_path / "small.json"
    rules_file.write_text(json.dumps(SMALL))
    rules = Competition.load(rules_file)
    items = MMLU().items_from_rows(rows) + MMLU().items_from_rows(private_rows)
    entries = [CorpusItem(item, f"Answer: {item.reference}",
                           f"Answer: {'B' if item.reference == 'A' else 'A'}") for item in items]
    personas = {m: {"mmlu": {"astronomy": p}} for m, p in zip(rules.pool_names, (0.9, 0.5, 0.1),
                                                               strict=True)}
    monkeypatch.setenv(PASSWORD_ENV, PASSWORD)
    monkeypatch.setenv(SEED_ENV, "a-secret-seed-of-enough-length")
    sim = Simulator(entries, personas, rules=rules)
    with serve_simulator(sim) as url:
        world = dict(repo=tmp_path / "repo", source=source, private=private, rules_file=rules_file,
                     rules=rules,
                     sim=sim, url=url, sealed=tmp_path / "sealed", data=tmp_path / "data")
        world["repo"].mkdir()
        yield world


def tinyrouter(world, *args: str) -> int:
    return cli.main(["--competition", str(world["rules_file"]), *args])


def seal(world, *extra: str) -> int:
    return tinyrouter(world, "seal", "--source", str(world["source"]), "--private-source",
                      str(world["private"]), "--out-dir",
                      str(world["sealed"]), "--manifest",
                      str(world["repo"] / "leaderboard" / "manifest.json"),
                      "--pool-url", world["url"], "--kdf-log2n", "10", *extra)


def collect(world, *extra: str) -> int:
    return tinyrouter(world, "collect", "--benchmark", "mmlu", "--out", str(world["data"]),
                      "--repo", str(world["repo"]), "--source", str(world["source"]),
                      "--pool-url", world["url"], *extra)


@pytest.mark.slow
def test_seal_then_verify_through_the_pool(world, capsys):
    assert seal(world) == 0
    out = capsys.readouterr().out
    assert "mmlu: pool 12, live 2, audit 3, train 10" in out
    assert world["sim"].requests == 3 * (12 + 3)  # cached answers for the pool and the audit
    assert verify_ledger(world["sealed"] / "ledger.jsonl").entries == 45
    opened = open_benchmark(world["sealed"], PASSWORD, world["rules"])["mmlu"]
    assert all(a.text.startswith("Answer: ") for row in opened["pool"]
               for a in row.answers.values())
    assert tinyrouter(world, "verify-benchmark", "--dir", str(world["sealed"]), "--manifest",
                      str(world["repo"] / "leaderboard" / "manifest.json")) == 0
    assert "commitments match" in capsys.readouterr().out
    assert "Question" not in out and "Never published" not in out  # no hidden item printed
    assert all(r.item.id.startswith("private/") for r in opened["audit"])
    assert all(item.id.startswith("private/") for item in opened["live"])


@pytest.mark.slow
def test_collect_is_resumable_ledgered_and_train_only(world, capsys):
    assert seal(world) == 0
    train_ids = load_manifest(world["repo"] / "leaderboard" / "manifest.json")[
        "benchmarks"]["mmlu"]["train_ids"]
    sealed_requests = world["sim"].requests
    assert collect(world, "--limit", "5") == 0
    assert [r.item.id for r in read_answered(world["data"] / "mmlu.jsonl", world["rules"])] == train_ids[:5]
    assert collect(world) == 0
    assert "5 new rows (10 in" in capsys.readouterr().out
    assert collect(world) == 0  # nothing left to ask
    assert "0 new rows (10 in" in capsys.readouterr().out
    assert world["sim"].requests == sealed_requests + 3 * 10
    assert verify_ledger(world["data"] / "ledger.jsonl").entries == 3 * 10
    rows = read_answered(world["data"] / "mmlu.jsonl", world["rules"])
    assert sorted(r.item.id for r in rows) == sorted(train_ids)


@pytest.mark.slow
@pytest.mark.parametrize(("fault", "message"), [
    # the key is refused
    ("401", "HTTP 401"),
    # the account is out of credit: the error says how to fix it
    ("402", "top up the key"),
])
def test_a_failed_collect_keeps_finished_rows_and_resumes(world, capsys, fault, message):
    assert seal(world) == 0
    assert collect(world, "--limit", "8") == 0
    world["sim"].inject(*[fault] * 3)  # the pool refuses the next batch for good
    assert collect(world) == 1
    errors = [line for line in capsys.readouterr().err.splitlines() if "error" in line]
    assert len(errors) == 1 and errors[0].startswith("error: ") and message in errors[0]
    assert len(read_answered(world["data"] / "mmlu.jsonl", world["rules"])) == 8
    assert collect(world) == 0
    assert len(read_answered(world["data"] / "mmlu.jsonl", world["rules"])) == 10


@pytest.mark.slow
@pytest.mark.parametrize(("args", "message", "code"), [
    # no manifest in the repo: nothing says which ids are public
    (["--repo", "elsewhere"], "no leaderboard/manifest.json", 1),
    # a command line that asks for the impossible
    (["--benchmark", "math500"], "unknown benchmark", 2),
    (["--limit", "0"], "at least 1", 2),
])
def test_collect_refuses_bad_requests(world, capsys, args, message, code):
    assert seal(world) == 0
    argv = {"--repo": str(world["repo"]), "--benchmark": "mmlu"}
    for flag, value in zip(args[::2], args[1::2], strict=True):
        argv[flag] = str(world["repo"].parent / value) if flag == "--repo" else value
    assert tinyrouter(world, "collect", "--out", str(world["data"]), "--source",
                      str(world["source"]), "--pool-url", world["url"],
                      *[x for kv in argv.items() for x in kv]) == code
    assert message in capsys.readouterr().err


@pytest.mark.slow
def test_sealing_again_needs_force(world, capsys):
    assert seal(world) == 0
    assert seal(world) == 1
    assert "--force" in capsys.readouterr().err
    assert seal(world, "--force") == 0
