"""`tinyrouter dev grading`: the graders against an independent grader, and what bounding costs.

Agreement: the peer vectors (another routing benchmark's grading cases) graded by this
package's graders; `--agreement OUT` writes the figure the Benchmarks page publishes. Timing:
the demo corpus's math answers graded in this process with no limit, in the long-lived bounded
worker, and in a fresh worker per comparison; medians and ratios to the in-process figure.
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import time
from pathlib import Path
from typing import Any

from evaluator import isolation
from evaluator.commands.output import write_json_out
from evaluator.errors import UsageError

OUT_OF_SCOPE = {"aime", "mmlu_pro"}  # the peer's benchmarks that this competition does not run
BENCHMARK_OF = {"math": "math500", "choice": "mmlu", "code": "livecodebench"}
FRESH_ANSWERS = 10  # answers graded with a process started per comparison


def add_grading(p: argparse.ArgumentParser) -> None:
    p.description = ("Grade the peer vectors (--vectors) and report the agreement per benchmark "
                     "and the cases that disagree; time grading N math answers in process, in "
                     "the bounded worker and with a process per comparison (medians over R "
                     "runs, ratios from the same run). A study, not a test.")
    p.add_argument("--vectors", type=Path, metavar="FILE",
                   help="the peer grader's vectors (grader_vectors.json); without it, timing only")
    p.add_argument("--agreement", metavar="OUT",
                   help="with --vectors: write the agreement the site publishes here "
                        "(evaluator/benchmarks/agreement.json)")
    p.add_argument("--answers", "-N", type=int, default=200, metavar="N",
                   help="math answers to time (0: skip the timing)")
    p.add_argument("--repeats", "-R", type=int, default=5, metavar="R",
                   help="timed runs of each way (medians are reported)")
    p.add_argument("--json", metavar="OUT", help="also write the report here (- for stdout)")
    isolation.add_flag(p)
    p.set_defaults(func=run)


PARSERS = {"grading": add_grading}


def run(args: argparse.Namespace) -> int:
    if args.answers < 0 or args.repeats < 1:
        raise UsageError("--answers must be at least 0 and --repeats at least 1")
    if args.agreement and not args.vectors:
        raise UsageError("--agreement writes what --vectors measures: give both")
    report: dict[str, Any] = {}
    if args.vectors:
        agreement, disagreements = measure_agreement(args.vectors)
        report["agreement"] = agreement.to_dict() | {"share": round(agreement.share, 4)}
        report["disagreements"] = disagreements
        print(f"agreement: {agreement.agreeing} of {agreement.cases} cases "
              f"({agreement.share:.2%})")
        for name, (cases, agreeing) in sorted(agreement.counts.items()):
            print(f"  {name:<14} {agreeing} of {cases}")
        for case in disagreements:
            print(f"  disagrees: {json.dumps(case, ensure_ascii=False)}")
        write_json_out(args.agreement, agreement.to_dict())
    if args.answers:
        report["timing"] = time_grading(args.answers, args.repeats)
        for key, value in report["timing"].items():
            print(f"{key}: {value}")
    write_json_out(args.json, report)
    return 0


# Agreement ----------------------------------------------------------------------------------


def peer_cases(vectors: Path) -> list[tuple[dict[str, Any], bool]]:
    """The in-scope peer cases as `grade_batch` cases, each with the peer's verdict."""
    try:
        data = json.loads(vectors.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UsageError(f"cannot read the peer vectors {vectors}: {exc}") from exc
    cases = []
    for key, benchmark in BENCHMARK_OF.items():
        for case in data.get(key, []):
            if case.get("benchmark") in OUT_OF_SCOPE:
                continue
            reference = case["tests"] if key == "code" else case["reference"]
            cases.append(({"benchmark": benchmark, "response": case["response"],
                           "reference": reference}, bool(case["expected"])))
    return cases


def measure_agreement(vectors: Path):
    """(Agreement, the cases on which the graders disagree) over the peer vectors."""
    from evaluator.benchmarks import grade_batch
    from evaluator.benchmarks.agreement import Agreement

    cases = peer_cases(vectors)
    grades = grade_batch([case for case, _ in cases])
    counts: dict[str, list[int]] = {}
    disagreements = []
    for (case, expected), grade in zip(cases, grades, strict=True):
        row = counts.setdefault(case["benchmark"], [0, 0])
        row[0] += 1
        if grade.correct is expected:
            row[1] += 1
        else:
            disagreements.append({"benchmark": case["benchmark"], "expected": expected,
                                  "response": case["response"][:200],
                                  "reference": str(case["reference"])[:200],
                                  "extracted": grade.extracted, "error": grade.error})
    return Agreement({name: (n, agreeing) for name, (n, agreeing) in counts.items()}), disagreements


# Timing -------------------------------------------------------------------------------------


def time_grading(count: int, repeats: int) -> dict[str, Any]:
    """Median seconds to grade `count` demo math answers in process, in the bounded worker and
    with a process per comparison (the last on at most FRESH_ANSWERS answers, per answer)."""
    from evaluator.benchmarks.corpus import load_corpus
    from evaluator.benchmarks.math500 import Math500
    from evaluator.benchmarks.verifier import Verifier
    from evaluator.rules import OFFICIAL

    entries = load_corpus(OFFICIAL, ["math500"])
    pairs = [(answer, e.item.reference) for e in entries for answer in (e.right, e.wrong)][:count]
    worker = Verifier()
    started = time.perf_counter()
    worker.compare("1", "1")
    start_seconds = time.perf_counter() - started
    ways = {"in process": Math500(InProcess()), "bounded worker": Math500(worker),
            "process per comparison": Math500(FreshEach())}
    sizes = {way: len(pairs) for way in ways} | {"process per comparison":
                                                 min(len(pairs), FRESH_ANSWERS)}
    try:
        verdicts = {way: [g.correct for g in bench.grade_many(pairs[:sizes[way]])]
                    for way, bench in ways.items()}  # warm: sympy's caches, the worker
        if verdicts["bounded worker"] != verdicts["in process"]:
            raise UsageError("the bounded worker and math-verify in process disagree")
        medians = {way: statistics.median(_timed(bench, pairs[:sizes[way]])
                                          for _ in range(repeats))
                   for way, bench in ways.items()}
    finally:
        worker.close()
    per_answer = {way: medians[way] / sizes[way] for way in ways}
    base = per_answer["in process"]
    return {"answers": len(pairs), "repeats": repeats,
            "worker start s": round(start_seconds, 3),
            **{f"{way} s ({sizes[way]} answers)": round(medians[way], 3) for way in ways},
            **{f"{way} ms per answer": round(per_answer[way] * 1000, 2) for way in ways},
            **{f"{way} / in process": round(per_answer[way] / base, 2) for way in ways
               if way != "in process"}}


def _timed(bench: Any, pairs: list[tuple[str, str]]) -> float:
    started = time.perf_counter()
    bench.grade_many(pairs)
    return time.perf_counter() - started


class InProcess:
    """math-verify called in this process with no limit: how grading ran before its bound."""

    def __init__(self) -> None:
        logging.getLogger("math_verify").setLevel(logging.ERROR)  # "timeout is disabled"

    def compare(self, answer: str, reference: str):
        from evaluator.benchmarks.verifier import Comparison
        from evaluator.benchmarks.verify_worker import same

        return Comparison(same(answer, reference))


class FreshEach:
    """A new worker process per comparison: the naive way to bound one."""

    def compare(self, answer: str, reference: str):
        from evaluator.benchmarks.verifier import Verifier

        bound = Verifier()
        try:
            return bound.compare(answer, reference)
        finally:
            bound.close()
