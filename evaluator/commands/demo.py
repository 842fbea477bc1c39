"""`tinyrouter demo`: the whole competition, offline, in a fresh workspace, and what happened.

Every stage runs the same `tinyrouter` subcommand a maintainer, a miner or a workflow
runs, against a tiny Qwen3 built here and the loopback pool simulator; nothing is faked.
The stages are a tuple of named steps and one loop, so a failure names its stage.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from unittest.mock import patch

from evaluator import isolation
from evaluator.baselines import gap_closed
from evaluator.cli import main
from evaluator.commands.serve import demo_hint
from evaluator.errors import TinyRouterError
from evaluator.files import SteppedClock, clock, write_json
from evaluator.pool.simulator import bundled_simulator, serve_simulator
from evaluator.reports import crown_test
from evaluator.rules import OFFICIAL, Competition
from evaluator.store import MANIFEST_PATH, Store, submission_path

log = logging.getLogger(__name__)

MARKER = ".tinyrouter-demo"
# Demo secrets: printed in the docs on purpose. A real competition keeps its own secret.
DEMO_PASSWORD = "demo-password-not-a-secret"
DEMO_SEED = "demo-seed-not-a-secret-0001"
# the sealed files' scrypt cost (log2 N): the demo's password is public, so the official
# cost would buy nothing; 2^12 derives each key the demo derives 32 times faster
DEMO_KDF_LOG2N = 12
# the demo's one clock (files.SteppedClock): its season opens this long before the demo ran,
# and each event it plays (a stage, a PR's gates, an evaluation) moves the clock on a step
SEASON, STEP = timedelta(hours=12), timedelta(minutes=30)


@dataclass(frozen=True)
class Miner:
    login: str
    seed: int
    pr: int


# two miners following the guide (their own seeds): both runs converge on the category lookup,
# and both are evaluated (the behavioural check compares a head's own choices)
MINERS = (Miner("alice", seed=1, pr=1), Miner("bob", seed=7, pr=2))
COPIER = Miner("mallory", seed=0, pr=3)  # submits the king's head with its role rows permuted
# asks the pool about every corpus item outside the published train ids (the hidden pool is
# among them) and fits a head to exactly those answers: the never-published audit and live
# questions catch it
MEMORISER = Miner("mnemo", seed=12, pr=4)
# each miner's training run: the search starts from the category lookup's fit (train/start.py),
# which already routes by topic; on the demo's data more generations leave alice's fitness where
# the start put it, so three (the fewest a receipt takes) show the search at work; the
# memoriser's too, as its start already fits each row's answers (--start rows)
GENERATIONS = 3
# the miners' CMA-ES population: about 60% of the default for the demo's 1,536 numbers, which
# trains a head as good on held-out rows in 60% of the time (a miner keeps the default)
POPSIZE = 16
# the demo's audit per benchmark: with the live split, every item of evaluator/data/corpus/private
AUDIT_SIZE = 60
# the demo's eval half per benchmark and share of the rest published as train ids: its corpus
# holds 330 to 360 public items a benchmark; a pool of twice EVAL_SIZE leaves 150 to 180, of
# which the honest miners train on TRAIN_FRACTION, enough to learn the topics
EVAL_SIZE, TRAIN_FRACTION = 90, 0.8
DEMO_SIZES = {"eval_size": EVAL_SIZE, "train_fraction": TRAIN_FRACTION,  # the studies read them
              "audit_size": AUDIT_SIZE}
FAIRNESS_SCALE = 0.01  # of `tinyrouter fairness`'s trial counts: seconds, not minutes


@dataclass
class Workspace:
    """Where every artefact of a demo run lives; `repo` plays the competition repository."""

    root: Path
    pool_url: str = ""
    rules: Competition = OFFICIAL
    timings: dict[str, float] = field(default_factory=dict)
    results: dict[str, dict[str, Any]] = field(default_factory=dict)
    clock: SteppedClock = field(default_factory=lambda: SteppedClock(
        datetime.now(UTC).replace(second=0, microsecond=0), SEASON, STEP))

    @property
    def encoder(self) -> Path:
        return self.root / "encoder"

    @property
    def competition(self) -> Path:
        return self.root / "competition.json"

    @property
    def hidden(self) -> Path:
        return self.root / "hidden"

    @property
    def repo(self) -> Path:
        return self.root / "repo"

    @property
    def data(self) -> Path:
        return self.root / "miners" / "data"

    @property
    def experiments(self) -> Path:
        return self.root / "miners" / "experiments"

    @property
    def public(self) -> Path:
        return self.root / "results"

    @property
    def private(self) -> Path:
        return self.root / "private"

    @property
    def site(self) -> Path:
        return self.root / "site"

    def folder(self, miner: Miner) -> str:
        return submission_path(miner.login, 1)


def prepare(root: Path) -> None:
    """A fresh workspace; an earlier demo's is replaced, anything else is left alone."""
    if root.exists() and any(root.iterdir()):
        if not (root / MARKER).is_file():
            raise TinyRouterError(f"{root} exists and is not a demo workspace; "
                                  "pass --workdir with an empty or new folder")
        shutil.rmtree(root)
    root.mkdir(parents=True, exist_ok=True)
    (root / MARKER).write_text("made by tinyrouter demo; safe to delete\n", encoding="utf-8")


def tinyrouter(ws: Workspace, *argv: object, expect: int = 0) -> None:
    """Run one `tinyrouter` subcommand in-process under the demo's rules."""
    args = [str(a) for a in argv]
    if ws.competition.is_file():
        args = ["--competition", str(ws.competition), *args]
    code = main(args)
    if code != expect:
        raise TinyRouterError(f"`tinyrouter {' '.join(map(str, argv[:2]))}` exited {code}, "
                              f"not {expect}")


# ---------------------------------------------------------------- stages

def build_encoder(ws: Workspace) -> None:
    from evaluator.coordinator.encoder import encoder_overrides  # torch: when the demo runs

    tinyrouter(ws, "encoder", "make-tiny", ws.encoder, "--seed", 0)
    write_json(ws.competition, {**encoder_overrides(ws.encoder), **DEMO_SIZES})
    ws.rules = Competition.load(ws.competition)


def seal(ws: Workspace) -> None:
    tinyrouter(ws, "seal", "--source", "demo", "--private-source", "demo", "--out-dir", ws.hidden,
               "--manifest", ws.repo / MANIFEST_PATH,
               "--pool-url", ws.pool_url, "--ledger", ws.private / "seal-ledger.jsonl",
               "--kdf-log2n", DEMO_KDF_LOG2N)
    tinyrouter(ws, "verify-benchmark", "--dir", ws.hidden,
               "--manifest", ws.repo / MANIFEST_PATH)
    tinyrouter(ws, "basis", "--benchmark-dir", ws.hidden, "--repo", ws.repo,
               "--encoder", ws.encoder)


def collect(ws: Workspace) -> None:
    for bench in ws.rules.benchmarks:
        tinyrouter(ws, "collect", "--benchmark", bench, "--out", ws.data, "--repo", ws.repo,
                   "--source", "demo", "--pool-url", ws.pool_url)
    tinyrouter(ws, "ledger", "verify", ws.data / "ledger.jsonl")


def train(ws: Workspace) -> None:
    for miner in MINERS:
        tinyrouter(ws, "train", "--benchmarks", ",".join(ws.rules.benchmarks),
                   "--run-name", miner.login, "--data", ws.data, "--encoder", ws.encoder,
                   "--experiments", ws.experiments, "--generations", GENERATIONS,
                   "--popsize", POPSIZE, "--seed", miner.seed,
                   "--progress-every", 1)
        tinyrouter(ws, "pack", "--run-dir", ws.experiments / miner.login,
                   "--miner-name", miner.login, "--repo", ws.repo)


def head_sha(ws: Workspace, miner: Miner) -> str:
    """Stands in for the PR head commit: a digest of the submitted files."""
    digest = hashlib.sha1(usedforsecurity=False)
    for path in sorted((ws.repo / ws.folder(miner)).iterdir()):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def run_gates(ws: Workspace, miner: Miner, expect: int = 0) -> dict[str, Any]:
    """The PR bot's gates on a miner's folder, recording the attempt; the gates' report."""
    ws.clock.step()
    changed = ws.root / f"pr-{miner.pr}-changed-files.txt"
    changed.write_text("".join(f"A\t{ws.folder(miner)}/{p.name}\n"
                               for p in sorted((ws.repo / ws.folder(miner)).iterdir())),
                       encoding="utf-8")
    report = ws.root / f"pr-{miner.pr}-gates.json"
    tinyrouter(ws, "gates", "--repo", ws.repo, "--submission", ws.folder(miner),
               "--author", miner.login, "--changed-files", changed, "--pr", miner.pr,
               "--head-sha", head_sha(ws, miner), "--record-attempt",
               "--comment", ws.root / f"pr-{miner.pr}-gates-comment.md", "--json", report,
               expect=expect)
    return json.loads(report.read_text(encoding="utf-8"))


def gates(ws: Workspace) -> None:
    for miner in MINERS:
        run_gates(ws, miner)


def evaluate_one(ws: Workspace, miner: Miner) -> None:
    """The evaluation of a miner's pull request, its result applied to the board."""
    public, private = (folder / f"{miner.login}-1.json" for folder in (ws.public, ws.private))
    ws.clock.step()
    tinyrouter(ws, "evaluate", "--repo", ws.repo, "--submission", ws.folder(miner),
               "--benchmark-dir", ws.hidden, "--encoder", ws.encoder,
               "--pool-url", ws.pool_url, "--pr", miner.pr, "--head-sha", head_sha(ws, miner),
               "--out", public, "--private-out", private)
    tinyrouter(ws, "leaderboard", "apply", public, "--private", private, "--repo", ws.repo)
    ws.results[miner.login] = json.loads(public.read_text(encoding="utf-8"))


def evaluate(ws: Workspace) -> None:
    for miner in MINERS:
        evaluate_one(ws, miner)
    tinyrouter(ws, "leaderboard", "validate", "--repo", ws.repo)


def copy_the_king(ws: Workspace) -> None:
    """A copier submits the king's head with its role rows permuted; gate 3 rejects it."""
    from evaluator.copies import disguise
    from evaluator.submission import Submission, write_submission

    king = Store(ws.repo).king()
    if king is None:
        raise TinyRouterError("no king to copy: the evaluations crowned nobody")
    original = Submission(ws.repo, submission_path(king.miner, king.generation), ws.rules)
    head, scales = disguise("roles permuted", *original.weights, ws.rules.n_models)
    fields = {k: v for k, v in original.receipt.data.items()
              if k not in ("format", "miner", "generation", "n_params", "pool", "weights_sha256")}
    write_submission(ws.repo, COPIER.login, 1, head, scales, fields, ws.rules)
    report = run_gates(ws, COPIER, expect=1)
    shutil.rmtree(Store(ws.repo).submission(COPIER.login, 1).parent)  # a rejected PR never merges
    ws.results[COPIER.login] = {"outcome": "rejected", "failed_gate": report["failed_gate"]}


def memorise(ws: Workspace) -> None:
    """A memorising miner: collects every public item but the train ids, fits a head to them
    (no holdout, no rows set aside, no shrinking toward the category's rate, a start fitted
    to each row's own answers rather than to the category lookup) and submits it."""
    from evaluator.benchmarks.corpus import load_corpus
    from evaluator.collect import collect_training, pool_client_factory
    from evaluator.train.data import LEDGER_FILE, data_path

    manifest, data = Store(ws.repo).manifest() or {}, ws.root / "memoriser" / "data"
    make_client = pool_client_factory(ws.pool_url, data / LEDGER_FILE, ws.rules)
    for bench in ws.rules.benchmarks:
        published = set(manifest["benchmarks"][bench]["train_ids"])
        collect_training([row.item for row in load_corpus(ws.rules, [bench])
                          if row.item.id not in published], data_path(data, bench), make_client,
                         ws.rules)
    runs = ws.root / "memoriser" / "experiments"
    tinyrouter(ws, "train", "--benchmarks", ",".join(ws.rules.benchmarks),
               "--run-name", MEMORISER.login, "--data", data, "--encoder", ws.encoder,
               "--experiments", runs, "--generations", GENERATIONS,
               "--popsize", POPSIZE, "--seed", MEMORISER.seed, "--holdout", 0, "--select", 0,
               "--shrink", 0, "--start", "rows", "--progress-every", 1)
    tinyrouter(ws, "pack", "--run-dir", runs / MEMORISER.login, "--miner-name", MEMORISER.login,
               "--repo", ws.repo)
    run_gates(ws, MEMORISER)
    evaluate_one(ws, MEMORISER)


def fairness(ws: Workspace) -> None:
    tinyrouter(ws, "fairness", "--scale", FAIRNESS_SCALE,
               "--json", Store(ws.repo).root / "fairness.json")


def retire(ws: Workspace) -> None:
    """The season ends: revealed beside the leaderboard, then each verdict replayed from it."""
    tinyrouter(ws, "reveal", "--season", "--dir", ws.hidden, "--records", ws.private,
               "--repo", ws.repo)
    tinyrouter(ws, "replay", "--repo", ws.repo)


def build_site(ws: Workspace) -> None:
    ws.clock.now = ws.clock.end  # built when the demo ran: every record lies before it
    tinyrouter(ws, "site", "build", "--leaderboard", Store(ws.repo).root, "--out", ws.site,
               "--demo")


PRACTISE_SCRIPT = "practise.sh"


def practise_script(ws: Workspace) -> str:
    """A script to source: the pool simulator on loopback, the miner tools pointed at it and
    at the demo's rules, and the shell in the demo's competition checkout."""
    import shlex
    import sys

    root, python = shlex.quote(str(ws.root)), shlex.quote(sys.executable)
    return f"""# Practise the miner's path on this demo workspace, offline: source this file
#   . {ws.root / PRACTISE_SCRIPT}
# It starts the pool simulator on 127.0.0.1 (its log: simulator.log), exports
# OPENROUTER_BASE_URL (the tools' pool) and TINYROUTER_COMPETITION (the demo's rules:
# its tiny encoder), and moves into repo/, which plays the competition's checkout.
# Stop the simulator with: kill "$TINYROUTER_SIMULATOR_PID"
{python} -m evaluator pool simulate > {root}/simulator.log 2>&1 &
TINYROUTER_SIMULATOR_PID=$!
export TINYROUTER_SIMULATOR_PID
for _ in $(seq 300); do
    grep -q "serving on" {root}/simulator.log 2>/dev/null && break
    sleep 0.1
done
OPENROUTER_BASE_URL=$(awk '/serving on/ {{print $3; exit}}' {root}/simulator.log)
export OPENROUTER_BASE_URL
export TINYROUTER_COMPETITION={shlex.quote(str(ws.competition))}
cd {root}/repo || return 1
echo "pool simulator on $OPENROUTER_BASE_URL (pid $TINYROUTER_SIMULATOR_PID); now in $PWD"
"""


def leave_practise(ws: Workspace) -> None:
    (ws.root / PRACTISE_SCRIPT).write_text(practise_script(ws), encoding="utf-8")


Stage = tuple[str, Callable[[Workspace], None]]
STAGES: tuple[Stage, ...] = (
    ("build the tiny Qwen3 encoder", build_encoder),
    ("seal the hidden benchmark (cached answers through the simulated pool)", seal),
    ("collect public training data", collect),
    ("train and pack two miners' heads", train),
    ("run the PR gates on both submissions", gates),
    ("evaluate alice, then bob against the king, and apply the results", evaluate),
    ("a copier submits the king's head with its role rows permuted", copy_the_king),
    ("a memoriser fits every public item outside the train ids and is evaluated", memorise),
    ("simulate the fairness figures (a quick run)", fairness),
    ("retire the season: reveal it, then replay every verdict from the published files", retire),
    ("build the leaderboard site", build_site),
    ("leave a script to practise the miner's path here", leave_practise),
)


def run_demo(root: Path,
             progress: Callable[[int, int, str], None] | None = None,
             stages: Sequence[Stage] = STAGES,
             done: Callable[[str, float], None] | None = None) -> Workspace:
    import torch

    from evaluator.benchmarks.livecodebench import remembered_grades

    # two threads: the tiny encoder's products gain from a second core (a third of the training
    # stage's time), not from more; one where the environment says so (OMP_NUM_THREADS)
    torch.set_num_threads(min(2, torch.get_num_threads()))
    prepare(root)
    ws = Workspace(root.resolve())
    # the demo's secrets for the run (the environment restored after); the simulator answers
    # a question asked again with the same program: graded once
    with (patch.dict(os.environ, BENCHMARK_PASSWORD=DEMO_PASSWORD, BENCHMARK_SEED=DEMO_SEED),
          remembered_grades(), clock(ws.clock),
          serve_simulator(bundled_simulator(OFFICIAL, seed=0)) as base_url):
        ws.pool_url = base_url
        for number, (title, stage) in enumerate(stages, 1):
            if progress:
                progress(number, len(stages), title)
            ws.clock.step()
            started = time.perf_counter()
            stage(ws)
            ws.timings[title] = time.perf_counter() - started
            if done:
                done(title, ws.timings[title])
    return ws


def add_demo(p: argparse.ArgumentParser) -> None:
    p.description = ("Build a tiny Qwen3, serve a simulated pool on 127.0.0.1, seal a demo hidden "
                     "benchmark, train and pack two miners, run the gates, evaluate both, update "
                     "the leaderboard, let a copier try the king's head, simulate the fairness "
                     "figures, retire the season and replay its verdicts, and build the site.")
    p.add_argument("--workdir", type=Path, default=Path("demo"),
                   help="fresh workspace (an earlier demo there is replaced)")
    isolation.add_flag(p)
    p.set_defaults(func=run)


PARSERS = {"demo": add_demo}


def run(args: argparse.Namespace) -> int:
    started = time.perf_counter()

    def progress(number: int, total: int, title: str) -> None:
        print(f"\n[{number}/{total}] {title}", flush=True)

    def done(title: str, seconds: float) -> None:
        print(f"    … {seconds:.0f} s", flush=True)

    print(f"TinyRouter demo in {args.workdir}/ — offline; the benchmark password is the demo's "
          f"own ({DEMO_PASSWORD!r}), never use it for a real competition.")
    print(f"Isolation of the code the demo grades: {isolation.require().describe()}", flush=True)
    ws = run_demo(args.workdir, progress=progress, done=done)
    print(summary(ws, time.perf_counter() - started))
    return 0


def _fmt(value: object) -> str:
    return f"{value:.4f}" if isinstance(value, float) else ("—" if value is None else str(value))


def summary(ws: Workspace, seconds: float) -> str:
    store = Store(ws.repo, lenient=True)  # a summary shows what there is
    manifest, king = store.manifest() or {"benchmarks": {}}, store.king()
    lines = ["", "=" * 78, "Results (public records, as the leaderboard shows them)", ""]
    lines.append(f"{'miner':<8} {'outcome':<9} {'composite':>9} {'king before':>11} {'delta':>8}")
    notes = {COPIER.login: "a copy of the king with its role rows permuted",
             MEMORISER.login: "fitted to every public item but the train ids"}
    for login in [m.login for m in MINERS] + [COPIER.login, MEMORISER.login]:
        if login in ws.results:
            lines.append(result_row(login, ws.results[login], notes.get(login, "")))
    memoriser = ws.results.get(MEMORISER.login)
    if memoriser is not None and memoriser.get("reason"):
        lines.append(f"{'':<8} {MEMORISER.login}: {memoriser['reason']}")
    graded = {ws.results[m.login].get("isolation") for m in MINERS}
    lines += ["", f"Isolation of the code graded (as the results record it): "
                  f"{'; '.join(map(str, sorted(graded)))}"]
    if king is None:
        lines += ["", "No king: no submission passed every check."]
        return "\n".join(lines + footer(ws, seconds))
    lines += ["", f"King: {king.miner} (generation {king.generation}), composite "
                  f"{king.composite:.4f}. {why(ws)}", "",
              f"{'benchmark':<14} {'king cached':>11} {'live':>6} {'turns':>6} {'score':>7} "
              f"{'best single':>12} {'random':>7} {'oracle':>7} {'captured':>9}"]
    for bench, comp in king.per_benchmark.items():
        base = manifest["benchmarks"][bench]["baselines"]
        single, oracle = base["best_single"]["accuracy"], base["oracle"]
        lines.append(f"{bench:<14} {comp.cached_acc:>11.3f} {comp.live_acc:>6.3f} "
                     f"{comp.avg_turns:>6.2f} {comp.score:>7.4f} {single:>12.3f} "
                     f"{base['random']:>7.3f} {oracle:>7.3f} "
                     f"{gap_closed(comp.cached_acc, single, oracle) or 0.0:>9.0%}")
    lines.append("captured: the share of the gap from the best single model to the oracle (on "
                 "the hidden pool) that the king's cached accuracy closes")
    return "\n".join(lines + footer(ws, seconds))


def result_row(login: str, record: dict[str, Any], note: str = "") -> str:
    """One miner's line of the results table, from its public record (a loss's king: composite
    less delta)."""
    before = record.get("king_composite")
    if before is None and record.get("delta") is not None and record.get("composite") is not None:
        before = record["composite"] - record["delta"]
    if record.get("failed_gate"):
        note = f"gate {record['failed_gate']['number']} ({record['failed_gate']['name']}): {note}"
    return (f"{login:<8} {record['outcome']:<9} {_fmt(record.get('composite')):>9} "
            f"{_fmt(before):>11} {_fmt(record.get('delta')):>8}" + (f"  {note}" if note else ""))


def footer(ws: Workspace, seconds: float) -> list[str]:
    width = max(map(len, ws.timings), default=0)
    stages = [f"  {title:<{width}}  {took:>5.0f} s" for title, took in ws.timings.items()]
    return ["", "Stages:", *stages, "", f"Finished in {seconds:.0f} s. Workspace: {ws.root}",
            f"  leaderboard state: {Store(ws.repo).root}",
            f"  private records (keep off the public repository): {ws.private}",
            f"Site: {ws.site / 'index.html'}",
            f"  serve it: python -m http.server 8000 --bind 127.0.0.1 --directory {ws.site}",
            "  then open http://127.0.0.1:8000/",
            f"Practise the miner's path here, offline: . {ws.root / PRACTISE_SCRIPT}",
            "  (it starts the pool simulator; the Submitting guide's \"Practise on the demo\" "
            "walks through the rest)", *demo_hint(ws.root / PRACTISE_SCRIPT, ws.repo)]


def why(ws: Workspace) -> str:
    first, second = (ws.results[m.login] for m in MINERS)
    if first["outcome"] != "king":
        return (f"{MINERS[0].login} was rejected: {first.get('reason')}; {MINERS[1].login} "
                f"was crowned, the first to pass every check.")
    if second["outcome"] in ("king", "lost"):
        return (f"{MINERS[0].login} was crowned first; then {MINERS[1].login}: "
                f"{crown_test(second, ws.rules)}")
    return (f"{MINERS[0].login} was crowned first; {MINERS[1].login} was rejected: "
            f"{second.get('reason')}.")
