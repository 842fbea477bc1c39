"""The next step after a failed gate, the advisories beside the verdict, and how the gates
comment renders both."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime

import numpy as np
import pytest

from evaluator.advisories import Advisory
from evaluator.cli import main
from evaluator.gates import GateContext, GateReport, GateResult, run_gates
from evaluator.next_steps import NextStep, next_step, submission_advisories
from evaluator.pool.ledger import Ledger
from evaluator.records import Attempt
from evaluator.rules import OFFICIAL
from evaluator.submission import Submission
from evaluator.templating import render

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
HEAD = "c" * 40


def attempt(generation: int, at: str, pr: int = 5, head: str = "a" * 40, **extra) -> Attempt:
    return Attempt(miner="alice", generation=generation, pr=pr, head_sha=head, at=at, **extra)


def folder_of(repo, make_submission, relpath: str) -> None:
    login, generation = relpath.split("/")[1:]
    make_submission(repo, login, int(generation))


NEXT_STEPS = [
    # (case, folder, author, attempts before, recorded?) → (recorded, fix, folder, same, opens)
    # gate 0: nothing recorded
    ("another miner's login", "submissions/alice/1", "bob", [], True,
     (False, True, "submissions/bob/1", False, None)),
    ("a generation skipped", "submissions/alice/3", "alice", [], True,
     (False, True, "submissions/alice/1", False, None)),
    # gate 1: nothing recorded, the slot opens a window after the last attempt
    ("a second PR in the window", "submissions/alice/2", "alice",
     [attempt(1, "2026-11-29T06:00:00Z", gates_passed=True)], True,
     (False, False, "submissions/alice/2", True, "2026-11-30T06:00:00Z")),
    ("a new head on a gated PR", "submissions/alice/1", "alice",
     [attempt(1, "2026-11-29T06:00:00Z", pr=7, gates_passed=True)], True,
     (False, False, "submissions/alice/2", False, "2026-11-30T06:00:00Z")),
    # gates 2–4: the attempt recorded spends the slot and the generation
    ("a bad receipt", "submissions/alice/1", "alice", [], True,
     (True, True, "submissions/alice/2", False, "2026-11-30T12:00:00Z")),
    ("a bad receipt, re-run of a recorded head", "submissions/alice/1", "alice",
     [attempt(1, "2026-11-29T11:00:00Z", pr=7, head=HEAD)], True,
     (True, True, "submissions/alice/2", False, "2026-11-30T11:00:00Z")),
    ("a bad receipt, in preflight (nothing recorded)", "submissions/alice/1", "alice", [], False,
     (False, True, "submissions/alice/1", True, None)),
]


@pytest.mark.parametrize(("case", "relpath", "author", "attempts", "recorded", "expected"),
                         NEXT_STEPS, ids=[r[0] for r in NEXT_STEPS])
def test_next_step_follows_the_attempts_log(repo, make_submission, case, relpath, author,
                                            attempts, recorded, expected):
    folder_of(repo, make_submission, relpath)
    if "receipt" in case:
        (repo / relpath / "receipt.json").write_text("{}")
    ctx = GateContext(author=author, now=NOW, rules=OFFICIAL, pr=7, head_sha=HEAD,
                      attempts=attempts)
    sub = Submission(repo, relpath, OFFICIAL)
    report = run_gates(sub, ctx)
    step = next_step(sub, report, ctx, recorded)
    assert report.failed is not None
    assert (step.recorded, step.fix, step.folder, step.same_folder, step.opens) == expected


def test_a_passing_report_has_no_next_step(repo, make_submission):
    make_submission(repo, "alice", 1)
    ctx = GateContext(author="alice", now=NOW, rules=OFFICIAL)
    sub = Submission(repo, "submissions/alice/1", OFFICIAL)
    assert next_step(sub, run_gates(sub, ctx), ctx, recorded=True) is None


# ---------------------------------------------------------------- advisories

def test_advisories_read_only_a_folder_gate_0_vouched_for(repo, make_submission):
    folder = make_submission(repo, "alice", 1, fitness_history=[
        {"generation": g, "mean": 0.5, "max": 0.6, "best": 0.6} for g in (0, 2, 1)])
    sub = Submission(repo, "submissions/alice/1", OFFICIAL)
    ctx = GateContext(author="alice", now=NOW, rules=OFFICIAL)
    assert [a.id for a in submission_advisories(sub, run_gates(sub, ctx))] == ["history-order"]
    (folder / "notes.txt").write_text("x")  # gate 0 fails: the folder is not read
    assert submission_advisories(sub, run_gates(sub, ctx)) == []


def comment(report: GateReport, step: NextStep | None, advisories=(), rules=OFFICIAL) -> str:
    return render("gates/comment.md.j2", report=report, step=step, advisories=list(advisories),
                  folder="submissions/alice/1", closes=True, rules=rules, rules_url="")


FAILED_4 = GateReport((GateResult(0, "scope", True, None), GateResult(1, "rate limit", True, None),
                       GateResult(2, "weight sanity", True, None),
                       GateResult(3, "duplicate", True, None),
                       GateResult(4, "receipt", False, "receipt.json: bad")))
FAILED_1 = GateReport((GateResult(0, "scope", True, None),
                       GateResult(1, "rate limit", False, "1 submission(s)"),
                       *(GateResult(n, name, None, None) for n, name in
                         ((2, "weight sanity"), (3, "duplicate"), (4, "receipt")))))
PASSED = GateReport(tuple(GateResult(r.number, r.name, True, None) for r in FAILED_4.results))

COMMENTS = [
    # (case, report, step) → what the comment says, and what it must not
    ("spent: pack the next generation later", FAILED_4,
     NextStep(True, True, "alice", 2, False, "2026-11-30T12:00:00Z"),
     ["its attempt is recorded", "`tinyrouter pack --run-dir experiments/YOUR-RUN --miner-name "
      "alice`", "writes `submissions/alice/2/`", "From 2026-11-30T12:00:00Z",
      "`tinyrouter preflight submissions/alice/2`", "Do not rename"],
     ["same folder", "No attempt"]),
    ("nothing spent, the same folder now", FAILED_4,
     NextStep(False, True, "alice", 1, True, None),
     ["No attempt was recorded", "keeping the folder `submissions/alice/1/`",
      "adds only `submissions/alice/1/`; your submission slot is open now"],
     ["tinyrouter pack", "From "]),
    ("rate limit: nothing to fix, wait", FAILED_1,
     NextStep(False, False, "alice", 2, True, "2026-11-30T06:00:00Z"),
     ["Keep `submissions/alice/2/` as it is", "From 2026-11-30T06:00:00Z"],
     ["Fix what", "tinyrouter pack"]),
    ("rate limit on a re-pushed PR: pack, no fix", FAILED_1,
     NextStep(False, False, "alice", 2, False, "2026-11-30T06:00:00Z"),
     ["\n1. On a branch from an up-to-date `main`", "writes `submissions/alice/2/`"],
     ["Fix what"]),
]


@pytest.mark.parametrize(("case", "report", "step", "says", "never"), COMMENTS,
                         ids=[c[0] for c in COMMENTS])
def test_the_comment_gives_the_next_step(case, report, step, says, never):
    text = comment(report, step)
    for words in says:
        assert words in text
    for words in never:
        assert words not in text


def test_the_comment_renders_the_limit_from_the_rules():
    rules = dataclasses.replace(OFFICIAL, rate_limit_count=3, rate_limit_hours=12)
    text = comment(FAILED_4, NextStep(True, True, "alice", 2, False, None), rules=rules)
    assert "the limit is 3 per 12 h" in " ".join(text.split())


def test_advisories_sit_apart_from_the_verdict_and_are_escaped():
    hostile = Advisory("x|y", "<img src=x onerror=alert(1)> ::error::z [a](javascript:b)",
                       "run `rm -rf` | ok")
    for report, step in ((PASSED, None), (FAILED_4, NextStep(True, True, "alice", 2, False,
                                                              None))):
        text = comment(report, step, [hostile])
        verdict, advisories = text.split("#### Advisories (these never block)")
        assert "<img" not in text and "&lt;img" in advisories
        assert "](javascript" not in text and "x\\|y" in advisories
        assert advisories.count("\n| ") == 2  # the header row and one advisory, no broken cell
        assert "Advisories" not in verdict
    assert "Advisories" not in comment(PASSED, None)


# ---------------------------------------------------------------- through the commands

def test_preflight_with_a_ledger_advises_and_keeps_its_exit_code(repo, make_submission,
                                                                 tmp_path, capsys):
    make_submission(repo, "alice", 1, total_cost_usd=1.25)
    ledger = tmp_path / "ledger.jsonl"
    Ledger(ledger).append("qwen3.5-35b-a3b", 100, 50, 0.5, "req-1")
    argv = ["preflight", "submissions/alice/1", "--repo", str(repo)]
    assert main(argv) == 0
    assert "advisory" not in capsys.readouterr().out
    assert main([*argv, "--ledger", str(ledger)]) == 0
    out = capsys.readouterr().out
    assert "all gates passed" in out
    assert "advisory [ledger-head] (never blocks)" in out and "advisory [ledger-cost]" in out


def test_gates_json_carries_advisories_and_the_next_step(repo, make_submission, tmp_path):
    head = np.random.default_rng(0).normal(0, 0.1, OFFICIAL.head_shape).astype(np.float32)
    head[OFFICIAL.n_models:] = 0  # role rows alike: an advisory, not a failure
    make_submission(repo, "alice", 1, head=head)
    out = tmp_path / "r.json"
    argv = ["gates", "--repo", str(repo), "--submission", "submissions/alice/1", "--author",
            "alice", "--pr", "7", "--now", "2026-11-29T12:00:00Z", "--json", str(out)]
    assert main(argv) == 0
    report = json.loads(out.read_text())
    assert report["passed"] is True and report["next_step"] is None
    assert [a["id"] for a in report["advisories"]] == ["roles-fixed"]

    (repo / "submissions/alice/1/receipt.json").write_text("{}")
    assert main([*argv, "--record-attempt", "--head-sha", HEAD]) == 1
    report = json.loads(out.read_text())
    assert report["failed_gate"]["number"] == 4
    assert report["next_step"] == {"recorded": True, "fix": True, "login": "alice",
                                   "generation": 2, "same_folder": False,
                                   "opens": "2026-11-30T12:00:00Z",
                                   "folder": "submissions/alice/2"}
    assert [a["id"] for a in report["advisories"]] == ["roles-fixed"]
