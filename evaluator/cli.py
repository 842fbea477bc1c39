"""The `tinyrouter` command: the table of subcommands, their parsers, and exit codes.

Only the chosen subcommand's module is imported (and with it whatever it needs), so
`tinyrouter --help` and the light commands start without loading torch or MkDocs.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from evaluator import __version__
from evaluator.errors import MissingExtraError, TinyRouterError, UsageError
from evaluator.rules import OFFICIAL, Competition

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
# The import name of each optional dependency → the extra that installs it (pyproject.toml)
EXTRAS = {
    **dict.fromkeys(("torch", "transformers", "tokenizers", "cma"), "model"),
    **dict.fromkeys(("math_verify", "latex2sympy2_extended", "antlr4", "sympy", "cryptography",
                     "tqdm", "pyarrow", "huggingface_hub"), "grade"),
    **dict.fromkeys(("mkdocs", "material", "matplotlib", "pandas"), "site"),
}


@dataclass(frozen=True)
class Command:
    module: str  # evaluator.commands.<module> defines PARSERS[name](parser)
    summary: str


COMMANDS = {
    "basis": Command("basis", "the public items' feature basis gate 3 compares model rows on "
                              "(after sealing)"),
    "baseline": Command("baseline", "what a head has to beat: single-model, random and oracle "
                                    "accuracy"),
    "collect": Command("collect", "collect training data: every pool model's graded answers "
                                  "to the public train items"),
    "demo": Command("demo", "run the whole competition offline on this machine"),
    "dev": Command("dev", "studies of the product: timing benchmarks and the evidence behind "
                          "rules (not tests)"),
    "diff": Command("diff", "how two heads' turn-1 decisions differ on your public rows"),
    "encoder": Command("encoder", "encoder checkpoints (a tiny Qwen3 for tests and the demo)"),
    "evaluate": Command("evaluate", "score a submission against the king on the hidden "
                                    "benchmark (GPU)"),
    "fairness": Command("fairness", "simulate the crown rule, the overfit gate and disclosure: "
                                    "the fairness figures"),
    "gates": Command("gates", "run gates 0–4 on a pull request's submission (the PR bot)"),
    "gh": Command("gh", "GitHub steps of the workflows: PR data, comments, merges, pushes"),
    "grade": Command("grade", "grade a response, or a batch of cases, as the evaluator does"),
    "leaderboard": Command("leaderboard", "validate and update the leaderboard/ state"),
    "ledger": Command("ledger", "inspect cost ledgers"),
    "pack": Command("pack", "write a training run's head as your next submission folder"),
    "pool": Command("pool", "the LLM pool: serve the loopback simulator, or check the real one"),
    "preflight": Command("gates", "run gates 0–4 locally, exactly as the PR bot does"),
    "replay": Command("replay", "re-derive every verdict of a retired season from what "
                                "`reveal --season` published"),
    "reveal": Command("seal", "publish a retired split or season: its items, commitment salts "
                              "and the verdicts' private records"),
    "runner": Command("runner", "check that this machine can be the evaluation runner: "
                                "sandbox, GPU, encoder, sealed files, pool, disk, memory"),
    "score": Command("score", "score a head as the evaluator would, on your public rows; "
                              "with --king, whether it would take the crown"),
    "seal": Command("seal", "draw, answer and seal the hidden benchmark splits"),
    "serve": Command("serve", "serve the king (or any head) behind an OpenAI-compatible API: "
                              "each request plays the evaluator's loop against the pool"),
    "site": Command("site", "build the leaderboard site"),
    "train": Command("train", "train a routing head with separable CMA-ES"),
    "verify-benchmark": Command("seal", "decrypt the sealed benchmark and check it against "
                                        "the manifest"),
}


# The top-level help lists the commands by who runs them, with one example each.
AUDIENCES = (
    ("miner: practise, train a head and submit it",
     ("demo", "collect", "train", "score", "diff", "pack", "preflight", "baseline", "grade"),
     "tinyrouter train --benchmarks math500,mmlu,livecodebench --run-name first --data data"),
    ("maintainer: seal a season, run the evaluation runner, publish",
     ("seal", "verify-benchmark", "basis", "runner", "evaluate", "leaderboard", "site",
      "fairness", "reveal", "pool", "ledger", "encoder"),
     "tinyrouter leaderboard validate --repo ."),
    ("workflow: what the GitHub Actions jobs run",
     ("gates", "gh"),
     "tinyrouter gates --repo . --submission submissions/alice/1 --author alice --pr 7"),
    ("anyone: route your own traffic through the king, replay a retired season",
     ("serve", "replay"),
     "tinyrouter serve --king ."),
    ("developer: studies of the product (not tests)",
     ("dev",),
     "tinyrouter dev scale --sizes 100,1000"),
)


def commands_by_audience(width: int = 20, columns: int = 88) -> str:
    """The top-level help's list of commands, grouped by audience, each group's example last."""
    import textwrap

    out = []
    for title, names, example in AUDIENCES:
        out.append(title)
        for name in names:
            out += textwrap.wrap(COMMANDS[name].summary, columns, initial_indent=
                                 f"  {name:<{width - 2}}", subsequent_indent=" " * width)
        out += [f"  e.g. {example}", ""]
    return "\n".join(out) + "\n"


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows each option's default, except where there is none to show."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.default in (None, False, argparse.SUPPRESS) or "%(default)" in (action.help or ""):
            return action.help
        return super()._get_help_string(action)


class TopHelpFormatter(HelpFormatter):
    """The top-level help: its command list keeps its own lines."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        return "".join(indent + line for line in text.splitlines(keepends=True))


class Parser(argparse.ArgumentParser):
    """Every parser of the CLI, nested verbs included: defaults shown, help as description."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)

    def add_subparsers(self, **kwargs: object) -> argparse._SubParsersAction:
        kwargs.setdefault("parser_class", Parser)
        group = super().add_subparsers(**kwargs)
        add = group.add_parser

        def add_parser(name: str, **options: object) -> argparse.ArgumentParser:
            if "help" in options:
                options.setdefault("description", options["help"])
            return add(name, **options)

        group.add_parser = add_parser  # type: ignore[method-assign]
        return group


def _chosen(argv: Sequence[str]) -> str | None:
    """The subcommand named on the command line (the first word that is one)."""
    return next((word for word in argv if word in COMMANDS), None)


def _missing_extra(exc: ModuleNotFoundError, command: str | None) -> MissingExtraError | None:
    """The actionable error for an optional package that is not installed, else None."""
    package = (exc.name or "").split(".")[0]
    if package not in EXTRAS:
        return None
    extra = EXTRAS[package]
    return MissingExtraError(f"`tinyrouter {command}` needs {package}, from the {extra} extra: "
                             f"pip install 'tinyrouter[{extra}]'")


def _load(name: str):
    try:
        return importlib.import_module(f"evaluator.commands.{COMMANDS[name].module}")
    except ModuleNotFoundError as exc:
        missing = _missing_extra(exc, name)
        if missing is None:
            raise
        raise missing from exc


def build_parser(argv: Sequence[str] = ()) -> argparse.ArgumentParser:
    """The parser, with full options for the chosen subcommand and a summary for the others."""
    chosen = _chosen(argv)
    # the list of commands is only shown by the top-level help: not built when one is chosen
    listed = None if chosen else (commands_by_audience() + "`tinyrouter COMMAND --help` shows "
                                  "a command's options.")
    parser = Parser(prog="tinyrouter",
                    usage=None if chosen else "tinyrouter [--competition FILE] [-v] COMMAND ...",
                    description="TinyRouter: the open benchmark for LLM routing.",
                    epilog=listed, formatter_class=TopHelpFormatter)
    parser.add_argument("--version", action="version", version=f"tinyrouter {__version__}")
    add_global_options(parser, os.environ.get("TINYROUTER_COMPETITION"), False)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", help=argparse.SUPPRESS)
    for name, command in COMMANDS.items():
        if chosen not in (None, name):
            continue  # a parser per command takes longer to build than most commands run
        child = sub.add_parser(name, help=command.summary)
        if name == chosen:
            _load(name).PARSERS[name](child)
            # after the subcommand too; given there, they override what came before it
            for leaf in _parsers_under(child):
                add_global_options(leaf, argparse.SUPPRESS, argparse.SUPPRESS)
    return parser


def _parsers_under(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    """The parser and every nested verb's parser (`leaderboard apply`, `pool simulate`)."""
    nested = [choice for action in parser._actions
              if isinstance(action, argparse._SubParsersAction)
              for choice in action.choices.values()]
    return [parser] + [leaf for child in nested for leaf in _parsers_under(child)]


def add_global_options(parser: argparse.ArgumentParser, competition: object,
                       verbose: object) -> None:
    """--competition and --verbose, which every subcommand takes before or after its name."""
    parser.add_argument("--competition", metavar="FILE", default=competition,
                        help="JSON overrides of the rules (the demo's tiny encoder); "
                             "default: the official competition")
    parser.add_argument("-v", "--verbose", action="store_true", default=verbose,
                        help="debug logging")


def invocation(args: argparse.Namespace) -> str:
    """`tinyrouter` as this run was invoked: with its --competition, so a printed next step
    runs under the same rules when pasted."""
    import shlex

    return "tinyrouter" + (f" --competition {shlex.quote(args.competition)}"
                           if getattr(args, "competition", None) else "")


def competition_from(args: argparse.Namespace) -> Competition:
    """The rules a command runs under: official unless --competition names overrides."""
    if not args.competition:
        return OFFICIAL
    try:
        return Competition.load(args.competition)
    except (OSError, ValueError, TypeError) as exc:
        raise UsageError(f"--competition {args.competition}: {exc}") from exc


def _report_on_stdout(args: argparse.Namespace):
    """With a report written to `-` (`--json -`), human text goes to stderr; not under
    GitHub's log format, whose workflow commands belong on stdout."""
    from contextlib import nullcontext

    from evaluator.commands.output import STDOUT, text_to_stderr

    targets = (getattr(args, name, None) for name in ("json_out", "json", "comment"))
    if STDOUT in map(str, targets) and getattr(args, "format", "text") != "github":
        return text_to_stderr()
    return nullcontext()


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        parser = build_parser(argv)
    except MissingExtraError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(message)s", stream=sys.stderr)
    if not getattr(args, "func", None):
        parser.print_help()
        return EXIT_USAGE
    try:
        args.rules = competition_from(args)
        if getattr(args, "unsandboxed", False):  # the explicit opt-in, for this command only
            from evaluator.isolation import unsandboxed

            with unsandboxed(), _report_on_stdout(args):
                return int(args.func(args) or EXIT_OK)
        with _report_on_stdout(args):
            return int(args.func(args) or EXIT_OK)
    except UsageError as exc:
        print(f"usage error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except TinyRouterError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except ModuleNotFoundError as exc:
        missing = _missing_extra(exc, args.command)
        if missing is None:
            raise
        print(f"error: {missing}", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
