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


def test_gates_render_their_comment_from_an_installed_wheel(installed, tmp_path,
                                                          make_submission):
    repo = tmp_path / "repo"
    (repo / "leaderboard").mkdir(parents=True)
    make_submission(repo, "alice", 1)
    changes = tmp_path / "changes.txt"
    changes.write_text("".join(f"A\tsubmissions/alice/1/{name}\n"
                               for name in ("weights.safetensors", "receipt.json", "README.md")))
    done = run(installed, "gates", "--repo", repo, "--submission", "submissions/alice/1",
               "--author", "alice", "--changed-files", changes, "--pr", "3",
               "--comment", tmp_path / "comment.md", "--json", tmp_path / "report.json",
               cwd=tmp_path)
    assert "all gates passed" in done.stdout
    assert "Gates passed" in (tmp_path / "comment.md").read_text(encoding="utf-8")
    assert json.loads((tmp_path / "report.json").read_text())["passed"] is True


@pytest.mark.parametrize("argv", [["train", "--benchmarks", "mmlu", "--run-name", "r"],
                                  ["bench", "coordinator"]])
def test_a_model_command_without_the_extra_says_how_to_install_it(installed, tmp_path, argv):
    blocker = tmp_path / "no-model-extra"
    blocker.mkdir()
    (blocker / "sitecustomize.py").write_text(
        "import sys\nfor name in ('torch', 'transformers', 'tokenizers', 'cma'):\n"
        "    sys.modules[name] = None  # as if the model extra were not installed\n")
    done = run(installed, *argv, cwd=tmp_path, check=False,
               env={"PYTHONPATH": str(blocker), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 1, done.stderr
    assert "from the model extra: pip install 'tinyrouter[model]'" in done.stderr
    assert "Traceback" not in done.stderr
