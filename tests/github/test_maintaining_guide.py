"""The maintaining guide (site/maintaining.md) checked against the code and the workflows.

Every `tinyrouter` command it shows is parsed by the real parser (a missing required option or
a renamed flag fails here); the leaderboard commands are run, in the guide's order, on a
sandbox repository; the others name the test that runs them. The facts the guide states
about the workflows (check name, runner labels, secrets, pins, paths) are read from them.
"""

from __future__ import annotations

import dataclasses
import json
import re
import shlex
from pathlib import Path

import pytest
import yaml

from evaluator.cli import build_parser, main
from evaluator.records import Attempt, Partition, Result
from evaluator.rules import OFFICIAL
from evaluator.site.markup import FILTERS
from evaluator.store import Store
from evaluator.templating import environment

REPO_ROOT = Path(__file__).resolve().parents[2]
GUIDE = REPO_ROOT / "site" / "maintaining.md"
WORKFLOWS = REPO_ROOT / ".github" / "workflows"
SHA = "a" * 40
PLACEHOLDERS = {"<login>": "alice", "<n>": "1", "--pr N": "--pr 7", "pr=N": "pr=7",
                "SHA": SHA, "OWNER/REPO": "tinyrouter/tinyrouter"}
# commands the guide shows that need the network, a GPU or a sealed benchmark: the test
# that runs each, so none is shown without one
RUN_ELSEWHERE = {
    "seal": "tests/benchmarks/test_sealing.py and the demo",
    "basis": "tests/coordinator/test_basis_command.py and the demo",
    "verify-benchmark": "tests/benchmarks/test_sealing.py::test_verify_command, "
                        "::test_a_revealed_split_is_checked_by_anyone",
    "reveal": "tests/benchmarks/test_sealing.py::test_a_revealed_split_is_checked_by_anyone, "
              "tests/evaluate/test_replayed_verdicts.py (--season) and the demo",
    "replay": "tests/evaluate/test_replayed_verdicts.py and the demo",
    "evaluate": "tests/evaluate/test_evaluate_cli.py (a sealed fake benchmark) and "
                "tests/commands/test_demo_command.py (the rehearsal, as printed)",
    "gates": "tests/commands/test_gates_command.py (--record-attempt included)",
    "fairness": "tests/test_fairness.py",
    "demo": "tests/commands/test_demo_command.py",
    "site": "tests/site/test_build.py",
    "gh": "tests/github/test_replay.py (every gh verb the workflows use)",
    "runner": "tests/test_isolation.py",
}


def rendered() -> str:
    text = GUIDE.read_text(encoding="utf-8")
    env = environment(autoescape=False)
    env.filters.update(FILTERS)  # as the site's hook renders the guides
    return env.from_string(text).render(rules=OFFICIAL.as_dict(), costs=None)


REHEARSAL = "### Rehearse a season offline"  # its block runs in the demo's test, as printed


def commands(skip: str | None = None) -> list[list[str]]:
    """Every `tinyrouter …` line of the guide's code blocks, placeholders filled in (those of
    the section under the heading `skip` left out)."""
    found, text = [], rendered()
    if skip:
        before, after = text.split(skip, 1)
        text = before + after.split("\n#", 1)[1]
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.split("  #", 1)[0].strip()
            if line.startswith("tinyrouter "):
                for placeholder, value in PLACEHOLDERS.items():
                    line = line.replace(placeholder, value)
                found.append(shlex.split(line)[1:])
    return found


COMMANDS = commands()


def test_the_guide_shows_the_commands_a_maintainer_runs():
    shown = {argv[0] for argv in COMMANDS}
    assert {"seal", "verify-benchmark", "reveal", "evaluate", "leaderboard"} <= shown
    assert any(argv[:2] == ["leaderboard", "seed-king"] for argv in COMMANDS)


@pytest.mark.parametrize("argv", COMMANDS, ids=[" ".join(a[:2]) for a in COMMANDS])
def test_every_command_in_the_guide_parses(argv):
    try:
        build_parser(argv).parse_args(argv)
    except SystemExit as exc:
        pytest.fail(f"`tinyrouter {' '.join(argv)}` does not parse (exit {exc.code})")


@pytest.mark.parametrize("argv", [a for a in COMMANDS if a[0] != "leaderboard"],
                         ids=lambda a: a[0])
def test_every_command_not_run_here_is_run_by_another_test(argv):
    assert argv[0] in RUN_ELSEWHERE


def crowned(miner: str, pr: int | None, king: float | None = None, composite: float = 0.6,
            at: str = "2026-11-20T12:00:00Z") -> dict:
    parts = {"cached_acc": 0.8, "audit_acc": 0.78, "live_acc": 0.7, "avg_turns": 2.0,
             "efficiency": 0.525, "novelty": 0.5, "overfit_penalty": 1.0, "score": composite}
    return {"format": 1, "miner": miner, "generation": 1, "pr": pr, "head_sha": SHA,
            "evaluated_at": at, "outcome": "king", "composite": composite,
            "king_composite": king, "delta": None if king is None else composite - king,
            "ci95": None if king is None else [0.01, 0.05], "reason": None,
            "crown_test": None if king is None else {
                "stage": 1, "difference": composite - king, "weighted": composite - king,
                "se": 0.01, "z": 9.0,
                "live_items": 20, "live_sessions": 120},
            "per_benchmark": {b: dict(parts) for b in OFFICIAL.benchmarks},
            "live_cost_usd": 0.41, "benchmark_manifest": "f" * 64, "router_card": None,
            "against": None, "isolation": None, "not_compared": None}


def write_evaluation(folder: Path, public: dict) -> None:
    """result.json and private.json as `tinyrouter evaluate` writes them."""
    drawn = Partition(seed="5e" * 32, salt="a1" * 16)
    record = Result.from_dict({**public, "partition_commitment": drawn.commitment})
    record = dataclasses.replace(record, partition=drawn)
    precision = OFFICIAL.disclosure_precision
    (folder / "result.json").write_text(json.dumps(record.public(precision)))
    (folder / "private.json").write_text(json.dumps(record.private(precision)))


def test_the_leaderboard_commands_of_the_guide_run_in_its_order(repo, make_submission,
                                                               monkeypatch, capsys):
    """The first king seeded from a maintainer's evaluation, then a PR's result applied."""
    make_submission(repo, "alice", 1)
    make_submission(repo, "bob", 1, seed=1)  # the PR's folder, merged before its crown applies
    monkeypatch.chdir(repo)
    evaluations = iter([crowned("alice", None),  # the reference head, no PR
                        crowned("bob", 7, king=0.6, composite=0.7,
                                at="2026-11-21T12:00:00Z")])  # "Evaluate by hand": a PR
    ran = []
    for argv in commands(skip=REHEARSAL):
        if argv[0] != "leaderboard":
            continue
        if argv[1] in ("seed-king", "apply"):
            write_evaluation(repo, next(evaluations))
        if argv[1] == "mark":  # bob's crowned head is refused; a stuck one is marked
            assert main(argv) == 1 and "never overwritten" in capsys.readouterr().err
            Store(repo).record_attempt(Attempt("carol", 1, 9, "c" * 40, "2026-11-22T12:00:00Z",
                                               gates_passed=True))
        if argv[1] in ("mark", "lift"):  # the stuck head, marked, then its mark lifted
            argv = [{"7": "9", SHA: "c" * 40}.get(word, word) for word in argv]
        assert main(argv) == 0, (argv, capsys.readouterr().err)
        ran.append(argv[1])
        if argv[1] == "mark":
            assert Store(repo).refunded_heads() == {"c" * 40}
    assert ran == ["seed-king", "validate", "apply", "mark", "lift"]
    king = json.loads((repo / "leaderboard/king.json").read_text())["king"]
    assert (king["miner"], king["pr"], king["previous"]["miner"]) == ("bob", 7, "alice")
    assert Store(repo).refunded_heads() == frozenset()  # lifted: its slot counts again


# ---------------------------------------------------------------- facts about the workflows

def workflow(name: str) -> dict:
    return yaml.safe_load((WORKFLOWS / name).read_text(encoding="utf-8"))


def ci_check_names() -> list[str]:
    """The status checks ci.yml reports: its job's name for each Python of the matrix."""
    [job] = workflow("ci.yml")["jobs"].values()
    return [job["name"].replace("${{ matrix.python }}", python)
            for python in job["strategy"]["matrix"]["python"]]


def test_branch_protection_names_the_ci_jobs_real_checks():
    guide = rendered()
    names = ci_check_names()
    assert len(names) == 2 and all("${{" not in name for name in names)
    for name in names:
        assert f"**{name}**" in guide


def test_runner_labels_secrets_and_environment_match_evaluate_yml():
    jobs, guide = workflow("evaluate.yml")["jobs"], rendered()
    runs_on = jobs["evaluate"]["runs-on"]
    # the repository variable the guide names, and its default, the labels it registers with
    assert "vars.TINYROUTER_GPU_RUNNER" in runs_on and "`TINYROUTER_GPU_RUNNER`" in guide
    assert "fromJSON('[\"self-hosted\", \"linux\", \"gpu\"]')" in runs_on
    assert "`self-hosted, linux, gpu`" in guide
    assert "--labels gpu" in guide and '"labels": ["self-hosted", "linux", "gpu"]' in guide
    assert f"`{jobs['evaluate']['environment']}` environment" in guide
    secrets = set(re.findall(r"secrets\.(\w+)", str(jobs["evaluate"])))
    # the GPU job's, no other: the benchmark's, and the key its result leaves sealed under
    assert secrets == {"BENCHMARK_PASSWORD", "OPENROUTER_API_KEY", "TINYROUTER_RESULT_KEY"}
    for name in secrets:
        assert guide.count(name) >= 2, f"{name}: the seal section and the environment"
    record = set(re.findall(r"secrets\.(\w+)", str(jobs["record"])))
    assert "TINYROUTER_RESULT_KEY" in record and "openssl rand -base64 32" in guide


def test_the_runner_prerequisites_match_the_evaluation_job():
    install = next(s["run"] for s in workflow("evaluate.yml")["jobs"]["evaluate"]["steps"]
                   if "venv" in s.get("run", ""))
    [torch] = re.findall(r"torch==[\d.]+", install)
    guide = rendered()
    assert f"`{torch}`" in guide and "python3 -m venv" in guide
    assert OFFICIAL.encoder_id in guide and "HF_HUB_OFFLINE=1" in guide
    assert "--ephemeral" in guide and "--jitconfig" in guide
    assert "restarted by a service manager" not in guide


def test_paths_and_names_agree_with_the_readme_and_codeowners():
    guide, readme = rendered(), (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    [folder] = set(re.findall(r"TINYROUTER_BENCHMARK_DIR=(\S+)", readme))
    assert f"TINYROUTER_BENCHMARK_DIR={folder}" in guide
    [team] = set(re.findall(r"@\S+", (REPO_ROOT / ".github" / "CODEOWNERS").read_text()))
    assert team in guide
    for label in ("gates-passed", "gates-failed"):
        assert label in guide and label in (WORKFLOWS / "gates.yml").read_text()


# ---------------------------------------------------------------- the App, the ruleset

def _words(name: str) -> str:
    return name.replace("_", " ").capitalize()


def test_the_apps_permissions_in_the_guide_are_the_ones_its_token_asks_for():
    from evaluator.github import APP_PERMISSIONS

    guide = rendered()
    granted = re.search(r"\*\*Repository permissions\*\*: (.*?); \*\*Metadata", guide, re.S).group(1)
    assert sorted(set(re.findall(r"\*\*([A-Z][a-z ]+)\*\*", granted)) - {"Read and write"}) == \
        sorted(_words(n) for n in APP_PERMISSIONS)
    assert set(APP_PERMISSIONS.values()) == {"write"} and "each **Read and write**" in granted


def test_the_writing_jobs_mint_the_apps_token_from_the_secrets_the_guide_names():
    guide = rendered()
    for name, jobs in (("gates.yml", ("gates",)),
                       ("evaluate.yml", ("announce", "record", "unfinished"))):
        text = (WORKFLOWS / name).read_text(encoding="utf-8")
        for job in jobs:
            spec = workflow(name)["jobs"][job]
            mint = next(s for s in spec["steps"] if s.get("id") == "token")
            assert mint["run"] == "tinyrouter gh app-token"
            assert set(mint["env"]) == {"TINYROUTER_APP_ID", "TINYROUTER_APP_PRIVATE_KEY"}
            assert spec["environment"] in ("leaderboard", "evaluation")
            assert f"`{spec['environment']}`" in guide
        assert "secrets.TINYROUTER_APP_PRIVATE_KEY" in text
    for name in ("TINYROUTER_APP_ID", "TINYROUTER_APP_PRIVATE_KEY", "Mint this job's token"):
        assert name in guide
    assert "Actor GitHub Actions integration must be part of the ruleset source" in \
        " ".join(guide.split())


def test_the_guides_ruleset_is_the_one_the_fake_enforces():
    """Each rule of the ruleset the strict fake enforces (conftest.guide_ruleset) is a step."""
    guide = rendered()
    flat = " ".join(guide.split())
    for step in ("Include default branch", "Restrict deletions", "Block force pushes",
                 "Require review from Code Owners", "Always allow", "**Apps**"):
        assert step in flat
    for check in ci_check_names():
        assert f"**{check}**" in guide


def test_the_guides_show_how_anyone_checks_a_signed_result():
    """The verification command the Maintaining and FAQ pages show names the workflow file whose
    job attests, on the branch it runs on, from a hosted runner; and the board's listing is
    printed as the attest job hashes it."""
    from evaluator.attestation import TREE_COMMAND

    attesting = [path.name for path in sorted(WORKFLOWS.glob("*.yml"))
                 if any("actions/attest@" in str(step.get("uses")) for job in
                        workflow(path.name)["jobs"].values() for step in job["steps"])]
    assert attesting == ["evaluate.yml"]
    env = environment(autoescape=False)
    env.filters.update(FILTERS)
    faq = env.from_string((REPO_ROOT / "site" / "faq.md").read_text(encoding="utf-8")).render(
        rules=OFFICIAL.as_dict())
    for page in (rendered(), faq):
        shown = [line.strip() for line in page.splitlines()
                 if line.strip().startswith("gh attestation verify")]
        assert shown and all(
            "--repo OWNER/REPO --signer-workflow OWNER/REPO/.github/workflows/evaluate.yml "
            "--source-ref refs/heads/main --deny-self-hosted-runners" in line for line in shown)
    listing = "git " + " ".join(TREE_COMMAND).format(commit="COMMIT")
    assert f"{listing} > leaderboard.tree" in rendered()
    jobs = workflow("evaluate.yml")["jobs"]
    assert jobs["attest"]["runs-on"] == "ubuntu-latest"
    assert all(step.get("with", {}).get("ref") == "main" for step in jobs["attest"]["steps"]
               if str(step.get("uses")).startswith("actions/checkout@"))


def test_the_guide_restricts_the_gpu_runners_to_evaluate_on_main():
    guide = rendered()
    assert "`OWNER/REPO/.github/workflows/evaluate.yml@refs/heads/main`" in guide
    assert "A label or a scale set's name is not a" in guide
    assert (WORKFLOWS / "evaluate.yml").is_file()


def test_the_lifecycle_table_on_the_site_is_the_codes():
    from evaluator.lifecycle import STATES
    from evaluator.records import OUTCOMES

    guide = rendered()
    start = guide.index("| State | What it means")
    rows = [line for line in guide[start:].split("\n\n")[0].splitlines()[2:]]
    shown = [[cell.strip() for cell in row.strip("|").split(" | ")] for row in rows]
    assert shown == [[f"**{s.name}**", s.means, s.moved_by, s.slot, ", ".join(s.then) or "final"]
                     for s in STATES]
    names = {s.name for s in STATES}
    assert set(OUTCOMES) <= names  # every recorded outcome is a state of the table
    assert all(set(s.then) <= names for s in STATES)
