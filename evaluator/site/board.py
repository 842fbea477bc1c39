"""The Leaderboard page's table: every evaluated head ranked by the paired evidence the
competition already has, with the baselines as rows of the same table.

A head is significantly better than another when an evaluation of the two found the crown
test's z above `crown_z_final` in its favour, or a chain of such findings leads from one to
the other (`_ranks`); heads no comparison separates share places. A loser's figures are
published rounded and its crown test hidden, until `replay` reproduces its verdict.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from statistics import fmean
from typing import Any

from evaluator.explain import FULL_PLACES
from evaluator.records import KING, LOST, Result
from evaluator.rules import Competition
from evaluator.site.cards import (
    LIVE,
    CostPoint,
    best_single_cost,
    category_lookup,
    random_routing,
)
from evaluator.site.markup import miner_id
from evaluator.site.state import LeaderboardState

HEAD, BASELINE = "head", "baseline"
PUBLISHED, REPLAYED, HIDDEN, NOT_REPRODUCED = "published", "replayed", "hidden", "not reproduced"
MANIFEST = "manifest"


@dataclass(frozen=True)
class BoardRow:
    """One row of the ranked table and of board.csv. Accuracies, turns and cost are means over
    the benchmarks; `figures` says where they come from (published, replayed, hidden until the
    season retires, not reproduced by the replay, or the manifest for a baseline) and `places`
    the decimals its composite and interval are known to."""

    kind: str
    label: str
    rank_best: int | None = None
    rank_worst: int | None = None
    miner: str | None = None
    generation: int | None = None
    pr: int | None = None
    head_sha: str | None = None
    outcome: str | None = None
    reigning: bool = False
    composite: float | None = None
    composite_low: float | None = None
    composite_high: float | None = None
    cached_acc: float | None = None
    live_acc: float | None = None
    avg_turns: float | None = None
    cost_per_1k_usd: float | None = None
    figures: str = PUBLISHED
    places: int = FULL_PLACES

    COLUMNS = ("rank_best", "rank_worst", "kind", "label", "miner", "generation", "pr",
               "head_sha", "outcome", "reigning", "composite", "composite_low", "composite_high",
               "cached_acc", "live_acc", "avg_turns", "cost_per_1k_usd", "figures", "places")
    INTEGERS = ("rank_best", "rank_worst", "generation", "pr", "places")

    @property
    def key(self) -> tuple[Any, ...] | None:
        """A head's identity, as the records' `key` (None for a baseline)."""
        if self.kind != HEAD:
            return None
        return (str(self.miner).lower(), self.generation, self.pr, self.head_sha)

    @property
    def rank(self) -> str:
        """"3", or "2–7" where the evidence allows several places."""
        if self.rank_best is None:
            return ""
        if self.rank_best == self.rank_worst:
            return str(self.rank_best)
        return f"{self.rank_best}–{self.rank_worst}"

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.COLUMNS}


def _mean(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return fmean(known) if known and len(known) == len(values) else None


def _components(result: Result, rules: Competition) -> dict[str, float | None]:
    """Mean cached and live accuracy and turns over the benchmarks, where the record has them."""
    per = result.per_benchmark or {}
    return {name: _mean([getattr(per[b], name) if b in per else None for b in rules.benchmarks])
            for name in ("cached_acc", "live_acc", "avg_turns")}


def _cost(result: Result) -> float | None:
    """The head's own live cost per 1,000 questions: a king's router card, or a replayed
    record's metered sessions."""
    card = result.router_card if isinstance(result.router_card, dict) else {}
    if card.get("cost_per_1k_usd") is not None:
        return float(card["cost_per_1k_usd"])
    run = result.challenger_run
    questions = sum(len(splits.get("live", [])) for splits in (run.items if run else {}).values())
    return 1000 * run.live_cost_usd / questions if run and questions else None


def _head_row(result: Result, shown: Result, figures: str, reigning: bool,
              rules: Competition) -> BoardRow:
    """A head's row from the record whose figures it shows (`shown`: the replayed one, or the
    published one)."""
    places = FULL_PLACES if shown.outcome == KING or figures == REPLAYED else \
        round(-math.log10(rules.disclosure_precision))
    low = high = None
    if shown.ci95 is not None and shown.delta is not None and shown.composite is not None:
        # the king it faced, re-scored on the same items, plus the paired interval
        low, high = (shown.composite - shown.delta + end for end in shown.ci95)
        if places != FULL_PLACES:  # its parts were published rounded: so is their sum
            low, high = round(low, places), round(high, places)
    parts = _components(shown, rules) if figures != HIDDEN else {}
    return BoardRow(HEAD, f"{result.miner} g{result.generation}", miner=result.miner,
                    generation=result.generation, pr=result.pr, head_sha=result.head_sha,
                    outcome=str(result.outcome), reigning=reigning, composite=shown.composite,
                    composite_low=low, composite_high=high, **parts,
                    cost_per_1k_usd=_cost(shown) if figures != HIDDEN else None,
                    figures=figures, places=places)


def _ranks(results: Sequence[Result], rules: Competition) -> list[tuple[int, int]]:
    """(best, worst) place of each head: 1 + the heads significantly better, and the number of
    heads less those significantly worse, through chains of paired comparisons."""
    index = {result.key: n for n, result in enumerate(results)}
    beaten_by: list[set[int]] = [set() for _ in results]  # n → heads found better than n
    for n, result in enumerate(results):
        z = (result.crown_test or {}).get("z")
        other = index.get(result.against.key) if result.against is not None else None
        if z is None or other is None:
            continue
        if z > rules.crown_z_final:
            beaten_by[other].add(n)
        elif z < -rules.crown_z_final:
            beaten_by[n].add(other)
    above = [_reach(n, beaten_by) for n in range(len(results))]
    below = [sum(n in found for found in above) for n in range(len(results))]
    return [(1 + len(above[n]), len(results) - below[n]) for n in range(len(results))]


def _reach(start: int, edges: Sequence[set[int]]) -> set[int]:
    seen, todo = set(), list(edges[start])
    while todo:
        node = todo.pop()
        if node not in seen and node != start:
            seen.add(node)
            todo.extend(edges[node])
    return seen


def head_rows(state: LeaderboardState, rules: Competition,
              replayed: Mapping[tuple[Any, ...], Any] | None = None) -> list[BoardRow]:
    """Every head with a decided composite (crowned or lost), ranked. `replayed`: the retired
    season's replays (`evaluator.replay.Replayed`) by the evaluation they are of."""
    replayed = replayed or {}
    reigning = state.king.key if state.king else None
    results = [r for r in state.results if r.outcome in (KING, LOST) and r.composite is not None]
    shown, figures = [], []
    for result in results:
        replay = replayed.get((*result.key, result.evaluated_at))
        if replay is not None and replay.reproduced:
            shown.append(replay.result)
            figures.append(REPLAYED)
        else:
            shown.append(result)
            figures.append(NOT_REPRODUCED if replay is not None else
                           PUBLISHED if result.outcome == KING else HIDDEN)
    ranks = _ranks(shown, rules)
    rows = [dataclasses.replace(_head_row(r, s, f, r.key == reigning, rules),
                                rank_best=best, rank_worst=worst)
            for r, s, f, (best, worst) in zip(results, shown, figures, ranks, strict=True)]
    return sorted(rows, key=lambda row: (row.rank_best, row.rank_worst, -(row.composite or 0),
                                         miner_id(row.miner), row.generation or 0))


def baseline_rows(baselines: Mapping[str, Mapping[str, Any]], rules: Competition,
                  pool_models: Sequence[str]) -> list[BoardRow]:
    """What a router has to beat, each answering every question once with one model's cached
    answer over the scored pool (its cost: that answer's): the best single model of each
    benchmark, each category's best model, random routing, and the oracle's ceiling."""
    benchmarks = list(rules.benchmarks)
    per = [baselines.get(b) or {} for b in benchmarks]
    lookup, random = category_lookup(baselines, benchmarks), random_routing(
        baselines, benchmarks, pool_models)
    rows = [
        BoardRow(BASELINE, "best single model",
                 cached_acc=_mean([(b.get("best_single") or {}).get("accuracy") for b in per]),
                 cost_per_1k_usd=best_single_cost(baselines, benchmarks)),
        BoardRow(BASELINE, "category lookup", cached_acc=lookup[0], cost_per_1k_usd=lookup[1]),
        BoardRow(BASELINE, "random routing", cached_acc=random[0], cost_per_1k_usd=random[1]),
        BoardRow(BASELINE, "oracle (a ceiling)", cached_acc=_mean([b.get("oracle") for b in per])),
    ]
    return [dataclasses.replace(row, avg_turns=1.0, figures=MANIFEST) for row in rows
            if row.cached_acc is not None]


def head_points(rows: Sequence[BoardRow], names: Mapping[str, str]) -> list[CostPoint]:
    """The cost chart's point of each head that lost and whose figures are known (its season
    replayed): live accuracy against its sessions' metered cost, as a king's is drawn."""
    return [CostPoint("head", f"{names.get(miner_id(row.miner), row.miner)} g{row.generation}",
                      row.live_acc, row.cost_per_1k_usd, row.miner, row.generation, LIVE)
            for row in rows if row.kind == HEAD and row.outcome == LOST
            and row.live_acc is not None and row.cost_per_1k_usd is not None]


def replays(state: LeaderboardState, rules: Competition) -> dict[tuple[Any, ...], Any]:
    """The retired season's replays (`evaluator.replay.Replayed`) by the evaluation each is of;
    empty while the season runs (nothing revealed beside the leaderboard)."""
    if state.revealed is None:
        return {}
    from evaluator.replay import open_season, replay_season

    season = open_season(state.revealed, state.manifest or {}, rules)
    return {(*one.published.key, one.published.evaluated_at): one
            for one in replay_season(season, state.results, rules)}
