"""The bundled demo corpus: items written for this project, each with a right and a subtly
wrong full Worker response, and the persona skills the loopback simulator plays.

Files live in `evaluator/data/corpus/`: `<benchmark>.jsonl` (one item per line: the `Item`
fields plus `"responses": {"right", "wrong"}`), `private/<benchmark>.jsonl` (the demo's
private source, never among the corpus's items, that the audit and the live questions are drawn
from, in the same format, with `private/about.json` saying what it is) and `personas.json`
(`{"personas": {<pool model>: {<benchmark>: {<category>: p_correct}}}}`). Skills are set so
routing matters: per benchmark a different persona is best overall, and within a benchmark
each category has its own specialist, so a head that reads the question beats any single model.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from evaluator.errors import CorpusError
from evaluator.rules import Competition
from evaluator.types import Item

PERSONAS_FILE = "personas.json"
ITEM_KEYS = frozenset({"benchmark", "id", "prompt", "reference", "category", "responses"})
CHOICE_LETTERS = "ABCD"
TEST_TYPES = ("stdin", "functional")


@dataclass(frozen=True)
class CorpusItem:
    """A corpus item and the two full Worker responses the simulator may give for it."""

    item: Item
    right: str
    wrong: str

    def response(self, correct: bool) -> str:
        return self.right if correct else self.wrong


def corpus_dir() -> Path:
    """The bundled corpus folder inside the installed package."""
    return Path(str(resources.files("evaluator").joinpath("data", "corpus")))


def load_corpus(rules: Competition, benchmarks: Iterable[str] | None = None,
                root: str | Path | None = None) -> list[CorpusItem]:
    """The corpus items of `benchmarks` (default: every benchmark of the rules), file order."""
    folder = Path(root) if root is not None else corpus_dir()
    names = tuple(benchmarks) if benchmarks is not None else rules.benchmarks
    return [entry for name in names for entry in _read_benchmark(folder / f"{name}.jsonl", name)]


PRIVATE_FOLDER, ABOUT_FILE = "private", "about.json"


def load_private_corpus(rules: Competition, benchmarks: Iterable[str] | None = None
                        ) -> list[CorpusItem]:
    """The demo's private items (`corpus/private/`), the audit and live questions are drawn
    from: written for the demo like the corpus, but never among its items, so no demo miner can
    have collected answers for them."""
    return load_corpus(rules, benchmarks, corpus_dir() / PRIVATE_FOLDER)


def private_about() -> dict[str, str]:
    """Per benchmark, what the demo's private source is made of, as the manifest publishes it."""
    path = corpus_dir() / PRIVATE_FOLDER / ABOUT_FILE
    try:
        return dict(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError) as exc:
        raise CorpusError(f"cannot read {path}: {exc}") from exc


def load_personas(rules: Competition, root: str | Path | None = None) -> dict[str, Any]:
    """The persona skills `{"personas": {model: {benchmark: {category: p}}}}`, validated."""
    path = (Path(root) if root is not None else corpus_dir()) / PERSONAS_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise CorpusError(f"cannot read persona skills {path}: {exc}") from exc
    check_personas(data, rules)
    return data


def skill(personas: dict[str, Any], model: str, item: Item) -> float:
    """The probability that `model`'s persona answers `item` correctly."""
    try:
        return float(personas["personas"][model][item.benchmark][item.category])
    except KeyError:
        raise CorpusError(f"no skill for {model} on {item.benchmark}/{item.category!r}; "
                          f"add it to {PERSONAS_FILE}") from None


# Reading and validation -----------------------------------------------------------------


@lru_cache(maxsize=16)
def _read_cached(path: Path, benchmark: str) -> tuple[CorpusItem, ...]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise CorpusError(f"cannot read corpus file {path}: {exc}") from exc
    entries = tuple(parse_line(line, benchmark, f"{path.name}:{number}")
                    for number, line in enumerate(lines, 1) if line.strip())
    seen: set[str] = set()
    for entry in entries:
        if entry.item.id in seen:
            raise CorpusError(f"{path.name}: duplicate item id {entry.item.id!r}")
        seen.add(entry.item.id)
    if not entries:
        raise CorpusError(f"{path.name}: no items")
    return entries


def _read_benchmark(path: Path, benchmark: str) -> list[CorpusItem]:
    return list(_read_cached(path.resolve(), benchmark))


def read_corpus(path: str | Path) -> list[CorpusItem]:
    """The items of one corpus file of any benchmarks (`pool simulate --corpus FILE`)."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise CorpusError(f"cannot read corpus file {path}: {exc}") from exc
    entries = []
    for number, line in enumerate(lines, 1):
        if line.strip():
            try:
                benchmark = str(json.loads(line).get("benchmark"))
            except (ValueError, AttributeError):
                benchmark = ""
            entries.append(parse_line(line, benchmark, f"{Path(path).name}:{number}"))
    return entries


def parse_line(line: str, benchmark: str, where: str = "corpus") -> CorpusItem:
    """One corpus line as a CorpusItem; raises CorpusError saying what is wrong and where."""
    try:
        data = json.loads(line)
    except ValueError as exc:
        raise CorpusError(f"{where}: not JSON ({exc})") from exc
    problem = item_problem(data, benchmark)
    if problem:
        raise CorpusError(f"{where}: {problem}")
    responses = data["responses"]
    return CorpusItem(Item.from_dict(data), responses["right"], responses["wrong"])


def item_problem(data: Any, benchmark: str) -> str | None:
    """Why a decoded corpus line is not a valid item of `benchmark`, or None."""
    if not isinstance(data, dict) or set(data) != ITEM_KEYS:
        return f"expected exactly the keys {', '.join(sorted(ITEM_KEYS))}"
    if data["benchmark"] != benchmark:
        return f"benchmark {data['benchmark']!r} in the {benchmark} file"
    for key in ("id", "prompt", "category"):
        if not isinstance(data[key], str) or not data[key].strip():
            return f"{key} must be a non-empty string"
    responses = data["responses"]
    if not isinstance(responses, dict) or set(responses) != {"right", "wrong"} or \
            not all(isinstance(v, str) and v.strip() for v in responses.values()):
        return 'responses must be {"right": str, "wrong": str}, both non-empty'
    if responses["right"] == responses["wrong"]:
        return "the right and wrong responses are the same"
    check = REFERENCE_CHECKS.get(benchmark)
    return check(data["prompt"], data["reference"]) if check else None


def _math_problem(prompt: str, reference: Any) -> str | None:
    if not isinstance(reference, str) or not reference.strip():
        return "a math500 reference is a non-empty answer string"
    return None


def _mmlu_problem(prompt: str, reference: Any) -> str | None:
    if reference not in tuple(CHOICE_LETTERS):
        return f"an mmlu reference is one letter of {CHOICE_LETTERS}"
    lines = prompt.splitlines()
    if not all(any(line.startswith(f"{letter}. ") for line in lines) for letter in CHOICE_LETTERS):
        return f"an mmlu prompt lists the options as lines {', '.join(CHOICE_LETTERS)}: 'X. ...'"
    return None


def _code_problem(prompt: str, reference: Any) -> str | None:
    if not isinstance(reference, dict) or set(reference) != {"tests", "fn_name"}:
        return 'a livecodebench reference is {"tests": [...], "fn_name": str | null}'
    tests, fn_name = reference["tests"], reference["fn_name"]
    if not isinstance(tests, list) or not tests:
        return "a livecodebench reference needs at least one test"
    for test in tests:
        if not isinstance(test, dict) or set(test) != {"input", "output", "testtype"} or \
                not isinstance(test["input"], str) or not isinstance(test["output"], str) or \
                test["testtype"] not in TEST_TYPES:
            return 'each test is {"input": str, "output": str, "testtype": "stdin"|"functional"}'
    if any(t["testtype"] == "functional" for t in tests) and not isinstance(fn_name, str):
        return "functional tests need fn_name"
    return None


REFERENCE_CHECKS = {"math500": _math_problem, "mmlu": _mmlu_problem,
                    "livecodebench": _code_problem}


def check_personas(data: Any, rules: Competition) -> None:
    """Every pool model has a skill in [0, 1] per category of every benchmark of the rules."""
    personas = data.get("personas") if isinstance(data, dict) else None
    if not isinstance(personas, dict):
        raise CorpusError(f'{PERSONAS_FILE}: expected {{"personas": {{model: ...}}}}')
    missing = [name for name in rules.pool_names if name not in personas]
    if missing:
        raise CorpusError(f"{PERSONAS_FILE}: no persona for {', '.join(missing)}")
    for model in rules.pool_names:
        for benchmark in rules.benchmarks:
            skills = personas[model].get(benchmark) if isinstance(personas[model], dict) else None
            if not isinstance(skills, dict) or not skills:
                raise CorpusError(f"{PERSONAS_FILE}: {model} has no skills for {benchmark}")
            for category, p in skills.items():
                if isinstance(p, bool) or not isinstance(p, (int, float)) or \
                        not math.isfinite(p) or not 0 <= p <= 1:
                    raise CorpusError(f"{PERSONAS_FILE}: {model}/{benchmark}/{category}: "
                                      f"skill {p!r} is not a probability")


# What the skills imply ------------------------------------------------------------------


def expected_accuracy(entries: Sequence[CorpusItem], personas: dict[str, Any],
                      models: Sequence[str]) -> dict[str, Any]:
    """Expected accuracies over `entries` when personas answer independently: each model
    alone, the per-item oracle (any model right), and routing by category to its best model."""
    if not entries:
        raise CorpusError("no items to compute expected accuracies over")
    per_model = {m: 0.0 for m in models}
    oracle = by_category = 0.0
    for entry in entries:
        ps = [skill(personas, m, entry.item) for m in models]
        for m, p in zip(models, ps, strict=True):
            per_model[m] += p
        oracle += 1 - math.prod(1 - p for p in ps)
        by_category += max(ps)
    n = len(entries)
    return {"per_model": {m: v / n for m, v in per_model.items()}, "oracle": oracle / n,
            "by_category": by_category / n}
