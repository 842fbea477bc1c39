"""The benchmarks, by name: load upstream rows, render prompts, grade responses."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from evaluator.benchmarks.base import Benchmark, Grade
from evaluator.benchmarks.livecodebench import LiveCodeBench
from evaluator.benchmarks.math500 import Math500
from evaluator.benchmarks.mmlu import MMLU
from evaluator.errors import BenchmarkError

BENCHMARK_REGISTRY: dict[str, type[Benchmark]] = {
    cls.name: cls for cls in (Math500, MMLU, LiveCodeBench)
}


def get_benchmark(name: str) -> Benchmark:
    """The benchmark called `name` (one of rules.BENCHMARKS)."""
    try:
        return BENCHMARK_REGISTRY[name]()
    except KeyError:
        raise BenchmarkError(f"unknown benchmark {name!r}; expected one of "
                             f"{', '.join(BENCHMARK_REGISTRY)}") from None


def runs_code(names: list[str]) -> bool:
    """Whether grading any of these benchmarks runs code a model wrote (in the sandbox)."""
    return any(BENCHMARK_REGISTRY[name].runs_code for name in names if name in BENCHMARK_REGISTRY)


def grade_batch(cases: list[Any], workers: int | None = None) -> list[Grade]:
    """Grade `{"benchmark", "response", "reference"}` cases, in order; a bad case is wrong
    with an error, never an exception. Code cases run in parallel, bounded by cores."""
    grades: list[Grade | None] = [None] * len(cases)
    groups: dict[str, list[int]] = defaultdict(list)
    for index, case in enumerate(cases):
        problem = _case_problem(case)
        if problem:
            grades[index] = Grade(False, None, problem)
        else:
            groups[case["benchmark"]].append(index)
    for name, indexes in groups.items():
        pairs = [(cases[i]["response"], cases[i]["reference"]) for i in indexes]
        graded = get_benchmark(name).grade_many(pairs, workers)  # a pair that raises is wrong
        for index, grade in zip(indexes, graded, strict=True):
            grades[index] = grade
    return [g for g in grades if g is not None]


def _case_problem(case: Any) -> str | None:
    if not isinstance(case, dict):
        return "a case must be a JSON object"
    if "benchmark" in case and str(case["benchmark"]) not in BENCHMARK_REGISTRY:
        return (f"unknown benchmark {case['benchmark']!r}; expected one of "
                f"{', '.join(BENCHMARK_REGISTRY)}")
    missing = [k for k in ("benchmark", "response", "reference") if k not in case]
    if missing:
        return f"missing {', '.join(missing)}"
    if not isinstance(case["response"], str):
        return "response must be a string"
    return None


__all__ = ["BENCHMARK_REGISTRY", "Benchmark", "Grade", "get_benchmark", "grade_batch", "runs_code"]
