"""`tinyrouter grade`: see how one response is graded, or grade a batch of cases."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from evaluator import isolation
from evaluator.benchmarks import BENCHMARK_REGISTRY, Grade, grade_batch
from evaluator.commands.output import write_json_out
from evaluator.errors import BenchmarkError, UsageError


def add_grade(parser: argparse.ArgumentParser) -> None:
    parser.description = ("Grade one response read from --response-file or stdin against "
                          "--reference, or grade a JSONL batch of cases (--batch). Prints one "
                          'JSON line {"correct", "extracted", "error"} per case; "error" says '
                          "why a case could not be graded (a bad case, a program the sandbox "
                          "refused, a math comparison past its time limit), and such a case is "
                          "wrong.")
    parser.add_argument("benchmark", nargs="?", choices=list(BENCHMARK_REGISTRY),
                        help="the benchmark whose grader to use (single mode)")
    parser.add_argument("--reference", metavar="REF",
                        help="the reference answer; for livecodebench a JSON object "
                             '{"tests": [...], "fn_name": ...} or @FILE holding it')
    parser.add_argument("--response-file", metavar="F", type=Path,
                        help="file holding the response (default: stdin)")
    parser.add_argument("--batch", metavar="CASES.jsonl",
                        help='JSONL of {"benchmark", "response", "reference"} ("-" for stdin)')
    parser.add_argument("--workers", type=int, default=None,
                        help="code programs graded at once (default and cap: the number of cores)")
    parser.add_argument("--json", dest="json_out", metavar="OUT",
                        help="also write the grades as one JSON document (- for standard output, "
                             "the lines then go to stderr): an object, or a list with --batch")
    isolation.add_flag(parser)
    parser.set_defaults(func=run)


PARSERS = {"grade": add_grade}


def run(args: argparse.Namespace) -> int:
    if args.batch:
        if args.benchmark or args.reference or args.response_file:
            raise UsageError("--batch takes no BENCHMARK, --reference or --response-file")
        return run_batch(args.batch, args.workers, args.json_out)
    if not args.benchmark or args.reference is None:
        raise UsageError("give BENCHMARK and --reference REF (or --batch CASES.jsonl)")
    response = _read_text(args.response_file)
    [grade] = grade_batch([{"benchmark": args.benchmark, "response": response,
                            "reference": _reference(args.benchmark, args.reference)}])
    print(_line(grade))
    if grade.detail:
        print(grade.detail, file=sys.stderr)
    write_json_out(args.json_out, grade.to_dict())
    return 0


def run_batch(source: str, workers: int | None, json_out: str | None = None) -> int:
    text = sys.stdin.read() if source == "-" else _read_text(Path(source))
    cases: list[Any] = []
    for number, line in enumerate(text.splitlines(), 1):
        try:
            cases.append(json.loads(line) if line.strip() else f"line {number} is empty")
        except ValueError as exc:
            cases.append(f"line {number} is not JSON: {exc}")
    graded = grade_batch([c if not isinstance(c, str) else {} for c in cases], workers)
    grades = [Grade(False, None, case) if isinstance(case, str) else grade
              for case, grade in zip(cases, graded, strict=True)]
    for grade in grades:
        print(_line(grade))
    write_json_out(json_out, [grade.to_dict() for grade in grades])
    return 0


def _reference(benchmark: str, text: str) -> Any:
    if text.startswith("@"):
        text = _read_text(Path(text[1:]))
    if benchmark != "livecodebench":
        return text
    try:
        return json.loads(text)
    except ValueError as exc:
        raise BenchmarkError(f"a livecodebench reference must be JSON: {exc}") from exc


def _read_text(path: Path | None) -> str:
    if path is None:
        return sys.stdin.read()
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise BenchmarkError(f"cannot read {path}: {exc}") from exc


def _line(grade: Grade) -> str:
    return json.dumps(grade.to_dict(), sort_keys=True)
