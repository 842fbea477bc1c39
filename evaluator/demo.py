"""`tinyrouter demo`: the whole competition, offline, in a fresh workspace.

Every stage runs the same `tinyrouter` subcommand a maintainer, a miner or a workflow
runs, against a tiny Qwen3 built here and the loopback pool simulator; nothing is faked.
The stages are a tuple of named steps and one loop, so a failure names its stage.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import time
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from evaluator.errors import TinyRouterError
from evaluator.files import write_json
from evaluator.rules import OFFICIAL, Competition

log = logging.getLogger(__name__)

PROJECT_ROOT = Path(__file__).resolve().parent.parent
MARKER = ".tinyrouter-demo"
# Demo secrets: printed in the docs on purpose. A real competition keeps its own secret.
DEMO_PASSWORD = "demo-password-not-a-secret"
DEMO_SEED = "demo-seed-not-a-secret-0001"
START = datetime(2026, 11, 1, 12, 0, tzinfo=timezone.utc)


@dataclass(frozen=True)
class Miner:
    login: str
    seed: int
    pr: int


MINERS = (Miner("alice", seed=1, pr=1), Miner("bob", seed=7, pr=2))


@dataclass
class Workspace:
    """Where every artefact of a demo run lives; `repo` plays the competition repository."""

    root: Path
    fast: bool = False
    pool_url: str = ""
    rules: Competition = OFFICIAL
    timings: dict[str, float] = field(default_factory=dict)
    results: dict[str, dict[str, Any]] = field(default_factory=dict)

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
        return f"submissions/{miner.login}/1"


def prepare(root: Path) -> None:
    """A fresh workspace; an earlier demo's is replaced, anything else is left alone."""
    if root.exists() and any(root.iterdir()):
        if not (root / MARKER).is_file():
            raise TinyRouterError(f"{root} exists and is not a demo workspace; "
                                  "pass --workdir with an empty or new folder")
        shutil.rmtree(root)
    root.mkdir(parents=True, exist_ok=True)
    (root / MARKER).write_text("made by tinyrouter demo; safe to delete\n", encoding="utf-8")


def tinyrouter(ws: Workspace, *argv: object) -> None:
    """Run one `tinyrouter` subcommand in-process under the demo's rules."""
    from evaluator.cli import main

    args = [str(a) for a in argv]
    if ws.competition.is_file():
        args = ["--competition", str(ws.competition), *args]
    code = main(args)
    if code != 0:
        raise TinyRouterError(f"`tinyrouter {' '.join(map(str, argv[:2]))}` exited {code}")


# ---------------------------------------------------------------- stages

def build_encoder(ws: Workspace) -> None:
    from evaluator.coordinator.encoder import encoder_overrides

    tinyrouter(ws, "encoder", "make-tiny", ws.encoder, "--seed", 0)
    write_json(ws.competition, encoder_overrides(ws.encoder))
    ws.rules = Competition.load(ws.competition)


def seal(ws: Workspace) -> None:
    tinyrouter(ws, "seal", "--source", "demo", "--out-dir", ws.hidden,
               "--manifest", ws.repo / "leaderboard" / "manifest.json",
               "--pool-url", ws.pool_url, "--ledger", ws.private / "seal-ledger.jsonl")
    tinyrouter(ws, "verify-benchmark", "--dir", ws.hidden,
               "--manifest", ws.repo / "leaderboard" / "manifest.json")


def collect(ws: Workspace) -> None:
    for bench in ws.rules.benchmarks:
        tinyrouter(ws, "collect", "--benchmark", bench, "--out", ws.data, "--repo", ws.repo,
                   "--source", "demo", "--pool-url", ws.pool_url)
    tinyrouter(ws, "ledger", "verify", ws.data / "ledger.jsonl")


def train(ws: Workspace) -> None:
    generations = 15 if ws.fast else 60
    for miner in MINERS:
        tinyrouter(ws, "train", "--benchmarks", ",".join(ws.rules.benchmarks),
                   "--run-name", miner.login, "--data", ws.data, "--encoder", ws.encoder,
                   "--experiments", ws.experiments, "--generations", generations,
                   "--seed", miner.seed, "--no-progress")
        tinyrouter(ws, "pack", "--run-dir", ws.experiments / miner.login,
                   "--miner-name", miner.login, "--repo", ws.repo)


def head_sha(ws: Workspace, miner: Miner) -> str:
    """Stands in for the PR head commit: a digest of the submitted files."""
    digest = hashlib.sha1(usedforsecurity=False)
    for path in sorted((ws.repo / ws.folder(miner)).iterdir()):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def gates(ws: Workspace) -> None:
    for i, miner in enumerate(MINERS):
        changed = ws.root / f"pr-{miner.pr}-changed-files.txt"
        changed.write_text("".join(f"A\t{ws.folder(miner)}/{p.name}\n"
                                   for p in sorted((ws.repo / ws.folder(miner)).iterdir())),
                           encoding="utf-8")
        now = START + timedelta(hours=i)
        tinyrouter(ws, "gates", "--repo", ws.repo, "--submission", ws.folder(miner),
                   "--author", miner.login, "--changed-files", changed, "--pr", miner.pr,
                   "--head-sha", head_sha(ws, miner), "--now", now.strftime("%Y-%m-%dT%H:%M:%SZ"),
                   "--record-attempt", "--comment", ws.root / f"pr-{miner.pr}-gates-comment.md")


def evaluate(ws: Workspace) -> None:
    for miner in MINERS:
        public = ws.public / f"{miner.login}-1.json"
        tinyrouter(ws, "evaluate", "--repo", ws.repo, "--submission", ws.folder(miner),
                   "--benchmark-dir", ws.hidden, "--encoder", ws.encoder,
                   "--pool-url", ws.pool_url, "--pr", miner.pr, "--head-sha", head_sha(ws, miner),
                   "--out", public, "--private-out", ws.private / f"{miner.login}-1.json")
        tinyrouter(ws, "leaderboard", "apply", public, "--repo", ws.repo)
        ws.results[miner.login] = json.loads(public.read_text(encoding="utf-8"))
    tinyrouter(ws, "leaderboard", "validate", "--repo", ws.repo)


def build_site(ws: Workspace) -> None:
    tinyrouter(ws, "site", "build", "--leaderboard", ws.repo / "leaderboard", "--out", ws.site,
               "--repo", PROJECT_ROOT)


Stage = tuple[str, Callable[[Workspace], None]]
STAGES: tuple[Stage, ...] = (
    ("build the tiny Qwen3 encoder", build_encoder),
    ("seal the hidden benchmark (cached answers through the simulated pool)", seal),
    ("collect public training data", collect),
    ("train and pack two miners' heads", train),
    ("run the PR gates on both submissions", gates),
    ("evaluate alice, then bob against the king, and apply the results", evaluate),
    ("build the leaderboard site", build_site),
)


@contextmanager
def demo_secrets():
    saved = {k: os.environ.get(k) for k in ("BENCHMARK_PASSWORD", "BENCHMARK_SEED")}
    os.environ.update(BENCHMARK_PASSWORD=DEMO_PASSWORD, BENCHMARK_SEED=DEMO_SEED)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def run_demo(root: Path, fast: bool = False,
             progress: Callable[[int, int, str], None] | None = None,
             stages: Sequence[Stage] = STAGES) -> Workspace:
    import torch

    from evaluator.pool.simulator import bundled_simulator, serve_simulator

    torch.set_num_threads(1)  # the tiny encoder's matrices are too small to share between cores
    prepare(root)
    ws = Workspace(root.resolve(), fast=fast)
    with demo_secrets(), serve_simulator(bundled_simulator(seed=0)) as base_url:
        ws.pool_url = base_url
        for number, (title, stage) in enumerate(stages, 1):
            if progress:
                progress(number, len(stages), title)
            started = time.perf_counter()
            stage(ws)
            ws.timings[title] = time.perf_counter() - started
    return ws
