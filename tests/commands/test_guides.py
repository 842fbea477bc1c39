"""The Submitting and Reference guides' commands, checked against the real parser.

Every `tinyrouter …` line in the guides' code blocks is parsed (a renamed flag or a missing
required option fails here), and each command names the test that runs it as a guide prints
it: the Submitting guide's steps run, with the demo's options, in its "Practise on the demo"
block, which tests/commands/test_demo_command.py runs line by line; the Maintaining guide's
are checked by tests/github/test_maintaining_guide.py. The Reference guide's synopses
(`[--option X]` in brackets) must name options the command has.
"""

from __future__ import annotations

import contextlib
import io
import re
import shlex
from pathlib import Path

import pytest

from evaluator.cli import build_parser
from evaluator.rules import OFFICIAL
from evaluator.site.markup import FILTERS
from evaluator.templating import environment

SITE = Path(__file__).resolve().parents[2] / "site"
PLACEHOLDERS = {"YOUR-LOGIN": "alice", "<your-github-login>": "alice", "<n>": "1",
                "<login>": "alice"}
# each command of the Submitting guide's steps: the test that runs it as printed
RUN_BY = {
    "pool": "tests/pool/test_check.py (pool check against the simulator)",
    "collect": "tests/commands/test_demo_command.py (the practise block, as printed)",
    "train": "tests/commands/test_demo_command.py (the practise block, as printed)",
    "score": "tests/commands/test_demo_command.py (the practise block, as printed)",
    "diff": "tests/commands/test_demo_command.py (the practise block, as printed)",
    "pack": "tests/commands/test_demo_command.py (the practise block, as printed)",
    "preflight": "tests/commands/test_demo_command.py (the practise block, as printed)",
    "gates": "tests/commands/test_demo_command.py (the practise block, as printed)",
    "demo": "tests/commands/test_demo_command.py",
}


def rendered(name: str) -> str:
    env = environment(autoescape=False)
    env.filters.update(FILTERS)
    return env.from_string((SITE / name).read_text(encoding="utf-8")).render(
        rules=OFFICIAL.as_dict(), walk=None, demo_times=None, costs=None, repo_url="")


def command_lines(name: str) -> list[str]:
    found = []
    for block in re.findall(r"```bash\n(.*?)```", rendered(name), re.S):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.split("  #", 1)[0].strip()
            for part in line.split("; do "):  # a for-loop's body is a command too
                part = part.removesuffix("; done").strip()
                if part.startswith("tinyrouter "):
                    found.append(part)
    return found


def filled(line: str) -> list[str]:
    for placeholder, value in PLACEHOLDERS.items():
        line = line.replace(placeholder, value)
    return shlex.split(line.replace("$b", "mmlu"))[1:]


SUBMITTING = [filled(line) for line in command_lines("submitting.md")]
SYNOPSES = [line for line in command_lines("reference.md") if "[" in line]


@pytest.mark.parametrize("argv", SUBMITTING, ids=[" ".join(a[:2]) for a in SUBMITTING])
def test_every_command_the_submitting_guide_prints_parses_and_is_run_by_a_test(argv):
    try:
        build_parser(argv).parse_args(argv)
    except SystemExit as exc:
        pytest.fail(f"`tinyrouter {' '.join(argv)}` does not parse (exit {exc.code})")
    assert argv[0] in RUN_BY


def test_the_practise_block_runs_each_step_the_guide_describes():
    steps = {argv[0] for argv in SUBMITTING}
    assert {"collect", "train", "score", "diff", "pack", "preflight", "gates"} <= steps


@pytest.mark.parametrize("line", SYNOPSES, ids=lambda line: " ".join(line.split()[1:3]))
def test_each_reference_synopsis_names_options_its_command_has(line):
    words = line.split()[1:]
    if words[0] == "--competition":  # the global option before the command
        words, line = words[2:], "tinyrouter " + " ".join(words[2:])
    path = []
    for word in words:
        if word.startswith(("[", "-")) or not re.fullmatch(r"[a-z][a-z-]*", word):
            break
        path.append(word)
    shown = io.StringIO()
    with contextlib.redirect_stdout(shown), pytest.raises(SystemExit) as exit_:
        build_parser([*path, "--help"]).parse_args([*path, "--help"])
    assert exit_.value.code == 0, path
    for option in re.findall(r"(?<![\w-])(--[a-z][a-z-]*)", line):
        assert option in shown.getvalue(), f"`tinyrouter {' '.join(path)}` has no {option}"
