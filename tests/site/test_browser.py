"""The built site in a real browser (Debian's chromium through Playwright), served on loopback.

Every page a visitor lands on is opened in light and dark mode, at a desktop and a phone width:
no console error, no request to another host, every chart loaded with its text at 10 CSS px or
more, nothing wider than the screen except inside a scroll box that says it scrolls, and on a
phone every verdict's outcome and composite in sight. Screenshots go to
`test-artifacts/site/<state>-<page>-<scheme>-<width>.png`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from urllib.parse import quote, urldefrag, urljoin

import pytest
from browsing import (
    SCHEMES,
    WIDTHS,
    Visitor,
    chromium,
    king_card,
    leaderboard_rows,
    phone_verdicts,
    serving,
)
from conftest import LONG_NAME

pytestmark = [pytest.mark.browser, pytest.mark.slow]
pytest.importorskip("playwright.sync_api")


@pytest.fixture(scope="module")
def servers(built_sites) -> Iterator[dict[str, tuple[str, Path]]]:
    """Each fixture state's site on http://127.0.0.1:<free port>/: state → (base URL, folder)."""
    with ExitStack() as stack:
        yield {state: (stack.enter_context(serving(site)), site)
               for state, site in built_sites.items()}


@pytest.fixture(scope="module")
def browser():
    with chromium() as launched:
        yield launched


@pytest.fixture
def visitor(browser, servers):
    opened = []

    def open_(state: str = "busy", scheme: str = "light", width: str = "desktop") -> Visitor:
        opened.append(Visitor(browser, servers[state][0], scheme, width))
        return opened[-1]

    yield open_
    for one in opened:
        one.close()


PAGES = {  # name → path (None: the reigning king's router card)
    "home": "", "leaderboard": "leaderboard/", "router-card": None, "queue": "queue/",
    "history": "history/",
    "evaluations": "evaluations/", "miner": "miners/%40heidi/", "fairness": "fairness/",
    "faq": "faq/", "rewards": "rewards/",
}


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("name", PAGES)
def test_every_page_in_both_schemes_and_at_both_widths(servers, visitor, name, scheme, width):
    site = servers["busy"][1]
    path = PAGES[name] if PAGES[name] is not None else king_card(site)
    guest = visitor("busy", scheme, width)
    page = guest.visit(path)
    assert page.locator("article h1").count() == 1
    guest.check(f"busy-{name}")


def test_a_phone_shows_every_verdicts_outcome_and_composite(servers, visitor):
    phone_verdicts(visitor("busy", "dark", "phone"), servers["busy"][1], "busy")


@pytest.mark.parametrize("width", WIDTHS)
def test_the_ranked_table_shows_the_downloads_numbers(servers, visitor, width):
    leaderboard_rows(visitor("busy", "light", width), servers["busy"][1], "busy")


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
    assert page.url.endswith(king_card(site))
    assert page.locator('img[src*="assets/charts/kings/"]').count() == 1
    guest.check("busy-router-card-from-home")


def test_a_router_card_opens_its_category_tables(servers, visitor):
    guest = visitor("busy", "dark", "phone")
    page = guest.visit(king_card(servers["busy"][1]))
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


def test_a_search_typed_on_a_phone_draws_tables_that_say_they_scroll(servers, visitor):
    guest = visitor("busy", "dark", "phone")
    page = guest.visit("miners/")
    page.wait_for_timeout(400)  # well after the page's own tables were looked at
    page.locator("#tr-miner-query").fill("ivan")
    page.locator("#tr-miner-found table").first.wait_for()
    hint = page.locator("#tr-miner-found .tr-scroll-hint").first
    hint.wait_for(timeout=2000)
    assert "scrolls sideways" in hint.inner_text()
    guest.check("busy-miners-search-phone")


def test_the_miners_search_finds_a_miner_without_a_page(servers, visitor):
    guest = visitor("busy", "dark", "desktop")
    page = guest.visit("miners/")
    page.locator("#tr-miner-query").fill("iva")
    found = page.locator("#tr-miner-found")
    found.locator("h3").first.wait_for()
    assert found.locator("h3").first.inner_text() == "ivan"
    assert [cell.inner_text() for cell in found.locator("tr td:nth-child(4)").all()] == [
        "lost", "void"]
    # a loss publishes none of its crown test's figures: no difference, no interval
    assert found.locator("tr td:nth-child(7)").first.inner_text() == "–"
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
    text = guest.visit(king_card(servers["one_king"][1])).locator("article").inner_text()
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
