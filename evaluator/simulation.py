"""One evaluation, simulated: the model behind the fairness figures (evaluator/fairness.py).

A correctness matrix gives each pool model's chance of answering each item right. A trial draws
a hidden benchmark from it as sealing does, heads as one model choice per item, and this
evaluation's halves, then scores and decides the match with `evaluator.verdict`: exactly the
code an evaluation runs. Live play is modelled two ways: **independent** re-runs of the king's
sessions (grades flip with chance `RERUN_FLIP`) and **shared** responses; the Fairness page
documents the other modelling choices.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from evaluator.baselines import matrix_from_json
from evaluator.errors import BaselineError
from evaluator.records import KING, REJECTED
from evaluator.rules import ROLES, Competition
from evaluator.scoring import (
    Measured,
    judge_gap,
    novelty,
    overfit_gap,
)
from evaluator.types import Decision
from evaluator.verdict import MORE, Verdict, judge, through_stage

REFERENCE_ACCURACY = 0.6
# the chance two runs of one call get different grades: the peer data's repeated samples
# disagree on 0.10 (MATH-500, 5 samples) and 0.19 (MMLU, 3 samples) of pairs; their middle
RERUN_FLIP = 0.15
INDEPENDENT, SHARED = "independent", "shared"
TURNS, TURN_WEIGHTS = np.array([1, 2, 3]), np.array([0.25, 0.5, 0.25])


@dataclass(frozen=True)
class Matrix:
    """Per benchmark, an (items, models) array of each model's chance to answer right."""

    source: str
    p: dict[str, np.ndarray]
    # what a head can learn of each item's chances (the demo: its category's persona skills);
    # None: the chances themselves
    known: dict[str, np.ndarray] | None = None

    @functools.cached_property
    def live(self) -> dict[str, np.ndarray]:
        """Per benchmark, each live call's chance of a right answer (`rerun_chance`)."""
        return {bench: rerun_chance(p) for bench, p in self.p.items()}

    def learnable(self, bench: str) -> np.ndarray:
        return self.p[bench] if self.known is None else self.known[bench]

    def check(self, rules: Competition) -> None:
        for bench, p in self.p.items():
            if p.ndim != 2 or p.shape[1] != rules.n_models or len(p) == 0:
                raise BaselineError(f"the {bench} matrix must have one column per pool model "
                                    f"({rules.n_models}); it has shape {p.shape}")


def demo_matrix(rules: Competition) -> Matrix:
    """The demo corpus: whether each persona's first Worker answer is right (0 or 1)."""
    from evaluator.pool.simulator import bundled_simulator

    sim = bundled_simulator(rules)
    by_bench: dict[str, list[list[float]]] = {b: [] for b in rules.benchmarks}
    skills: dict[str, list[list[float]]] = {b: [] for b in rules.benchmarks}
    for entry in sim.entries:
        item = entry.item
        if item.benchmark in by_bench:
            by_bench[item.benchmark].append(
                [float(sim.worker_right(m, item)) for m in rules.pool_names])
            skills[item.benchmark].append(
                [sim.skill(m, item.benchmark, item.category) for m in rules.pool_names])
    return Matrix("the demo corpus", {b: np.array(rows) for b, rows in by_bench.items() if rows},
                  {b: np.array(rows) for b, rows in skills.items() if rows})


def read_matrix(paths: Sequence[Path], rules: Competition) -> Matrix:
    """Matrices in the `{"benchmark", "tasks": [{"id", "per_model": {model: [0|1, ...]}}]}`
    format, one file per benchmark; each cell's chance is the mean of its samples."""
    p = {}
    for path in paths:
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise BaselineError(f"cannot read the correctness matrix {path}: {exc}") from exc
        bench = data.get("benchmark") if isinstance(data, dict) else None
        if not isinstance(bench, str) or not bench:
            raise BaselineError(f"{path} names no 'benchmark'")
        if bench in p:
            raise BaselineError(f"two matrices for {bench}")
        p[bench] = matrix_from_json(data).means()
    matrix = Matrix(", ".join(Path(x).name for x in paths), p)
    matrix.check(rules)
    return matrix


def reference_matrix(rules: Competition, accuracy: float = REFERENCE_ACCURACY) -> Matrix:
    """Every model right with the same chance on every item: a head of exactly that accuracy."""
    shape = (cached_size(rules), rules.n_models)
    return Matrix(f"accuracy {accuracy}", {b: np.full(shape, accuracy) for b in rules.benchmarks})


def cached_size(rules: Competition) -> int:
    """The cached items an evaluation grades per benchmark: the pool (its eval half and the
    rest) and the audit."""
    return rules.pool_size + rules.audit_size


def rules_for(matrix: Matrix, rules: Competition) -> Competition:
    """The rules over the benchmarks the matrix has (peer data lacks livecodebench)."""
    benches = tuple(b for b in rules.benchmarks if b in matrix.p) or tuple(matrix.p)
    return dataclasses.replace(rules, benchmarks=benches)


# ---------------------------------------------------------------- one hidden benchmark


@dataclass(frozen=True)
class Hidden:
    """One drawn hidden benchmark: per benchmark the chances and the drawn 0/1 correctness of
    every model on the cached items (the pool, then the audit) and on the live split; `rerun`
    is a second, independent run of every live call (the king's, when live play is not
    shared); `known` and `known_live` what a head can learn of each cached and live item's
    chances (`Matrix.known`), what generalises beyond the drawn items."""

    p_pool: dict[str, np.ndarray]
    p_live: dict[str, np.ndarray]
    pool: dict[str, np.ndarray]
    live: dict[str, np.ndarray]
    rerun: dict[str, np.ndarray]
    known: dict[str, np.ndarray] = dataclasses.field(default_factory=dict)
    known_live: dict[str, np.ndarray] = dataclasses.field(default_factory=dict)


def rerun_chance(p: np.ndarray, flip: float = RERUN_FLIP) -> np.ndarray:
    """Each live call's chance of a right answer: the matrix's, moved toward one half where the
    matrix is surer than a provider is, so that two independent runs of a call disagree (with
    chance 2q(1 − q)) at least `flip` of the time on average; a 0/1 matrix, like the demo
    corpus's, gets exactly that."""
    def spread(edge: float) -> float:
        q = p + edge * (1 - 2 * p)
        return float((2 * q * (1 - q)).mean())

    if spread(0.0) >= flip:
        return p
    low, high = 0.0, 0.5
    for _ in range(40):
        mid = (low + high) / 2
        low, high = (mid, high) if spread(mid) < flip else (low, mid)
    return p + high * (1 - 2 * p)


def draw_hidden(matrix: Matrix, rules: Competition, rng: np.random.Generator) -> Hidden:
    parts: dict[str, dict[str, np.ndarray]] = {
        k: {} for k in ("p_pool", "p_live", "pool", "live", "rerun", "known", "known_live")}
    for bench in rules.benchmarks:
        cached = cached_size(rules)
        need = cached + rules.live_size
        picks = rng.choice(len(matrix.p[bench]), need, replace=len(matrix.p[bench]) < need)
        pool = matrix.p[bench][picks[:cached]]
        live = matrix.live[bench][picks[cached:]]
        parts["p_pool"][bench], parts["p_live"][bench] = pool, live
        parts["known"][bench] = matrix.learnable(bench)[picks[:cached]]
        parts["known_live"][bench] = matrix.learnable(bench)[picks[cached:]]
        parts["pool"][bench] = rng.random(pool.shape) < pool
        parts["live"][bench] = rng.random(live.shape) < live
        parts["rerun"][bench] = rng.random(live.shape) < live
    return Hidden(**parts)


Halves = dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]


def draw_halves(rules: Competition, rng: np.random.Generator) -> Halves:
    """This evaluation's eval items, audit items and the pool's unscored rest of every
    benchmark, as indices into the drawn cached items: the first `pool_size` of them are the
    pool, drawn from the public dataset, split afresh into eval and rest; the others are the
    audit, the same all season (what a memoriser could not collect)."""
    halves = {}
    audit = np.arange(rules.pool_size, cached_size(rules))
    for bench in rules.benchmarks:
        order = rng.permutation(rules.pool_size)
        halves[bench] = (order[:rules.eval_size], audit, order[rules.eval_size:])
    return halves


@dataclass(frozen=True)
class Choices:
    """Per benchmark: the model chosen for each pool item, for each live item, and the turns
    each live item takes."""

    pool: dict[str, np.ndarray]
    live: dict[str, np.ndarray]
    turns: dict[str, np.ndarray]


def best_single(hidden: Hidden, matrix: Matrix, rules: Competition) -> Choices:
    """The head that always picks the matrix's best model of each benchmark."""
    best = {b: int(np.argmax(matrix.p[b].mean(axis=0))) for b in rules.benchmarks}
    return Choices(pool={b: np.full(cached_size(rules), best[b]) for b in rules.benchmarks},
                live={b: np.full(rules.live_size, best[b]) for b in rules.benchmarks},
                turns={b: np.full(rules.live_size, 2) for b in rules.benchmarks})


def router(hidden: Hidden, rules: Competition) -> Choices:
    """The head that learnt the task: on each item the model whose chance it can learn is
    highest (`Hidden.known`)."""
    def pick(p: np.ndarray) -> np.ndarray:
        return np.argmax(p, axis=1)

    return Choices(pool={b: pick(hidden.known[b]) for b in rules.benchmarks},
                   live={b: pick(hidden.p_live[b]) for b in rules.benchmarks},
                   turns={b: np.full(rules.live_size, 2) for b in rules.benchmarks})


def draw_turns(n: int, rng: np.random.Generator) -> np.ndarray:
    return rng.choice(TURNS, n, p=TURN_WEIGHTS)


def equal_pair(base: Choices, disagreement: float, rules: Competition,
               rng: np.random.Generator) -> tuple[Choices, Choices]:
    """(king, challenger) of equal true quality: on a `disagreement` share of items they pick
    two different models, drawn as an ordered pair, so either head is as likely to hold the
    better one; elsewhere both pick the base head's model and take the same turns."""
    heads: tuple[dict, dict] = ({"pool": {}, "live": {}, "turns": {}},
                                {"pool": {}, "live": {}, "turns": {}})
    models = rules.n_models
    for bench in rules.benchmarks:
        for part in ("pool", "live"):
            base_choice = getattr(base, part)[bench]
            differ = rng.random(base_choice.size) < disagreement
            first = rng.integers(0, models, base_choice.size)
            second = (first + rng.integers(1, models, base_choice.size)) % models
            heads[0][part][bench] = np.where(differ, first, base_choice)
            heads[1][part][bench] = np.where(differ, second, base_choice)
            if part == "live":
                shared = draw_turns(base_choice.size, rng)
                heads[0]["turns"][bench] = shared
                heads[1]["turns"][bench] = np.where(differ, draw_turns(base_choice.size, rng),
                                                    shared)
    return Choices(**heads[0]), Choices(**heads[1])


def improved(head: Choices, hidden: Hidden, share: float, rules: Competition,
             rng: np.random.Generator) -> Choices:
    """The head with each item's choice moved, with chance `share`, to the model most likely
    right on it (a real improvement: the chances, not this draw's outcomes, decide)."""
    parts: dict[str, dict[str, np.ndarray]] = {"pool": {}, "live": {}}
    for bench in rules.benchmarks:
        for part, p in (("pool", hidden.p_pool[bench]), ("live", hidden.p_live[bench])):
            choice = getattr(head, part)[bench]
            moves = rng.random(choice.size) < share
            parts[part][bench] = np.where(moves, np.argmax(p, axis=1), choice)
    return Choices(parts["pool"], parts["live"], head.turns)


def memorised(head: Choices, hidden: Hidden, share: float, rules: Competition,
              rng: np.random.Generator) -> Choices:
    """The head fitted to the public pool's collected answers: on each pool item, with chance
    `share`, a model whose cached answer was right there (when one was); the audit and live
    items, which were never published, as the head had them."""
    pool = {}
    for bench in rules.benchmarks:
        choice = head.pool[bench].copy()
        right = hidden.pool[bench][:rules.pool_size]
        moves = (rng.random(rules.pool_size) < share) & right.any(axis=1)
        choice[:rules.pool_size] = np.where(moves, np.argmax(right, axis=1),
                                            choice[:rules.pool_size])
        pool[bench] = choice
    return Choices(pool, head.live, head.turns)


def memorised_share(head: Choices, hidden: Hidden, lead: float, rules: Competition) -> float:
    """The share `memorised` needs to raise the head's accuracy on the pool by `lead` (at
    most all of it), on this draw."""
    gains = []
    for bench in rules.benchmarks:
        right = hidden.pool[bench][:rules.pool_size]
        mine = right[np.arange(rules.pool_size), head.pool[bench][:rules.pool_size]]
        gains.append(float((right.any(axis=1) & ~mine).mean()))
    room = float(np.mean(gains))
    return 1.0 if room <= lead else lead / room


def improvement_slope(matrix: Matrix, disagreement: float, rules: Competition) -> float:
    """The true composite gain of `improved(share=1)` over an `equal_pair` challenger, in
    expectation: per benchmark the accuracy it adds on cached and on live items, times what
    each is worth."""
    def gain(p: np.ndarray, best: int) -> float:
        top = p.max(axis=1)
        # the challenger picks the base model, or (on disagreement) any model, each equally
        any_model = (top[:, None] - p).mean(axis=1)
        return float(((1 - disagreement) * (top - p[:, best]) + disagreement * any_model).mean())

    mean_turns = float(TURNS @ TURN_WEIGHTS)
    spare = max(0.0, (rules.max_turns - mean_turns) / (rules.max_turns - 1))
    gains = []
    for bench in rules.benchmarks:
        best = int(np.argmax(matrix.p[bench].mean(axis=0)))
        gains.append(rules.weight_cached * gain(matrix.p[bench], best)
                     + (rules.weight_live + rules.weight_efficiency * spare)
                     * gain(matrix.live[bench], best))
    return float(np.mean(gains))


def differing(matrix: Matrix, disagreement: float, share: float, rules: Competition) -> float:
    """The expected share of items on which the king and an `equal_pair` challenger at
    `disagreement`, `improved` by `share`, choose different models: what the behavioural
    duplicate check sees."""
    shares = []
    for bench in rules.benchmarks:
        p = matrix.p[bench]
        moved_off = float((np.argmax(p, axis=1) != int(np.argmax(p.mean(axis=0)))).mean())
        shares.append(disagreement * (1 - share / rules.n_models)
                      + (1 - disagreement) * share * moved_off)
    return float(np.mean(shares))


# ---------------------------------------------------------------- scoring, as an evaluation does


def measure(hidden: Hidden, head: Choices, halves: Halves, bench: str,
            rerun: bool = False, replays: Choices | None = None) -> Measured:
    """The head's numbers on one benchmark; `rerun`: its live grades from the second run;
    `replays`: the head whose sessions this one's replayed from the response cache, wherever
    the two chose the same model and took the same turns (played after it, as the king plays
    after the challenger)."""
    pool = hidden.pool[bench][np.arange(head.pool[bench].size), head.pool[bench]]
    grades = hidden.rerun if rerun else hidden.live
    live = grades[bench][np.arange(head.live[bench].size), head.live[bench]]
    best = hidden.pool[bench][:, int(np.argmax(hidden.pool[bench].mean(axis=0)))]
    eval_idx, audit_idx, rest_idx = halves[bench]
    # a session's calls: its model, once per turn (what `verdict.session_calls` compares; the
    # crown test compares the sessions of one question, so the question need not be named)
    calls = tuple(map(str, (head.live[bench] * 8 + head.turns[bench]).tolist()))
    replayed = (np.zeros(head.live[bench].size, dtype=bool) if replays is None else
                (head.live[bench] == replays.live[bench]) & (head.turns[bench] == replays.turns[bench]))
    return Measured(pool[eval_idx].astype(float), pool[audit_idx].astype(float),
                    live.astype(float), head.turns[bench].astype(float),
                    best[eval_idx].astype(float), best[audit_idx].astype(float),
                    pool[rest_idx].astype(float), calls, best[rest_idx].astype(float),
                    tuple(replayed.tolist()))


def _decisions(choices: np.ndarray) -> list[Decision]:
    return [Decision(str(int(c)), ROLES[1]) for c in choices]  # every turn 1 a Worker


def novelties(first: Choices, second: Choices | None, halves: Halves,
              rules: Competition) -> dict[str, float]:
    """Novelty as an evaluation computes it: on the first eval questions, the same for both."""
    values = {}
    for bench in rules.benchmarks:
        eval_idx = halves[bench][0][:rules.novelty_questions]
        theirs = None if second is None else _decisions(second.pool[bench][eval_idx])
        values[bench] = novelty(_decisions(first.pool[bench][eval_idx]), theirs, rules)
    return values


@dataclass(frozen=True)
class Scored:
    composite: float
    rejected: bool
    penalised: dict[str, bool]
    rejected_on: dict[str, bool]
    measured: dict[str, Measured]


def score(hidden: Hidden, head: Choices, halves: Halves, nov: dict[str, float],
          rules: Competition) -> Scored:
    """The head's composite and overfit gate without a king, as `verdict.judge` reads them."""
    measured = {b: measure(hidden, head, halves, b) for b in rules.benchmarks}
    decided = judge(measured, None, nov, rules)
    return Scored(decided.composite, decided.outcome == REJECTED,
                  {b: s.overfit_penalty < 1.0 for b, s in decided.scores.items()},
                  {b: judge_gap(float(overfit_gap(m, rules)), rules).rejected
                   for b, m in measured.items()}, measured)


def rerun_turns(head: Choices, rng: np.random.Generator) -> Choices:
    """The head with every live question's turns drawn afresh (a re-run of its sessions)."""
    return dataclasses.replace(head, turns={b: draw_turns(t.size, rng)
                                            for b, t in head.turns.items()})


def match(hidden: Hidden, king: Choices, challenger: Choices, halves: Halves, rules: Competition,
          rng: np.random.Generator, live: str = INDEPENDENT) -> tuple[Verdict, int]:
    """The verdict on the challenger in this evaluation, and the live questions per benchmark
    each head played: `verdict.judge`, stage by stage, as an evaluation calls it. `live`:
    INDEPENDENT runs the king's live sessions again (grades, and turns drawn with `rng`),
    none of them a replay; SHARED gives both heads the same grade where they choose alike,
    and the king's session is a replay of the challenger's where it also took the same turns
    (the response cache)."""
    if live == INDEPENDENT:
        king = rerun_turns(king, rng)
    nov = novelties(challenger, king, halves, rules)
    mine = {b: measure(hidden, challenger, halves, b) for b in rules.benchmarks}
    theirs = {b: measure(hidden, king, halves, b, rerun=live == INDEPENDENT,
                         replays=None if live == INDEPENDENT else challenger)
              for b in rules.benchmarks}
    played = 0
    for stage, size in enumerate(rules.live_stages, start=1):
        played += size
        decided = judge(through_stage(mine, stage, rules), through_stage(theirs, stage, rules),
                        nov, rules, stage)
        if decided.outcome != MORE:
            break
    return decided, played


def crowned(hidden: Hidden, king: Choices, challenger: Choices, halves: Halves, rules: Competition,
            rng: np.random.Generator, live: str = INDEPENDENT) -> tuple[bool, int]:
    """Whether the challenger takes the crown in this evaluation (`match`), and the live
    questions per benchmark each head played."""
    decided, played = match(hidden, king, challenger, halves, rules, rng, live)
    return decided.outcome == KING, played


def replayed_live(hidden: Hidden, rng: np.random.Generator) -> Hidden:
    """The hidden benchmark with its live calls answered afresh (another evaluation's run of
    them): the cached answers were collected once, live answers come anew each time."""
    def draw(p: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {b: rng.random(v.shape) < v for b, v in p.items()}

    return dataclasses.replace(hidden, live=draw(hidden.p_live), rerun=draw(hidden.p_live))


def true_delta(hidden: Hidden, head: Choices, king: Choices, rules: Competition) -> float:
    """The head's composite over the king's by what can be learnt of each item's chances
    (`Hidden.known`), not by this draw's outcomes: what it would gain on items like these that
    it was never fitted to (both heads take the same turns)."""
    spare = max(0.0, (rules.max_turns - float(TURNS @ TURN_WEIGHTS)) / (rules.max_turns - 1))
    gains = []
    for bench in rules.benchmarks:
        def chance(p: np.ndarray, choice: np.ndarray) -> float:
            return float(p[np.arange(choice.size), choice].mean())

        cached = chance(hidden.known[bench], head.pool[bench]) - chance(
            hidden.known[bench], king.pool[bench])
        live = chance(hidden.known_live[bench], head.live[bench]) - chance(
            hidden.known_live[bench], king.live[bench])
        gains.append(rules.weight_cached * cached
                     + (rules.weight_live + rules.weight_efficiency * spare) * live)
    return float(np.mean(gains))
