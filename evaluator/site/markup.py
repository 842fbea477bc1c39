"""Escaping and number formats for generated pages: untrusted text always ends up as text.

Miner names, PR titles and README text come from strangers. Every character outside
letters, digits and spaces becomes a numeric HTML entity, which neither Markdown nor
HTML reads as syntax (no links, emphasis, attribute lists or tags), yet browsers
display it as the original character.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from datetime import UTC
from pathlib import PurePath
from typing import Any

from markupsafe import Markup

from evaluator.files import try_parse_time
from evaluator.rules import is_name

MISSING = "—"
_PLAIN = re.compile(r"[A-Za-z0-9 ]|[^\x00-\x7f]")
_CONTROL = re.compile(r"[\x00-\x1f\x7f\u2028\u2029]")
_HUB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,95}/[A-Za-z0-9][A-Za-z0-9_.-]{0,95}", re.ASCII)


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


def miner_id(name: Any) -> str:
    """One miner whatever the case: GitHub logins are case-insensitive, other text is kept."""
    return name.lower() if is_name(name) else str(name)


def miner_slug(name: Any) -> str:
    """The page name of a miner: `@` and the lower-case login, which no login or fixed page
    can spell, or `invalid-` and a hash when the name is not a login."""
    if is_name(name):
        return "@" + name.lower()
    return "invalid-" + hashlib.sha256(str(name).encode("utf-8")).hexdigest()[:12]


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def _fixed(number: float, digits: int, sign: str = "") -> str:
    """`number` to `digits` decimals; a value that rounds to zero prints without a minus."""
    return f"{round(number, digits) + 0.0:{sign}.{digits}f}"


def fmt_score(value: Any, digits: int = 4) -> Markup:
    number = _number(value)
    return Markup(MISSING if number is None else _fixed(number, digits))


def fmt_delta(value: Any, digits: int = 4) -> Markup:
    number = _number(value)
    return Markup(MISSING if number is None else _fixed(number, digits, "+"))


def fmt_pct(value: Any, digits: int = 1) -> Markup:
    number = _number(value)
    return Markup(MISSING if number is None else _fixed(100 * number, digits) + "%")


def fmt_usd(value: Any) -> Markup:
    """Dollars to the cent; under ten cents, to three significant digits ($0.0412)."""
    number = _number(value)
    if number is None:
        return Markup(MISSING)
    if 0 < abs(number) < 0.1:
        return Markup(f"${number:.3g}" if abs(number) >= 1e-4 else f"${number:.2e}")
    return Markup(f"${round(number, 2) + 0.0:,.2f}")


def fmt_num(value: Any) -> Markup:
    """Thousands separators for counts (13312 → 13,312), never an exponent (1e6 → 1,000,000)."""
    number = _number(value)
    if number is None:
        return Markup(MISSING)
    if number.is_integer():
        return Markup(f"{int(number):,}")
    return Markup(f"{number:,.10f}".rstrip("0").rstrip("."))


def fmt_interval(pair: Any, digits: int = 4) -> Markup:
    if not isinstance(pair, (list, tuple)) or len(pair) != 2:
        return Markup(MISSING)
    low, high = (_number(v) for v in pair)
    if low is None or high is None:
        return Markup(MISSING)
    return Markup(f"[{_fixed(low, digits, '+')}, {_fixed(high, digits, '+')}]")


def fmt_tested(why: Any) -> Markup:
    """An explanation's crown-test difference and its interval: "+0.07 [+0.04, +0.10]"; the
    interval alone for a record without its test."""
    places = getattr(why, "places", 4)
    interval = fmt_interval(getattr(why, "interval", None), places)
    difference = _number(getattr(why, "difference", None))
    if difference is None:
        return interval
    return Markup(f"{_fixed(difference, places, '+')} {interval}")


def fmt_share(value: Any, items: Any, few: int = 20) -> Markup:
    """A share of `items`: a percentage, or a count ("3 of 4") when there are fewer than `few`
    items, where a percentage would claim more than a handful can show."""
    number, total = _number(value), _number(items)
    if number is None:
        return Markup(MISSING)
    if total is None or not total.is_integer() or total >= few:
        return fmt_pct(number, 0)
    return Markup(f"{round(number * total)} of {int(total)}")


def fmt_rate(value: Any, trials: Any) -> Markup:
    """A rate seen in `trials` independent trials with its 95% Wilson interval: 19% (16–22%);
    one decimal only where so many trials support it."""
    rate, count = _number(value), _number(trials)
    if rate is None or count is None or count < 1:
        return fmt_pct(value)
    z = 1.959964
    centre = (rate + z * z / (2 * count)) / (1 + z * z / count)
    half = z * math.sqrt(rate * (1 - rate) / count + z * z / (4 * count * count)) / (
        1 + z * z / count)
    digits = 1 if half < 0.005 else 0
    low, high = max(0.0, centre - half), min(1.0, centre + half)
    return Markup(f"{fmt_pct(rate, digits)} ({_fixed(100 * low, digits)}–"
                  f"{_fixed(100 * high, digits)}%)")


def fmt_mc(value: Any, se: Any, trials: Any = None) -> Markup:
    """A simulated rate with its Monte Carlo standard error: 1.3% ± 0.2%; a rate no trial (or
    every trial) hit says so with its count, where a standard error of zero would claim too
    much."""
    rate, error, count = _number(value), _number(se), _number(trials)
    if rate is None:
        return Markup(MISSING)
    if count is not None and rate in (0.0, 1.0):
        return Markup(f"{fmt_pct(rate, 0)} ({'none' if rate == 0 else 'all'} of {fmt_num(count)})")
    if error is None:
        return fmt_pct(rate)
    digits = 2 if 0 < error < 0.001 else 1
    return Markup(f"{fmt_pct(rate, digits)} ± {fmt_pct(error, digits)}")


def fmt_plural(count: Any, noun: str, plural: str | None = None) -> Markup:
    """`1 attempt`, `2 attempts`: a count with its noun."""
    number = _number(count)
    if number is None:
        return Markup(f"{MISSING} {plural or noun + 's'}")
    return Markup(f"{fmt_num(number)} {noun if number == 1 else plural or noun + 's'}")


def fmt_encoder(value: Any) -> Markup:
    """The encoder as readers know it: a Hugging Face id, never a path on some machine."""
    if isinstance(value, str) and _HUB_ID.fullmatch(value):
        return Markup(f"[`{value}`](https://huggingface.co/{value})")
    name = PurePath(str(value)).name if value else ""
    return Markup(f"a locally built model (`{md_text(name)}`)" if is_name(name)
                  else "a locally built model")


def _rule_value(name: str, value: Any) -> str:
    if name == "encoder_id":
        return value if isinstance(value, str) and _HUB_ID.fullmatch(value) else \
            "a tiny Qwen3 built locally"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return json.dumps(value, sort_keys=True) if isinstance(value, (list, dict)) else str(value)
    return str(fmt_num(value))


def rules_differences(rules: Any) -> Markup:
    """Every rule and derived figure in which `rules` differ from the official ones, as one
    escaped sentence for a demo site's banner: "eval_size 90 (official 150); …"."""
    found = [f"{name} {_rule_value(name, mine)} (official {_rule_value(name, official)})"
             for name, mine, official in rules.differences()]
    if not found:
        return Markup("")
    return Markup("Its rules differ from the official ones (evaluator/rules.py), and every "
                  "page states the demo's: ") + Markup("; ").join(found) + Markup(".")


def fmt_hub_id(value: Any) -> str:
    """The encoder's hub id for a command line, or a placeholder when it is a local folder."""
    return value if isinstance(value, str) and _HUB_ID.fullmatch(value) else "<encoder hub id>"


def fmt_date(value: Any, with_time: bool = False) -> Markup:
    moment = try_parse_time(value)
    if moment is None:
        return md_text(value) if value else Markup(MISSING)
    moment = moment.astimezone(UTC)
    return Markup(moment.strftime("%Y-%m-%d %H:%M" if with_time else "%Y-%m-%d"))


FILTERS = {"score": fmt_score, "delta": fmt_delta, "pct": fmt_pct, "usd": fmt_usd,
           "num": fmt_num, "interval": fmt_interval, "tested": fmt_tested, "date": fmt_date,
           "label": safe_label,
           "plural": fmt_plural, "share": fmt_share, "rate": fmt_rate, "mc": fmt_mc,
           "encoder": fmt_encoder, "hub_id": fmt_hub_id}
