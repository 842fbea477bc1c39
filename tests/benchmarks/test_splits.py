"""Hidden splits: disjoint, sized by the rules, secret-seeded and independent of row order; the
audit and the live questions only from a private source that shares nothing with the public one."""

from __future__ import annotations

import dataclasses
import random

import pytest

from evaluator.benchmarks.splits import (
    SEED_ENV,
    draw_private,
    draw_splits,
    load_items,
    load_private,
    seed_from_env,
)
from evaluator.errors import BenchmarkError
from evaluator.rules import OFFICIAL, SPLITS
from evaluator.types import Item

SEED = "a-secret-seed-of-enough-length"
SMALL = dataclasses.replace(OFFICIAL, eval_size=10, audit_size=4, live_size=3)


def items(n: int, benchmark: str = "math500") -> list[Item]:
    return [Item(benchmark, f"q{i}", f"prompt {i}", str(i)) for i in range(n)]


def ids(split_items) -> list[str]:
    return [item.id for item in split_items]


def test_official_sizes_disjoint_and_train_withholds_a_reserve():
    drawn = draw_splits(items(500), SEED, rules=OFFICIAL)
    sizes = {s: len(drawn.hidden[s]) for s in SPLITS}
    assert sizes == {"pool": 2 * OFFICIAL.eval_size}
    hidden = [i for s in SPLITS for i in ids(drawn.hidden[s])]
    assert len(set(hidden)) == sum(sizes.values()) and not set(hidden) & set(drawn.train_ids)
    # half of what is left is published; the other half is withheld
    assert len(drawn.train_ids) == round((500 - sum(sizes.values())) * OFFICIAL.train_fraction)
    unpublished = set(ids(items(500))) - set(drawn.train_ids)
    assert set(hidden) < unpublished  # the complement of train is not the hidden set


def test_same_seed_same_draw_whatever_the_row_order():
    rows = items(60)
    shuffled = rows[:]
    random.Random(1).shuffle(shuffled)
    a, b = draw_splits(rows, SEED, SMALL), draw_splits(shuffled, SEED, SMALL)
    assert a.hidden == b.hidden
    assert sorted(a.train_ids) == sorted(b.train_ids)


@pytest.mark.parametrize("other", [
    # another seed
    dict(seed="another-secret-seed-value"),
    # the same seed on another benchmark draws differently
    dict(benchmark="mmlu"),
])
def test_draw_depends_on_seed_and_benchmark(other):
    base = draw_splits(items(60), SEED, SMALL)
    changed = draw_splits(items(60, other.get("benchmark", "math500")),
                          other.get("seed", SEED), SMALL)
    assert ids(base.hidden["pool"]) != ids(changed.hidden["pool"])


def test_excluded_items_are_in_no_split():
    drawn = draw_splits(items(30), SEED, SMALL, exclude={"q0", "q1"})
    everywhere = [i for s in SPLITS for i in ids(drawn.hidden[s])] + drawn.train_ids
    assert "q0" not in everywhere and "q1" not in everywhere
    # a pool of twice the eval items hidden, half of what is left for training
    hidden = 2 * SMALL.eval_size
    assert len(everywhere) == len(set(everywhere)) == hidden + (28 - hidden) // 2


@pytest.mark.parametrize("rows, message", [
    # fewer usable items than the hidden splits need
    (items(16), "need 20"),
    # duplicate ids would let one question sit in two splits
    (items(20) + items(1), "duplicate item ids"),
    # one draw per benchmark
    ([*items(20), Item("mmlu", "x", "p", "A")], "several benchmarks"),
    ([], "no items"),
])
def test_bad_inputs_are_clear_errors(rows, message):
    with pytest.raises(BenchmarkError, match=message):
        draw_splits(rows, SEED, SMALL)


@pytest.mark.parametrize("value", [None, "", "short"])
def test_seed_must_be_a_real_secret(monkeypatch, value):
    if value is None:
        monkeypatch.delenv(SEED_ENV, raising=False)
    else:
        monkeypatch.setenv(SEED_ENV, value)
    with pytest.raises(BenchmarkError, match=SEED_ENV):
        seed_from_env()


def test_seed_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv(SEED_ENV, SEED)
    assert seed_from_env() == SEED


def test_unknown_source_is_a_clear_error(tmp_path):
    with pytest.raises(BenchmarkError, match="no folder"):
        load_items("math500", str(tmp_path / "nowhere"), OFFICIAL)


def test_demo_source_is_the_bundled_corpus():
    loaded = load_items("mmlu", "demo", OFFICIAL)
    assert loaded and all(item.benchmark == "mmlu" for item in loaded)
    assert len({item.id for item in loaded}) == len(loaded)


def private(n: int, benchmark: str = "math500") -> list[Item]:
    return [Item(benchmark, f"private/p{i}", f"never published {i}", str(i)) for i in range(n)]


def test_audit_and_live_come_disjoint_from_the_private_source_in_the_seeds_order():
    source = private(10)
    drawn = draw_private(source, items(60), "math500", SEED, SMALL)
    assert {s: len(v) for s, v in drawn.items()} == {"audit": 4, "live": 3}
    assert not set(ids(drawn["audit"])) & set(ids(drawn["live"]))
    again = draw_private(source[::-1], items(60), "math500", SEED, SMALL)
    assert again == drawn
    other = draw_private(source, items(60), "math500", "another-secret-seed-value",
                         SMALL)
    assert ids(other["audit"]) + ids(other["live"]) != ids(drawn["audit"]) + ids(drawn["live"])


@pytest.mark.parametrize("source, message", [
    # a public question copied in under an id of its own: a miner could have its answers
    ([*private(7), Item("math500", "private/copy", "prompt 3", "3")],
     r"holds 1 item\(s\) of the public dataset \(e.g. 'prompt 3'\)"),
    ([*private(7), items(1)[0]], r"holds 1 item\(s\) of the public dataset"),
    (private(6), "holds 6 items; the rules draw 7 from it \\(audit 4, live 3\\)"),
    ([*private(7), Item("math500", "private/again", "never published 2", "2")],
     "the same question twice"),
    ([*private(7), Item("mmlu", "private/x", "other", "A")], "another benchmark"),
])
def test_a_private_source_that_is_not_private_or_too_small_is_refused(source, message):
    with pytest.raises(BenchmarkError, match=message):
        draw_private(source, items(60), "math500", SEED, SMALL)


def test_the_demos_private_source_covers_the_demos_audit_and_live_splits():
    demo = dataclasses.replace(OFFICIAL, eval_size=90, audit_size=60, live_size=60)
    for benchmark in OFFICIAL.benchmarks:
        public = load_items(benchmark, "demo", demo)
        source = load_private(benchmark, "demo", demo)
        drawn = draw_private(source.items, public, benchmark, SEED, demo)
        assert len(drawn["live"]) == 60 and source.about
