"""Escaping and formats: untrusted text renders as itself, never as markup."""

from __future__ import annotations

import html

import markdown
import pytest

from evaluator.site.markup import (
    fmt_date,
    fmt_delta,
    fmt_encoder,
    fmt_interval,
    fmt_mc,
    fmt_num,
    fmt_pct,
    fmt_plural,
    fmt_score,
    fmt_usd,
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
    # a value that rounds to zero has no sign of its own
    (-0.00001, fmt_score, "0.0000"),
    (-0.00001, fmt_delta, "+0.0000"),
    ([-0.00003, 0.0412], fmt_interval, "[+0.0000, +0.0412]"),
    (-0.0004, fmt_pct, "0.0%"),
    # counts and limits never in exponent notation
    (1e6, fmt_num, "1,000,000"),
    (0.5, fmt_num, "0.5"),
    (1e-7, fmt_num, "0.0000001"),
    # dollars: cents, and small amounts to three significant digits
    (0.0, fmt_usd, "$0.00"),
    (0.631, fmt_usd, "$0.63"),
    (1234.5, fmt_usd, "$1,234.50"),
    (0.0412, fmt_usd, "$0.0412"),
    (float("nan"), fmt_usd, "—"),
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


@pytest.mark.parametrize(("rate", "se", "trials", "expected"), [
    (0.0132, 0.0036, 1000, "1.3% ± 0.4%"),
    (0.0013, 0.00047, 6000, "0.13% ± 0.05%"),  # a small error keeps its digits
    (0.19, 0.05, None, "19.0% ± 5.0%"),  # a campaign figure: no trials of its own
    # no trial (or every trial) hit: the count, never a standard error of zero
    (0.0, 0.0, 6000, "0% (none of 6,000)"),
    (1.0, 0.0, 1000, "100% (all of 1,000)"),
    (None, None, 1000, "—"),
])
def test_simulated_rates_carry_their_standard_error(rate, se, trials, expected):
    assert str(fmt_mc(rate, se, trials)) == expected


@pytest.mark.parametrize(("count", "noun", "expected"), [
    (1, "attempt", "1 attempt"),
    (2, "attempt", "2 attempts"),
    (0, "crown", "0 crowns"),
    (1, "category", "1 category"),
    (3, "category", "3 categories"),
])
def test_plurals(count, noun, expected):
    plural = "categories" if noun == "category" else None
    assert fmt_plural(count, noun, plural) == expected


@pytest.mark.parametrize(("encoder", "shown"), [
    # a Hugging Face id is shown and linked
    ("Qwen/Qwen3-0.6B", "[`Qwen/Qwen3-0.6B`](https://huggingface.co/Qwen/Qwen3-0.6B)"),
    # a local folder shows its name only, never the path on the machine that built it
    ("/tmp/tinyrouter-demo-x1/encoder", "a locally built model (`encoder`)"),
    ("C:\\Users\\me\\enc oder", "a locally built model"),
])
def test_encoder_is_named_without_a_machine_path(encoder, shown):
    assert fmt_encoder(encoder) == shown


def test_date_with_time_is_utc():
    assert fmt_date("2026-11-29T14:03:00+02:00", with_time=True) == "2026-11-29 12:03"


@pytest.mark.parametrize(("name", "label", "slug"), [
    # a login's page is `@` and the login in lower case: one page whatever the case, and no
    # login can take the name of another page (index, README)
    ("alice", "alice", "@alice"),
    ("Bob-2_x", "Bob-2_x", "@bob-2_x"),
    ("index", "index", "@index"),
    ("README", "README", "@readme"),
    # anything else gets a harmless label and a hashed page name
    ("<img src=x onerror=alert(1)>", "img_src_x_onerror_alert_1 (invalid name)", "invalid-"),
    ("../../etc/passwd", "etc_passwd (invalid name)", "invalid-"),
    ("", "unnamed (invalid name)", "invalid-"),
])
def test_labels_and_page_names(name, label, slug):
    assert safe_label(name) == label
    assert miner_slug(name).startswith(slug)
    assert "/" not in miner_slug(name) and "." not in miner_slug(name)
    assert miner_slug(name) not in ("index", "README") and miner_slug(name) != miner_slug(name + "x")
