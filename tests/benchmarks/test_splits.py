"""Hidden splits: disjoint, sized by the rules, secret-seeded and independent of row order."""

from __future__ import annotations

import dataclasses
import random

import pytest

from evaluator.benchmarks.splits import SEED_ENV, draw_splits, load_items, seed_from_env
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
    assert sizes == {"pool": OFFICIAL.eval_size + OFFICIAL.audit_size, "live": OFFICIAL.live_size}
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
    # a pool of twice the eval items and the live split hidden, half of what is left for training
    hidden = 2 * SMALL.eval_size + SMALL.live_size
    assert len(everywhere) == len(set(everywhere)) == hidden + (28 - hidden) // 2


@pytest.mark.parametrize("rows, message", [
    # fewer usable items than the hidden splits need
    (items(16), "need 23"),
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
