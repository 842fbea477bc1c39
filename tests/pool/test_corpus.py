"""The bundled demo corpus and persona skills: valid, gradable, and built so routing matters."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from collections import Counter, defaultdict

import pytest

from evaluator.benchmarks import get_benchmark
from evaluator.benchmarks.corpus import (
    CorpusError,
    CorpusItem,
    check_personas,
    expected_accuracy,
    load_corpus,
    load_personas,
    load_private_corpus,
    parse_line,
    private_about,
)
from evaluator.benchmarks.livecodebench import extract_program
from evaluator.pool.simulator import Simulator
from evaluator.rules import BENCHMARKS, OFFICIAL

# enough for the official pool with public train items left over
MIN_ITEMS = OFFICIAL.pool_size + 20
MIN_ORACLE_GAP = 0.10
MIN_CATEGORY_ROUTING_GAP = 0.20  # a head that reads the category wins by a wide margin


@pytest.fixture(scope="module")
def bundled() -> dict[str, list[CorpusItem]]:
    return {name: load_corpus(OFFICIAL, [name]) for name in BENCHMARKS}


@pytest.fixture(scope="module", params=["corpus", "private"])
def gradable(request) -> dict[str, list[CorpusItem]]:
    """The corpus, then the demo's private items: both must grade as labelled."""
    load = load_corpus if request.param == "corpus" else load_private_corpus
    return {name: load(OFFICIAL, [name]) for name in BENCHMARKS}


def test_the_private_items_are_never_among_the_corpus_items(bundled):
    private = load_private_corpus(OFFICIAL)
    known = {e.item.id for v in bundled.values() for e in v}
    prompts = {e.item.prompt for v in bundled.values() for e in v}
    assert private and not {e.item.id for e in private} & known
    assert not {e.item.prompt for e in private} & prompts
    assert set(private_about()) == set(BENCHMARKS)


@pytest.fixture(scope="module")
def skills() -> dict:
    return load_personas(OFFICIAL)


# Shape --------------------------------------------------------------------------------------


def test_the_private_items_are_like_the_corpus_in_their_mix_of_topics():
    """The audit stands for the pool on items nobody could collect: a different mix of topics
    would make an honest head's lead differ between the two, and look like memorising."""
    corpus, audit = load_corpus(OFFICIAL), load_private_corpus(OFFICIAL)
    for bench in BENCHMARKS:
        public = Counter(e.item.category for e in corpus if e.item.benchmark == bench)
        private = Counter(e.item.category for e in audit if e.item.benchmark == bench)
        assert set(private) == set(public), bench
        for category, count in private.items():
            share = public[category] / public.total()
            assert abs(count / private.total() - share) < 0.1, (bench, category)


def test_every_benchmark_has_enough_items_with_unique_ids_and_prompts(bundled):
    for name, entries in bundled.items():
        assert len(entries) >= MIN_ITEMS, name
        assert {e.item.benchmark for e in entries} == {name}
        assert len({e.item.prompt for e in entries}) == len(entries), name
    ids = [e.item.id for entries in bundled.values() for e in entries]
    assert len(set(ids)) == len(ids)


def test_default_load_is_every_benchmark_in_rule_order(bundled):
    everything = load_corpus(OFFICIAL)
    assert [e.item.benchmark for e in everything] == \
        [name for name in BENCHMARKS for _ in bundled[name]]


def test_categories_are_those_the_benchmarks_use(bundled):
    categories = {name: set(Counter(e.item.category for e in entries))
                  for name, entries in bundled.items()}
    assert {"Algebra", "Geometry", "Number Theory"} <= categories["math500"]
    assert categories["livecodebench"] == {"easy", "medium", "hard"}
    assert all(re.fullmatch(r"[a-z_]+", c) for c in categories["mmlu"])


def test_code_items_mix_stdin_and_functional_tests_and_both_call_styles(bundled):
    entries = bundled["livecodebench"]
    kinds = Counter(t["testtype"] for e in entries for t in e.item.reference["tests"])
    assert kinds["stdin"] > 0 and kinds["functional"] > 0
    functional = [e for e in entries if e.item.reference["fn_name"]]
    assert any("class Solution" in e.right for e in functional)
    assert any("class Solution" not in e.right for e in functional)
    assert max(len(e.item.reference["tests"]) for e in entries) <= 5  # kept fast to grade


# Grading: right responses are right, wrong ones wrong -------------------------------------------


def test_mmlu_right_and_wrong_responses_grade_as_such(gradable):
    grader = get_benchmark("mmlu")
    for e in gradable["mmlu"]:
        assert grader.grade(e.right, e.item.reference).correct, e.item.id
        assert not grader.grade(e.wrong, e.item.reference).correct, e.item.id


@pytest.mark.slow
def test_math_right_and_wrong_responses_grade_as_such(gradable):
    grader = get_benchmark("math500")
    for e in gradable["math500"]:
        assert e.right.rstrip().endswith("$.") and "\\boxed{" in e.right
        assert grader.grade(e.right, e.item.reference).correct, e.item.id
        assert not grader.grade(e.wrong, e.item.reference).correct, e.item.id


HARNESS = r"""
import contextlib, io, json, sys
def passes(code, reference):
    for test in reference["tests"]:
        out = io.StringIO()
        try:
            if test["testtype"] == "stdin":
                sys.stdin = io.StringIO(test["input"])
                with contextlib.redirect_stdout(out):
                    exec(code, {"__name__": "__main__"})
                if out.getvalue().split() != test["output"].split():
                    return False
            else:
                ns = {"__name__": "solution"}
                exec(code, ns)
                name = reference["fn_name"]
                fn = getattr(ns["Solution"](), name) if "Solution" in ns else ns[name]
                args = [json.loads(line) for line in test["input"].split("\n")]
                if json.loads(json.dumps(fn(*args))) != json.loads(test["output"]):
                    return False
        except Exception:
            return False
        finally:
            sys.stdin = sys.__stdin__
    return True
print(json.dumps([passes(code, ref) for code, ref in json.load(sys.stdin)]))
"""


def test_every_code_answer_passes_or_fails_its_tests_as_labelled(gradable):
    """All programs in one child process (our own code, not hostile): fast enough for every item."""
    entries = gradable["livecodebench"]
    jobs = [[extract_program(text), e.item.reference] for e in entries for text in (e.right, e.wrong)]
    done = subprocess.run([sys.executable, "-c", HARNESS], input=json.dumps(jobs), text=True,
                          capture_output=True, check=True, timeout=120)
    results = json.loads(done.stdout)
    failures = [(e.item.id, label) for i, e in enumerate(entries)
                for label, ok in (("right fails", not results[2 * i]), ("wrong passes", results[2 * i + 1]))
                if ok]
    assert failures == []


@pytest.mark.slow
def test_code_answers_grade_as_labelled_in_the_real_sandbox(bundled):
    """A sample per difficulty and test type through the real grader (a sandbox run per test)."""
    sample: dict[tuple[str, str], CorpusItem] = {}
    for e in bundled["livecodebench"]:
        sample.setdefault((e.item.category, e.item.reference["tests"][0]["testtype"]), e)
    grader = get_benchmark("livecodebench")
    for e in sample.values():
        assert grader.grade(e.right, e.item.reference).correct, e.item.id
        assert not grader.grade(e.wrong, e.item.reference).correct, e.item.id


# Persona skills: routing matters and is learnable from the question ------------------------------


def test_skills_cover_every_category_for_every_pool_model(bundled, skills):
    for name, entries in bundled.items():
        for category in {e.item.category for e in entries}:
            for model in OFFICIAL.pool_names:
                assert 0 <= skills["personas"][model][name][category] <= 1


@pytest.mark.parametrize("benchmark", BENCHMARKS)
def test_oracle_and_category_routing_beat_the_best_single_persona(bundled, skills, benchmark):
    acc = expected_accuracy(bundled[benchmark], skills, OFFICIAL.pool_names)
    best_single = max(acc["per_model"].values())
    assert acc["oracle"] - best_single >= MIN_ORACLE_GAP
    assert acc["by_category"] - best_single >= MIN_CATEGORY_ROUTING_GAP


def test_best_persona_differs_by_benchmark_and_by_category(bundled, skills):
    best_overall = set()
    for name, entries in bundled.items():
        acc = expected_accuracy(entries, skills, OFFICIAL.pool_names)
        best_overall.add(max(acc["per_model"], key=acc["per_model"].get))
        per_category = skills["personas"]
        best_by_category = {max(OFFICIAL.pool_names, key=lambda m: per_category[m][name][c])
                            for c in {e.item.category for e in entries}}
        assert len(best_by_category) >= 2, name
    assert len(best_overall) == len(BENCHMARKS)


def _words(text: str) -> Counter:
    return Counter(re.findall(r"[a-z]+", text.lower()))


def _cosine(a: Counter, b: Counter) -> float:
    dot = sum(v * b[k] for k, v in a.items())
    return dot / (math.sqrt(sum(v * v for v in a.values()) * sum(v * v for v in b.values())) or 1)


@pytest.mark.parametrize("benchmark", BENCHMARKS)
def test_category_is_readable_from_the_question_words(bundled, benchmark):
    """A bag-of-words nearest centroid, fit on half the items, names the category of the rest."""
    entries = bundled[benchmark]
    centroids: dict[str, Counter] = defaultdict(Counter)
    for e in entries[::2]:
        centroids[e.item.category] += _words(e.item.prompt)
    held_out = entries[1::2]
    hits = sum(max(centroids, key=lambda c: _cosine(_words(e.item.prompt), centroids[c]))
               == e.item.category for e in held_out)
    assert hits / len(held_out) >= 0.9


def test_the_simulator_finds_every_item_from_its_rendered_prompt(bundled, skills):
    everything = [e for entries in bundled.values() for e in entries]
    simulator = Simulator(everything, skills, rules=OFFICIAL)
    for e in everything:
        rendered = get_benchmark(e.item.benchmark).render_prompt(e.item)
        assert simulator.find(f"QUERY:\n{rendered}") is e, e.item.id


# Validation: a broken corpus or skills file is a clear error -------------------------------------

GOOD = {"benchmark": "mmlu", "id": "m-1", "prompt": "Q?\nA. a\nB. b\nC. c\nD. d",
        "reference": "B", "category": "astronomy",
        "responses": {"right": "Answer: B", "wrong": "Answer: C"}}
GOOD_CODE = {"benchmark": "livecodebench", "id": "c-1", "prompt": "Print 1.", "category": "easy",
             "reference": {"tests": [{"input": "", "output": "1\n", "testtype": "stdin"}],
                           "fn_name": None},
             "responses": {"right": "```python\nprint(1)\n```", "wrong": "```python\nprint(2)\n```"}}


def _with(base: dict, **changes) -> str:
    return json.dumps({**base, **changes})


@pytest.mark.parametrize(("line", "benchmark", "message"), [
    # not an item
    ("{", "mmlu", "not JSON"),
    (json.dumps({k: v for k, v in GOOD.items() if k != "responses"}), "mmlu", "expected exactly"),
    (_with(GOOD, extra=1), "mmlu", "expected exactly"),
    (_with(GOOD), "math500", "in the math500 file"),
    (_with(GOOD, id=""), "mmlu", "id must be"),
    (_with(GOOD, category=None), "mmlu", "category must be"),
    # responses
    (_with(GOOD, responses={"right": "Answer: B"}), "mmlu", "responses must be"),
    (_with(GOOD, responses={"right": "Answer: B", "wrong": "Answer: B"}), "mmlu", "the same"),
    # references per benchmark
    (_with(GOOD, reference="E"), "mmlu", "one letter"),
    (_with(GOOD, prompt="Q? a, b, c or d"), "mmlu", "lists the options"),
    (_with(GOOD, benchmark="math500", reference=""), "math500", "non-empty answer"),
    (_with(GOOD_CODE, reference={"tests": []}), "livecodebench", "livecodebench reference is"),
    (_with(GOOD_CODE, reference={"tests": [], "fn_name": None}), "livecodebench", "at least one"),
    (_with(GOOD_CODE, reference={"tests": [{"input": "", "output": 1, "testtype": "stdin"}],
                                 "fn_name": None}), "livecodebench", "each test is"),
    (_with(GOOD_CODE, reference={"tests": [{"input": "1", "output": "1", "testtype": "functional"}],
                                 "fn_name": None}), "livecodebench", "need fn_name"),
])
def test_a_malformed_line_is_rejected_with_its_reason(line, benchmark, message):
    with pytest.raises(CorpusError, match=message):
        parse_line(line, benchmark, "x.jsonl:1")


def test_a_valid_line_parses_into_an_item_with_both_responses():
    entry = parse_line(_with(GOOD_CODE), "livecodebench")
    assert entry.item.reference["tests"][0]["output"] == "1\n"
    assert entry.response(True) == entry.right and entry.response(False) == entry.wrong


def test_a_corpus_folder_with_duplicate_ids_is_rejected(tmp_path):
    (tmp_path / "mmlu.jsonl").write_text(_with(GOOD) + "\n" + _with(GOOD) + "\n", encoding="utf-8")
    with pytest.raises(CorpusError, match="duplicate item id 'm-1'"):
        load_corpus(OFFICIAL, ["mmlu"], root=tmp_path)


def test_a_missing_corpus_file_is_a_clear_error(tmp_path):
    with pytest.raises(CorpusError, match="cannot read corpus file"):
        load_corpus(OFFICIAL, ["mmlu"], root=tmp_path)


def test_another_corpus_folder_can_stand_in_for_the_bundled_one(tmp_path):
    (tmp_path / "mmlu.jsonl").write_text(_with(GOOD) + "\n\n" + _with(GOOD, id="m-2") + "\n",
                                         encoding="utf-8")
    assert [e.item.id for e in load_corpus(OFFICIAL, ["mmlu"], root=tmp_path)] == ["m-1", "m-2"]


def _personas(**overrides) -> dict:
    data = {m: {b: {"x": 0.5} for b in BENCHMARKS} for m in OFFICIAL.pool_names}
    data.update(overrides)
    return {"personas": data}


@pytest.mark.parametrize(("data", "message"), [
    ({}, "expected"),
    ({"personas": {}}, "no persona for"),
    (_personas(**{OFFICIAL.pool_names[0]: {"mmlu": {"x": 0.5}}}), "no skills for math500"),
    (_personas(**{OFFICIAL.pool_names[1]: {b: {"x": 1.5} for b in BENCHMARKS}}), "not a probability"),
    (_personas(**{OFFICIAL.pool_names[2]: {b: {"x": True} for b in BENCHMARKS}}), "not a probability"),
])
def test_malformed_skills_are_rejected(data, message):
    with pytest.raises(CorpusError, match=message):
        check_personas(data, OFFICIAL)


def test_skills_file_is_read_from_the_given_folder(tmp_path):
    (tmp_path / "personas.json").write_text(json.dumps(_personas()), encoding="utf-8")
    assert load_personas(OFFICIAL, root=tmp_path)["personas"][OFFICIAL.pool_names[0]]["mmlu"] == {"x": 0.5}
    (tmp_path / "personas.json").write_text("[", encoding="utf-8")
    with pytest.raises(CorpusError, match="cannot read persona skills"):
        load_personas(OFFICIAL, root=tmp_path)
