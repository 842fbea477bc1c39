"""The programs a bare interpreter runs for the sandbox, inside it or beside it.

Each is a standalone script (the standard library only, never `evaluator`: inside there is
no site-packages and no repository), shipped as a file of this package and handed over as
text: the harness and the runner as files of the sandbox (memfds under bubblewrap), the
launcher, the sweeper and the interpreter's paths on the command line (`-c`).
"""

from __future__ import annotations

from importlib import resources

PROGRAM_FILE = "solution.py"  # the names the program's files have inside the sandbox
HARNESS_FILE = "harness.py"
RUNNER_FILE = "runner.py"


def _source(name: str) -> str:
    return resources.files(__name__).joinpath(name).read_text(encoding="utf-8")


HARNESS = _source("harness.py")  # calls one function of the program
RUNNER = _source("program_runner.py")  # many runs of one program in one sandbox
LAUNCHER = _source("launcher.py")  # joins the run's cgroup, sets rlimits, execs
SWEEPER = _source("sweeper.py")  # kills every process of its uid
INTERPRETER_PATHS = _source("interpreter_paths.py")  # what the sandbox must show of python


def flags(entry: str) -> list[str]:
    """Isolated mode; the runner, our own code, also skips site (a few ms per program)."""
    return ["-I", "-S"] if entry == RUNNER_FILE else ["-I"]
