"""Pins the package's public names and the command's subcommands: changing them is a decision."""

import pytest

import evaluator
from evaluator.cli import build_parser
from evaluator.rules import OFFICIAL

PUBLIC = [
    "AnsweredItem", "Competition", "Decision", "GATES", "Item", "ModelAnswer", "OFFICIAL",
    "OpenRouterClient", "Result", "Router", "Store", "Submission", "TinyRouterError",
    "apply_result", "build_site", "evaluate_submission", "get_benchmark", "load_encoder",
    "open_benchmark", "oracle_report", "read_weights", "run_gates", "run_sessions",
    "run_training", "verify_ledger", "write_submission",
]

COMMANDS = [
    "baseline", "basis", "collect", "demo", "dev",
    "diff", "encoder", "evaluate", "fairness", "gates", "gh", "grade", "leaderboard", "ledger",
    "pack", "pool", "preflight", "replay", "reveal", "runner", "score", "seal", "serve", "site",
    "train", "verify-benchmark",
]


def test_public_names_are_pinned_and_resolve():
    assert evaluator.__all__ == ["__version__", *PUBLIC]
    for name in PUBLIC:
        assert getattr(evaluator, name) is not None


def test_subcommands_are_pinned():
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    assert sorted(sub.choices) == COMMANDS


def test_the_help_lists_every_command_once_by_audience(capsys):
    from evaluator.cli import AUDIENCES
    from evaluator.cli import COMMANDS as TABLE

    listed = [name for _, names, _ in AUDIENCES for name in names]
    assert sorted(listed) == sorted(TABLE) == COMMANDS
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--help"])
    text = capsys.readouterr().out
    for title, names, example in AUDIENCES:
        assert title in text and f"e.g. {example}" in text
        assert all(f"  {name} " in text for name in names)


@pytest.mark.parametrize("argv", [["gates"], ["leaderboard", "apply"], ["dev", "scale"]])
def test_a_commands_usage_names_it(argv, capsys):
    with pytest.raises(SystemExit):
        build_parser(argv).parse_args([*argv, "--help"])
    assert capsys.readouterr().out.startswith(f"usage: tinyrouter {' '.join(argv)} [-h]")


def test_the_studies_are_one_group_apart_from_the_product():
    from evaluator.commands.dev import STUDIES

    sub = next(a for a in build_parser(["dev"])._actions if a.dest == "command")
    studies = next(a for a in sub.choices["dev"]._actions if a.dest == "study")
    assert sorted(studies.choices) == sorted(STUDIES)
    assert not any(name.startswith("bench") for name in COMMANDS)


def test_every_subcommand_builds_its_parser():
    for name in COMMANDS:
        sub = next(a for a in build_parser([name])._actions if a.dest == "command")
        assert len(sub.choices[name]._actions) > 1, name  # more than its --help


@pytest.mark.parametrize(("command", "shown"), [
    # help shows the numbers a default stands for, read from the rules
    ("train", f"(default: {OFFICIAL.train_generations})"),
    ("train", f"(default: {OFFICIAL.train_holdout}; 0 keeps none)"),
    ("score", OFFICIAL.encoder_id),
    # and the values an option takes
    ("collect", "{" + ",".join(OFFICIAL.benchmarks) + "}"),
])
def test_help_shows_numbers_and_choices(command, shown, capsys):
    with pytest.raises(SystemExit):
        build_parser([command]).parse_args([command, "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert shown in text and "the rules'" not in text
