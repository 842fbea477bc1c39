"""The site's verdict rows: every evaluation and every head a gate stopped, each explained."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from evaluator.explain import Explanation, explain, explain_gate
from evaluator.files import try_parse_time
from evaluator.records import Result
from evaluator.rules import Competition
from evaluator.site.state import LeaderboardState


@dataclass(frozen=True)
class Entry:
    """One line of a verdict table: an evaluation, or a head a gate stopped before one."""

    when: str
    miner: str
    generation: int
    pr: int | None
    head_sha: str | None
    why: Explanation
    result: Result | None = None  # None: stopped at a gate, never evaluated

    def row(self, precision: float) -> dict[str, Any]:
        """The downloads' line: the public record (or the attempt's identity), then the why."""
        public = self.result.public(precision) if self.result else {
            "miner": self.miner, "generation": self.generation, "pr": self.pr,
            "head_sha": self.head_sha, "evaluated_at": None, "outcome": self.why.outcome}
        return {**public, "gated_at": None if self.result else self.when,
                "failed_gate": self.why.gate, **self.why.to_dict()}


def entries(state: LeaderboardState, rules: Competition) -> list[Entry]:
    """Every verdict, newest first: each result, and each attempt a gate stopped."""
    rows = [Entry(r.evaluated_at, r.miner, r.generation, r.pr, r.head_sha, explain(r, rules), r)
            for r in state.results]
    rows += [Entry(a.at, a.miner, a.generation, a.pr, a.head_sha, explain_gate(a))
             for a in state.attempts if not a.gates_passed and a.failed_gate is not None]
    return sorted(rows, key=lambda e: (_timestamp(e.when), e.result is not None), reverse=True)


def _timestamp(value: str) -> float:
    moment = try_parse_time(value)
    return moment.timestamp() if moment else float("-inf")


def closest(rows: list[Entry]) -> Entry | None:
    """A miner's verdict nearest the crown: the largest Δ to the king it was judged against."""
    scored = [e for e in rows if e.why.delta is not None]
    return max(scored, key=lambda e: e.why.delta) if scored else None
