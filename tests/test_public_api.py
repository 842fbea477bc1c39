"""Pins the package's public names and the command's subcommands: changing them is a decision."""

import evaluator
from evaluator.cli import build_parser

PUBLIC = [
    "AnsweredItem", "Competition", "Decision", "GATES", "Item", "ModelAnswer", "OFFICIAL",
    "OpenRouterClient", "Result", "Router", "Store", "Submission", "TinyRouterError",
    "apply_result", "build_site", "evaluate_submission", "get_benchmark", "load_encoder",
    "open_benchmark", "oracle_report", "read_weights", "run_gates", "run_sessions",
    "run_training", "verify_ledger", "write_submission",
]

COMMANDS = [
    "baseline", "bench", "bench-agreement", "bench-sandbox", "bench-scale", "bench-startup",
    "bench-training", "collect", "demo",
    "diff", "encoder", "evaluate", "fairness", "gates", "gh", "grade", "leaderboard", "ledger",
    "pack", "pool", "preflight", "reveal", "score", "seal", "site", "train", "verify-benchmark",
]


def test_public_names_are_pinned_and_resolve():
    assert evaluator.__all__ == ["__version__", *PUBLIC]
    for name in PUBLIC:
        assert getattr(evaluator, name) is not None


def test_subcommands_are_pinned():
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    assert sorted(sub.choices) == COMMANDS


def test_every_subcommand_builds_its_parser():
    for name in COMMANDS:
        sub = next(a for a in build_parser([name])._actions if a.dest == "command")
        assert len(sub.choices[name]._actions) > 1, name  # more than its --help
