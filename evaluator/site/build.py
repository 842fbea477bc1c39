"""`build_site`: the same MkDocs build as `mkdocs build`, callable from the CLI and the demo."""

from __future__ import annotations

import logging
from pathlib import Path

from mkdocs.commands.build import build
from mkdocs.config import load_config
from mkdocs.exceptions import MkDocsException

from evaluator.errors import TinyRouterError
from evaluator.rules import OFFICIAL, Competition
from evaluator.site.hooks import OPTIONS_KEY

log = logging.getLogger(__name__)

CONFIG_FILE = "mkdocs.yml"


class SiteBuildError(TinyRouterError):
    """The site could not be built (a broken page, link or leaderboard file)."""


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


def build_site(repo_dir: str | Path, out_dir: str | Path | None = None,
               leaderboard_dir: str | Path | None = None, rules: Competition = OFFICIAL,
               strict: bool = True) -> Path:
    """Build the site of the repository at `repo_dir` into `out_dir` and return that folder.

    `out_dir` defaults to mkdocs.yml's `site_dir`, `leaderboard_dir` to `<repo>/leaderboard`.
    """
    config_file = Path(repo_dir) / CONFIG_FILE
    if not config_file.is_file():
        raise SiteBuildError(f"{config_file} not found: pass the repository root")
    overrides: dict[str, object] = {"strict": strict}
    if out_dir is not None:
        _check_out_dir(Path(out_dir))
        overrides["site_dir"] = str(Path(out_dir).resolve())
    problems = _ProblemCollector()
    mkdocs_log = logging.getLogger("mkdocs")
    mkdocs_log.addHandler(problems)
    try:
        config = load_config(str(config_file), **overrides)
        config.extra[OPTIONS_KEY] = {"rules": rules, "leaderboard_dir": (
            Path(leaderboard_dir).resolve() if leaderboard_dir is not None else None)}
        build(config)
    except MkDocsException as exc:
        details = "; ".join(problems.messages) or str(exc)
        raise SiteBuildError(f"site build failed: {details}") from exc
    finally:
        mkdocs_log.removeHandler(problems)
    log.debug("site built in %s", config.site_dir)
    return Path(config.site_dir)
