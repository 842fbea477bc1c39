"""The one Jinja setup: strict, from the shipped `templates/`, escaping what strangers wrote.

Two flavours share it. Markdown for GitHub (PR comments, job summaries, submission READMEs)
autoescapes HTML and escapes Markdown with the `md` filter. Site pages pass every value
through a finalizer (`site.markup.finalize`) that turns text into inert entities; the
site adds its own filters and globals on top.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import cache
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined
from markupsafe import Markup

from evaluator.resources import TEMPLATES, bundled

_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+!|~>-])")


def md(text: object) -> Markup:
    """Escape text for Markdown and HTML, so a hostile name shows as itself. Only `&`, `<`
    and `>` become entities: with no tag possible a quote is harmless, and an entity's `#`
    escaped for Markdown would show the entity itself (`items&#39;`)."""
    escaped = str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    escaped = _MARKDOWN_SPECIAL.sub(r"\\\1", escaped)
    return Markup(escaped.replace("\r", " ").replace("\n", " "))


def environment(autoescape: bool = True,
                finalize: Callable[[Any], Any] | None = None) -> Environment:
    """A fresh strict environment over the shipped templates."""
    env = Environment(loader=FileSystemLoader(str(bundled(TEMPLATES))), autoescape=autoescape,
                      finalize=finalize, undefined=StrictUndefined, keep_trailing_newline=True,
                      trim_blocks=True, lstrip_blocks=True)
    env.filters["md"] = md
    return env


@cache
def _markdown() -> Environment:
    return environment()


def render(name: str, **context: object) -> str:
    """A Markdown template for GitHub (see the module docstring)."""
    return _markdown().get_template(name).render(**context)
