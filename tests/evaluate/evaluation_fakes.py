"""Offline fakes for evaluation tests: hidden sets with a known answer key, a linear router, a pool.

Items fall in two categories; model 0 answers category "c0" right, model 1 "c1", model 2
nothing. A head reading the category scores 1.0 cached, one that always picks model 0
scores 0.5. Every question and answer carries a SECRET marker the disclosure tests hunt.
"""

from __future__ import annotations

import dataclasses
import zlib
from pathlib import Path

import numpy as np

from evaluator.contenders import Contender
from evaluator.loop import LiveOutcome, coordinator_transcript
from evaluator.records import Partition
from evaluator.rules import OFFICIAL, ROLES
from evaluator.types import AnsweredItem, Decision, Item, ModelAnswer

# a tiny θ and the sizes of make_sets(), as the overrides a CLI run reads
# small halves make the eval/audit gap a coin toss: the overfit gate is off unless a test
# turns it on (STRICT)
SMALL = {"hidden_size": 8, "svf_scale_count": 8, "eval_size": 20, "audit_size": 10,
         "live_size": 6, "overfit_reject_gap": 1.0, "overfit_penalty_gap": 1.0}
RULES = dataclasses.replace(OFFICIAL, **SMALL)
STRICT = dataclasses.replace(RULES, overfit_reject_gap=OFFICIAL.overfit_reject_gap,
                             overfit_penalty_gap=OFFICIAL.overfit_penalty_gap)
CATEGORIES = ("c0", "c1")
SECRET = "SECRET"


def item(bench: str, split: str, i: int) -> Item:
    category = CATEGORIES[i % 2]
    return Item(benchmark=bench, id=f"{bench}-{split}-{i}", category=category,
                prompt=f"{SECRET}-QUESTION {bench} {split} {i} topic:{category}",
                reference=f"{SECRET}-REFERENCE-{i}")


def right_model(category: str) -> int:
    return CATEGORIES.index(category)


# the partition the tests draw, so they know which pool items land in the audit half
DRAWN = Partition(seed="0123456789abcdef" * 4, salt="fe" * 16)


def answered(it: Item, broken: bool = False) -> AnsweredItem:
    """Each category's own model is right, the others wrong; `broken`: model 1 (the c1
    specialist a routing head relies on) is wrong too."""
    answers = {}
    for m, name in enumerate(RULES.pool_names):
        correct = m == right_model(it.category) and not (broken and m == 1)
        answers[name] = ModelAnswer(text=f"{SECRET}-ANSWER {it.id} by {name}", correct=correct)
    return AnsweredItem(item=it, answers=answers)


def make_sets(n_live=6, broken_audit=(), rules=RULES):
    """Hidden sets: the pool, the live questions and the private audit; in `broken_audit`
    benchmarks a head that routes by category leads the best single model on the pool but not
    on the audit (as a head that memorised the public items would)."""
    sets = {}
    for bench in rules.benchmarks:
        sets[bench] = {
            "pool": [answered(item(bench, "pool", i)) for i in range(rules.pool_size)],
            "live": [item(bench, "live", i) for i in range(n_live)],
            "audit": [answered(item(bench, "audit", i), bench in broken_audit)
                      for i in range(rules.audit_size)]}
    return sets


def features(text: str) -> np.ndarray:
    """A bias, the category one-hot, and hashed noise: what a tiny encoder might see."""
    f = np.zeros(RULES.hidden_size)
    f[0] = 1.0
    for k, category in enumerate(CATEGORIES):
        f[1 + k] = float(f"topic:{category}" in text)
    f[3 + zlib.crc32(text.encode()) % 5] = 0.01
    return f


class LinearRouter:
    """argmax per logit group of head · features(text); counts calls and transcripts."""

    def __init__(self):
        self.calls = 0

    def decide(self, transcripts, theta, reuse=False):
        self.calls += 1
        head = np.asarray(theta[: RULES.n_head_params]).reshape(RULES.head_shape)
        decisions = []
        for text in transcripts:
            z = head @ features(text)
            decisions.append(Decision(RULES.pool_names[int(np.argmax(z[:3]))],
                                      ROLES[int(np.argmax(z[3:]))]))
        return decisions


def head_theta(route: dict[str | None, int], role: int = 1, noise: float = 0.0,
               own: int | None = None) -> np.ndarray:
    """θ of a head sending category → model (`None`: the default for every category); with
    `own`, items whose hashed feature `own` is set go to model 2 whatever their category: a
    fifth of them, the head's own choices (what a copy takes and a category router has not)."""
    head = np.zeros(RULES.head_shape)
    if None in route:
        head[route[None], 0] = 1.0
    for k, category in enumerate(CATEGORIES):
        if category in route:
            head[route[category], 1 + k] = 2.0
    if own is not None:
        head[2, 3 + own] = 500.0
    head[3 + role, 0] = 1.0
    head[:, 7] += noise
    return np.concatenate([head.reshape(-1), np.ones(RULES.svf_scale_count)])


SMART = {"c0": 0, "c1": 1}
ALWAYS_0 = {None: 0}
ALWAYS_2 = {None: 2}


class FakePool:
    """Plays live questions: right when turn 1 picks the category's model; records calls."""

    def __init__(self, turns: int = 2, cost: float = 0.001):
        self.turns, self.cost, self.calls = turns, cost, []

    def __call__(self, bench, items, policy):
        self.calls.append((bench, len(items)))
        decisions = policy([coordinator_transcript(it.prompt, []) for it in items])
        return [LiveOutcome(item_id=it.id, n_turns=self.turns, cost_usd=self.cost * self.turns,
                            seconds=1.5 * self.turns,
                            correct=RULES.pool_names.index(d.model) == right_model(it.category),
                            decisions=(d,) * self.turns)
                for it, d in zip(items, decisions, strict=True)]


def contender(route, miner="alice", generation=1, pr=12, role=1, noise=0.0):
    return Contender(miner=miner, generation=generation, theta=head_theta(route, role, noise),
                     pr=pr, head_sha="a" * 40)

FAST_KDF = {"log2_n": 10, "r": 1, "p": 1}


def train_items(bench: str, n: int = 40) -> list[Item]:
    """Public train items of the fake benchmark: both categories, none of them hidden."""
    return [item(bench, "train", i) for i in range(n)]


def seal_sets(directory: Path, sets: dict, password: str, repo: Path | None = None) -> Path:
    """Seal the fake sets the way `tinyrouter seal` does (a cheap KDF), with their public
    train items, and write the manifest into `repo`'s leaderboard when one is given."""
    from evaluator.baselines import from_answered
    from evaluator.benchmarks.sealing import (
        KdfParams,
        build_manifest,
        seal_split,
        sealed_path,
        write_train_items,
    )
    from evaluator.files import write_json
    from evaluator.store import Store

    entries = {}
    for bench, splits in sets.items():
        public = {split: {"count": len(rows), "commitment": seal_split(
            sealed_path(directory, bench, split), [r.to_dict() for r in rows], bench, split,
            password, KdfParams(**FAST_KDF))} for split, rows in splits.items()}
        train = train_items(bench)
        write_train_items(directory, bench, train)
        entries[bench] = {"splits": public, "train_ids": [i.id for i in train],
                          "baselines": from_answered(splits["pool"], RULES.pool_names),
                          "private": {"about": f"{len(splits['audit']) + len(splits['live'])} "
                                                   "items written for the tests"}}
    if repo is not None:
        write_json(Store(repo).file("manifest.json"), build_manifest(entries))
    return directory
