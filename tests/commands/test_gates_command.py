import hashlib
import json
import os
import subprocess
import sys

import pytest

from evaluator.cli import main


def cli(*args):
    return main([str(a) for a in args])


@pytest.fixture
def pr_repo(repo, make_submission):
    make_submission(repo, "alice", 1)
    changed = repo.parent / "changed.txt"
    changed.write_text("A\tsubmissions/alice/1/weights.safetensors\nA\tsubmissions/alice/1/receipt.json\n"
                       "A\tsubmissions/alice/1/README.md\n")
    return repo, changed


def bot(repo, changed, *extra):
    return cli("gates", "--repo", repo, "--submission", "submissions/alice/1", "--author", "alice",
               "--changed-files", changed, "--pr", 7, "--now", "2026-11-29T12:00:00Z", *extra)


def test_passing_pr_exits_0_and_writes_the_json_contract(pr_repo, tmp_path, capsys):
    repo, changed = pr_repo
    assert bot(repo, changed, "--json", tmp_path / "r.json") == 0
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["passed"] is True and report["failed_gate"] is None
    assert [g["number"] for g in report["gates"]] == [0, 1, 2, 3, 4]
    out = capsys.readouterr().out
    assert out.count("✓") == 5 and "all gates passed" in out


def test_failing_gate_exits_1_with_reason_in_json(pr_repo, tmp_path):
    repo, changed = pr_repo
    changed.write_text(changed.read_text() + "M\t.github/workflows/evaluate.yml\n")
    assert bot(repo, changed, "--json", tmp_path / "r.json") == 1
    failed = json.loads((tmp_path / "r.json").read_text())["failed_gate"]
    assert failed["number"] == 0 and failed["name"] == "scope" and ".github" in failed["reason"]


def test_record_attempt_is_idempotent_and_consumes_the_slot(pr_repo):
    repo, changed = pr_repo
    assert bot(repo, changed, "--record-attempt", "--head-sha", "c" * 40) == 0
    assert bot(repo, changed, "--record-attempt", "--head-sha", "c" * 40) == 0  # same PR re-run
    lines = (repo / "leaderboard/attempts.jsonl").read_text().splitlines()
    assert len(lines) == 1
    attempt = json.loads(lines[0])
    assert {k: attempt[k] for k in ("at", "generation", "head_sha", "miner", "pr", "gates")} == {
        "at": "2026-11-29T12:00:00Z", "generation": 1, "head_sha": "c" * 40, "miner": "alice", "pr": 7,
        "gates": {"passed": True, "failed": None}}
    weights = (repo / "submissions/alice/1/weights.safetensors").read_bytes()
    assert attempt["weights_sha256"] == hashlib.sha256(weights).hexdigest()
    assert attempt["fingerprint"]  # later submissions are compared against it (gate 3)
    # a second PR from the same miner an hour later hits the rate limit
    assert cli("gates", "--repo", repo, "--submission", "submissions/alice/1", "--author", "alice",
               "--pr", 8, "--now", "2026-11-29T13:00:00Z") == 1


def test_slot_is_consumed_even_when_a_later_gate_fails(pr_repo):
    repo, changed = pr_repo
    (repo / "submissions/alice/1/weights.safetensors").write_bytes(b"junk" * 10)
    assert bot(repo, changed, "--record-attempt") == 1
    assert (repo / "leaderboard/attempts.jsonl").read_text().count("\n") == 1


def test_scope_failure_records_no_attempt(pr_repo):
    repo, _ = pr_repo
    assert cli("gates", "--repo", repo, "--submission", "submissions/alice/1", "--author", "bob",
               "--record-attempt", "--pr", 3) == 1
    assert not (repo / "leaderboard/attempts.jsonl").exists()


def test_github_format_annotates_and_writes_the_step_summary(pr_repo, tmp_path, monkeypatch, capsys):
    repo, changed = pr_repo
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    (repo / "submissions/alice/1/receipt.json").write_text("{}")
    assert bot(repo, changed, "--format", "github") == 1
    out = capsys.readouterr().out
    assert "::error title=Gate 4 (receipt)::" in out
    assert "| 4 receipt | ✗ failed |" in summary.read_text()


def test_comment_escapes_hostile_text(repo, make_submission, tmp_path):
    folder = make_submission(repo, "alice", 1)
    (folder / "<img src=x onerror=alert(1)>|[x](javascript:alert(1))").write_text("boo")
    comment = tmp_path / "comment.md"
    assert cli("gates", "--repo", repo, "--submission", "submissions/alice/1", "--author", "alice",
               "--comment", comment, "--rules-url", "https://example.org/rules/") == 1
    text = comment.read_text()
    assert "<img" not in text and "&lt;img" in text
    assert "](javascript" not in text
    # a quote stays a quote: an entity with its `#` escaped would show as `&#39;`
    assert "'&lt;img" in text and "&#" not in text and "&\\#" not in text
    assert "Gate 0 (scope) failed" in text and "tinyrouter preflight" in text
    assert "(https://example.org/rules/)" in text


def test_in_a_workflow_a_failing_gate_is_an_output_not_an_exit_code(pr_repo, tmp_path,
                                                                    monkeypatch):
    repo, changed = pr_repo
    outputs = tmp_path / "outputs"
    monkeypatch.setenv("GITHUB_OUTPUT", str(outputs))
    (repo / "submissions/alice/1/receipt.json").write_text("{}")
    assert bot(repo, changed, "--format", "github", "--exit-zero") == 0
    assert outputs.read_text() == "passed=false\n"


@pytest.mark.slow
def test_odd_file_names_fail_gate_0_through_the_real_command(repo, make_submission, tmp_path):
    folder = make_submission(repo, "alice", 1)
    (folder / os.fsdecode(b"\xffREADME.md")).write_bytes(b"x")
    comment = tmp_path / "comment.md"
    run = subprocess.run([sys.executable, "-m", "evaluator", "gates", "--repo", str(repo),
                          "--submission", "submissions/alice/1", "--author", "alice",
                          "--comment", str(comment), "--format", "github"],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 1 and "Traceback" not in run.stdout + run.stderr
    assert "is not valid UTF-8" in run.stdout
    assert "not valid UTF-8" in comment.read_text(encoding="utf-8").replace("\\", "")


USAGE_ERRORS = [
    ("missing --author", ["gates", "--repo", ".", "--submission", "submissions/a/1"]),
    ("bad --now", ["gates", "--repo", ".", "--submission", "s", "--author", "a", "--now", "noon"]),
    ("hostile --author", ["gates", "--repo", ".", "--submission", "s", "--author", "$(id)"]),
    ("bad --head-sha", ["gates", "--repo", ".", "--submission", "s", "--author", "a",
                        "--head-sha", "`id`"]),
    ("--push without --record-attempt", ["gates", "--repo", ".", "--submission", "s",
                                         "--author", "a", "--push"]),
    ("hostile --remote", ["gates", "--repo", ".", "--submission", "s", "--author", "a",
                          "--record-attempt", "--push", "--remote", "-oProxy=x"]),
]


@pytest.mark.parametrize(("case", "argv"), USAGE_ERRORS, ids=[c[0] for c in USAGE_ERRORS])
def test_usage_errors_exit_2(case, argv, capsys):
    with pytest.raises(SystemExit) as raised:
        code = main(argv)
        raise SystemExit(code)
    assert raised.value.code == 2


def test_json_to_stdout_is_the_report_alone(pr_repo, capsys):
    repo, changed = pr_repo
    assert bot(repo, changed, "--json", "-") == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["passed"] is True  # nothing else on stdout
    assert "all gates passed" in captured.err


def test_global_options_work_after_the_subcommand(pr_repo, tmp_path, capsys):
    repo, changed = pr_repo
    rules = tmp_path / "rules.json"
    rules.write_text(json.dumps({"duplicate_cosine": 0.5}))
    assert bot(repo, changed, "--competition", rules) == 0
    (tmp_path / "broken.json").write_text("{")
    assert bot(repo, changed, "--competition", tmp_path / "broken.json") == 2
    assert cli("leaderboard", "validate", "--repo", repo, "-v", "--competition",
               tmp_path / "broken.json") == 2
    assert "--competition" in capsys.readouterr().err


def test_preflight_runs_the_same_gates(repo, make_submission, capsys, monkeypatch):
    make_submission(repo, "alice", 1)
    monkeypatch.chdir(repo)
    assert cli("preflight", "submissions/alice/1") == 0
    assert "as if the pull request came from 'alice'" in capsys.readouterr().out
    assert cli("preflight", "submissions/alice/1", "--author", "mallory") == 1
    assert "as if" not in capsys.readouterr().out
    (repo / "submissions/alice/1/notes.txt").write_text("x")
    assert cli("preflight", "submissions/alice/1") == 1
    assert "unexpected file(s) 'notes.txt'" in capsys.readouterr().out


@pytest.mark.slow
def test_hostile_file_through_the_real_command_has_no_traceback(repo, make_submission):
    folder = make_submission(repo, "alice", 1)
    (folder / "weights.safetensors").write_bytes((2**63).to_bytes(8, "little") + b"{}")
    run = subprocess.run([sys.executable, "-m", "evaluator", "gates", "--repo", str(repo),
                          "--submission", "submissions/alice/1", "--author", "alice"],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 1
    assert "Traceback" not in run.stdout + run.stderr
    assert "✗ gate 2 weight sanity" in run.stdout
