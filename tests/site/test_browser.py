"""The built site in a real browser (Debian's chromium through Playwright), served on loopback."""

from __future__ import annotations

import functools
import json
import shutil
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urldefrag, urljoin

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.slow]
sync_api = pytest.importorskip("playwright.sync_api")

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking"]


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def served(built_sites) -> Iterator[tuple[str, Path]]:
    """The busy state's site on http://127.0.0.1:<free port>/."""
    site = built_sites["busy"]
    handler = functools.partial(_QuietHandler, directory=str(site))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/", site
    server.shutdown()
    thread.join()


@pytest.fixture(scope="module")
def browser_page(served):
    executable = shutil.which("chromium")
    if executable is None:
        pytest.skip("Debian's chromium is not installed")
    base, _ = served
    problems: list[str] = []
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.on("console", lambda m: problems.append(f"console: {m.text}")
                if m.type == "error" else None)
        page.on("pageerror", lambda exc: problems.append(f"page error: {exc}"))
        page.on("dialog", lambda d: (problems.append(f"dialog: {d.message}"), d.dismiss()))
        page.on("request", lambda r: None if r.url.startswith((base, "data:"))
                else problems.append(f"request to another host: {r.url}"))
        yield page, problems
        browser.close()


def _visit(page, url: str, settle: bool = True) -> None:
    response = page.goto(url)
    assert response is not None and response.ok, url
    if settle:
        page.wait_for_load_state("networkidle")


def test_home_shows_the_king(served, browser_page):
    base, site = served
    page, problems = browser_page
    king = json.loads((site / "downloads/leaderboard.json").read_text())["king"]
    _visit(page, base)
    panel = page.locator(".tr-king-panel")
    assert king["miner"] in panel.inner_text()
    assert f"{king['composite']:.4f}" in panel.inner_text()
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=ARTIFACTS / "site-home.png", full_page=True)
    assert problems == []


def test_history_chart_loads(served, browser_page):
    base, _ = served
    page, problems = browser_page
    _visit(page, base + "history/")
    chart = page.locator("img.tr-chart")
    chart.scroll_into_view_if_needed()
    assert chart.evaluate("img => img.complete && img.naturalWidth > 0")
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=ARTIFACTS / "site-history.png", full_page=True)
    assert problems == []


def test_hostile_miner_name_renders_as_text(served, browser_page, hostile):
    base, _ = served
    page, problems = browser_page
    _visit(page, base + "evaluations/")
    assert page.get_by_text(hostile["name"], exact=True).count() >= 1
    assert page.locator('img[src="x"]').count() == 0
    assert page.locator('a[href^="javascript:"]').count() == 0
    assert problems == []


def test_navigation_reaches_every_page(served, browser_page):
    base, site = served
    page, problems = browser_page
    expected = {urljoin(base, p.parent.relative_to(site).as_posix() + "/")
                for p in site.rglob("index.html")}
    seen, queue = set(), [base]
    while queue:
        url = queue.pop()
        if url in seen:
            continue
        seen.add(url)
        _visit(page, url, settle=False)
        hrefs = page.eval_on_selector_all(
            "a[href]", "links => links.map(a => a.getAttribute('href'))")
        for href in hrefs:
            target = urldefrag(urljoin(url, href)).url
            if target.startswith(base) and target.endswith("/"):
                queue.append(target)
    assert len(expected) >= 20 and expected <= seen, sorted(expected - seen)
    assert problems == []
