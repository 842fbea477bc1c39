"""A public result as the people who read it see it: one headline, a PR comment, a job summary.

Only public fields are rendered (the disclosure rule is `records.Result.public`'s); the
Markdown templates escape every piece of text a miner could have written.
"""

from __future__ import annotations

from typing import Any

from evaluator.records import KING, REJECTED
from evaluator.rules import Competition
from evaluator.templating import render

TEMPLATES = {"comment": "evaluation/comment.md.j2", "summary": "evaluation/summary.md.j2"}


def render_result(kind: str, public: dict[str, Any], rules: Competition) -> str:
    """`comment` (the PR comment) or `summary` (the job summary) of a public record."""
    return render(TEMPLATES[kind], result=public, rules=rules.as_dict(),
                  benchmarks=list(rules.benchmarks))


def headline(public: dict[str, Any]) -> str:
    who = f"{public['miner']} generation {public['generation']}"
    if public["outcome"] == REJECTED:
        return f"{who}: rejected: {public['reason']}"
    versus = ("no king reigned" if public["king_composite"] is None else
              f"king {public['king_composite']:.4f}, delta {public['delta']:+.4f}")
    verdict = "new king" if public["outcome"] == KING else "not crowned"
    return f"{who}: {verdict}: composite {public['composite']:.4f} ({versus})"
