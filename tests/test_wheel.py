"""The package as a wheel: built, installed into a fresh environment outside the checkout, run.

The fresh environment gets the wheel alone; its dependencies are borrowed from the test
environment's site-packages through a plain path entry (whose .pth files, the editable
install among them, are not run), so the `evaluator` it imports is the wheel's own copy.
"""

from __future__ import annotations

import json
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from evaluator.cli import EXTRAS

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow


def run(*argv, cwd: Path, check: bool = True, env: dict | None = None
        ) -> subprocess.CompletedProcess:
    return subprocess.run([str(a) for a in argv], cwd=cwd, capture_output=True, text=True,
                          timeout=600, check=check, env=env)


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """The `tinyrouter` script of a fresh venv holding only the wheel."""
    work = tmp_path_factory.mktemp("wheel")
    run(sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", work / "dist", REPO,
        cwd=work)
    [wheel] = (work / "dist").glob("tinyrouter-*.whl")
    run(sys.executable, "-m", "venv", work / "venv", cwd=work)
    python = work / "venv" / "bin" / "python"
    run(python, "-m", "pip", "install", "--quiet", "--no-deps", wheel, cwd=work)
    site = run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])",
               cwd=work).stdout.strip()
    (Path(site) / "borrowed-dependencies.pth").write_text(
        sysconfig.get_paths()["purelib"] + "\n", encoding="utf-8")
    where = run(python, "-c", "import evaluator; print(evaluator.__file__)", cwd=work).stdout
    assert where.startswith(site) and str(REPO) not in where
    return work / "venv" / "bin" / "tinyrouter"


def test_the_site_builds_from_an_installed_wheel(installed, tmp_path):
    done = run(installed, "site", "build", "--out", tmp_path / "public", cwd=tmp_path)
    assert "site built" in done.stdout
    for page in ("index.html", "rules/index.html", "maintaining/index.html",
                 "history/index.html", "downloads/leaderboard.json"):
        assert (tmp_path / "public" / page).is_file(), page


SHIPPED_SANDBOX = """import json
from evaluator import sandbox
source = "def f(a):\\n    return (a, a)\\nif __name__ == '__main__':\\n    print(int(input()) * 3)\\n"
runs = [sandbox.Run("2\\n"), sandbox.Run("[1]\\n", "f")]
print(json.dumps([r.stdout for r in sandbox.run_each(source, runs, isolation=sandbox.RLIMITS)]))
"""


def test_the_sandbox_runs_the_programs_the_wheel_ships(installed, tmp_path):
    """The runner and the harness are files of the wheel, read from the installed package."""
    python = installed.parent / "python"
    done = run(python, "-c", SHIPPED_SANDBOX, cwd=tmp_path)
    assert json.loads(done.stdout) == ["6\n", "[[1], [1]]\n"]


def without(extras: tuple[str, ...], where: Path) -> dict[str, str]:
    """An environment in which the packages of these extras fail to import, as if not installed."""
    blocked = sorted(name for name, extra in EXTRAS.items() if extra in extras)
    where.mkdir(exist_ok=True)
    (where / "sitecustomize.py").write_text(
        f"import sys\nfor name in {blocked!r}:\n    sys.modules[name] = None\n")
    return {"PYTHONPATH": str(where), "PATH": "/usr/bin:/bin"}


# what the hosted jobs run, on the core install alone: no extra is imported
def test_gates_render_their_comment_from_the_core_of_an_installed_wheel(installed, tmp_path,
                                                                         make_submission):
    repo = tmp_path / "repo"
    (repo / "leaderboard").mkdir(parents=True)
    make_submission(repo, "alice", 1)
    changes = tmp_path / "changes.txt"
    changes.write_text("".join(f"A\tsubmissions/alice/1/{name}\n"
                               for name in ("weights.safetensors", "receipt.json", "README.md")))
    core = without(("model", "grade", "site"), tmp_path / "core-only")
    done = run(installed, "gates", "--repo", repo, "--submission", "submissions/alice/1",
               "--author", "alice", "--changed-files", changes, "--pr", "3",
               "--comment", tmp_path / "comment.md", "--json", tmp_path / "report.json",
               cwd=tmp_path, env=core)
    assert "all gates passed" in done.stdout
    assert "Gates passed" in (tmp_path / "comment.md").read_text(encoding="utf-8")
    assert json.loads((tmp_path / "report.json").read_text())["passed"] is True
    done = run(installed, "leaderboard", "validate", "--repo", repo, cwd=tmp_path, env=core)
    assert done.returncode == 0


# a command, and the extra it needs that is missing
NEEDS = [
    (["train", "--benchmarks", "mmlu", "--run-name", "r"], "model"),
    (["dev", "coordinator"], "model"),
    (["grade", "math500", "--reference", "2", "--response-file", "answer.txt"], "grade"),
    (["site", "build", "--out", "public"], "site"),
]


@pytest.mark.parametrize(("argv", "extra"), NEEDS)
def test_a_command_without_its_extra_says_how_to_install_it(installed, tmp_path, argv, extra):
    (tmp_path / "answer.txt").write_text("so \\boxed{2}\n")
    done = run(installed, *argv, cwd=tmp_path, check=False,
               env=without((extra,), tmp_path / f"no-{extra}-extra"))
    assert done.returncode == 1, done.stderr
    assert f"from the {extra} extra: pip install 'tinyrouter[{extra}]'" in done.stderr
    assert "Traceback" not in done.stderr
