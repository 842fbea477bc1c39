import atexit
import dataclasses
import json
import shlex
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pytest

from evaluator.cli import main
from evaluator.errors import LedgerError, SubmissionError, TrainingError
from evaluator.pool.ledger import Ledger
from evaluator.rules import OFFICIAL
from evaluator.submission import load_receipt, read_weights, sha256_file
from evaluator.train.data import TrainingSet
from evaluator.train.pack import SPARK_WIDTH, pack, render_readme, sparkline
from evaluator.train.run import TrainConfig, run_training
from evaluator.types import AnsweredItem, Item, ModelAnswer

BENCHES = ("math500", "mmlu", "livecodebench")
SMALL = dataclasses.replace(OFFICIAL, hidden_size=16, svf_scale_count=7 * 16)


class Features:
    def __init__(self, n: int, hidden: int):
        self.base = np.random.default_rng(0).normal(size=(n, hidden))

    def features(self, index, scales):
        f = self.base[index] * scales[:self.base.shape[1]]
        return f / np.linalg.norm(f, axis=1, keepdims=True)


_TRAINED: dict = {}  # (rules, generations, cost) → a run trained once in this process


def trained_run(folder, rules=OFFICIAL, generations=3, cost=0.42):
    """A finished run in `folder`, trained on data whose collection cost `cost` dollars: each
    kind trained once per process and copied (a test may break its copy as it likes)."""
    key = (rules, generations, cost)
    if key not in _TRAINED:
        built = Path(tempfile.mkdtemp(prefix="trained-"))
        atexit.register(shutil.rmtree, built, True)  # the worker's copies go when it ends
        _TRAINED[key] = _train(built / "run", rules, generations, cost)
    shutil.copytree(_TRAINED[key], folder)
    return folder


def _train(folder, rules, generations, cost):
    rows = [AnsweredItem(Item(BENCHES[i % 3], f"q{i}", f"question {i}", "1"),
                         {m: ModelAnswer("…", (i + j) % 3 == 0)
                          for j, m in enumerate(rules.pool_names)}) for i in range(30)]
    rows.sort(key=lambda r: BENCHES.index(r.item.benchmark))
    data = TrainingSet(rows, np.repeat(np.arange(3), 10),
                             np.array([r.correct_vector(rules.pool_names) for r in rows]),
                             BENCHES)
    ledger = folder.parent / "collected-ledger.jsonl"
    if cost:
        Ledger(ledger).append("qwen3.5-35b-a3b", 100, 50, cost, "req-1")
    config = TrainConfig.resolve(rules, BENCHES, generations=generations, popsize=6, sigma0=0.1,
                                 minibatch=12)
    run_training(folder, config, data, Features(30, rules.hidden_size), rules,
                 ledger_source=ledger)
    return folder


@pytest.fixture
def run(tmp_path):
    return trained_run(tmp_path / "experiments" / "r1")


@pytest.mark.slow
def test_pack_writes_a_submission_that_passes_preflight(run, repo, capsys):
    assert main(["pack", "--run-dir", str(run), "--miner-name", "alice",
                 "--repo", str(repo)]) == 0
    folder = repo / "submissions" / "alice" / "1"
    assert sorted(p.name for p in folder.iterdir()) == ["README.md", "receipt.json",
                                                        "weights.safetensors"]
    receipt = load_receipt(folder / "receipt.json", rules=OFFICIAL)
    assert receipt.miner == "alice" and receipt.generation == 1
    assert receipt.total_cost_usd == pytest.approx(0.42)
    assert receipt.optimizer["generations"] == 3 and len(receipt.fitness_history) == 3
    assert receipt.weights_sha256 == sha256_file(folder / "weights.safetensors")
    head, _ = read_weights(folder / "weights.safetensors", rules=OFFICIAL)
    assert np.array_equal(head, read_weights(run / "best.safetensors", rules=OFFICIAL)[0])
    readme = (folder / "README.md").read_text()
    assert "sep-cma-es" in readme and "| generation |" in readme
    out = capsys.readouterr().out
    assert "must be opened by the GitHub account alice" in out
    hint = next(line for line in out.splitlines() if line.startswith("next:"))
    # the hint runs exactly as printed
    argv = shlex.split(hint.removeprefix("next:"))
    assert argv[:2] == ["tinyrouter", "preflight"] and argv[-2:] == ["--author", "alice"]
    assert main(argv[1:]) == 0


def _attempted(repo, folder):
    from evaluator.records import Attempt
    from evaluator.store import Store

    Store(repo).record_attempt(Attempt("alice", int(folder.name), 5, "a" * 40,
                                       "2026-11-20T12:00:00Z", "b" * 64, "q7:AAAA", True, None))


def _committed(repo, folder):
    import subprocess

    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.org"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "submissions"], check=True)
    subprocess.run([*git, "commit", "-qm", "merged"], check=True)


@pytest.mark.slow
@pytest.mark.parametrize(("between", "expected"), [
    # a folder packed here and never submitted is replaced: the bot expects that generation
    (lambda repo, folder: None, "1"),
    # a generation the bot recorded, or one merged on main, is spent
    (_attempted, "2"),
    (_committed, "2"),
])
def test_packing_again_writes_the_generation_the_bot_expects(run, repo, between, expected,
                                                             capsys):
    first = pack(run, "alice", repo, OFFICIAL)
    between(repo, first)
    second = pack(run, "alice", repo, OFFICIAL)
    assert (first.name, second.name) == ("1", expected)
    assert sorted(p.name for p in (repo / "submissions" / "alice").iterdir()) == (
        ["1"] if expected == "1" else ["1", "2"])
    if expected == "1":  # and preflight, as the bot, passes it (no gate 3 against a ghost)
        assert main(["preflight", "submissions/alice/1", "--repo", str(repo),
                     "--author", "alice"]) == 0


@pytest.mark.slow
def test_receipt_follows_the_ledger_head(run, repo):
    ledger = Ledger(run / "ledger.jsonl")
    ledger.append("deepseek-v4-flash", 10, 10, 0.08, "req-2")
    receipt = load_receipt(pack(run, "bob", repo, OFFICIAL) / "receipt.json", rules=OFFICIAL)
    assert receipt.ledger_head == ledger.head
    assert receipt.total_cost_usd == pytest.approx(0.50)


def test_pack_under_other_rules(tmp_path, repo):
    run = trained_run(tmp_path / "small", SMALL)
    folder = pack(run, "carol", repo, SMALL)
    head, scales = read_weights(folder / "weights.safetensors", SMALL)
    assert head.shape == SMALL.head_shape and scales.shape == (SMALL.svf_scale_count,)
    with pytest.raises(TrainingError, match="another pool or head size"):
        pack(run, "carol", repo, OFFICIAL)


def _two_generations(tmp_path):
    return trained_run(tmp_path / "short", generations=2)


def _no_cost(tmp_path):
    return trained_run(tmp_path / "free", cost=0)


def _zero_cost(tmp_path):
    folder = trained_run(tmp_path / "zero", cost=0)
    Ledger(folder / "ledger.jsonl").append("gemini-3.1-flash-lite", 0, 0, 0.0, "req-0")
    return folder


def _no_generation(tmp_path):
    folder = tmp_path / "empty"
    folder.mkdir()
    return folder


def _corrupt_history(tmp_path):
    folder = trained_run(tmp_path / "broken")
    (folder / "history.json").write_text("{\"generations\": ")
    return folder


def _tampered_ledger(tmp_path):
    folder = trained_run(tmp_path / "tampered")
    path = folder / "ledger.jsonl"
    path.write_text(path.read_text().replace("0.42", "4.2"))
    return folder


def _bad_weights(tmp_path):
    folder = trained_run(tmp_path / "weights")
    (folder / "best.safetensors").write_bytes(b"not a safetensors file")
    return folder


def _long_history(tmp_path):
    folder = trained_run(tmp_path / "long")
    history = [{"generation": g, "mean": 0.5, "max": 0.6, "best": 0.6, "seconds": g}
               for g in range(2000)]
    (folder / "history.json").write_text(json.dumps({"format": 1, "generations": history}))
    return folder


@pytest.mark.slow
@pytest.mark.parametrize(("make_run", "login", "error", "message"), [
    # the run is not ready
    (_no_generation, "alice", TrainingError, "not finished a generation"),
    (lambda p: p / "typo", "alice", TrainingError, "no run folder"),
    (_two_generations, "alice", TrainingError, "at least 3"),
    (_corrupt_history, "alice", TrainingError, "corrupt"),
    (_bad_weights, "alice", SubmissionError, "safetensors"),
    (_long_history, "alice", TrainingError, "over the 65536-byte cap"),
    # the cost cannot be proven
    (_no_cost, "alice", TrainingError, "has no ledger.jsonl"),
    (_zero_cost, "alice", TrainingError, "needs a cost above"),
    (_tampered_ledger, "alice", LedgerError, "line 1"),
    # the login cannot be a folder name
    (lambda p: trained_run(p / "ok"), "../alice", TrainingError, "not a valid GitHub login"),
    (lambda p: trained_run(p / "ok"), "a" * 65, TrainingError, "not a valid GitHub login"),
    (lambda p: trained_run(p / "ok"), "", TrainingError, "not a valid GitHub login"),
])
def test_bad_input_leaves_nothing_in_submissions(tmp_path, repo, make_run, login, error,
                                                 message):
    run = make_run(tmp_path)
    with pytest.raises(error, match=message):
        pack(run, login, repo, OFFICIAL)
    assert list((repo / "submissions").rglob("*")) == []


@pytest.mark.slow
def test_bad_login_on_the_command_line_exits_1(run, repo, capsys):
    assert main(["pack", "--run-dir", str(run), "--miner-name", "bad/name",
                 "--repo", str(repo)]) == 1
    assert "not a valid GitHub login" in capsys.readouterr().err


def test_readme_shows_the_fitness_curve():
    history = [{"generation": g, "mean": 0.4 + g / 100, "max": 0.5 + g / 100,
                "best": 0.5 + g / 100, "seconds": g} for g in range(25)]
    summary = {"optimizer": {"name": "sep-cma-es", "popsize": 32, "sigma0": 0.1,
                             "generations": 25, "seed": 0},
               "benchmarks": list(BENCHES), "minibatch": 96, "seconds": 25.0, "shrink": 0.5,
               "train": {"mmlu": {"items": 10, "expected_acc": 0.5, "argmax_acc": 0.6}}}
    readme = render_readme("alice", 4, summary, history, 1.5)
    assert readme.startswith("# alice — generation 4")
    assert "category at weight 0.5" in readme
    assert "▁" in readme and "█" in readme
    curve = sparkline([h["best"] for h in history * 10])
    assert len(curve) == SPARK_WIDTH
    assert "| 24 |" in readme  # the last generation is always shown


@pytest.mark.slow
def test_readme_reads_well_as_text_with_a_score_without_a_king(run, repo):
    score = {"weights_sha256": sha256_file(run / "best.safetensors"), "benchmarks": ["mmlu"],
             "per_benchmark": {"mmlu": {"rows": 4, "cached_acc": 0.5, "cached_ci95": [0.2, 0.8],
                                        "fit": {"gap": 0.1}}},
             "composite": None, "cached_part": 0.4}
    (run / "score.json").write_text(json.dumps(score))
    readme = (pack(run, "alice", repo, OFFICIAL) / "README.md").read_text()
    assert "Cached part of the composite 0.4000; live accuracy and efficiency not measured.\n" \
        in readme
    king = {"head": "the king (bob-2 generation 3)", "delta": 0.01, "ci95": [-0.02, 0.04],
            "z": 0.5}
    (run / "score.json").write_text(json.dumps(score | {"king": king}))
    readme = (pack(run, "alice", repo, OFFICIAL) / "README.md").read_text()
    assert "measured.\n\nAgainst the king (bob-2 generation 3) on the same rows" in readme
    assert "\\" not in readme  # nothing escaped that plain text would show
    summary = json.loads((run / "summary.json").read_text())["selection"]
    kept = ("The head is the start, fitted again on every training row" if
            summary["kept_after"] == 0 else
            f"The head is the search's after generation {summary['kept_after']}")
    assert f"{kept}" in readme and f"the {summary['rows']} training rows the search never read" \
        in readme
