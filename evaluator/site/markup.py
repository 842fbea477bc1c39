"""Escaping and number formats for generated pages: untrusted text always ends up as text.

Miner names, PR titles and README text come from strangers. Every character outside
letters, digits and spaces becomes a numeric HTML entity, which neither Markdown nor
HTML reads as syntax (no links, emphasis, attribute lists or tags), yet browsers
display it as the original character.
"""

from __future__ import annotations

import hashlib
import re
from datetime import UTC
from typing import Any

from markupsafe import Markup

from evaluator.files import try_parse_time
from evaluator.rules import is_name

MISSING = "—"
_PLAIN = re.compile(r"[A-Za-z0-9 ]|[^\x00-\x7f]")
_CONTROL = re.compile(r"[\x00-\x1f\x7f\u2028\u2029]")


def md_text(value: Any) -> Markup:
    """`value` as Markdown source that renders as exactly its text, on one line."""
    if value is None:
        return Markup(MISSING)
    text = _CONTROL.sub(" ", str(value))
    return Markup("".join(ch if _PLAIN.fullmatch(ch) else f"&#{ord(ch)};" for ch in text))


def finalize(value: Any) -> str:
    """Jinja finalizer for generated pages: escape everything not already marked safe."""
    if hasattr(value, "__html__"):
        return str(value.__html__())
    return str(md_text(value))


def safe_label(name: Any) -> str:
    """A label for page titles and navigation, which the theme inserts unescaped."""
    if is_name(name):
        return name
    cleaned = re.sub(r"[^A-Za-z0-9_-]+", "_", str(name)).strip("_")[:40]
    return f"{cleaned or 'unnamed'} (invalid name)"


def miner_slug(name: Any) -> str:
    """The file name of a miner's page: the login itself, or a hash when it is not a login."""
    if is_name(name):
        return name
    return "miner-" + hashlib.sha256(str(name).encode("utf-8")).hexdigest()[:12]


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def fmt_score(value: Any, digits: int = 4) -> Markup:
    number = _number(value)
    return Markup(MISSING if number is None else f"{number:.{digits}f}")


def fmt_delta(value: Any, digits: int = 4) -> Markup:
    number = _number(value)
    return Markup(MISSING if number is None else f"{number:+.{digits}f}")


def fmt_pct(value: Any, digits: int = 1) -> Markup:
    number = _number(value)
    return Markup(MISSING if number is None else f"{100 * number:.{digits}f}%")


def fmt_usd(value: Any) -> Markup:
    number = _number(value)
    return Markup(MISSING if number is None else f"${number:,.2f}")


def fmt_num(value: Any) -> Markup:
    """Thousands separators for counts (13312 → 13,312)."""
    number = _number(value)
    if number is None:
        return Markup(MISSING)
    return Markup(f"{int(number):,}" if number.is_integer() else f"{number:,}")


def fmt_interval(pair: Any, digits: int = 4) -> Markup:
    if not isinstance(pair, (list, tuple)) or len(pair) != 2:
        return Markup(MISSING)
    low, high = (_number(v) for v in pair)
    if low is None or high is None:
        return Markup(MISSING)
    return Markup(f"[{low:+.{digits}f}, {high:+.{digits}f}]")


def fmt_date(value: Any, with_time: bool = False) -> Markup:
    moment = try_parse_time(value)
    if moment is None:
        return md_text(value) if value else Markup(MISSING)
    moment = moment.astimezone(UTC)
    return Markup(moment.strftime("%Y-%m-%d %H:%M" if with_time else "%Y-%m-%d"))


FILTERS = {"score": fmt_score, "delta": fmt_delta, "pct": fmt_pct, "usd": fmt_usd,
           "num": fmt_num, "interval": fmt_interval, "date": fmt_date, "label": safe_label}
