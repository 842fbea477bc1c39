"""The fairness figures: a seeded Monte Carlo of the competition's own scoring under its rules.

Every trial simulates one evaluation (`evaluator.simulation`), scored and judged by the code an
evaluation runs. The figures (honest heads, memorisation, false crowns, power, campaigns, live
sessions, the climber; some also with a rule taken away, to show what it buys) each come with
their Monte Carlo standard error, for independent live re-runs and for shared responses; the
Fairness page says what each measures.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from evaluator.records import KING, REJECTED, disclosed
from evaluator.rules import Competition
from evaluator.scoring import TOLERANCE
from evaluator.simulation import (
    INDEPENDENT,
    REFERENCE_ACCURACY,
    RERUN_FLIP,
    SHARED,
    Choices,
    Halves,
    Hidden,
    Matrix,
    best_single,
    crowned,
    differing,
    draw_halves,
    draw_hidden,
    equal_pair,
    improved,
    improvement_slope,
    match,
    memorised,
    memorised_share,
    novelties,
    reference_matrix,
    replayed_live,
    router,
    rules_for,
    score,
    true_delta,
)

FORMAT = 3
DISAGREEMENTS = (0.1, 0.3, 0.6)  # besides the least the behavioural check lets through
ADVANTAGES = (0.01, 0.02, 0.03, 0.05)
POWER_DISAGREEMENT = 0.3  # besides the least the behavioural check lets through
SUBMISSIONS = (100, 300, 1000)
# the campaign's trade: another final crown bar (the normal's upper 0.1 % point), with what it
# would do to the campaign and to a +0.03 challenger's chance
OTHER_FINAL_Z = 3.090
PRICED_ADVANTAGE = 0.03
Z95 = 1.959964
CLIMB_CHECK_PARTITIONS = 16  # fresh partitions averaged to score a climber's head
MEMORISER_ADVANTAGE = 0.02  # the real gain of the partial memoriser
OLD_AUDIT_SIZE = 50  # the audit split before the scored pool (a fixed 150/50 split)


# ---------------------------------------------------------------- the figures


def _rate(hits: Sequence[bool]) -> float:
    return float(np.mean(hits)) if len(hits) else math.nan


def standard_error(rate: float, trials: int) -> float:
    """The Monte Carlo standard error of a rate seen in `trials` independent trials."""
    return math.sqrt(rate * (1 - rate) / trials) if trials else math.nan


def upper_bound(rate: float, trials: int) -> float:
    """The upper end of the rate's 95% Wilson interval: above zero even when no trial hit."""
    if not trials:
        return math.nan
    z2 = Z95 * Z95
    centre = (rate + z2 / (2 * trials)) / (1 + z2 / trials)
    half = Z95 * math.sqrt(rate * (1 - rate) / trials + z2 / (4 * trials * trials)) / (
        1 + z2 / trials)
    return min(1.0, centre + half)


def honest_rates(matrix: Matrix, rules: Competition, trials: int,
                 rng: np.random.Generator) -> dict[str, Any]:
    """Penalty and reject rates of the best-single head, per benchmark and on any of them."""
    hits: dict[str, list[tuple[bool, bool]]] = {b: [] for b in rules.benchmarks}
    anyone: list[tuple[bool, bool]] = []
    accuracy = {b: float(matrix.p[b].mean(axis=0).max()) for b in rules.benchmarks}
    for _ in range(trials):
        hidden = draw_hidden(matrix, rules, rng)
        head = best_single(hidden, matrix, rules)
        halves = draw_halves(rules, rng)
        s = score(hidden, head, halves, dict.fromkeys(rules.benchmarks, 0.5), rules)
        for bench in rules.benchmarks:
            hits[bench].append((s.penalised[bench], s.rejected_on[bench]))
        anyone.append((any(s.penalised.values()), s.rejected))
    return {
        "per_benchmark": {b: {"accuracy": accuracy[b],
                              "penalty": _rate([h[0] for h in hits[b]]),
                              "reject": _rate([h[1] for h in hits[b]])}
                          for b in rules.benchmarks},
        "any": {"penalty": _rate([h[0] for h in anyone]),
                "reject": _rate([h[1] for h in anyone])},
    }


def memorisation_rates(matrix: Matrix, rules: Competition, trials: int,
                       rng: np.random.Generator) -> dict[str, Any]:
    """The overfit gate as an evaluation runs it, on a head that learnt the task (`router`)
    and on the same head fitted to every public pool item (`memorised`: where some model's
    cached answer was right, that model). Per head: how often the gate penalises or rejects it
    on any benchmark, and its mean lead over the best single model on the pool's items (the
    eval half and the rest, which the gate reads) and on the never-published audit items."""
    rows: dict[str, list[tuple[bool, bool, float, float]]] = {"router": [], "memoriser": []}
    novelty = dict.fromkeys(rules.benchmarks, rules.novelty_without_king)
    for _ in range(trials):
        hidden = draw_hidden(matrix, rules, rng)
        halves = draw_halves(rules, rng)
        honest = router(hidden, rules)
        heads = {"router": honest, "memoriser": memorised(honest, hidden, 1.0, rules, rng)}
        for name, head in heads.items():
            s = score(hidden, head, halves, novelty, rules)
            rows[name].append((any(s.penalised.values()), s.rejected,
                               float(np.mean([m.public_lead().mean()
                                              for m in s.measured.values()])),
                               float(np.mean([(m.audit_correct - m.audit_best).mean()
                                              for m in s.measured.values()]))))
    rates = {name: {"penalty": _rate([r[0] for r in got]), "reject": _rate([r[1] for r in got]),
                    "pool_lead": float(np.mean([r[2] for r in got])),
                    "audit_lead": float(np.mean([r[3] for r in got]))}
             for name, got in rows.items()}
    return {"audit_size": rules.audit_size, **rates}


def memoriser_crowns(matrix: Matrix, rules: Competition, trials: int,
                     seed: np.random.SeedSequence, advantage: float = 0.0) -> dict[str, Any]:
    """P(crowned), with its standard error, of a challenger as good as the king (or truly
    better by `advantage`) whose other decisions differ from the king's on
    `POWER_DISAGREEMENT` of items, honest and, in the very same trials, having also memorised
    the public pool up to the overfit penalty's line (`memorised_share`: its pool accuracy
    raised by `overfit_penalty_gap`, kept under the gate). Both are judged by `verdict.judge`
    over both live stages, with independent live re-runs and with the response cache."""
    slope = improvement_slope(matrix, POWER_DISAGREEMENT, rules)
    share = advantage / slope if advantage > 0 and slope > 0 else 0.0
    hits: dict[str, dict[str, list[bool]]] = {who: {INDEPENDENT: [], SHARED: []}
                                              for who in ("honest", "memoriser")}
    for child in seed.spawn(trials):
        draw, fit, *live = child.spawn(2 + len((INDEPENDENT, SHARED)))
        rng = np.random.default_rng(draw)
        hidden = draw_hidden(matrix, rules, rng)
        king, challenger = equal_pair(best_single(hidden, matrix, rules), POWER_DISAGREEMENT,
                                      rules, rng)
        if share > 0:
            challenger = improved(challenger, hidden, min(1.0, share), rules, rng)
        halves = draw_halves(rules, rng)
        fitted = memorised(challenger, hidden, memorised_share(
            challenger, hidden, rules.overfit_penalty_gap, rules), rules,
            np.random.default_rng(fit))
        for mode, stream in zip((INDEPENDENT, SHARED), live, strict=True):
            for who, head in (("honest", challenger), ("memoriser", fitted)):
                won, _ = crowned(hidden, king, head, halves, rules,
                                 np.random.default_rng(stream), mode)
                hits[who][mode].append(won)
    found: dict[str, Any] = {"advantage": advantage, "disagreement": POWER_DISAGREEMENT,
                             "trials": trials}
    for who, by_mode in hits.items():
        rates = {mode: _rate(seen) for mode, seen in by_mode.items()}
        found[who] = {"crowned": rates[INDEPENDENT],
                      "crowned_se": standard_error(rates[INDEPENDENT], trials),
                      "shared": rates[SHARED], "shared_se": standard_error(rates[SHARED], trials)}
    return found


def crown_rate(matrix: Matrix, rules: Competition, trials: int, rng: np.random.Generator,
               disagreement: float, share: float = 0.0) -> dict[str, float]:
    """P(crowned), with its standard error, for an equal pair at `disagreement` whose
    challenger is `improved` by `share`: with independent live re-runs and with shared live
    play; the share of items the heads' choices differ on, and the live questions per
    benchmark each head played (independent re-runs)."""
    hits: dict[str, list[bool]] = {INDEPENDENT: [], SHARED: []}
    played, differ = [], []
    for _ in range(trials):
        hidden = draw_hidden(matrix, rules, rng)
        king, challenger = equal_pair(best_single(hidden, matrix, rules), disagreement, rules, rng)
        if share > 0:
            challenger = improved(challenger, hidden, share, rules, rng)
        differ.append(np.mean([np.mean(king.pool[b] != challenger.pool[b])
                               for b in rules.benchmarks]))
        halves = draw_halves(rules, rng)
        for live, seen in hits.items():
            won, items = crowned(hidden, king, challenger, halves, rules, rng, live)
            seen.append(won)
            if live == INDEPENDENT:
                played.append(items)
    rates = {live: _rate(seen) for live, seen in hits.items()}
    return {"trials": trials, "differ": float(np.mean(differ)),
            "crowned": rates[INDEPENDENT], "crowned_se": standard_error(rates[INDEPENDENT], trials),
            "shared": rates[SHARED], "shared_se": standard_error(rates[SHARED], trials),
            "live_items": float(np.mean(played))}


def campaign(per_evaluation: float, trials: int) -> list[dict[str, float]]:
    """P(at least one crown) among each count of SUBMISSIONS evaluations, from a
    per-evaluation rate seen in `trials` trials: with its standard error (the delta method)
    and the upper end of its 95% interval (from the rate's Wilson interval, so a rate seen
    in no trial still bounds the campaign). Evaluations are independent: each draws its own
    partition, live order and live runs."""
    se, high = standard_error(per_evaluation, trials), upper_bound(per_evaluation, trials)
    return [{"submissions": n, "any": 1 - (1 - per_evaluation) ** n,
             "se": n * (1 - per_evaluation) ** (n - 1) * se, "upper": 1 - (1 - high) ** n}
            for n in SUBMISSIONS]


def other_bar(matrix: Matrix, rules: Competition, budget: Budget, near: float,
              seeds: Paired) -> dict[str, Any]:
    """The campaign's trade under another final crown bar (`OTHER_FINAL_Z`): the near-equal
    challenger's per-evaluation false crowns and the campaign they add up to, and how often a
    challenger better by `PRICED_ADVANTAGE` at `POWER_DISAGREEMENT` is crowned. The trials are
    the very ones the rules' rows ran (`seeds`), so the two bars differ by their decisions
    alone, not by Monte Carlo noise."""
    other = dataclasses.replace(rules, crown_z_final=OTHER_FINAL_Z)
    per = crown_rate(matrix, other, budget.campaign, np.random.default_rng(seeds.near), near)
    slope = improvement_slope(matrix, POWER_DISAGREEMENT, other)
    share = PRICED_ADVANTAGE / slope if slope > 0 else math.inf
    better = (crown_rate(matrix, other, budget.crown, np.random.default_rng(seeds.priced),
                         POWER_DISAGREEMENT, share)
              if share <= 1 else None)
    return {"crown_z_final": other.crown_z_final, "per_evaluation": per["crowned"],
            "per_evaluation_se": per["crowned_se"], "trials": per["trials"],
            "independent_rows": campaign(per["crowned"], per["trials"]),
            "advantage": PRICED_ADVANTAGE, "disagreement": POWER_DISAGREEMENT,
            "crowned": None if better is None else better["crowned"],
            "crowned_se": None if better is None else better["crowned_se"]}


def sessions(rows: Sequence[dict[str, Any]], benchmarks: int,
             rules: Competition) -> dict[str, float]:
    """Live sessions per evaluation, both heads on each of `benchmarks` benchmarks: when the
    first stage decides, expected for the first row's challenger (the near-equal one) and in
    the costliest scenario simulated, and at worst (every benchmark plays the whole split)."""
    played = [row["live_items"] for row in rows if row.get("live_items") is not None]
    return {"first_stage": 2 * benchmarks * rules.live_stages[0],
            "near_equal": 2 * benchmarks * played[0], "costliest": 2 * benchmarks * max(played),
            "worst": 2 * benchmarks * rules.live_size}


def mutation(rules: Competition) -> float:
    """The share of items whose choice one variation draws afresh: enough that it differs from
    the head it varies on the least share the behavioural duplicate check lets through (a
    closer variation is rejected as a copy before it is scored)."""
    return min(1.0, (1 - rules.duplicate_agreement) * rules.n_models / (rules.n_models - 1))


def mutate(head: Choices, rules: Competition, rng: np.random.Generator) -> Choices:
    """Another head from a change of the weights: some items' choices drawn afresh."""
    parts: dict[str, dict[str, np.ndarray]] = {"pool": {}, "live": {}}
    share = mutation(rules)
    for bench in rules.benchmarks:
        for part in parts:
            choice = getattr(head, part)[bench]
            moves = rng.random(choice.size) < share
            parts[part][bench] = np.where(moves, rng.integers(0, rules.n_models, choice.size),
                                          choice)
    return Choices(parts["pool"], parts["live"], head.turns)


def board_delta(hidden: Hidden, head: Choices, king: Choices, partitions: list[Halves],
                rules: Competition) -> float:
    """The head's mean published composite over the king's on this hidden benchmark, over
    fresh partitions and at the live questions' expected grades: what the board would show."""
    expected = dataclasses.replace(hidden, live=hidden.p_live)
    deltas = []
    for halves in partitions:
        nov = novelties(head, king, halves, rules)
        deltas.append(score(expected, head, halves, nov, rules).composite
                      - score(expected, king, halves, nov, rules).composite)
    return float(np.mean(deltas))


def climber(matrix: Matrix, rules: Competition, climbers: int, submissions: int,
            rng: np.random.Generator, sees_test: bool = False) -> list[dict[str, Any]]:
    """A sybil campaign that climbs on what is published: it submits random variations of its
    best head so far (`mutate`), one evaluation each (fresh partition, fresh live answers),
    keeps a variation whose published delta (rounded to the disclosure precision) beats the
    best it has seen, and, when one is crowned, goes on from the new king. `sees_test`: a
    loss also publishes its crown test's z, which reads the audit, and the climber keeps by it.

    After each count of SUBMISSIONS up to `submissions` (and after `submissions`): the chance
    it was crowned at least once, and what the king then gains on the board over the king it
    started from (`board_delta`), by the chances (`true_delta`) and beyond them (fit to the
    sealed items).
    """
    checkpoints = sorted({n for n in SUBMISSIONS if n <= submissions} | {submissions})
    seen: dict[int, list[tuple[bool, float, float]]] = {n: [] for n in checkpoints}
    for _ in range(climbers):
        hidden = draw_hidden(matrix, rules, rng)
        start = best_single(hidden, matrix, rules)
        king, base, best, crowned_once = start, start, -math.inf, False
        check = [draw_halves(rules, rng) for _ in range(CLIMB_CHECK_PARTITIONS)]
        for n in range(1, checkpoints[-1] + 1):
            candidate = mutate(base, rules, rng)
            decided, _ = match(replayed_live(hidden, rng), king, candidate,
                               draw_halves(rules, rng), rules, rng)
            if decided.outcome == KING:
                king = base = candidate
                best, crowned_once = -math.inf, True
            elif decided.outcome != REJECTED and decided.delta is not None:
                shown = (decided.evidence.z if sees_test and decided.evidence is not None
                         else disclosed(decided.delta, rules.disclosure_precision))
                if shown > best + TOLERANCE:
                    base, best = candidate, shown
            if n in seen:
                board = board_delta(hidden, king, start, check, rules)
                seen[n].append((crowned_once, board, true_delta(hidden, king, start, rules)))
    rows = []
    for n in checkpoints:
        crowned_share = _rate([s[0] for s in seen[n]])
        board, true = (float(np.mean([s[i] for s in seen[n]])) for i in (1, 2))
        rows.append({"submissions": n, "crowned": crowned_share,
                     "crowned_se": standard_error(crowned_share, climbers),
                     "board_gain": board, "true_gain": true, "beyond": board - true})
    return rows


@dataclass(frozen=True)
class Paired:
    """The seeds of the rows `other_bar` runs again under another bar: the near-equal false
    crowns and the priced advantage. A generator made from a seed starts in the same state
    each time, so both bars see the same trials."""

    near: np.random.SeedSequence
    priced: np.random.SeedSequence


@dataclass(frozen=True)
class Budget:
    """How many trials each figure runs."""

    honest: int = 2000
    crown: int = 1000
    # near-equal evaluations behind the per-evaluation rate of a campaign: a rate near 0.1 %
    # needs this many for a standard error near a fifth of it
    campaign: int = 24000
    memoriser: int = 2000
    climbers: int = 30
    climb: int = max(SUBMISSIONS)  # submissions per climber

    def scaled(self, factor: float) -> Budget:
        return Budget(*(max(1, round(getattr(self, f.name) * factor))
                        for f in dataclasses.fields(self)))


def power_rows(matrix: Matrix, rules: Competition, trials: int,
               streams: Iterator[np.random.Generator], seeds: Paired) -> list[dict[str, Any]]:
    """P(crowned) by true advantage and other disagreement; a row the matrix has no room for
    ("headroom") or whose heads the behavioural check would call copies ("duplicate") is left
    out, its rates None. The priced row (`PRICED_ADVANTAGE` at `POWER_DISAGREEMENT`) runs on
    `seeds`, for `other_bar`."""
    rows = []
    for disagreement in (round(1 - rules.duplicate_agreement, 4), POWER_DISAGREEMENT):
        slope = improvement_slope(matrix, disagreement, rules)
        for advantage in ADVANTAGES:
            share = advantage / slope if slope > 0 else math.inf
            row: dict[str, Any] = {"disagreement": disagreement, "advantage": advantage}
            if share > 1:
                row["left_out"] = "headroom"
            elif differing(matrix, disagreement, share, rules) < 1 - rules.duplicate_agreement:
                row["left_out"] = "duplicate"
            if "left_out" in row:
                row.update(dict.fromkeys(("crowned", "crowned_se", "shared", "shared_se")))
            else:
                priced = (disagreement, advantage) == (POWER_DISAGREEMENT, PRICED_ADVANTAGE)
                rng = np.random.default_rng(seeds.priced) if priced else next(streams)
                row.update(crown_rate(matrix, rules, trials, rng, disagreement, share))
            rows.append(row)
    return rows


def _honest(matrix: Matrix, rules: Competition, budget: Budget,
            streams: Iterator[np.random.Generator]) -> dict[str, Any]:
    """How often an honest head is penalised or rejected: the reference router, the best
    single model, and the reference under the older, smaller audit split."""
    old_split = dataclasses.replace(rules, audit_size=OLD_AUDIT_SIZE)
    return {
        "reference_accuracy": REFERENCE_ACCURACY,
        "reference": honest_rates(reference_matrix(rules), rules, budget.honest, next(streams)),
        "best_single": honest_rates(matrix, rules, budget.honest, next(streams)),
        "without": {"eval_size": old_split.eval_size, "audit_size": old_split.audit_size,
                    "reference": honest_rates(reference_matrix(old_split), old_split,
                                              budget.honest, next(streams))},
    }


def _campaign_of(per: dict[str, Any], near: float) -> dict[str, Any]:
    """The campaign figures from the near-equal false-crown row `per`."""
    return {"disagreement": near, "per_evaluation": per["crowned"],
            "per_evaluation_se": per["crowned_se"], "shared": per["shared"],
            "shared_se": per["shared_se"], "trials": per["trials"],
            "independent_rows": campaign(per["crowned"], per["trials"]),
            "shared_rows": campaign(per["shared"], per["trials"])}


def figures(matrix: Matrix, rules: Competition, budget: Budget = Budget(), seed: int = 0,
            progress: Callable[[str], None] = lambda _: None) -> dict[str, Any]:
    """Every fairness figure under `rules` (some also with a rule taken away), as JSON data."""
    matrix.check(rules)
    played_benchmarks = len(rules.benchmarks)  # an evaluation plays them all, whatever the matrix
    rules = rules_for(matrix, rules)
    *spawned, near_seed, priced_seed = np.random.SeedSequence(seed).spawn(64)
    streams = iter(np.random.default_rng(s) for s in spawned[:-2])
    paired = Paired(near_seed, priced_seed)

    progress("honest heads")
    honest = _honest(matrix, rules, budget, streams)
    progress("memorising heads")
    memorisation = {**memorisation_rates(matrix, rules, budget.crown, next(streams)),
                    "lead": rules.overfit_penalty_gap,
                    "crowns": [memoriser_crowns(matrix, rules, budget.memoriser, seeds, advantage)
                               for seeds, advantage in zip(spawned[-2:], (0.0, MEMORISER_ADVANTAGE),
                                                           strict=True)]}
    progress("equal challengers")
    # a head that differs from the king on less is rejected as a copy before it is scored
    near = round(1 - rules.duplicate_agreement, 4)
    false_crown = [{"disagreement": d,
                    **crown_rate(matrix, rules, budget.campaign if d == near else budget.crown,
                                 np.random.default_rng(paired.near) if d == near else next(streams), d)}
                   for d in (near, *(d for d in DISAGREEMENTS if d > near))]
    campaigns = _campaign_of(false_crown[0], near)
    progress("better challengers")
    power = power_rows(matrix, rules, budget.crown, streams, paired)
    progress("another final bar")
    campaigns["other_bar"] = other_bar(matrix, rules, budget, near, paired)
    progress("climbers")
    climbing = {"mutation": mutation(rules), "climbers": budget.climbers,
                "rows": climber(matrix, rules, budget.climbers, budget.climb, next(streams)),
                "without": climber(matrix, rules, budget.climbers, budget.climb, next(streams),
                                   sees_test=True)}
    return {
        "format": FORMAT, "source": matrix.source, "seed": seed,
        "trials": dataclasses.asdict(budget), "benchmarks": list(rules.benchmarks),
        "rerun_flip": RERUN_FLIP, "duplicate_agreement": rules.duplicate_agreement,
        "left_out": [d for d in DISAGREEMENTS if d < near],
        "honest": honest, "memorisation": memorisation, "false_crown": false_crown,
        "campaign": campaigns, "power": power,
        "live_sessions": sessions([*false_crown, *power], played_benchmarks, rules),
        "climber": climbing,
    }
