"""Escaping and formats: untrusted text renders as itself, never as markup."""

from __future__ import annotations

import html

import markdown
import pytest

from evaluator.site.markup import (
    fmt_date,
    fmt_delta,
    fmt_interval,
    fmt_num,
    fmt_pct,
    fmt_score,
    md_text,
    miner_slug,
    safe_label,
)

EXTENSIONS = ["tables", "attr_list", "md_in_html", "admonition", "toc"]

HOSTILE = [
    # HTML
    "<img src=x onerror=alert(1)>",
    "<script>alert(1)</script>",
    "</title><script>alert(1)</script>",
    '" onmouseover="alert(1)',
    # Markdown
    "[x](javascript:alert(1))",
    "![x](http://evil.example/x.png)",
    "<http://evil.example>",
    "**bold** _em_ `code`",
    "# heading",
    "text { onclick=alert(1) }",
    "a | b | c",
    "&lt;already escaped&gt;",
    # text that must survive as is
    "ünïcødé 名前",
    "plain-name_42",
]


@pytest.mark.parametrize("text", HOSTILE)
def test_untrusted_text_renders_as_itself(text):
    rendered = markdown.markdown(f"Miner: {md_text(text)}", extensions=EXTENSIONS)
    assert "<a" not in rendered and "<img" not in rendered and "<script" not in rendered
    assert "<strong>" not in rendered and "<em>" not in rendered and "<h1" not in rendered
    assert html.unescape(rendered) == f"<p>Miner: {text}</p>"  # no tag, no attribute


@pytest.mark.parametrize("text", ["a | b", "<b>x</b>", "[x](javascript:alert(1))"])
def test_untrusted_text_stays_inside_its_table_cell(text):
    table = f"| a | b |\n|---|---|\n| {md_text(text)} | 2 |\n"
    rendered = markdown.markdown(table, extensions=EXTENSIONS)
    assert rendered.count("<td>") == 2
    assert "<a" not in rendered and "<b>" not in rendered


def test_control_characters_cannot_break_a_line():
    assert "\n" not in md_text("a\nb\r\nc") and "\u2028" not in md_text("a\u2028b")


@pytest.mark.parametrize(("value", "formatter", "expected"), [
    # scores and deltas
    (0.71344, fmt_score, "0.7134"),
    (0.0234, fmt_delta, "+0.0234"),
    (-0.031, fmt_delta, "-0.0310"),
    (0.395, fmt_pct, "39.5%"),
    (13312, fmt_num, "13,312"),
    ([0.005, 0.055], fmt_interval, "[+0.0050, +0.0550]"),
    # missing or wrong-typed values show a dash, not "None" or a crash
    (None, fmt_score, "—"),
    ("0.7", fmt_score, "—"),
    (True, fmt_score, "—"),
    ([1], fmt_interval, "—"),
    # dates
    ("2026-11-29T14:03:00Z", fmt_date, "2026-11-29"),
    (None, fmt_date, "—"),
])
def test_formats(value, formatter, expected):
    assert str(formatter(value)) == expected


def test_date_with_time_is_utc():
    assert fmt_date("2026-11-29T14:03:00+02:00", with_time=True) == "2026-11-29 12:03"


@pytest.mark.parametrize(("name", "label", "slug"), [
    # valid GitHub logins are used as they are
    ("alice", "alice", "alice"),
    ("Bob-2_x", "Bob-2_x", "Bob-2_x"),
    # anything else gets a harmless label and a hashed page name
    ("<img src=x onerror=alert(1)>", "img_src_x_onerror_alert_1 (invalid name)", "miner-"),
    ("../../etc/passwd", "etc_passwd (invalid name)", "miner-"),
    ("", "unnamed (invalid name)", "miner-"),
])
def test_labels_and_page_names(name, label, slug):
    assert safe_label(name) == label
    assert miner_slug(name).startswith(slug)
    assert "/" not in miner_slug(name) and "." not in miner_slug(name)
