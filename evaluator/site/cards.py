"""Router cards and cost: what each king does, where it gains, and what a query costs.

A king's public record carries a `router_card` (records before it did not: every figure
here is optional). The manifest's baselines add, per benchmark, the pool models' accuracy
per category and their cost per 1,000 single-turn answers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from statistics import fmean
from typing import Any

from evaluator.baselines import gap_closed
from evaluator.records import KING, Crowning, Result
from evaluator.rules import Competition
from evaluator.site.markup import miner_id, miner_slug
from evaluator.site.state import LeaderboardState

CHART_CATEGORIES = 10  # categories drawn per benchmark in a mix chart; the rest are pooled
MIN_SHARE_ITEMS = 20  # fewer items than this: counts, never percentages


def _float(value: Any) -> float | None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    return float(value) if ok else None


def _mean(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return fmean(known) if known else None


@dataclass(frozen=True)
class Reign:
    """One king of history.json with its public record and its neighbours in the line."""

    number: int  # 1 for the first king
    king: Crowning
    result: Result | None
    previous: Crowning | None = None
    previous_result: Result | None = None
    successor: Crowning | None = None

    @property
    def slug(self) -> str:
        return f"{miner_slug(self.king.miner)}/{self.king.generation}"

    @property
    def uri(self) -> str:
        return f"kings/{self.slug}.md"

    @property
    def chart_uri(self) -> str:
        return f"assets/charts/kings/{self.slug.replace('/', '-')}.svg"

    @property
    def card(self) -> dict[str, Any]:
        card = self.result.router_card if self.result else None
        return card if isinstance(card, dict) else {}

    @property
    def per_benchmark(self) -> dict[str, Any]:
        return (self.result.per_benchmark if self.result else None) or {}

    @property
    def cost_per_1k(self) -> float | None:
        return _float(self.card.get("cost_per_1k_usd"))

    @property
    def live_seconds(self) -> dict[str, float] | None:
        """Median and 95th percentile seconds of a live question, as the evaluator measured."""
        value = self.card.get("live_seconds")
        if not isinstance(value, dict):
            return None
        median, p95 = _float(value.get("median")), _float(value.get("p95"))
        return None if median is None or p95 is None else {"median": median, "p95": p95}

    def accuracy(self, benchmarks: Sequence[str]) -> float | None:
        """Mean live accuracy over the benchmarks: the sessions its cost was metered on, as
        the cost chart plots it."""
        return _mean([self.per_benchmark[b].live_acc for b in benchmarks
                      if b in self.per_benchmark])

    def mean_part(self, name: str) -> float | None:
        return _mean([getattr(part, name) for part in self.per_benchmark.values()])


def _crowned_result(state: LeaderboardState, king: Crowning) -> Result | None:
    crowned = [r for r in state.results if r.outcome == KING]
    exact = next((r for r in crowned if r.key == king.key), None)
    return exact or next((r for r in crowned if (miner_id(r.miner), r.generation)
                          == (miner_id(king.miner), king.generation)), None)


def reigns(state: LeaderboardState) -> list[Reign]:
    """Every king, oldest first."""
    results = [_crowned_result(state, king) for king in state.kings]
    line = []
    for index, king in enumerate(state.kings):
        before = index - 1 if index else None
        line.append(Reign(
            number=index + 1, king=king, result=results[index],
            previous=None if before is None else state.kings[before],
            previous_result=None if before is None else results[before],
            successor=state.kings[index + 1] if index + 1 < len(state.kings) else None))
    return line


# ---------------------------------------------------------------- routing mix

def _weighted(groups: Mapping[str, Any], part: str) -> dict[str, float]:
    total = sum(g.get("items", 0) for g in groups.values() if isinstance(g, dict))
    shares: dict[str, float] = {}
    for group in groups.values():
        if not isinstance(group, dict) or not total:
            continue
        for name, share in (group.get(part) or {}).items():
            value = _float(share)
            if value is not None:
                shares[name] = shares.get(name, 0.0) + value * group.get("items", 0) / total
    return shares


def mix(card: Mapping[str, Any], bench: str) -> dict[str, Any]:
    """One benchmark's public-item mix: items, overall model and role shares, categories
    (largest first)."""
    entry = (card.get("public_items") or {}).get(bench) or {}
    groups = {str(k): v for k, v in (entry.get("by_category") or {}).items() if isinstance(v, dict)}
    return {"items": entry.get("items"), "models": _weighted(groups, "models"),
            "roles": _weighted(groups, "roles"),
            "categories": sorted(groups.items(), key=lambda kv: (-kv[1].get("items", 0), kv[0]))}


def _items(groups: Sequence[tuple[str, Mapping[str, Any]]]) -> int:
    return sum(g.get("items", 0) for _, g in groups if isinstance(g.get("items"), int))


def chart_rows(card: Mapping[str, Any],
               bench: str) -> list[tuple[str, dict[str, float], int]]:
    """The bars of one benchmark's mix chart, each with its number of public items: all items,
    the largest categories, the rest."""
    entry = mix(card, bench)
    if not entry["categories"]:
        return []
    rows = [("all items", entry["models"], _items(entry["categories"]))]
    shown, rest = entry["categories"][:CHART_CATEGORIES], entry["categories"][CHART_CATEGORIES:]
    rows += [(name, {m: _float(v) or 0.0 for m, v in (group.get("models") or {}).items()},
              _items([(name, group)])) for name, group in shown]
    if rest:
        rows.append((f"{len(rest)} other categories", _weighted(dict(rest), "models"),
                     _items(rest)))
    return rows


# ---------------------------------------------------------------- where it gains

def _worth(models: Mapping[str, Any], per_model: Mapping[str, Any]) -> float | None:
    """What a turn-1 mix of models is worth: each model's share times its accuracy."""
    total = 0.0
    for model, share in models.items():
        weight, acc = _float(share), _float(per_model.get(model))
        if weight is None or (weight > 0 and acc is None):
            return None
        total += weight * (acc or 0.0)
    return total


def gains(card: Mapping[str, Any], bench: str, baselines: Mapping[str, Any]) -> list[dict]:
    """Per category, from public figures only: what the king's turn-1 choices on the public
    train items are worth at each model's accuracy on that category of the pool (published
    with the manifest at sealing), beside the benchmark's best single model overall (the one
    model a router competes with, as on every page) and the category's oracle. Nothing about
    the hidden items is read per king, so a run of kings reveals nothing the manifest does not.
    Headroom captured is left out where the category has fewer than MIN_SHARE_ITEMS public
    items: a share of a tiny gap reads as noise."""
    by_category = baselines.get("by_category") or {}
    model = (baselines.get("best_single") or {}).get("model")
    rows = []
    for category, group in sorted(mix(card, bench)["categories"]):
        base = by_category.get(category) or {}
        per_model = base.get("per_model") or {}
        cached = _worth(group.get("models") or {}, per_model) if per_model else None
        best_acc = _float(per_model.get(model))
        oracle, items = _float(base.get("oracle")), group.get("items")
        big = isinstance(items, int) and items >= MIN_SHARE_ITEMS
        rows.append({"category": category, "items": items, "cached": cached,
                     "best_model": model, "best": best_acc, "oracle": oracle,
                     "gain": None if cached is None or best_acc is None else cached - best_acc,
                     "captured": gap_closed(cached, best_acc, oracle) if big else None})
    return rows


# ---------------------------------------------------------------- cost

def model_cost(baselines: Mapping[str, Mapping[str, Any]], model: Any,
               benchmarks: Sequence[str]) -> float | None:
    """A pool model's mean cost per 1,000 single-turn answers over the benchmarks."""
    return _mean([_float((baselines.get(b, {}).get("cost_per_1k_usd") or {}).get(model))
                  for b in benchmarks])


def best_single_cost(baselines: Mapping[str, Mapping[str, Any]],
                     benchmarks: Sequence[str]) -> float | None:
    """What always asking each benchmark's best single model costs per 1,000 questions."""
    return _mean([model_cost(baselines, (baselines.get(b, {}).get("best_single") or {})
                             .get("model"), [b]) for b in benchmarks])


def random_routing(baselines: Mapping[str, Mapping[str, Any]], benchmarks: Sequence[str],
                   pool_models: Sequence[str]) -> tuple[float | None, float | None]:
    """(accuracy, cost per 1,000 questions) of routing each question to a pool model at random:
    the mean over models, answering once."""
    accuracy = _mean([_float(baselines.get(b, {}).get("random")) for b in benchmarks])
    costs = [model_cost(baselines, model, benchmarks) for model in pool_models]
    return accuracy, fmean(costs) if costs and None not in costs else None


def category_lookup(baselines: Mapping[str, Mapping[str, Any]],
                    benchmarks: Sequence[str]) -> tuple[float | None, float | None]:
    """(accuracy, cost per 1,000 questions) of asking each category's best model on the scored
    pool, answering once, weighted by the category's items; its cost at each model's mean cost
    on the benchmark. None where the manifest has no categories."""
    accuracy, cost = [], []
    for bench in benchmarks:
        base = baselines.get(bench, {})
        groups = [g for g in (base.get("by_category") or {}).values() if isinstance(g, dict)]
        items = sum(g.get("items", 0) for g in groups)
        picks = [((g.get("best_single") or {}), g.get("items", 0)) for g in groups]
        prices = base.get("cost_per_1k_usd") or {}
        if not items or any(_float(best.get("accuracy")) is None for best, _ in picks):
            return None, None
        accuracy.append(sum(best["accuracy"] * n for best, n in picks) / items)
        paid = [(_float(prices.get(best.get("model"))), n) for best, n in picks]
        cost.append(None if any(c is None for c, _ in paid)
                    else sum(c * n for c, n in paid) / items)
    return _mean(accuracy), _mean(cost) if None not in cost else None


ONE_ANSWER = "cached accuracy; cost of one Worker answer"
LIVE = "live accuracy; metered cost of its live sessions, every turn and role"


@dataclass(frozen=True)
class CostPoint:
    """One point of the cost–accuracy chart and of `cost.csv`: accuracy and cost measured
    alike, on what `basis` says (a model answering once, or a king's live sessions)."""

    kind: str  # "king", "head" (a head that lost, once replayed), "model", "random", "lookup"
    label: str
    accuracy: float
    cost_per_1k_usd: float
    miner: str | None = None
    generation: int | None = None
    basis: str = ONE_ANSWER


def cost_points(line: Sequence[Reign], baselines: Mapping[str, Mapping[str, Any]],
                rules: Competition, pool_models: Sequence[str],
                names: Mapping[str, str], heads: Sequence[CostPoint] = ()) -> list[CostPoint]:
    """Each pool model, random routing, the category lookup, every head that lost and has its
    figures (`heads`: once its season is replayed) and every king with a metered cost, where
    known; the kings last, oldest first."""
    benchmarks = list(rules.benchmarks)
    points = []
    for model in pool_models:
        accuracy = _mean([_float((baselines.get(b, {}).get("per_model") or {}).get(model))
                          for b in benchmarks])
        cost = model_cost(baselines, model, benchmarks)
        if accuracy is not None and cost is not None:
            points.append(CostPoint("model", model, accuracy, cost))
    for kind, label, (accuracy, cost) in (
            ("random", "random routing", random_routing(baselines, benchmarks, pool_models)),
            ("lookup", "category lookup", category_lookup(baselines, benchmarks))):
        if accuracy is not None and cost is not None:
            points.append(CostPoint(kind, label, accuracy, cost))
    points += heads
    for reign in line:
        accuracy, cost = reign.accuracy(benchmarks), reign.cost_per_1k
        if accuracy is not None and cost is not None:
            name = names.get(miner_id(reign.king.miner), reign.king.miner)
            points.append(CostPoint("king", f"{name} g{reign.king.generation}", accuracy, cost,
                                    name, reign.king.generation, LIVE))
    return points


def oracle_accuracy(baselines: Mapping[str, Mapping[str, Any]],
                    benchmarks: Sequence[str]) -> float | None:
    return _mean([_float(baselines.get(b, {}).get("oracle")) for b in benchmarks])
