"""Generated pages: leaderboard state + Jinja templates → Markdown, charts and downloads."""

from __future__ import annotations

import dataclasses
import json
import math
import posixpath
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import quote, unquote

from jinja2 import Environment, pass_context
from markupsafe import Markup, escape

from evaluator.baselines import gap_closed
from evaluator.benchmarks.agreement import grading_facts
from evaluator.explain import explain, explain_gate, gate_label
from evaluator.files import format_time, utc_now
from evaluator.records import KING, OUTCOMES, Result
from evaluator.rules import ROLES, Competition, is_commit_sha, is_name, is_sha256
from evaluator.scoring import BenchmarkScore
from evaluator.site.board import baseline_rows, head_points, head_rows, replays
from evaluator.site.cards import (
    MIN_SHARE_ITEMS,
    CostPoint,
    Reign,
    best_single_cost,
    chart_rows,
    cost_points,
    gains,
    mix,
    model_cost,
    oracle_accuracy,
    reigns,
)
from evaluator.site.charts import FRAMES, WIDE, cost_svg, fairness_svg, history_svg, mix_svg
from evaluator.site.downloads import download_files
from evaluator.site.follow import BADGE_URI, FEED_URI, atom_feed, king_badge
from evaluator.site.markup import (
    FILTERS,
    finalize,
    md_text,
    miner_id,
    miner_slug,
    safe_label,
)
from evaluator.site.queue import build_queue
from evaluator.site.state import LeaderboardState, MinerSummary
from evaluator.site.verdicts import Entry, closest, entries
from evaluator.templating import environment

EVALUATIONS_PER_PAGE = 100  # rows of each Evaluations page; older verdicts on the next ones
EVALUATION_PAGES = 10  # pages of them; older verdicts are in the search and evaluations.csv
MINERS_LISTED = 100  # rows of the Miners page; every miner is a search away (miners.json)
MINERS_JSON = "miners.json"
CHART_URI = "assets/charts/history.svg"
COST_CHART_URI = "assets/charts/cost.svg"
FAIRNESS_CHART_URI = "assets/charts/fairness.svg"
DOWNLOADS_DIR = "downloads"
PAGES = (  # (page, template): the fixed generated pages
    ("leaderboard.md", "leaderboard.md.j2"),
    ("history.md", "history.md.j2"),
    ("queue.md", "queue.md.j2"),
    ("miners/index.md", "miners.md.j2"),
    ("benchmarks.md", "benchmarks.md.j2"),
    ("fairness.md", "fairness.md.j2"),
    ("downloads.md", "downloads.md.j2"),
)
# inserted into hand-written pages: key → template, and the page (if not the home page)
FRAGMENTS = {"king_panel": "king.md.j2", "cost_panel": "cost.md.j2",
             "rewards_panel": "rewards.md.j2", "follow_panel": "follow.md.j2"}
FRAGMENT_PAGES = {"rewards_panel": "rewards.md"}
REWARD_TEXT = ("programme", "currency", "note")  # free-text fields of `extra.rewards`
_SAFE_URL = re.compile(r"^https://[A-Za-z0-9._~/-]+$")
_REPO_PATH = re.compile(r"[A-Za-z0-9_-]+(?:/[A-Za-z0-9_.-]+)*")
_SITE_URL = re.compile(r"^https?://[A-Za-z0-9.-]+(:[0-9]+)?(/[A-Za-z0-9._~/-]*)?$")
NO_SCORES = BenchmarkScore(*(None,) * len(BenchmarkScore.FIELDS))  # a benchmark without a record


@dataclass
class SiteContent:
    """What the hook adds to the MkDocs build."""

    pages: dict[str, str] = field(default_factory=dict)
    assets: dict[str, str] = field(default_factory=dict)
    fragments: dict[str, str] = field(default_factory=dict)
    miner_nav: list[dict[str, str]] = field(default_factory=list)


def miner_uri(name: Any) -> str:
    """`miners/@login.md` (lower case), a name no login or fixed page can take."""
    return f"miners/{miner_slug(name)}.md"


@pass_context
def _link(ctx: Any, target: str) -> Markup:
    """A link target relative to the page being rendered, as MkDocs expects."""
    here = posixpath.dirname(ctx["page_uri"]) or "."
    return Markup(posixpath.relpath(target, here))


def miner_query(name: Any) -> str:
    """The Miners page's address for a miner without a page: its search, given the miner."""
    return f"miners/index.md?miner={quote(miner_id(name), safe='')}"


def evaluations_uri(page: int) -> str:
    """`evaluations.md`, then `evaluations/2.md`, … for older verdicts."""
    return "evaluations.md" if page == 1 else f"evaluations/{page}.md"


def _html_link(ctx: Any, target: str) -> str:
    """A link target for raw HTML, which MkDocs leaves as written: relative to the address
    the page is published at (a directory URL), not to its Markdown source."""
    here = page_url(ctx["page_uri"]).rstrip("/") or "."
    return quote(posixpath.relpath(target, unquote(here)))


@pass_context
def _miner_link(ctx: Any, name: Any) -> Markup:
    """A miner's page where they have one, else their entry in the Miners page's search."""
    shown = ctx["display_name"](name)
    if ctx["has_page"](name):
        return Markup(f"[{md_text(shown)}]({_link(ctx, miner_uri(name))})")
    here = posixpath.dirname(ctx["page_uri"]) or "."
    return Markup(f"[{md_text(shown)}]({posixpath.relpath('miners/index.md', here)}"
                  f"{miner_query(name).removeprefix('miners/index.md')})")


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


@pass_context
def _repo_file(ctx: Any, path: Any) -> Markup:
    """A file of the repository, linked on its main branch when the site knows the repository."""
    if not isinstance(path, str) or not _REPO_PATH.fullmatch(path):
        return md_text(path)
    repo = ctx["repo_url"]
    return Markup(f"[`{path}`]({repo}/blob/main/{path})" if repo else f"`{path}`")


def _commitment(value: Any) -> Markup:
    if is_sha256(value):
        return Markup(f"`{value}`")
    return md_text(value)


def _badge(outcome: Any) -> Markup:
    if isinstance(outcome, Entry):
        if outcome.result is not None:
            return _badge(outcome.result.outcome)
        return Markup(f'<span class="tr-badge tr-rejected">rejected at '
                      f'{escape(gate_label(outcome.why.gate))}</span>')
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


def reign_record(reign: Reign) -> Result | dict[str, Any]:
    """The record a reign's verdict is explained from: its crowning result, or failing that the
    history entry (its Δ and interval are the same figures)."""
    if reign.result is not None:
        return reign.result
    return {**reign.king.to_dict(), "outcome": KING, "evaluated_at": reign.king.crowned_at}


def make_environment(rules: Competition, repo_url: str | None) -> Environment:
    env = environment(autoescape=False, finalize=finalize)
    env.filters.update(FILTERS, badge=_badge, commitment=_commitment)
    url = (repo_url or "").rstrip("/")
    env.globals.update(rules=rules, link=_link, miner_link=_miner_link, pr_link=_pr_link,
                       profile_link=_profile_link, commit_link=_commit_link,
                       repo_file=_repo_file,
                       repo_url=url if _SAFE_URL.fullmatch(url) else "",
                       headroom=headroom, headroom_captured=headroom_captured, ordered=ordered,
                       mix=mix, gains=gains, model_cost=model_cost, miner_uri=miner_uri,
                       chart_uri=CHART_URI, cost_chart_uri=COST_CHART_URI,
                       fairness_chart_uri=FAIRNESS_CHART_URI, chart=_chart,
                       min_share_items=MIN_SHARE_ITEMS,
                       downloads=DOWNLOADS_DIR, no_scores=NO_SCORES,
                       display_name=lambda name: name, has_page=lambda name: True,
                       miners_json=f"{DOWNLOADS_DIR}/{MINERS_JSON}",
                       explain=lambda record: explain(record, rules),
                       reign_why=lambda reign: explain(reign_record(reign), rules))
    return env


def _baselines(state: LeaderboardState) -> dict[str, dict[str, Any]]:
    return {bench: dict(info.get("baselines") or {}) for bench, info in state.benchmarks.items()
            if isinstance(info, dict)}


def _pool_models(state: LeaderboardState, rules: Competition) -> list[str]:
    """The models the manifest's baselines name, in pool order."""
    named = {model for base in _baselines(state).values()
             for model in (base.get("per_model") or {})}
    return ordered(named, rules.pool_names) if named else list(rules.pool_names)


def _rewards(configured: Any) -> dict[str, Any]:
    """The maintainers' reward settings, text only: a link must be a plain https URL."""
    settings = configured if isinstance(configured, dict) else {}
    text = {key: settings[key] if isinstance(settings.get(key), str) and settings[key].strip()
            else None for key in REWARD_TEXT}
    needs = settings.get("needs")
    url = settings.get("url")
    return {**text, "needs": [n for n in needs if isinstance(n, str)]
            if isinstance(needs, list) else [],
            "url": url if isinstance(url, str) and _SAFE_URL.fullmatch(url) else None}


def _badge_filter(reigning: tuple | None):
    def badge(record: Any) -> Markup:
        """A result's outcome; a king that has since been dethroned is a former king."""
        if isinstance(record, Entry):
            if record.result is None:
                return _badge(record)
            record = record.result
        outcome = getattr(record, "outcome", record)
        if outcome == KING and reigning is not None and getattr(record, "key", reigning) != reigning:
            return Markup('<span class="tr-badge tr-former" title="crowned, since dethroned">'
                          "former king</span>")
        return _badge(outcome)
    return badge


def narrow_uri(uri: str) -> str:
    """Where a chart's phone-width drawing is: beside the desktop one."""
    return uri.removesuffix(".svg") + "-narrow.svg"


@pass_context
def _chart(ctx: Any, uri: str, alt: str) -> Markup:
    """A chart drawn for the width it is shown at: the narrow drawing on a phone."""
    wide, narrow = _html_link(ctx, uri), _html_link(ctx, narrow_uri(uri))
    return Markup(f'<picture><source media="(max-width: 44.9375em)" srcset="{narrow}">'
                  f'<img class="tr-chart" src="{wide}" alt="{md_text(alt)}"></picture>')


def _charts(state: LeaderboardState, rules: Competition, now: datetime, line: list[Reign],
            points: list[CostPoint], baselines: dict[str, Any], pool_models: list[str],
            names: dict[str, str]) -> dict[str, str]:
    """Every chart of the site, at each width: asset path → SVG text (a chart without data
    is left out)."""
    shown = [dataclasses.replace(k, miner=names.get(miner_id(k.miner), k.miner))
             for k in state.kings]
    oracle = oracle_accuracy(baselines, rules.benchmarks)
    charts = {}
    for frame in FRAMES:
        drawn = {CHART_URI: history_svg(shown, list(rules.benchmarks), until=now, frame=frame),
                 COST_CHART_URI: cost_svg(points, oracle, frame)}
        if state.fairness is not None:
            drawn[FAIRNESS_CHART_URI] = fairness_svg(state.fairness, frame)
        for reign in line:
            drawn[reign.chart_uri] = mix_svg([(b, chart_rows(reign.card, b))
                                              for b in rules.benchmarks], pool_models, frame)
        charts.update({uri if frame is WIDE else narrow_uri(uri): svg
                       for uri, svg in drawn.items()})
    return {uri: svg for uri, svg in charts.items() if svg is not None}


def _state_globals(env: Environment, state: LeaderboardState, line: list[Reign]) -> None:
    """What templates look up per record: a miner's shown name, a result's badge and reign."""
    names = state.display_names()
    paged = {m.id for m in paged_miners(state)}
    by_key = {(miner_id(r.king.miner), r.king.generation): r for r in line}
    env.globals.update(display_name=lambda name: names.get(miner_id(name), name),
                       has_page=lambda name: miner_id(name) in paged,
                       reign_for=lambda r: by_key.get((miner_id(r.miner), r.generation)),
                       gate_why=explain_gate)
    env.filters["badge"] = _badge_filter(state.king.key if state.king else None)


def page_url(uri: str) -> str:
    """The address MkDocs publishes a page at (directory URLs), relative to the site's root."""
    path = uri.removesuffix(".md")
    path = path.removesuffix("index") if path.endswith("/index") or path == "index" else path + "/"
    return quote(path)


def paged_miners(state: LeaderboardState) -> list[MinerSummary]:
    """The miners with a page of their own: those ever crowned (their breakdowns and router
    cards). Everyone else's record is in the Miners page's search and the downloads, so the
    build does not grow by a page with every loser."""
    return [m for m in state.miners() if m.crowns]


def listed_miners(state: LeaderboardState, closest_of: Any) -> list[MinerSummary]:
    """The Miners page's table: most crowns, then closest to the crown, then latest active."""
    def rank(miner: MinerSummary) -> tuple:
        near = closest_of(miner)
        return (miner.crowns, near.why.delta if near else float("-inf"),
                miner.last_activity or "")
    return sorted(state.miners(), key=rank, reverse=True)[:MINERS_LISTED]


def miners_json(state: LeaderboardState, names: dict[str, str],
                by_miner: dict[str, list[Entry]]) -> str:
    """Every miner's record for the Miners page's search: the counts its table shows, each
    verdict as the Evaluations page explains it, and the page (relative to the site's root)
    where there is one."""
    paged = {m.id for m in paged_miners(state)}
    rows = [{"id": m.id, "name": names.get(m.id, m.name), "attempts": len(m.attempts),
             "evaluated": len(m.results), "crowns": m.crowns, "last_activity": m.last_activity,
             "page": page_url(miner_uri(m.name)) if m.id in paged else None,
             "verdicts": [{"when": e.when, "generation": e.generation, "pr": e.pr,
                           "outcome": e.why.outcome, "composite": e.why.composite,
                           "delta": e.why.delta, "places": e.why.places, "why": e.why.sentence,
                           "difference": e.why.difference,
                           "interval": list(e.why.interval) if e.why.interval else None}
                          for e in by_miner.get(m.id, [])]}
            for m in state.miners()]
    return json.dumps({"format": 1, "miners": rows}, sort_keys=True, separators=(",", ":"))


def _evaluation_pages(env: Environment, common: dict[str, Any], content: SiteContent) -> None:
    """Evaluations, newest first, EVALUATIONS_PER_PAGE verdicts to a page."""
    verdicts = common["entries"]
    count = min(EVALUATION_PAGES, max(1, math.ceil(len(verdicts) / EVALUATIONS_PER_PAGE)))
    template = env.get_template("site/evaluations.md.j2")
    for page in range(1, count + 1):
        uri = evaluations_uri(page)
        rows = verdicts[(page - 1) * EVALUATIONS_PER_PAGE:page * EVALUATIONS_PER_PAGE]
        pager = {"page": page, "pages": count, "total": len(verdicts),
                 "paged": min(len(verdicts), count * EVALUATIONS_PER_PAGE),
                 "newer": evaluations_uri(page - 1) if page > 1 else None,
                 "older": evaluations_uri(page + 1) if page < count else None}
        content.pages[uri] = template.render(common, page_uri=uri, entries=rows, pager=pager)


def generate(state: LeaderboardState, rules: Competition, repo_url: str | None = None,
             now: datetime | None = None, rewards: dict[str, Any] | None = None,
             site_url: str | None = None, demo: bool = False) -> SiteContent:
    """Render every generated page (templates/site/), the charts and the downloads. `now` is
    the build's time (the history chart runs to it, rate-limit slots are counted from it);
    `rewards` the maintainers' `extra.rewards` from mkdocs.yml; `site_url` the address the
    site is served at (the feed's links are absolute with it); `demo` marks a site built
    from the demo's made-up board."""
    now = now or utc_now()
    env = make_environment(rules, repo_url)
    line, miners, names = reigns(state), state.miners(), state.display_names()
    verdicts = entries(state, rules)
    base_url = site_url.rstrip("/") + "/" if site_url and _SITE_URL.fullmatch(site_url) else ""
    by_miner = _by_miner(verdicts)
    env.globals["closest_of"] = lambda m: closest(by_miner.get(m.id, []))
    _state_globals(env, state, line)
    baselines, pool_models = _baselines(state), _pool_models(state, rules)
    replayed = replays(state, rules)
    heads = head_rows(state, rules, replayed)
    board = [*heads, *baseline_rows(baselines, rules, pool_models)]
    points = cost_points(line, baselines, rules, pool_models, names, head_points(heads, names))
    content = SiteContent(assets=_charts(state, rules, now, line, points, baselines,
                                         pool_models, names))
    common = {"state": state, "king": state.king, "kings": state.kings, "reigns": line,
              "current": next((r for r in line if state.king and r.king.key == state.king.key),
                              None),
              "results": state.results, "entries": verdicts, "miners": miners, "baselines": baselines,
              "benchmarks": list(rules.benchmarks), "has_chart": CHART_URI in content.assets,
              "has_cost_chart": COST_CHART_URI in content.assets, "cost_points": points,
              "best_single_cost": best_single_cost(baselines, rules.benchmarks),
              "manifest_benchmarks": ordered(state.benchmarks, rules.benchmarks),
              "pool_models": pool_models, "roles": list(ROLES),
              "queue": build_queue(state, rules, now), "built_at": format_time(now),
              "rewards": _rewards(rewards), "demo": demo,
              "site_url": base_url, "feed_uri": FEED_URI, "badge_uri": BADGE_URI,
              "listed_miners": listed_miners(state, env.globals["closest_of"]),
              "grading": grading_facts(), "board": board, "replayed": list(replayed.values())}
    for uri, template in PAGES:
        content.pages[uri] = env.get_template(f"site/{template}").render(common, page_uri=uri)
    _evaluation_pages(env, common, content)
    for key, template in FRAGMENTS.items():
        content.fragments[key] = env.get_template(f"site/{template}").render(
            common, page_uri=FRAGMENT_PAGES.get(key, "index.md"))
    paged = paged_miners(state)
    _miner_pages(env, common, content, paged, by_miner)
    _reign_pages(env, common, content, line, names)
    content.assets[FEED_URI] = atom_feed(verdicts, base_url, now, _page_of(line, paged), names)
    content.assets[BADGE_URI] = king_badge(state.king, names)
    for name, text in download_files(state, rules, points, board).items():
        content.assets[f"{DOWNLOADS_DIR}/{name}"] = text
    content.assets[f"{DOWNLOADS_DIR}/{MINERS_JSON}"] = miners_json(state, names, by_miner)
    return content


def _by_miner(verdicts: list[Entry]) -> dict[str, list[Entry]]:
    """The verdicts by miner id, in their order."""
    by_miner: dict[str, list[Entry]] = {}
    for entry in verdicts:
        by_miner.setdefault(miner_id(entry.miner), []).append(entry)
    return by_miner


def _miner_pages(env: Environment, common: dict[str, Any], content: SiteContent,
                 paged: list[MinerSummary], by_miner: dict[str, list[Entry]]) -> None:
    """A page per miner that has one, listed in the navigation."""
    for miner in paged:
        uri = miner_uri(miner.name)
        own = by_miner.get(miner.id, [])
        content.pages[uri] = env.get_template("site/miner.md.j2").render(
            common, page_uri=uri, miner=miner, title=safe_label(miner.name), own=own,
            closest=closest(own))
        content.miner_nav.append({safe_label(miner.name): uri})


def _reign_pages(env: Environment, common: dict[str, Any], content: SiteContent,
                 line: list[Reign], names: dict[str, str]) -> None:
    """A router card per reign."""
    for reign in line:
        content.pages[reign.uri] = env.get_template("site/router_card.md.j2").render(
            common, page_uri=reign.uri, reign=reign,
            has_mix_chart=reign.chart_uri in content.assets,
            title=safe_label(names.get(miner_id(reign.king.miner), reign.king.miner)))


def _page_of(line: list[Reign], paged: list[MinerSummary]) -> Callable[[Entry], str]:
    """Where the feed links a verdict: its reign's card, else its miner's page, else the
    miners' list filtered to it."""
    by_reign = {(miner_id(r.king.miner), r.king.generation): r.uri for r in line}
    with_page = {m.id for m in paged}

    def page_of(entry: Entry) -> str:
        key = (miner_id(entry.miner), entry.generation)
        if entry.why.outcome == KING and key in by_reign:
            return page_url(by_reign[key])
        if miner_id(entry.miner) in with_page:
            return page_url(miner_uri(entry.miner))
        return page_url("miners/index.md") + miner_query(entry.miner).removeprefix(
            "miners/index.md")

    return page_of
