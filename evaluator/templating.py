"""Jinja rendering for PR comments and job summaries: strict, and escaping untrusted text."""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

from jinja2 import Environment, FileSystemLoader, StrictUndefined
from markupsafe import Markup, escape

TEMPLATES_DIR = Path(__file__).resolve().parent.parent / "templates"
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+!|~>-])")


def md(text: object) -> Markup:
    """Escape text for Markdown and HTML, so a hostile name shows as itself."""
    escaped = str(escape(str(text)))
    escaped = _MARKDOWN_SPECIAL.sub(r"\\\1", escaped)
    return Markup(escaped.replace("\r", " ").replace("\n", " "))


@lru_cache(maxsize=4)
def environment(directory: str = str(TEMPLATES_DIR)) -> Environment:
    env = Environment(loader=FileSystemLoader(directory), autoescape=True,
                      undefined=StrictUndefined, keep_trailing_newline=True,
                      trim_blocks=True, lstrip_blocks=True)
    env.filters["md"] = md
    return env


def render(name: str, **context: object) -> str:
    return environment().get_template(name).render(**context)
