"""The package's shape: no import cycle, the command layer on top, the light commands light."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "evaluator"
# the studies (`tinyrouter dev`) sit beside the commands: they may use them, nothing uses them
STUDIES = "evaluator.studies"
COMMAND_LAYER = ("evaluator.cli", "evaluator.commands", "evaluator.__main__", STUDIES)
HEAVY = ("torch", "transformers", "matplotlib", "mkdocs")


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in PACKAGE.rglob("*.py")}


def resolve(name: str) -> str | None:
    """The package module an import names (a name imported from a module resolves to it)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def imports(path: Path) -> set[str]:
    """Every evaluator module this file imports, anywhere in it, with each parent package
    (importing `a.b.c` runs `a.b`'s __init__ first)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [f"{node.module}.{alias.name}" for alias in node.names]
        for name in names:
            target = resolve(name) if name.startswith("evaluator") else None
            while target and target != "evaluator":
                found.add(target)
                target = target.rpartition(".")[0]
    return found - {module_name(path)}


GRAPH = {name: imports(path) for name, path in MODULES.items()}


def test_no_import_cycles():
    done, path = set(), []

    def visit(name: str) -> None:
        if name in path:
            cycle = [*path[path.index(name):], name]
            pytest.fail("import cycle: " + " → ".join(cycle))
        if name in done:
            return
        path.append(name)
        for target in sorted(GRAPH.get(name, ())):
            if not (name.startswith(f"{target}.")):  # a module needs its own package: no cycle
                visit(target)
        path.pop()
        done.add(name)

    for name in sorted(GRAPH):
        visit(name)


def test_nothing_below_the_command_layer_imports_it():
    below = {n: targets for n, targets in GRAPH.items() if not n.startswith(COMMAND_LAYER)}
    upward = {n: sorted(t for t in targets if t.startswith(COMMAND_LAYER))
              for n, targets in below.items()}
    assert {n: t for n, t in upward.items() if t} == {}


def unit(name: str) -> str:
    """The package or top-level module a module belongs to (evaluator.pool.client → pool)."""
    return ".".join(name.split(".")[:2])


def test_no_package_level_back_edge():
    """Between the package's units (its subpackages and top-level modules) imports flow one
    way: no unit reaches back to one that imports it (collect → train, submission → train and
    pool ↔ benchmarks were such edges). The command layer is one unit with the CLI."""
    def of(name: str) -> str:
        return "commands" if name.startswith(COMMAND_LAYER) else unit(name)

    edges: dict[str, set[str]] = {}
    for name, targets in GRAPH.items():
        for target in targets:
            if of(target) not in (of(name), "evaluator"):
                edges.setdefault(of(name), set()).add(of(target))

    def reach(start: str) -> set[str]:
        seen, todo = set(), [start]
        while todo:
            for nxt in edges.get(todo.pop(), ()):
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        return seen

    back = sorted(f"{a} → {b}" for a, targets in edges.items() for b in targets if a in reach(b))
    assert back == []


def test_names_mean_one_thing():
    """No two modules define a public class or type alias of the same name (two Routers, two
    Heads, three LiveRunners once), and no library module shares its name with another but for
    the command or study that fronts it."""
    defined: dict[str, list[str]] = {}
    for name, path in MODULES.items():
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            found = [node.name] if isinstance(node, ast.ClassDef) else [
                t.id for t in getattr(node, "targets", [getattr(node, "target", None)])
                if isinstance(t, ast.Name) and t.id[:1].isupper() and not t.id.isupper()]
            for one in found:
                if not one.startswith("_"):
                    defined.setdefault(one, []).append(name)
    assert {n: where for n, where in defined.items() if len(where) > 1} == {}
    stems: dict[str, list[str]] = {}
    for name in MODULES:
        if not name.startswith(COMMAND_LAYER) and name != "evaluator":
            stems.setdefault(name.rpartition(".")[2], []).append(name)
    assert {s: where for s, where in stems.items() if len(where) > 1} == {}


MAX_LINES = 500  # "modules stay a few hundred lines" (STYLE.md, rule 6)


def test_modules_stay_a_few_hundred_lines():
    lines = {name: len(path.read_text(encoding="utf-8").splitlines())
             for name, path in MODULES.items()}
    assert {name: n for name, n in lines.items() if n > MAX_LINES} == {}


def test_the_product_never_imports_its_studies():
    """Timing and measurement code lives in evaluator/studies and only `tinyrouter dev` runs
    it (by name): what the studies time is what ships, and nothing shipped depends on them."""
    users = {n: sorted(t for t in targets if t.startswith(STUDIES))
             for n, targets in GRAPH.items() if not n.startswith(STUDIES)}
    assert {n: t for n, t in users.items() if t} == {}


@pytest.mark.parametrize("argv", [
    ["--help"],
    ["gates", "--help"],
    ["preflight", "--help"],
    ["leaderboard", "--help"],
    ["gh", "--help"],
    ["grade", "--help"],
])
def test_light_commands_load_no_heavy_library(argv):
    probe = ("import sys\nfrom evaluator.cli import main\n"
             "try:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
             f"heavy = sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r})\n"
             "print(heavy)\n")
    done = subprocess.run([sys.executable, "-c", probe, *argv], capture_output=True, text=True,
                          timeout=60, check=True)
    assert done.stdout.strip().splitlines()[-1] == "[]"


def test_the_light_commands_run_without_a_heavy_library(repo, make_submission, tmp_path):
    """`gates` end to end with torch, transformers, matplotlib and mkdocs unimportable."""
    make_submission(repo, "alice", 1)
    blocker = tmp_path / "block"
    blocker.mkdir()
    (blocker / "sitecustomize.py").write_text(
        "import sys\n"
        f"for name in {HEAVY!r}:\n"
        "    sys.modules[name] = None  # importing it raises ImportError\n", encoding="utf-8")
    env = {"PYTHONPATH": str(blocker), "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-m", "evaluator", "preflight", "submissions/alice/1",
                           "--repo", str(repo)], capture_output=True, text=True, timeout=60,
                          env=env)
    assert done.returncode == 0, done.stderr
    assert "all gates passed" in done.stdout


def test_the_wheel_lists_every_folder_and_file_kind():
    import tomllib

    root = PACKAGE.parent
    setuptools = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["tool"][
        "setuptools"]
    mapped = {folder: package for package, folder in setuptools["package-dir"].items()}
    assert set(mapped) == {"templates", "site"}
    folders = [p for top in (PACKAGE, root / "templates", root / "site")
               for p in (top, *top.rglob("*")) if p.is_dir() and p.name != "__pycache__"]

    def package(folder: Path) -> str:
        top, *rest = folder.relative_to(root).parts
        return ".".join([mapped.get(top, top), *rest])

    assert sorted(setuptools["packages"]) == sorted(package(f) for f in folders)
    kinds = {f"*{p.suffix}" for f in folders for p in f.iterdir() if p.is_file()} - {"*.py", "*.pyc"}
    assert kinds <= set(setuptools["package-data"]["*"])


def _top_level_imports(path: Path) -> set[str]:
    """What a file imports when it is imported: module-level statements only (not those inside
    functions, nor under `if TYPE_CHECKING:`), each name as written."""
    names = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names |= {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
    return names


COLLECTION_HEAVY = ("torch", "transformers", "mkdocs")


def _heavy_modules() -> set[str]:
    """The package modules whose import imports a heavy library: through their own top-level
    imports, a package module those reach, or their package's __init__ (which runs first)."""
    imported = {name: _top_level_imports(path) for name, path in MODULES.items()}
    heavy: set[str] = set()
    while True:
        grown = {name for name, names in imported.items() if name not in heavy and (
            name.rpartition(".")[0] in heavy or any(_names_heavy(n, heavy) for n in names))}
        if not grown:
            return heavy
        heavy |= grown


def _names_heavy(name: str, heavy: set[str]) -> bool:
    module = resolve(name) if name.startswith("evaluator") else None
    return name.split(".")[0] in COLLECTION_HEAVY or module in heavy


def test_collecting_the_suite_loads_no_heavy_library():
    """A test module imports torch, transformers or MkDocs inside its tests (or through
    tests/deferred.py), never at its top: collecting every test stays quick."""
    tests = PACKAGE.parent / "tests"
    modules = _heavy_modules()
    heavy = sorted(str(path.relative_to(tests)) for path in tests.rglob("*.py")
                   if any(_names_heavy(name, modules) for name in _top_level_imports(path)))
    assert heavy == []
