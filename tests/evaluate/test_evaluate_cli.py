"""`tinyrouter evaluate` and `tinyrouter leaderboard` on a repository, with a sealed fake benchmark.

The encoder and the pool are fakes (the real ones are exercised in test_end_to_end.py);
everything else is real: gates, sealing, king lookup, records, apply, templates.
"""

import json
import logging
import os
import re
import shutil
import sys

import numpy as np
import pytest
from evaluation_fakes import (
    ALWAYS_0,
    RULES,
    SECRET,
    SMALL,
    SMART,
    FakePool,
    LinearRouter,
    head_theta,
    make_sets,
    seal_sets,
    train_items,
)

from evaluator import cli, isolation
from evaluator.errors import IsolationError, LeaderboardError
from evaluator.evaluate import evaluate_submission
from evaluator.gates import encode_fingerprint, fingerprint
from evaluator.records import Attempt
from evaluator.reports import render_result
from evaluator.store import Store
from evaluator.submission import Submission, sha256_file

PASSWORD = "correct horse battery staple"
COMPONENTS = ("cached_acc", "audit_acc", "live_acc", "avg_turns", "efficiency", "novelty",
              "overfit_penalty")


def add_head(repo, make_submission, login, route, generation=1, noise=0.0, own=None):
    theta = head_theta(route, noise=noise, own=own)
    head = theta[: RULES.n_head_params].reshape(RULES.head_shape).astype(np.float32)
    return make_submission(repo, login, generation, head=head,
                           scales=np.ones(RULES.svf_scale_count, np.float32), rules=RULES)


@pytest.fixture
def world(repo, tmp_path, make_submission, monkeypatch):
    """A repo with alice (reads the category) and bob (always model 0), sealed sets, fakes."""
    add_head(repo, make_submission, "alice", SMART)
    add_head(repo, make_submission, "bob", ALWAYS_0)
    sealed = seal_sets(tmp_path / "sealed", make_sets(), PASSWORD, repo)
    competition = tmp_path / "competition.json"
    competition.write_text(json.dumps(SMALL))
    monkeypatch.setenv("BENCHMARK_PASSWORD", PASSWORD)
    monkeypatch.setattr("evaluator.coordinator.router.load_router", lambda *a: LinearRouter())
    monkeypatch.setattr("evaluator.pool.runner.pool_runner", lambda *a, **kw: FakePool())
    return {"repo": repo, "sealed": sealed, "competition": competition, "tmp": tmp_path}


def tinyrouter(world, *argv):
    return cli.main(["--competition", str(world["competition"]), *map(str, argv)])


def evaluate(world, login, pr, *extra):
    out = world["tmp"] / f"{login}.json"
    private = world["tmp"] / f"{login}.private.json"
    code = tinyrouter(world, "evaluate", "--repo", world["repo"], "--submission",
                      f"submissions/{login}/1", "--benchmark-dir", world["sealed"], "--pr", pr,
                      "--head-sha", "c" * 40, "--out", out, "--private-out", private, *extra)
    assert code == 0
    return out, json.loads(out.read_text()), json.loads(private.read_text())


def test_first_king_then_a_loser_then_idempotent_apply(world, capsys):
    out, public, _ = evaluate(world, "alice", 1)
    assert public["outcome"] == "king"
    private = world["tmp"] / "alice.private.json"  # the public view is recomputed from it
    assert tinyrouter(world, "leaderboard", "apply", out, "--private", private,
                      "--repo", world["repo"]) == 0
    assert Store(world["repo"]).king().miner == "alice"

    out, public, private = evaluate(world, "bob", 2)
    assert public["outcome"] == "lost" and public["delta"] < 0
    # the king was re-scored in this run, with the same (symmetric) novelty
    assert private["king"]["miner"] == "alice"
    assert ({b: c["novelty"] for b, c in private["king"]["per_benchmark"].items()}
            == {b: c["novelty"] for b, c in private["challenger"]["per_benchmark"].items()})
    for _ in range(2):
        assert tinyrouter(world, "leaderboard", "apply", out, "--repo", world["repo"]) == 0
    assert "already recorded" in capsys.readouterr().out
    assert tinyrouter(world, "leaderboard", "validate", out, "--repo", world["repo"]) == 0
    # both recorded results are counted, and the one named on the command line
    assert ("2 recorded result(s) checked, and 1 named result(s)"
            in capsys.readouterr().out)
    assert Store(world["repo"]).king().miner == "alice"
    assert len(Store(world["repo"]).history()) == 1


def test_a_losing_run_discloses_nothing_but_its_composite(world, capsys, caplog, monkeypatch):
    out, _, _ = evaluate(world, "alice", 1)
    tinyrouter(world, "leaderboard", "apply", out, "--repo", world["repo"])
    capsys.readouterr()
    summary = world["tmp"] / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    with caplog.at_level(logging.DEBUG):
        out, public, private = evaluate(world, "bob", 2, "--format", "github")
        tinyrouter(world, "leaderboard", "render", out)  # the comment, and the record job's summary
        tinyrouter(world, "leaderboard", "render", out, "--template", "summary", "--out", summary)
    streams = capsys.readouterr()
    shown = "\n".join([streams.out, streams.err, caplog.text, summary.read_text(),
                       out.read_text()])
    assert "not crowned" in shown.lower() and f"{public['composite']:.2f}" in shown
    # no hidden question, answer or reference, whatever the channel
    assert SECRET not in shown
    # none of the loser's components, by name or by value
    for name in COMPONENTS:
        assert name not in shown
    mine = private["challenger"]["per_benchmark"]
    # the king's composite a loss was judged against is shown as composite − delta: public already
    published = {round(v, 2) for v in (public["composite"], public["delta"],
                                       public["composite"] - public["delta"])}
    values = {round(c[k], 4) for c in mine.values() for k in ("efficiency", "score")}
    values |= {round(private[k], 4) for k in ("composite", "king_composite", "delta")}
    assert values
    for value in values:
        for digits in (4, 3) if round(value, 2) in published else (4, 3, 2):
            assert not re.search(rf"(?<![\d.-]){re.escape(f'{value:.{digits}f}')}(?!\d)", shown)


def test_in_a_workflow_the_evaluation_logs_no_score_and_the_summary_shows_the_breakdown(
        world, capsys, monkeypatch):
    out, _, _ = evaluate(world, "bob", 1)
    tinyrouter(world, "leaderboard", "apply", out, "--repo", world["repo"])
    capsys.readouterr()
    summary = world["tmp"] / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    out, public, _ = evaluate(world, "alice", 2, "--format", "github")
    assert public["outcome"] == "king"
    logged = capsys.readouterr().out
    assert "record job publishes the verdict" in logged and not summary.exists()
    assert "new king" not in logged and f"{public['composite']:.4f}" not in logged
    tinyrouter(world, "leaderboard", "render", out, "--template", "summary", "--out", summary)
    text = summary.read_text()  # what the record job writes once the verdict is recorded
    assert "| mmlu |" in text and "Crown test, decided after live stage 1" in text
    tinyrouter(world, "leaderboard", "apply", out, "--repo", world["repo"])
    king = Store(world["repo"]).king()
    assert (king.miner, king.previous.miner) == ("alice", "bob")


def test_a_gate_failure_is_rejected_before_anything_is_decrypted(repo, make_submission):
    folder = make_submission(repo, "mallory", 1, head=np.zeros(RULES.head_shape, np.float32),
                             scales=np.ones(RULES.svf_scale_count, np.float32), rules=RULES)

    def never():
        raise AssertionError("the hidden sets were opened for a rejected head")

    result = evaluate_submission(repo, "submissions/mallory/1", never, LinearRouter(),
                                 FakePool(), RULES, pr=5, head_sha="d" * 40)
    assert result.outcome == "rejected"
    assert result.reason.startswith("gate 2 (weight sanity)")
    assert folder.exists()


def test_a_copy_of_the_king_is_caught_by_the_duplicate_gate(world, make_submission):
    add_head(world["repo"], make_submission, "carol", SMART, noise=1e-6)
    result = evaluate_submission(world["repo"], "submissions/carol/1", make_sets, LinearRouter(),
                                 FakePool(), RULES, pr=9)
    assert result.reason.startswith("gate 3 (duplicate)")


@pytest.mark.parametrize(("argv", "message"), [
    (["--submission", "evaluator/x"], "submissions/<login>/<n>"),
    (["--submission", "submissions/alice/1", "--head-sha", "XYZ"], "--head-sha"),
    (["--submission", "submissions/alice/1", "--pr", "0"], "--pr"),
])
def test_usage_errors(world, capsys, argv, message):
    code = tinyrouter(world, "evaluate", "--repo", world["repo"], "--benchmark-dir",
                      world["sealed"], "--out", world["tmp"] / "r.json", *argv)
    assert code == 2 and message in capsys.readouterr().err


def test_wrong_password_is_one_clear_error(world, capsys, monkeypatch):
    monkeypatch.setenv("BENCHMARK_PASSWORD", "wrong")
    code = tinyrouter(world, "evaluate", "--repo", world["repo"], "--submission",
                      "submissions/alice/1", "--benchmark-dir", world["sealed"],
                      "--out", world["tmp"] / "r.json")
    assert code == 1
    assert "cannot decrypt" in capsys.readouterr().err
    assert not (world["tmp"] / "r.json").exists()


def test_apply_refuses_an_invalid_result(world, capsys):
    bad = world["tmp"] / "bad.json"
    bad.write_text(json.dumps({"format": 1, "outcome": "king"}))
    assert tinyrouter(world, "leaderboard", "apply", bad, "--repo", world["repo"]) == 1
    assert "schema" in capsys.readouterr().err
    assert not (world["repo"] / "leaderboard" / "king.json").exists()


def test_seed_king_from_a_maintainer_evaluation(world):
    out = world["tmp"] / "seed.json"
    assert tinyrouter(world, "evaluate", "--repo", world["repo"], "--submission",
                      "submissions/alice/1", "--benchmark-dir", world["sealed"],
                      "--out", out) == 0
    assert tinyrouter(world, "leaderboard", "seed-king", "submissions/alice/1", "--result", out,
                      "--repo", world["repo"]) == 0
    assert Store(world["repo"]).king().pr is None
    assert tinyrouter(world, "leaderboard", "validate", "--repo", world["repo"]) == 0


def public_items():
    return [i for b in RULES.benchmarks for i in train_items(b)]


def test_a_copy_that_moves_the_weights_but_not_the_decisions_is_caught(world, make_submission,
                                                                        capsys):
    add_head(world["repo"], make_submission, "erin", SMART, own=0)  # a king with choices of its own
    out, _, _ = evaluate(world, "erin", 1)
    tinyrouter(world, "leaderboard", "apply", out, "--repo", world["repo"])
    head = head_theta(SMART, own=0)[: RULES.n_head_params].reshape(RULES.head_shape)
    head = head.astype(np.float32)
    original = fingerprint(head, 3)
    head[:3, 5] += np.array([90.0, -90.0, 0.0], np.float32)  # where the features barely reach
    assert fingerprint(head, 3) @ original < RULES.duplicate_cosine  # past gate 3's cosine
    make_submission(world["repo"], "carol", 1, head=head,
                    scales=np.ones(RULES.svf_scale_count, np.float32), rules=RULES)

    def never():
        raise AssertionError("the hidden sets were opened for a copy")

    result = evaluate_submission(world["repo"], "submissions/carol/1", never, LinearRouter(),
                                 FakePool(), RULES, pr=9, public_items=public_items)
    assert result.outcome == "rejected"
    assert result.reason.startswith("gate 3 (duplicate, behaviour): the head picks the same "
                                    "model as the king on 100.0% of the 120 public train items")
    own = re.search(r"of the (\d+) public items the king sends away from the model it picks "
                    r"most for their category \(its own choices, in [^)]*\), the head makes "
                    r"the same choice on (\d+) \(100%\)", result.reason)
    assert own and own[1] == own[2] and int(own[1]) >= RULES.duplicate_own_items
    assert "train it yourself" not in result.reason and "--seed" in result.reason


def test_a_head_routing_like_a_category_router_is_no_copy_of_it(world, make_submission):
    """Every default run converges on the category lookup: a head that routes exactly as a
    king with no choices of its own (one model per category, which its router card shows)
    is evaluated, whoever submitted that routing first."""
    out, _, _ = evaluate(world, "alice", 1)  # SMART: one model per category
    tinyrouter(world, "leaderboard", "apply", out, "--repo", world["repo"])
    head = head_theta(SMART)[: RULES.n_head_params].reshape(RULES.head_shape).astype(np.float32)
    head[:3, 5] += np.array([3.0, -3.0, 0.0], np.float32)
    make_submission(world["repo"], "carol", 1, head=head,
                    scales=np.ones(RULES.svf_scale_count, np.float32), rules=RULES)
    result = evaluate_submission(world["repo"], "submissions/carol/1", make_sets,
                                 LinearRouter(), FakePool(), RULES, pr=9,
                                 public_items=public_items)
    assert result.outcome == "lost", result.reason  # evaluated, and equal is no crown


def lift_alices_pending_head(world, make_submission):
    """Alice's head passed its gates and waits in its open PR; carol copies it from there and
    adds weight where the features barely look, until gate 3's cosine lets it through."""
    add_head(world["repo"], make_submission, "alice", SMART, generation=2, own=0)
    shutil.rmtree(world["repo"] / "submissions" / "alice" / "1")
    (world["repo"] / "submissions" / "alice" / "2").rename(
        world["repo"] / "submissions" / "alice" / "1")
    alice = Submission(world["repo"], "submissions/alice/1", RULES)
    Store(world["repo"]).record_attempt(Attempt(
        miner="alice", generation=1, pr=1, head_sha="a" * 40, at="2026-11-28T10:00:00Z",
        weights_sha256=sha256_file(alice.folder / "weights.safetensors"), gates_passed=True,
        fingerprint=encode_fingerprint(fingerprint(alice.weights[0], 3), 3)))
    head = alice.weights[0].copy()
    head[:3, 5] += np.array([90.0, -90.0, 0.0], np.float32)
    assert fingerprint(head, 3) @ fingerprint(alice.weights[0], 3) < RULES.duplicate_cosine
    make_submission(world["repo"], "carol", 1, head=head,
                    scales=np.ones(RULES.svf_scale_count, np.float32), rules=RULES)


def evaluate_carol(world, earlier_dir=None):
    def never():
        raise AssertionError("the hidden sets were opened for a copy")

    return evaluate_submission(world["repo"], "submissions/carol/1", never, LinearRouter(),
                               FakePool(), RULES, pr=9, earlier_dir=earlier_dir,
                               public_items=public_items)


def test_a_copy_of_a_pending_attempt_is_caught_by_its_routing(world, make_submission):
    lift_alices_pending_head(world, make_submission)
    result = evaluate_carol(world)
    assert result.outcome == "rejected"
    assert result.reason.startswith("gate 3 (duplicate, behaviour): the head picks the same "
                                    "model as the attempt of PR #1 (alice")
    assert "the head makes the same choice on" in result.reason


def test_an_earlier_head_that_could_not_be_fetched_is_listed_not_compared(
        world, make_submission, tmp_path):
    """A head GitHub no longer has (a force push, a purge) stops nobody's evaluation: it is
    not compared, and the public result names its pull request."""
    lift_alices_pending_head(world, make_submission)
    out = tmp_path / "result.json"
    result = evaluate_submission(world["repo"], "submissions/carol/1",
                                 lambda: make_sets(), LinearRouter(), FakePool(), RULES, pr=9,
                                 earlier_dir=tmp_path / "nothing-fetched",
                                 public_items=lambda: [i for b in RULES.benchmarks
                                                       for i in train_items(b)])
    assert result.outcome in ("king", "lost") and result.not_compared == (1,)
    out.write_text(json.dumps(result.public(RULES.disclosure_precision)))
    assert tinyrouter(world, "leaderboard", "validate", "--results-only", out) == 0
    assert "PR #1 (not to be had from GitHub)" in render_result(
        "comment", json.loads(out.read_text()), RULES)


def test_an_independent_head_passes_the_behaviour_check(world, make_submission):
    out, _, _ = evaluate(world, "bob", 1)  # always model 0 is king
    tinyrouter(world, "leaderboard", "apply", out, "--repo", world["repo"])
    out, public, _ = evaluate(world, "alice", 2)
    assert public["outcome"] == "king"


@pytest.mark.parametrize("tamper", ["reseal", "swap"])
def test_an_older_or_swapped_seal_is_refused_before_scoring(world, capsys, tamper):
    from evaluator.benchmarks.sealing import KdfParams, seal_split, sealed_path

    sets = make_sets(n_live=7 if tamper == "reseal" else 6)
    if tamper == "reseal":  # a seal made for another manifest: its commitment differs
        seal_split(sealed_path(world["sealed"], "mmlu", "live"),
                   [r.to_dict() for r in sets["mmlu"]["live"][:6]], "mmlu", "live", PASSWORD,
                   KdfParams(log2_n=10, r=1))
    else:  # two benchmarks' pools trade places under their own names
        a, b = (sealed_path(world["sealed"], bench, "pool") for bench in ("mmlu", "math500"))
        a.rename(world["tmp"] / "x")
        b.rename(a)
        (world["tmp"] / "x").rename(b)
    code = tinyrouter(world, "evaluate", "--repo", world["repo"], "--submission",
                      "submissions/alice/1", "--benchmark-dir", world["sealed"],
                      "--out", world["tmp"] / "r.json")
    err = capsys.readouterr().err
    assert code == 1 and len(err.strip().splitlines()) == 1
    assert "commitment" in err or "renamed or swapped" in err
    assert not (world["tmp"] / "r.json").exists()


# ---------------------------------------------------------------- the evaluator's own re-check

def never():
    raise AssertionError("the hidden sets were opened for a head the re-check refuses")


def record_gates(world, login, pr, head_sha, now):
    """The gates bot's run on this head, recording its attempt (as the gates workflow does)."""
    return tinyrouter(world, "gates", "--repo", world["repo"], "--submission",
                      f"submissions/{login}/1", "--author", login, "--pr", pr, "--head-sha",
                      head_sha, "--now", now, "--record-attempt")


RECHECKS = [
    # every gate that needs no secret runs again in the evaluator's checkout, scope included
    ("an extra file in the folder", {}, lambda f: (f / "notes.txt").write_text("x"),
     "gate 0 (scope): unexpected file(s) 'notes.txt'"),
    ("the head also edits code", {"changes": "M\tevaluator/gates.py\n"}, None,
     "gate 0 (scope): the PR modifies 'evaluator/gates.py'"),
    ("the folder is not the PR author's", {"author": "bob"}, None,
     "gate 0 (scope): the folder is for 'alice' but the PR author is 'bob'"),
    ("a name with a trailing newline", {"changes": 'A\t"submissions/alice/1/README.md\\n"\n'},
     None, "gate 0 (scope): the PR adds"),
    ("a broken receipt", {}, lambda f: (f / "receipt.json").write_text("{}"), "gate 4 (receipt)"),
]


@pytest.mark.parametrize(("case", "given", "damage", "reason"), RECHECKS,
                         ids=[row[0] for row in RECHECKS])
def test_the_evaluator_rechecks_every_secret_free_gate(world, case, given, damage, reason):
    from evaluator.changes import parse_changes

    if damage:
        damage(world["repo"] / "submissions/alice/1")
    changes = parse_changes(given["changes"]) if "changes" in given else None
    result = evaluate_submission(world["repo"], "submissions/alice/1", never, LinearRouter(),
                                 FakePool(), RULES, pr=5, head_sha="d" * 40,
                                 author=given.get("author"), changes=changes)
    assert result.outcome == "rejected" and result.reason.startswith(reason), result.reason


def test_evaluation_requires_a_recorded_gates_pass_for_the_exact_head(world, capsys):
    with pytest.raises(LeaderboardError, match=r"no gates pass for PR 5 at d{40}"):
        evaluate_submission(world["repo"], "submissions/alice/1", never, LinearRouter(),
                            FakePool(), RULES, pr=5, head_sha="d" * 40, require_gates_pass=True)
    assert record_gates(world, "alice", 5, "e" * 40, "2026-11-29T12:00:00Z") == 0
    argv = ["evaluate", "--repo", world["repo"], "--submission", "submissions/alice/1",
            "--benchmark-dir", world["sealed"], "--pr", 5, "--require-gates-pass",
            "--out", world["tmp"] / "r.json"]
    # another head of the same PR is not covered by that pass
    assert tinyrouter(world, *argv, "--head-sha", "d" * 40) == 1
    assert "no gates pass" in capsys.readouterr().err
    assert not (world["tmp"] / "r.json").exists()
    assert tinyrouter(world, *argv, "--head-sha", "e" * 40) == 0
    assert json.loads((world["tmp"] / "r.json").read_text())["outcome"] == "king"


def test_the_recheck_judges_the_rate_limit_when_the_head_was_gated(world, make_submission):
    """A head evaluated again later (it was stale, or void) keeps the slot it was gated in,
    though the miner's next head has taken the next one since."""
    from datetime import timedelta

    from evaluator.files import format_time, utc_now

    gated = utc_now() - timedelta(hours=47)
    assert record_gates(world, "alice", 5, "d" * 40, format_time(gated)) == 0
    add_head(world["repo"], make_submission, "alice", {"c0": 1, "c1": 0}, generation=2)
    assert tinyrouter(world, "gates", "--repo", world["repo"], "--submission",
                      "submissions/alice/2", "--author", "alice", "--pr", 6, "--head-sha",
                      "e" * 40, "--now", format_time(gated + timedelta(hours=25)),
                      "--record-attempt") == 0
    result = evaluate_submission(world["repo"], "submissions/alice/1", make_sets, LinearRouter(),
                                 FakePool(), RULES, pr=5, head_sha="d" * 40,
                                 require_gates_pass=True)
    assert result.outcome == "king", result.reason
    # a head of that PR that was never gated is judged now: the newer head's slot is taken
    result = evaluate_submission(world["repo"], "submissions/alice/1", never, LinearRouter(),
                                 FakePool(), RULES, pr=5, head_sha="f" * 40)
    assert result.reason.startswith("gate 1 (rate limit)"), result.reason


def test_without_a_head_commit_the_recheck_finds_the_attempt_by_its_pr_and_weights(world,
                                                                                   capsys):
    """Offline (the Maintaining guide's rehearsal) the gates record an attempt with no head
    commit: its evaluation finds it by pull request and weights and charges no second slot;
    a head the log cannot tell apart is refused before anything is written."""
    from evaluator.errors import UsageError
    from evaluator.files import format_time, utc_now

    assert tinyrouter(world, "gates", "--repo", world["repo"], "--submission",
                      "submissions/alice/1", "--author", "alice", "--pr", 10,
                      "--now", format_time(utc_now()), "--record-attempt") == 0
    assert Store(world["repo"]).attempts()[-1].head_sha is None
    out = world["tmp"] / "r.json"
    assert tinyrouter(world, "evaluate", "--repo", world["repo"], "--submission",
                      "submissions/alice/1", "--benchmark-dir", world["sealed"], "--pr", 10,
                      "--out", out, "--private-out", world["tmp"] / "p.json") == 0
    assert json.loads(out.read_text())["outcome"] == "king"
    out.unlink()
    for pr in (11, None):  # another pull request, or none: which attempt is this head?
        argv = [] if pr is None else ["--pr", pr]
        assert tinyrouter(world, "evaluate", "--repo", world["repo"], "--submission",
                          "submissions/alice/1", "--benchmark-dir", world["sealed"], *argv,
                          "--out", out, "--private-out", world["tmp"] / "p.json") == 2
        assert "records attempts of alice but none of" in capsys.readouterr().err
        assert not out.exists()
    with pytest.raises(UsageError, match="pass the --pr"):
        evaluate_submission(world["repo"], "submissions/alice/1", never, LinearRouter(),
                            FakePool(), RULES, pr=11)


def test_require_gates_pass_needs_the_pr_and_head(world, capsys):
    code = tinyrouter(world, "evaluate", "--repo", world["repo"], "--submission",
                      "submissions/alice/1", "--benchmark-dir", world["sealed"],
                      "--require-gates-pass", "--out", world["tmp"] / "r.json")
    assert code == 2 and "--require-gates-pass needs --pr and --head-sha" in capsys.readouterr().err


# Isolation -------------------------------------------------------------------------------


def test_the_result_records_the_isolation_the_code_was_graded_under(world):
    _, public, private = evaluate(world, "alice", 1)
    assert public["isolation"] == private["isolation"] == isolation.verified().describe()


def test_without_isolation_in_force_the_evaluation_is_void_before_any_secret_is_read(
        world, monkeypatch, capsys):
    monkeypatch.setattr(isolation, "verified", lambda: isolation.Isolation(
        "rlimits", "per-process", failure="bwrap is not installed", fix="install bubblewrap"))
    out, public, private = evaluate(world, "alice", 1)
    assert public == {**{k: public[k] for k in ("format", "miner", "generation", "pr",
                                                "head_sha", "evaluated_at",
                                                "benchmark_manifest")},
                      "partition_commitment": None, "outcome": "void", "composite": None,
                      "delta": None, "isolation": "runner isolation not in force",
                      "not_compared": None,
                      "reason": "void: runner isolation not in force on the evaluation runner; "
                                "no score is given and your attempt is refunded; a maintainer "
                                "re-runs the evaluation"}
    assert private["challenger"] is None and private["partition"] is None
    assert os.environ["BENCHMARK_PASSWORD"] == PASSWORD  # never read
    assert "Fix: install bubblewrap" in capsys.readouterr().out  # the maintainers' log
    assert tinyrouter(world, "leaderboard", "apply", out, "--repo", world["repo"]) == 0
    assert Store(world["repo"]).king() is None


def test_isolation_lost_during_live_play_voids_the_evaluation(world, monkeypatch):
    def lost(*args):
        raise IsolationError("runner isolation not in force: cannot create the run's cgroup")

    monkeypatch.setattr("evaluator.pool.runner.pool_runner", lambda *a, **kw: lost)
    _, public, _ = evaluate(world, "alice", 1)
    assert public["outcome"] == "void"
    assert public["reason"].startswith("void: runner isolation not in force")


def test_the_records_go_outside_the_repository_by_default(world, monkeypatch, capsys):
    monkeypatch.setenv("TINYROUTER_PRIVATE_DIR", str(world["tmp"] / "kept"))
    assert tinyrouter(world, "evaluate", "--repo", world["repo"], "--submission",
                      "submissions/alice/1", "--benchmark-dir", world["sealed"], "--pr", 4) == 0
    folder = world["tmp"] / "kept" / "alice-1-pr4"
    assert json.loads((folder / "result.json").read_text())["outcome"] == "king"
    assert (folder / "private.json").stat().st_mode & 0o777 == 0o600
    assert folder.stat().st_mode & 0o777 == 0o700
    assert f"private record (keep it private): {folder / 'private.json'}" in capsys.readouterr().out


# Preflight: the behavioural check before a pull request ----------------------------------


def collected(world, benches=None):
    """The rows `tinyrouter collect` would write for the public train items."""
    from evaluation_fakes import answered

    data = world["tmp"] / "data"
    data.mkdir(exist_ok=True)
    for bench in RULES.benchmarks if benches is None else benches:
        (data / f"{bench}.jsonl").write_text("".join(
            json.dumps(answered(it).to_dict()) + "\n" for it in train_items(bench)))
    return data


def preflight(world, login, *extra):
    return tinyrouter(world, "preflight", f"submissions/{login}/1", "--repo", world["repo"],
                      "--author", login, *extra)


def test_preflight_gives_the_evaluations_verdict_on_a_copy_and_on_a_convergent_head(
        world, make_submission, capsys):
    data = collected(world)
    add_head(world["repo"], make_submission, "erin", SMART, own=0)
    out, _, _ = evaluate(world, "erin", 1)
    tinyrouter(world, "leaderboard", "apply", out, "--repo", world["repo"])
    head = head_theta(SMART, own=0)[: RULES.n_head_params].reshape(RULES.head_shape)
    head = head.astype(np.float32)
    head[:3, 5] += np.array([90.0, -90.0, 0.0], np.float32)
    make_submission(world["repo"], "carol", 1, head=head,
                    scales=np.ones(RULES.svf_scale_count, np.float32), rules=RULES)
    capsys.readouterr()
    assert preflight(world, "carol", "--data", data) == 1
    shown = capsys.readouterr().out
    result = evaluate_submission(world["repo"], "submissions/carol/1", never, LinearRouter(),
                                 FakePool(), RULES, pr=9, public_items=public_items)
    assert "all gates passed" in shown and f"✗ {result.reason}\n" in shown
    assert "the evaluation would reject this head before it opens the hidden sets" in shown
    # bob routes one model per category, as a default run does: not a copy, here or there
    assert preflight(world, "bob", "--data", data) == 0
    shown = capsys.readouterr().out
    assert "✓ gate 3 (duplicate, behaviour): routes like no earlier head (1 compared)" in shown
    assert "the head picks the same model as the king on" in shown


@pytest.mark.parametrize(("setup", "says"), [
    ("no data", "holds 0 of the 120 public train items the evaluation compares heads on"),
    ("one benchmark", "holds 40 of the 120 public train items"),
    ("no model extra", "needs the model extra (torch is not installed"),
])
def test_preflight_says_in_one_line_what_it_cannot_run(world, capsys, monkeypatch, setup, says):
    data = collected(world, ["math500"] if setup == "one benchmark" else [])
    if setup == "no model extra":
        data = collected(world)
        monkeypatch.setitem(sys.modules, "torch", None)
    capsys.readouterr()
    assert preflight(world, "alice", "--data", data) == 0  # the gates decide; this never blocks
    lines = [line for line in capsys.readouterr().out.splitlines() if "behaviour" in line]
    assert len(lines) == 1 and lines[0].startswith(
        "– gate 3 (duplicate, behaviour): not run here: ") and says in lines[0], lines
