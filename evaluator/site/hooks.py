"""MkDocs hooks, named in mkdocs.yml: generate pages from `leaderboard/` and render the rules.

`mkdocs build` and `serve` run them on their own (the board from TINYROUTER_LEADERBOARD_DIR or
`<repo>/leaderboard`, rules from TINYROUTER_COMPETITION or the official ones); `build_site`
passes both through `config.extra["tinyrouter"]`. The site links only to a repository it was
told about (`repo_url`), and a demo site says so on every page.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File

from evaluator import resources
from evaluator.errors import TinyRouterError
from evaluator.files import utc_now
from evaluator.resources import COSTS, DEMO_TIMES, TEMPLATES, bundled
from evaluator.rules import OFFICIAL, Competition
from evaluator.site.markup import FILTERS, rules_differences
from evaluator.site.pages import _SAFE_URL, SiteContent, generate
from evaluator.site.state import load_state
from evaluator.store import LEADERBOARD_DIR
from evaluator.templating import environment
from evaluator.verdict import walk_through

OPTIONS_KEY = "tinyrouter"
MINERS_TITLE = "Miners"


def _options(config: Any) -> dict[str, Any]:
    options = config.extra.get(OPTIONS_KEY)
    if not isinstance(options, dict):
        options = {}
        config.extra[OPTIONS_KEY] = options
    return options


def _default_rules() -> Competition:
    path = os.environ.get("TINYROUTER_COMPETITION")
    return Competition.load(path) if path else OFFICIAL


def _with_miners(nav: list[Any] | None, miner_nav: list[dict[str, str]]) -> list[Any] | None:
    """The nav with the Miners entry expanded into the index plus one page per miner."""
    if not nav:
        return nav
    expanded = []
    for entry in nav:
        if isinstance(entry, dict) and isinstance(entry.get(MINERS_TITLE), str):
            entry = {MINERS_TITLE: [entry[MINERS_TITLE], *miner_nav]}
        expanded.append(entry)
    return expanded


def _repo_url(configured: str | None) -> str | None:
    if configured:
        return configured
    server, repository = os.environ.get("GITHUB_SERVER_URL"), os.environ.get("GITHUB_REPOSITORY")
    return f"{server.rstrip('/')}/{repository}" if server and repository else None


def _safe_url(url: str | None) -> str:
    """The repository URL a guide may link to (issue forms), or "" when it is not a plain one."""
    url = (url or "").rstrip("/")
    return url if _SAFE_URL.fullmatch(url) else ""


def _site_url(configured: str | None) -> str | None:
    """The configured address, else the Pages address of the workflow's repository."""
    if configured:
        return configured
    repository = os.environ.get("GITHUB_REPOSITORY", "")
    owner, _, name = repository.partition("/")
    if not owner or not name or os.environ.get("GITHUB_SERVER_URL") != "https://github.com":
        return None
    host = f"{owner.lower()}.github.io"
    return f"https://{host}/" if name.lower() == host else f"https://{host}/{name}/"


def _now() -> datetime:
    epoch = os.environ.get("SOURCE_DATE_EPOCH", "").strip()
    return datetime.fromtimestamp(int(epoch), UTC) if epoch.isdigit() else utc_now()


def on_config(config: Any) -> Any:
    root = Path(config.config_file_path).parent
    options = _options(config)
    leaderboard = Path(options.get("leaderboard_dir")
                       or os.environ.get("TINYROUTER_LEADERBOARD_DIR") or root / LEADERBOARD_DIR)
    rules = options.get("rules") or _default_rules()
    config.repo_url = _repo_url(config.repo_url)
    config.site_url = _site_url(config.site_url)
    demo = bool(options.get("demo")) or os.environ.get("TINYROUTER_DEMO") == "1"
    options["demo"] = demo
    options["differs"] = rules_differences(rules) if demo else ""  # the banner says what
    try:
        content = generate(load_state(leaderboard), rules, config.repo_url,
                           now=options.get("now") or _now(), rewards=config.extra.get("rewards"),
                           site_url=config.site_url, demo=demo)
    except (TinyRouterError, jinja2.TemplateError) as exc:
        raise PluginError(f"cannot generate the leaderboard pages: {exc}") from exc
    # the Scoring page's worked decision, decided once per build by the verdict function
    options.update(leaderboard_dir=leaderboard, rules=rules, content=content,
                   templates_dir=bundled(TEMPLATES), walk=walk_through(rules))
    config.nav = _with_miners(config.nav, content.miner_nav)
    return config


def on_files(files: Any, config: Any) -> Any:
    content: SiteContent = _options(config)["content"]
    for uri, text in {**content.pages, **content.assets}.items():
        if files.get_file_from_path(uri) is not None:
            raise PluginError(f"{config.docs_dir}/{uri} clashes with a generated page: remove it")
        files.append(File.generated(config, uri, content=text))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """Hand-written pages are Jinja templates over `rules`, so numbers come from the code."""
    options = _options(config)
    content: SiteContent = options["content"]
    if page.file.src_uri in content.pages:
        return markdown
    env = environment(autoescape=False)
    env.filters.update(FILTERS)
    fragments = {key: Markup(text) for key, text in content.fragments.items()}
    try:
        return env.from_string(markdown).render(rules=options["rules"].as_dict(),
                                                walk=options["walk"], demo_times=shipped(DEMO_TIMES),
                                                costs=shipped(COSTS),
                                                repo_url=_safe_url(config.repo_url), **fragments)
    except jinja2.TemplateError as exc:
        line = getattr(exc, "lineno", None)
        where = f"{page.file.src_uri}:{line}" if line else page.file.src_uri
        raise PluginError(f"{where}: {exc}") from exc


def shipped(name: str) -> dict[str, Any] | None:
    """Figures a study measured for the guides (`tinyrouter dev demo`, `dev costs`), or None."""
    path = resources.data_file(name)
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def on_serve(server: Any, config: Any, builder: Any) -> Any:
    options = _options(config)
    for path in (options["leaderboard_dir"], options["templates_dir"]):
        if Path(path).exists():
            server.watch(str(path))
    return server
