"""Following the board without visiting it: an Atom feed and a shields.io endpoint badge.

Both are static files written with the site (no service runs): `feed.xml` holds the newest
verdicts and coronations, each with the sentence `explain` gives it, and `badge/king.json`
is the JSON that https://img.shields.io/endpoint reads to draw a "current king" badge.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any
from xml.etree import ElementTree

from evaluator.files import dumps, try_parse_time
from evaluator.records import KING
from evaluator.site.markup import miner_id, safe_label
from evaluator.site.verdicts import Entry

FEED_URI = "feed.xml"
BADGE_URI = "badge/king.json"
FEED_ENTRIES = 50  # the newest verdicts a feed carries; every verdict is in the downloads
ATOM = "http://www.w3.org/2005/Atom"
TAG = "tag:tinyrouter.invalid,2026:"  # ids that never change with where the site is hosted
_NOT_XML = re.compile("[^\u0009\u000a\u000d\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _text(value: Any) -> str:
    """Text XML 1.0 can carry: characters it forbids become spaces."""
    return _NOT_XML.sub(" ", str(value))


def _time(value: Any, fallback: datetime) -> str:
    moment = try_parse_time(value) or fallback
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _add(parent: ElementTree.Element, tag: str, text: str | None = None,
         **attributes: str) -> ElementTree.Element:
    element = ElementTree.SubElement(parent, f"{{{ATOM}}}{tag}", attributes)
    if text is not None:
        element.text = _text(text)
    return element


def _title(entry: Entry, display: dict[str, str]) -> str:
    who = f"{display.get(miner_id(entry.miner), entry.miner)} generation {entry.generation}"
    why = entry.why
    if why.outcome == KING:
        return f"New king: {who}, composite {why.composite:.{why.places}f}"
    if why.composite is not None and why.delta is not None:
        return (f"{who} {why.outcome}: composite {why.composite:.{why.places}f}, "
                f"Δ {why.delta:+.{why.places}f}")
    return f"{who}: {why.outcome}"


def atom_feed(verdicts: Sequence[Entry], base_url: str, now: datetime,
              page_of: Any, display: dict[str, str]) -> str:
    """The feed: the newest FEED_ENTRIES verdicts, newest first. `base_url` is the site's
    address ("" for links relative to the feed); `page_of(entry)` the page an entry links to."""
    ElementTree.register_namespace("", ATOM)
    feed = ElementTree.Element(f"{{{ATOM}}}feed")
    _add(feed, "id", TAG + "feed")
    _add(feed, "title", "TinyRouter: new kings and evaluations")
    _add(feed, "subtitle", "Every verdict of the LLM-routing benchmark, with why.")
    newest = verdicts[0].when if verdicts else None
    _add(feed, "updated", _time(newest, now))
    _add(feed, "link", rel="self", href=base_url + FEED_URI, type="application/atom+xml")
    _add(feed, "link", rel="alternate", href=base_url or "./", type="text/html")
    author = _add(feed, "author")
    _add(author, "name", "TinyRouter leaderboard")
    for entry in verdicts[:FEED_ENTRIES]:
        item = _add(feed, "entry")
        key = f"{entry.miner.lower()}/{entry.generation}/{entry.pr}/{entry.head_sha}/{entry.when}"
        _add(item, "id", TAG + re.sub(r"[^A-Za-z0-9._~/-]", "_", key))
        _add(item, "title", _title(entry, display))
        _add(item, "updated", _time(entry.when, now))
        _add(item, "link", rel="alternate", type="text/html", href=base_url + page_of(entry))
        _add(item, "summary", entry.why.sentence)
    ElementTree.indent(feed)
    return ('<?xml version="1.0" encoding="utf-8"?>\n'
            + ElementTree.tostring(feed, encoding="unicode") + "\n")


def king_badge(king: Any, display: dict[str, str]) -> str:
    """shields.io's endpoint JSON (schemaVersion 1): who reigns, at what composite."""
    if king is None or king.composite is None:
        message, color = "no king yet", "lightgrey"
    else:
        name = safe_label(display.get(miner_id(king.miner), king.miner))
        message, color = f"{name} g{king.generation} · {king.composite:.4f}", "indigo"
    return dumps({"schemaVersion": 1, "label": "TinyRouter king", "message": message,
                  "color": color})
