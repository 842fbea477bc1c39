"""The model stack's declared floors are true: the coordinator tests pass on exactly those versions.

The floor releases are pip-installed into a temporary folder that shadows the environment's
own through PYTHONPATH; torch is reused from the environment when it already is the floor
(CI installs that one), since another torch is a download of gigabytes.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
FLOORED = ("torch", "transformers", "tokenizers", "safetensors")
OFFLINE = ("(from versions: none)", "NewConnectionError", "Network is unreachable",
           "Temporary failure in name resolution")
# prints what the subprocess imports, then runs the coordinator tests (not this file: no recursion)
PROBE = """\
import json, sys, pytest
mods = {name: __import__(name) for name in sys.argv[1:]}
print(json.dumps({n: [m.__version__, m.__file__] for n, m in mods.items()}), flush=True)
sys.exit(pytest.main(["-q", "-n0", "tests/coordinator", "-p", "no:cacheprovider"]))
"""


def declared_floors() -> dict[str, str]:
    """name -> the version after `>=` in pyproject.toml, for each floored package."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    floors = {}
    for line in project["dependencies"] + project["optional-dependencies"]["model"]:
        req = Requirement(line)
        if req.name in FLOORED:
            (spec,) = req.specifier
            assert spec.operator == ">=", f"{line!r}: a floor is stated as >=VERSION"
            floors[req.name] = spec.version
    assert set(floors) == set(FLOORED)
    return floors


def _same_release(version: str, floor: str) -> bool:
    """2.13.0+cpu is the floor 2.13."""
    return Version(Version(version).base_version) == Version(floor)


def _pip_install(target: Path, pins: list[str]) -> None:
    cmd = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), *pins]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if done.returncode and any(sign in done.stderr for sign in OFFLINE):
        pytest.skip(f"pip cannot reach the package index: {done.stderr.strip().splitlines()[-1]}")
    assert done.returncode == 0, done.stderr


def _hub_requirement(target: Path) -> str:
    """The huggingface-hub range the floor transformers itself asks for."""
    (dist,) = (d for d in importlib.metadata.distributions(path=[str(target)])
               if d.metadata["Name"] == "transformers")
    return next(r for r in dist.requires or ()
                if Requirement(r).name == "huggingface-hub" and not Requirement(r).marker)


@pytest.mark.slow
def test_coordinator_runs_on_the_declared_floors(tmp_path):
    floors = declared_floors()
    target = tmp_path / "floor"
    pins = [f"{name}=={floors[name]}" for name in FLOORED
            if name != "torch" or not _same_release(importlib.metadata.version("torch"), floors["torch"])]
    _pip_install(target, pins)
    _pip_install(target, [_hub_requirement(target)])

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(target), *filter(None, [os.environ.get("PYTHONPATH")])])}
    done = subprocess.run([sys.executable, "-c", PROBE, *FLOORED], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=900)
    first, _, rest = done.stdout.partition("\n")
    imported = json.loads(first)
    for name, floor in floors.items():
        version, _ = imported[name]
        assert _same_release(version, floor), f"{name} {version} imported, the floor is {floor}"
    assert Path(imported["transformers"][1]).is_relative_to(target)
    assert done.returncode == 0, f"coordinator tests fail on the floors:\n{rest[-6000:]}{done.stderr[-2000:]}"
