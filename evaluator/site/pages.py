"""Generated pages: leaderboard state + Jinja templates → Markdown, charts and downloads."""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field
from typing import Any

from jinja2 import Environment, pass_context
from markupsafe import Markup

from evaluator.baselines import gap_closed
from evaluator.records import OUTCOMES
from evaluator.rules import Competition, is_commit_sha, is_name, is_sha256
from evaluator.scoring import BenchmarkScore
from evaluator.site.charts import fairness_svg, history_svg
from evaluator.site.downloads import download_files
from evaluator.site.markup import (
    FILTERS,
    finalize,
    md_text,
    miner_slug,
    safe_label,
)
from evaluator.site.state import LeaderboardState
from evaluator.templating import environment

CHART_URI = "assets/charts/history.svg"
FAIRNESS_CHART_URI = "assets/charts/fairness.svg"
DOWNLOADS_DIR = "downloads"
PAGES = (  # (page, template): the fixed generated pages
    ("history.md", "history.md.j2"),
    ("evaluations.md", "evaluations.md.j2"),
    ("miners/index.md", "miners.md.j2"),
    ("benchmarks.md", "benchmarks.md.j2"),
    ("fairness.md", "fairness.md.j2"),
    ("downloads.md", "downloads.md.j2"),
)
FRAGMENTS = {"king_panel": "king.md.j2"}  # inserted into hand-written pages
_SAFE_URL = re.compile(r"^https://[A-Za-z0-9._~/-]+$")
NO_SCORES = BenchmarkScore(*(None,) * len(BenchmarkScore.FIELDS))  # a benchmark without a record


@dataclass
class SiteContent:
    """What the hook adds to the MkDocs build."""

    pages: dict[str, str] = field(default_factory=dict)
    assets: dict[str, str] = field(default_factory=dict)
    fragments: dict[str, str] = field(default_factory=dict)
    miner_nav: list[dict[str, str]] = field(default_factory=list)


def miner_uri(name: Any) -> str:
    return f"miners/{miner_slug(name)}.md"


@pass_context
def _link(ctx: Any, target: str) -> Markup:
    """A link target relative to the page being rendered, as MkDocs expects."""
    here = posixpath.dirname(ctx["page_uri"]) or "."
    return Markup(posixpath.relpath(target, here))


@pass_context
def _miner_link(ctx: Any, name: Any) -> Markup:
    return Markup(f"[{md_text(name)}]({_link(ctx, miner_uri(name))})")


def _profile_link(name: Any) -> Markup:
    if not is_name(name):
        return md_text(name)
    return Markup(f"[@{name}](https://github.com/{name})")


@pass_context
def _pr_link(ctx: Any, pr: Any) -> Markup:
    if isinstance(pr, bool) or not isinstance(pr, int) or pr <= 0:
        return md_text(pr)
    repo = ctx["repo_url"]
    return Markup(f"[#{pr}]({repo}/pull/{pr})" if repo else f"#{pr}")


@pass_context
def _commit_link(ctx: Any, sha: Any) -> Markup:
    if not is_commit_sha(sha):
        return md_text(sha)
    repo = ctx["repo_url"]
    return Markup(f"[`{sha[:7]}`]({repo}/commit/{sha})" if repo else f"`{sha[:7]}`")


def _commitment(value: Any) -> Markup:
    if is_sha256(value):
        return Markup(f"`{value}`")
    return md_text(value)


def _badge(outcome: Any) -> Markup:
    if outcome in OUTCOMES:
        return Markup(f'<span class="tr-badge tr-{outcome}">{outcome}</span>')
    return md_text(outcome)


def _float(value: Any) -> float | None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    return float(value) if ok else None


def headroom(baselines: dict[str, Any]) -> float | None:
    """What a perfect router adds over the best single model."""
    oracle = _float(baselines.get("oracle"))
    best = _float((baselines.get("best_single") or {}).get("accuracy"))
    return None if oracle is None or best is None else oracle - best


def headroom_captured(cached: Any, baselines: dict[str, Any]) -> float | None:
    """The share of that headroom a head's cached accuracy realises."""
    return gap_closed(_float(cached), _float((baselines.get("best_single") or {}).get("accuracy")),
                      _float(baselines.get("oracle")))


def ordered(keys: Any, preferred: Any) -> list[str]:
    """`keys` in the order of `preferred` (the rules' order), then any others sorted."""
    keys = list(keys)
    return [k for k in preferred if k in keys] + sorted(k for k in keys if k not in preferred)


def make_environment(rules: Competition, repo_url: str | None) -> Environment:
    env = environment(autoescape=False, finalize=finalize)
    env.filters.update(FILTERS, badge=_badge, commitment=_commitment)
    url = (repo_url or "").rstrip("/")
    env.globals.update(rules=rules, link=_link, miner_link=_miner_link, pr_link=_pr_link,
                       profile_link=_profile_link, commit_link=_commit_link,
                       repo_url=url if _SAFE_URL.fullmatch(url) else "",
                       headroom=headroom, headroom_captured=headroom_captured, ordered=ordered,
                       chart_uri=CHART_URI, fairness_chart_uri=FAIRNESS_CHART_URI,
                       downloads=DOWNLOADS_DIR, no_scores=NO_SCORES)
    return env


def _baselines(state: LeaderboardState) -> dict[str, dict[str, Any]]:
    return {bench: dict(info.get("baselines") or {}) for bench, info in state.benchmarks.items()
            if isinstance(info, dict)}


def _pool_models(state: LeaderboardState, rules: Competition) -> list[str]:
    """The models the manifest's baselines name, in pool order."""
    named = {model for base in _baselines(state).values()
             for model in (base.get("per_model") or {})}
    return ordered(named, rules.pool_names) if named else list(rules.pool_names)


def _challenge_bar(state: LeaderboardState, rules: Competition) -> float | None:
    composite = state.king.composite if state.king else None
    return None if composite is None else composite + rules.win_margin


def generate(state: LeaderboardState, rules: Competition, repo_url: str | None = None) -> SiteContent:
    """Render every generated page (templates/site/), the history chart and the downloads."""
    env = make_environment(rules, repo_url)
    miners = state.miners()
    latest = state.results[0].evaluated_at if state.results else None
    chart = history_svg(state.kings, list(rules.benchmarks), until=latest,
                        win_margin=rules.win_margin if state.king else None)
    common = {"state": state, "king": state.king, "kings": state.kings,
              "results": state.results, "miners": miners, "baselines": _baselines(state),
              "benchmarks": list(rules.benchmarks), "has_chart": chart is not None,
              "manifest_benchmarks": ordered(state.benchmarks, rules.benchmarks),
              "pool_models": _pool_models(state, rules),
              "challenge_bar": _challenge_bar(state, rules)}
    content = SiteContent()
    for uri, template in PAGES:
        content.pages[uri] = env.get_template(f"site/{template}").render(common, page_uri=uri)
    for key, template in FRAGMENTS.items():
        content.fragments[key] = env.get_template(f"site/{template}").render(
            common, page_uri="index.md")
    for miner in miners:
        uri = miner_uri(miner.name)
        content.pages[uri] = env.get_template("site/miner.md.j2").render(
            common, page_uri=uri, miner=miner, title=safe_label(miner.name))
        content.miner_nav.append({safe_label(miner.name): uri})
    if chart is not None:
        content.assets[CHART_URI] = chart
    if state.fairness is not None:
        content.assets[FAIRNESS_CHART_URI] = fairness_svg(state.fairness, rules.win_margin)
    for name, text in download_files(state, rules).items():
        content.assets[f"{DOWNLOADS_DIR}/{name}"] = text
    return content
