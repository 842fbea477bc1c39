"""Driving the built site in Debian's chromium through Playwright, served on loopback: shared
by the site's browser tests (fixture boards) and the demo's (the board `tinyrouter demo` built).
"""

from __future__ import annotations

import functools
import json
import re
import shutil
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import quote, urljoin

import pytest

ARTIFACTS = Path(__file__).resolve().parents[1] / "test-artifacts" / "site"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking"]
WIDTHS = {"desktop": {"width": 1280, "height": 900}, "phone": {"width": 390, "height": 844}}
SCHEMES = {"light": "default", "dark": "slate"}  # prefers-color-scheme → Material's palette
MIN_TEXT_PX = 10  # the smallest chart text a visitor should have to read
# Elements of the page's content that stick out of the screen, unless a scroll box that says
# so (tinyrouter.js marks a table or code block that scrolls sideways and puts a line above
# it, or above the code block's wrapper) holds them.
OUTSIDE = """() => {
  const out = [];
  for (const el of document.querySelectorAll("article *")) {
    const r = el.getBoundingClientRect();
    if (r.width === 0 || r.right <= innerWidth + 1) continue;
    let box = el.parentElement, said = false;
    while (box && box.tagName !== "ARTICLE") {
      const x = getComputedStyle(box).overflowX;
      const fits = box.getBoundingClientRect().right <= innerWidth + 1;
      if (fits && (x === "auto" || x === "scroll" || x === "hidden")) {
        const holder = (box.tagName === "CODE" && box.closest(".highlight")) || box;
        const before = holder.previousElementSibling;
        said = box.hasAttribute("data-tr-scrolls") && before !== null
          && before.classList.contains("tr-scroll-hint") && before.offsetHeight > 0;
        break;
      }
      box = box.parentElement;
    }
    if (!said) out.push(`${el.tagName}.${el.className}: ${el.textContent.trim().slice(0, 40)}`);
  }
  return out.slice(0, 5);
}"""


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


@contextmanager
def serving(site: Path) -> Iterator[str]:
    """A built site on http://127.0.0.1:<free port>/ while the block runs: its base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0),
                                 functools.partial(_QuietHandler, directory=str(site)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        thread.join()


@contextmanager
def chromium():
    """Debian's chromium under Playwright (the test is skipped where either is missing)."""
    sync_api = pytest.importorskip("playwright.sync_api")
    executable = shutil.which("chromium")
    if executable is None:
        pytest.skip("Debian's chromium is not installed")
    with sync_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            launched.close()


def king_card(site: Path) -> str | None:
    """The reigning king's router card, relative to the site's root (None without a king)."""
    king = json.loads((site / "downloads/leaderboard.json").read_text())["king"]
    return king and f"kings/{quote('@' + king['miner'].lower())}/{king['generation']}/"


class Visitor:
    """One browser context (a colour scheme and a width) with a record of what went wrong."""

    def __init__(self, browser, base: str, scheme: str = "light", width: str = "desktop"):
        self.base, self.scheme, self.width = base, scheme, width
        self.context = browser.new_context(viewport=WIDTHS[width], color_scheme=scheme)
        self.page = self.context.new_page()
        self.problems: list[str] = []
        self.page.on("console", lambda m: self.problems.append(f"console: {m.text}")
                     if m.type == "error" else None)
        self.page.on("pageerror", lambda exc: self.problems.append(f"page error: {exc}"))
        self.page.on("dialog", lambda d: (self.problems.append(f"dialog: {d.message}"),
                                          d.dismiss()))
        self.page.on("request", lambda r: None if r.url.startswith((base, "data:"))
                     else self.problems.append(f"request to another host: {r.url}"))
        self.in_flight: set = set()  # the page's requests not yet answered (see `settle`)
        self.page.on("request", lambda r: self.in_flight.add(r))
        for ended in ("requestfinished", "requestfailed"):
            self.page.on(ended, lambda r: self.in_flight.discard(r))

    def visit(self, path: str, settle: bool = True):
        response = self.page.goto(urljoin(self.base, path))
        assert response is not None and response.ok, path
        if settle:
            self.settle()
        return self.page

    def settle(self, quiet_ms: int = 100, step_ms: int = 20) -> None:
        """Wait until none of the page's requests has been in flight for `quiet_ms`: what
        Playwright's "networkidle" waits for, without its fixed 500 ms of quiet."""
        quiet = 0
        while quiet < quiet_ms:
            self.page.wait_for_timeout(step_ms)
            quiet = 0 if self.in_flight else quiet + step_ms

    def check(self, name: str) -> None:
        """The page as a visitor sees it: scheme applied, charts loaded, nothing too wide."""
        page = self.page
        assert page.get_attribute("body", "data-md-color-scheme") == SCHEMES[self.scheme]
        for chart in page.locator("article img").all():
            chart.scroll_into_view_if_needed()
            assert chart.evaluate("img => img.complete && img.naturalWidth > 0"), \
                chart.get_attribute("src")
        overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 1, f"{name} is {overflow}px wider than the screen"
        assert page.evaluate(OUTSIDE) == [], (name, page.evaluate(OUTSIDE))
        for chart in page.locator("article img.tr-chart").all():
            assert self.chart_text_px(chart) >= MIN_TEXT_PX, chart.evaluate("i => i.currentSrc")
        if page.evaluate("window.scrollY") > 0:  # a chart scrolled into view moved the page:
            page.evaluate("window.scrollTo(0, 0)")  # the header is drawn where it is scrolled
            page.wait_for_timeout(250)
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=ARTIFACTS / f"{name}-{self.scheme}-{self.width}.png", full_page=True)
        assert self.problems == []

    def chart_text_px(self, chart) -> float:
        """The smallest text of a chart as shown: its SVG's font size scaled to the width."""
        source = chart.evaluate("img => img.currentSrc")
        svg = self.page.request.get(source).text()
        drawn = float(re.search(r'viewBox="0 0 ([0-9.]+)', svg).group(1))
        smallest = min(float(size) for size in re.findall(r"font-size: ([0-9.]+)px", svg))
        return smallest * chart.evaluate("img => img.getBoundingClientRect().width") / drawn

    def close(self) -> None:
        self.context.close()


def phone_verdicts(guest: Visitor, site: Path, board: str) -> None:
    """On a phone, every verdict row of Evaluations shows its outcome, its composite where one
    is disclosed, and why, inside the screen."""
    page = guest.visit("evaluations/")
    rows = page.locator("article .tr-stack tbody tr").all()
    verdicts = json.loads((site / "downloads/leaderboard.json").read_text())
    assert len(rows) == len(verdicts["verdicts"])
    for row, verdict in zip(rows, verdicts["verdicts"], strict=True):
        cells = row.locator("td")
        outcome, composite = cells.nth(0), cells.nth(1)
        row.scroll_into_view_if_needed()
        assert outcome.is_visible() and verdict["outcome"] in outcome.inner_text()
        shown = [outcome] + ([composite] if verdict["shown_composite"] is not None else [])
        for cell in shown:
            box = cell.bounding_box()
            assert box and box["x"] >= 0 and box["x"] + box["width"] <= WIDTHS["phone"]["width"]
        if verdict["shown_composite"] is not None:
            assert composite.is_visible()
            assert float(composite.inner_text()) == pytest.approx(verdict["shown_composite"])
        assert verdict["why"] in row.inner_text()
    guest.check(f"{board}-evaluations-phone-rows")


def leaderboard_rows(guest: Visitor, site: Path, board: str) -> None:
    """The Leaderboard page as a visitor sees it: one table row per row of the downloads' board,
    in its order, every number the download's (at the places the page shows it), the rank and
    composite in sight at this width; and the page checked as every page is."""
    from evaluator.site.markup import fmt_score, fmt_usd

    page = guest.visit("leaderboard/")
    rows = page.locator("article .tr-stack tbody tr").all()
    data = json.loads((site / "downloads/leaderboard.json").read_text())["board"]
    assert len(rows) == len(data) > 0
    for row, want in zip(rows, data, strict=True):
        cells = [cell.inner_text().strip() for cell in row.locator("td").all()]
        places = want["places"]
        interval = (f"{fmt_score(want['composite_low'], places)} to "
                    f"{fmt_score(want['composite_high'], places)}"
                    if want["composite_low"] is not None else "—")
        head = want["kind"] == "head"
        rank = ("—" if not head else str(want["rank_best"])
                if want["rank_best"] == want["rank_worst"]
                else f"{want['rank_best']}–{want['rank_worst']}")
        shown = [rank, fmt_score(want["composite"], places) if head else "—", interval,
                 fmt_score(want["cached_acc"], 3),
                 fmt_score(want["live_acc"], 3) if head else "—",
                 fmt_score(want["avg_turns"], 2), fmt_usd(want["cost_per_1k_usd"])]
        assert [cells[0], *cells[3:]] == shown, (cells, want)
        assert want["label"].split(" g")[0] in cells[1]
        row.scroll_into_view_if_needed()
        screen = WIDTHS[guest.width]["width"]
        for cell in row.locator("td").all()[:4:3] if head else ():  # its rank and composite
            box = cell.bounding_box()
            assert box and box["x"] >= 0 and box["x"] + box["width"] <= screen
    assert page.locator('img[src$="assets/charts/cost.svg"]').count() == 1
    guest.check(f"{board}-leaderboard-{guest.width}")


def cost_points_of(text: str) -> list:
    """The cost–accuracy chart's points as cost.csv gives them, typed as the chart draws them
    (a float written by the CSV reads back exactly)."""
    import csv
    import dataclasses
    import io

    from evaluator.site.cards import CostPoint

    kinds = {f.name: f.type for f in dataclasses.fields(CostPoint)}
    read = {"float": float, "int | None": int}
    return [CostPoint(**{name: None if value == "" else read.get(kinds[name], str)(value)
                         for name, value in row.items()})
            for row in csv.DictReader(io.StringIO(text))]
