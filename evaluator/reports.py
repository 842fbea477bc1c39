"""A public result as the people who read it see it: one headline, a PR comment, a job summary.

Only public fields are rendered (the disclosure rule is `records.Result.public`'s), the
sentence of why is `explain.explain`'s, as on the site, and the Markdown templates escape every
piece of text a miner could have written.
"""

from __future__ import annotations

from typing import Any

from evaluator.explain import explain
from evaluator.records import KING, UNSCORED
from evaluator.rules import Competition
from evaluator.templating import render

TEMPLATES = {"comment": "evaluation/comment.md.j2", "summary": "evaluation/summary.md.j2"}
UNFINISHED_TEMPLATE = "evaluation/unfinished.md.j2"


def render_result(kind: str, public: dict[str, Any], rules: Competition) -> str:
    """`comment` (the PR comment) or `summary` (the job summary) of a public record."""
    return render(TEMPLATES[kind], result=public, rules=rules.as_dict(),
                  benchmarks=list(rules.benchmarks), why=explain(public, rules))


def render_unfinished(event: dict[str, Any]) -> str:
    """The PR comment of an evaluation that ended without a result (a queue event)."""
    return render(UNFINISHED_TEMPLATE, event=event)


def headline(public: dict[str, Any]) -> str:
    """One line of the public record: what the disclosure rule lets a log say."""
    who = f"{public['miner']} generation {public['generation']}"
    if public["outcome"] in UNSCORED:
        return f"{who}: {public['outcome']}: {public['reason']}"
    if public["outcome"] == KING:
        versus = ("no king reigned" if public["king_composite"] is None else
                  f"king {public['king_composite']:.4f}, delta {public['delta']:+.4f}")
        return f"{who}: new king: composite {public['composite']:.4f} ({versus})"
    test = public.get("crown_test") or {}
    where = f" after live stage {test['stage']}" if "stage" in test else ""
    return (f"{who}: not crowned{where}: composite {public['composite']:.2f}, delta "
            f"{public['delta']:+.2f}")


def crown_test(result: dict, rules: Competition) -> str:
    """The crown test of a public result, stage by stage, in words."""
    test = result.get("crown_test")
    if not test:
        return f"{result['outcome']} (delta {result['delta']:+.2f})."
    stages = len(rules.live_stages)
    steps = [f"stage 1 ({rules.live_stages[0]} live questions per benchmark)"]
    if test["stage"] > 1:
        steps.append(f"undecided, so stage 2 ({rules.live_stages[1]} more)")
    crowned = result["outcome"] == "king"
    if "z" not in test:  # a loss publishes where its test ended, none of its figures
        return (f"{', '.join(steps)}: lost after stage {test['stage']} "
                f"({test['live_sessions']} live sessions).")
    return (f"{', '.join(steps)}: difference {test['difference']:+.3f} (margin "
            f"{rules.win_margin}), z {test['z']:.2f} against {rules.crown_bar(test['stage'])} "
            "to crown"
            + (f", {rules.lose_z_first} to lose" if test["stage"] < stages else "")
            + f"; {'crowned' if crowned else 'lost'} after stage {test['stage']} "
            f"({test['live_sessions']} live sessions).")
