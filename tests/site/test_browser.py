"""The built site in a real browser (Debian's chromium through Playwright), served on loopback.

Every page a visitor lands on is opened in light and dark mode, at a desktop and a phone width:
no console error, no request to another host, every chart loaded with its text at 10 CSS px or
more, nothing wider than the screen except inside a scroll box that says it scrolls, and on a
phone every verdict's outcome and composite in sight. Screenshots go to
`test-artifacts/site/<state>-<page>-<scheme>-<width>.png`.
"""

from __future__ import annotations

import functools
import json
import re
import shutil
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import quote, urldefrag, urljoin

import pytest
from conftest import LONG_NAME

pytestmark = [pytest.mark.browser, pytest.mark.slow]
sync_api = pytest.importorskip("playwright.sync_api")

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "site"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking"]
WIDTHS = {"desktop": {"width": 1280, "height": 900}, "phone": {"width": 390, "height": 844}}
SCHEMES = {"light": "default", "dark": "slate"}  # prefers-color-scheme → Material's palette
MIN_TEXT_PX = 10  # the smallest chart text a visitor should have to read
# Elements of the page's content that stick out of the screen, unless a scroll box that says
# so (tinyrouter.js marks a table that scrolls sideways and puts a line above it) holds them.
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
        const before = box.previousElementSibling;
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


@pytest.fixture(scope="module")
def servers(built_sites) -> Iterator[dict[str, tuple[str, Path]]]:
    """Each fixture state's site on http://127.0.0.1:<free port>/: state → (base URL, folder)."""
    running = {}
    for state, site in built_sites.items():
        handler = functools.partial(_QuietHandler, directory=str(site))
        server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        running[state] = (server, thread, f"http://127.0.0.1:{server.server_address[1]}/", site)
    yield {state: (base, site) for state, (_, _, base, site) in running.items()}
    for server, thread, _, _ in running.values():
        server.shutdown()
        thread.join()


@pytest.fixture(scope="module")
def browser():
    executable = shutil.which("chromium")
    if executable is None:
        pytest.skip("Debian's chromium is not installed")
    with sync_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        yield launched
        launched.close()


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

    def visit(self, path: str, settle: bool = True):
        response = self.page.goto(urljoin(self.base, path))
        assert response is not None and response.ok, path
        if settle:
            self.page.wait_for_load_state("networkidle")
        return self.page

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
        assert page.evaluate(OUTSIDE) == [], name
        for chart in page.locator("article img.tr-chart").all():
            assert self.chart_text_px(chart) >= MIN_TEXT_PX, chart.evaluate("i => i.currentSrc")
        page.evaluate("window.scrollTo(0, 0)")  # the header is drawn where the page is scrolled
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


@pytest.fixture
def visitor(browser, servers):
    opened = []

    def open_(state: str = "busy", scheme: str = "light", width: str = "desktop") -> Visitor:
        opened.append(Visitor(browser, servers[state][0], scheme, width))
        return opened[-1]

    yield open_
    for one in opened:
        one.close()


def _king_card(site: Path) -> str | None:
    king = json.loads((site / "downloads/leaderboard.json").read_text())["king"]
    return king and f"kings/{quote('@' + king['miner'].lower())}/{king['generation']}/"


PAGES = {  # name → path (None: the reigning king's router card)
    "home": "", "router-card": None, "queue": "queue/", "history": "history/",
    "evaluations": "evaluations/", "miner": "miners/%40heidi/", "fairness": "fairness/",
    "faq": "faq/", "rewards": "rewards/",
}


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("name", PAGES)
def test_every_page_in_both_schemes_and_at_both_widths(servers, visitor, name, scheme, width):
    site = servers["busy"][1]
    path = PAGES[name] if PAGES[name] is not None else _king_card(site)
    guest = visitor("busy", scheme, width)
    page = guest.visit(path)
    assert page.locator("article h1").count() == 1
    guest.check(f"busy-{name}")


def test_a_phone_shows_every_verdicts_outcome_and_composite(servers, visitor):
    guest = visitor("busy", "dark", "phone")
    page = guest.visit("evaluations/")
    rows = page.locator("article .tr-stack tbody tr").all()
    verdicts = json.loads((servers["busy"][1] / "downloads/leaderboard.json").read_text())
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
    guest.check("busy-evaluations-phone-rows")


def test_home_shows_the_king_and_the_cost_chart(servers, visitor):
    site = servers["busy"][1]
    king = json.loads((site / "downloads/leaderboard.json").read_text())["king"]
    guest = visitor()
    page = guest.visit("")
    panel = page.locator(".tr-king-panel").inner_text()
    assert king["miner"] in panel and f"{king['composite']:.4f}" in panel
    assert "Cost per 1,000 questions" in panel
    assert page.locator('img[src$="assets/charts/cost.svg"]').count() == 1
    page.get_by_role("link", name="Router card").click()
    page.wait_for_load_state("networkidle")
    assert page.url.endswith(_king_card(site))
    assert page.locator('img[src*="assets/charts/kings/"]').count() == 1
    guest.check("busy-router-card-from-home")


def test_a_router_card_opens_its_category_tables(servers, visitor):
    guest = visitor("busy", "dark", "phone")
    page = guest.visit(_king_card(servers["busy"][1]))
    details = page.locator("article details").first
    assert not details.locator("table").is_visible()
    details.locator("summary").click()
    assert details.locator("table").is_visible()
    guest.check("busy-router-card-open")


def test_long_names_stay_inside_the_screen(servers, visitor):
    guest = visitor("busy", "light", "phone")
    page = guest.visit("queue/")
    assert page.get_by_text(LONG_NAME, exact=True).count() >= 1
    guest.check("busy-queue-long-name")
    page = guest.visit(f"miners/?miner={quote(LONG_NAME)}")
    assert page.locator("#tr-miner-found h3").first.inner_text() == LONG_NAME
    assert "1 miner(s) match" in page.locator("#tr-miner-status").inner_text()
    guest.check("busy-miner-long-name")


def test_the_miners_search_finds_a_miner_without_a_page(servers, visitor):
    guest = visitor("busy", "dark", "desktop")
    page = guest.visit("miners/")
    page.locator("#tr-miner-query").fill("iva")
    found = page.locator("#tr-miner-found")
    found.locator("h3").first.wait_for()
    assert found.locator("h3").first.inner_text() == "ivan"
    assert [cell.inner_text() for cell in found.locator("tr td:nth-child(4)").all()] == [
        "lost", "void"]
    page.locator("#tr-miner-query").fill("<img src=x onerror=alert(1)>")
    assert found.locator("h3").first.inner_text() == "<img src=x onerror=alert(1)>"
    guest.check("busy-miners-search")


@pytest.mark.parametrize(("path", "says"), [
    # no king, no queue, no cost yet
    ("", ["No king yet", "No cost figures yet"]),
    ("queue/", ["Nothing in the queue", "Every miner may submit now"]),
    ("history/", ["No king has been crowned yet"]),
    ("rewards/", ["No programme announced", "None yet: no head has been crowned"]),
    ("faq/", ["How is a tie decided?"]),
])
def test_the_empty_board_reads_well(visitor, path, says):
    for scheme, width in (("light", "desktop"), ("dark", "phone")):
        guest = visitor("empty", scheme, width)
        text = guest.visit(path).locator("article").inner_text()
        for words in says:
            assert words in text
        guest.check(f"empty-{path.strip('/') or 'home'}")


def test_a_king_recorded_before_router_cards(servers, visitor):
    guest = visitor("one_king", "dark", "desktop")
    text = guest.visit("").locator("article").inner_text()
    assert "No metered cost published for this king yet" in text
    guest.check("one-king-home")
    text = guest.visit(_king_card(servers["one_king"][1])).locator("article").inner_text()
    assert "No router card for this king" in text and "The first king" in text
    guest.check("one-king-router-card")


def test_history_chart_loads(visitor):
    guest = visitor()
    page = guest.visit("history/")
    chart = page.locator("img.tr-chart")
    chart.scroll_into_view_if_needed()
    assert chart.evaluate("img => img.complete && img.naturalWidth > 0")
    guest.check("busy-history-chart")


def test_hostile_miner_name_renders_as_text(visitor, hostile):
    guest = visitor()
    for path in ("evaluations/", "queue/"):
        page = guest.visit(path)
        assert page.get_by_text(hostile["name"], exact=True).count() >= 1
        assert page.locator('img[src="x"]').count() == 0
        assert page.locator('a[href^="javascript:"]').count() == 0
    assert guest.problems == []


def test_navigation_reaches_every_page(servers, visitor):
    base, site = servers["busy"]
    guest = visitor()
    expected = {urljoin(base, quote(p.parent.relative_to(site).as_posix()) + "/")
                for p in site.rglob("index.html")}
    seen, queue = set(), [base]
    while queue:
        url = queue.pop()
        if url in seen:
            continue
        seen.add(url)
        page = guest.visit(url, settle=False)
        hrefs = page.eval_on_selector_all(
            "a[href]", "links => links.map(a => a.getAttribute('href'))")
        for href in hrefs:
            target = urldefrag(urljoin(url, href)).url
            if target.startswith(base) and target.endswith("/"):
                queue.append(target)
    assert len(expected) >= 20 and expected <= seen, sorted(expected - seen)
    assert guest.problems == []
