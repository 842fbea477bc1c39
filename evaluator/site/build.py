"""`build_site`: the same MkDocs build as `mkdocs build`, from the package's own files.

It writes a small configuration that inherits the shipped `mkdocs.yml` and points at the
shipped guides, theme overrides and hooks, so an installed wheel builds the whole site
outside any checkout.
"""

from __future__ import annotations

import logging
import tempfile
from datetime import datetime
from pathlib import Path

from mkdocs.commands.build import build
from mkdocs.config import load_config
from mkdocs.exceptions import MkDocsException

from evaluator.errors import SiteBuildError
from evaluator.files import dumps
from evaluator.resources import GUIDES, TEMPLATES, bundled
from evaluator.rules import Competition
from evaluator.site.hooks import OPTIONS_KEY

log = logging.getLogger(__name__)

SITE_DIR = Path(__file__).resolve().parent
BASE_CONFIG = SITE_DIR / "mkdocs.yml"
THEME_OVERRIDES = ("site", "theme")  # under the shipped templates/


class _ProblemCollector(logging.Handler):
    """Keeps MkDocs' warnings and errors, so the exception can say what broke."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def _check_out_dir(out: Path) -> None:
    """MkDocs empties its output folder first: refuse one that holds anything but a site."""
    if out.is_dir() and any(out.iterdir()) and not (out / "index.html").is_file():
        raise SiteBuildError(f"{out} is not empty and holds no earlier site build; "
                             "pick an empty or new folder (the build deletes its contents)")


def _config_text(out: Path, site_url: str | None) -> str:
    """The build's configuration: the shipped one, with absolute paths (JSON is YAML)."""
    return dumps({
        "INHERIT": str(BASE_CONFIG), "docs_dir": str(bundled(GUIDES)), "site_dir": str(out),
        "theme": {"custom_dir": str(bundled(TEMPLATES).joinpath(*THEME_OVERRIDES))},
        "hooks": [str(SITE_DIR / "hooks.py")], **({"site_url": site_url} if site_url else {})})


def build_site(out_dir: str | Path, leaderboard_dir: str | Path, rules: Competition,
               strict: bool = True, now: datetime | None = None, site_url: str | None = None,
               demo: bool = False) -> Path:
    """Build the site from the leaderboard at `leaderboard_dir` into `out_dir`; returns it.

    `now` is the build's time (the clock, or SOURCE_DATE_EPOCH, when None); `site_url` the
    address it will be served at (else the configured one, see hooks); `demo` puts a banner
    on every page saying the board is the demo's."""
    out = Path(out_dir).resolve()
    _check_out_dir(out)
    problems = _ProblemCollector()
    mkdocs_log = logging.getLogger("mkdocs")
    mkdocs_log.addHandler(problems)
    try:
        with tempfile.TemporaryDirectory(prefix="tinyrouter-site-") as tmp:
            config_file = Path(tmp) / "mkdocs.yml"
            config_file.write_text(_config_text(out, site_url), encoding="utf-8")
            config = load_config(str(config_file), strict=strict)
            config.extra[OPTIONS_KEY] = {"rules": rules, "now": now, "demo": demo,
                                         "leaderboard_dir": Path(leaderboard_dir).resolve()}
            build(config)
    except MkDocsException as exc:
        details = "; ".join(problems.messages) or str(exc)
        raise SiteBuildError(f"site build failed: {details}") from exc
    finally:
        mkdocs_log.removeHandler(problems)
    log.debug("site built in %s", out)
    return out
