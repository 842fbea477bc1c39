"""Site builds from fixture states: every page, strict, untrusted text as text, rules from code."""

from __future__ import annotations

import dataclasses
import io
import json
import os
import re
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd
import pytest

from evaluator.cli import main
from evaluator.errors import SiteBuildError
from evaluator.rules import OFFICIAL
from evaluator.site import build_site

pytestmark = pytest.mark.slow  # every MkDocs build takes a few seconds

REPO = Path(__file__).resolve().parents[2]
PAGES = ("index.html", "history/index.html", "evaluations/index.html", "miners/index.html",
         "benchmarks/index.html", "fairness/index.html", "downloads/index.html",
         "rules/index.html",
         "scoring/index.html", "submitting/index.html", "maintaining/index.html")


class _Text(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []
        self.hidden = 0

    def handle_starttag(self, tag: str, attrs: list) -> None:
        self.hidden += tag in ("script", "style")

    def handle_endtag(self, tag: str) -> None:
        self.hidden -= tag in ("script", "style")

    def handle_data(self, data: str) -> None:
        if not self.hidden:
            self.parts.append(data)


def text_of(path: Path) -> str:
    """What a reader sees: the page's text with entities decoded and tags dropped."""
    parser = _Text()
    parser.feed(path.read_text(encoding="utf-8"))
    return " ".join("".join(parser.parts).split())


def html_files(site: Path) -> list[Path]:
    return sorted(site.rglob("*.html"))


@pytest.mark.parametrize("state", ["empty", "one_king", "busy"])
def test_every_page_is_built(built_sites, state):
    site = built_sites[state]
    for page in PAGES:
        assert (site / page).is_file(), page
    assert "fonts.googleapis" not in (site / "index.html").read_text(encoding="utf-8")


def test_empty_state(built_sites):
    site = built_sites["empty"]
    assert "No king yet" in text_of(site / "index.html")
    assert "Nothing evaluated yet" in text_of(site / "evaluations/index.html")
    assert not (site / "assets/charts/history.svg").exists()
    frame = pd.read_csv(site / "downloads/evaluations.csv")
    assert frame.empty and "composite" in frame.columns


def test_home_shows_the_king_against_the_baselines(built_sites):
    home = text_of(built_sites["one_king"] / "index.html")
    assert "alice, generation 1" in home and "0.6123" in home
    needed = f"{0.6123 + OFFICIAL.win_margin:.4f}"
    assert f"A challenger needs {needed} or more" in home
    assert "Best single model" in home and "Oracle ceiling" in home
    assert "The first king" in home


def test_history_has_a_chart_and_every_king(built_sites):
    site = built_sites["busy"]
    chart = (site / "assets/charts/history.svg").read_text(encoding="utf-8")
    assert chart.lstrip().startswith("<?xml") and "<svg" in chart
    assert 'src="../assets/charts/history.svg"' in (site / "history/index.html").read_text()
    kings = json.loads((site / "downloads/leaderboard.json").read_text())["history"]
    page = text_of(site / "history/index.html")
    assert len(kings) == 6
    for king in kings:
        assert f"#{king['pr']}" in page and f"{king['composite']:.4f}" in page


def test_evaluations_follow_the_disclosure_rule(built_sites):
    site = built_sites["busy"]
    data = json.loads((site / "downloads/leaderboard.json").read_text())
    page = text_of(site / "evaluations/index.html")
    assert len(re.findall(r"\b(king|lost|rejected|void)\b", page)) >= len(data["results"]) == 52
    assert "void: the pool failed on 4 of 60" in page
    breakdowns = pd.read_csv(site / "downloads/breakdowns.csv")
    crowned = {(r["miner"], r["generation"]) for r in data["results"] if r["outcome"] == "king"}
    assert set(zip(breakdowns["miner"], breakdowns["generation"], strict=True)) == crowned


def test_the_fairness_page_shows_the_figures_and_what_each_rule_buys(built_sites):
    from conftest import FAIRNESS

    site = built_sites["busy"]
    page = text_of(site / "fairness/index.html")
    assert "19.1%" in page and "37.7%" in page  # honest penalty, now and with a fixed 150/50 split
    assert "What the rule buys" in page and f"{OFFICIAL.audit_size}" in page
    for row in FAIRNESS["false_crown"]:
        assert f"{100 * row['margin_only']:.1f}%" in page
    assert "+0.015" in page and "+0.147" in page  # the hill-climber, with and without the rules
    chart = (site / "assets/charts/fairness.svg").read_text(encoding="utf-8")
    assert "<svg" in chart
    assert 'src="../assets/charts/fairness.svg"' in (site / "fairness/index.html").read_text()
    empty = text_of(built_sites["empty"] / "fairness/index.html")
    assert "Not computed yet" in empty and "tinyrouter fairness --json" in empty


def test_a_fairness_file_that_breaks_its_schema_is_left_out(tmp_path, make_state, caplog):
    board = make_state("one_king")
    (board / "fairness.json").write_text(json.dumps({"format": 1, "power": "lots"}))
    site = build_site(tmp_path / "public", board, OFFICIAL)
    assert "Not computed yet" in text_of(site / "fairness/index.html")
    assert "leaves the figures out" in caplog.text


def test_one_page_per_miner_reachable_from_the_miners_page(built_sites):
    site = built_sites["busy"]
    data = json.loads((site / "downloads/leaderboard.json").read_text())
    index = (site / "miners/index.html").read_text(encoding="utf-8")
    names = {r["miner"] for r in data["results"]}
    pages = [p for p in (site / "miners").iterdir() if p.is_dir()]
    assert len(pages) == len(names) == 11
    for page in pages:
        assert f'href="{page.name}/"' in index


def test_hostile_text_is_shown_as_text_everywhere(built_sites, hostile):
    site = built_sites["busy"]
    for path in html_files(site):
        source = path.read_text(encoding="utf-8")
        assert "<img src=x" not in source, path
        assert "javascript:" not in source.lower(), path
        assert "<b>bold</b>" not in source, path
    assert hostile["name"] in text_of(site / "evaluations/index.html")
    assert hostile["markdown"] + " <b>bold</b>" in text_of(site / "evaluations/index.html")
    titles = re.findall(r"<title>(.*?)</title>", "".join(
        p.read_text(encoding="utf-8") for p in html_files(site)))
    assert all("<" not in title for title in titles)


def test_csv_cells_cannot_become_spreadsheet_formulas(tmp_path):
    from evaluator.records import Result
    from evaluator.site.downloads import download_files
    from evaluator.site.state import LeaderboardState

    state = LeaderboardState(results=[Result.from_dict({"miner": "=HYPERLINK(\"x\")",
                                                        "outcome": "lost"})])
    frame = pd.read_csv(io.StringIO(download_files(state, OFFICIAL)["evaluations.csv"]))
    assert frame["miner"][0] == "'=HYPERLINK(\"x\")"


def test_rules_pages_render_the_numbers_in_force(built_sites, make_state, tmp_path):
    official = {p: text_of(built_sites["one_king"] / f"{p}/index.html") for p in ("rules",
                                                                                   "scoring")}
    assert f"+ {OFFICIAL.win_margin}" in official["rules"]
    assert f"({OFFICIAL.max_turns} − avg_turns) / {OFFICIAL.max_turns - 1}" in official["scoring"]
    assert f"audit {OFFICIAL.audit_size}" in official["rules"]
    assert f"{OFFICIAL.bootstrap_resamples:,} times" in official["scoring"]
    changed = dataclasses.replace(OFFICIAL, win_margin=0.037, max_turns=7, eval_size=321,
                                  audit_size=123, weight_novelty=0.09, duplicate_agreement=0.91,
                                  disclosure_precision=0.05, void_failure_share=0.1,
                                  bootstrap_resamples=999)
    site = build_site(tmp_path / "public", make_state("one_king"), changed)
    rules, scoring = (text_of(site / f"{p}/index.html") for p in ("rules", "scoring"))
    assert "+ 0.037" in rules and f"+ {OFFICIAL.win_margin}" not in rules
    assert "(7 − avg_turns) / 6" in scoring and "321 eval questions" in scoring
    assert "0.09·novelty" in scoring
    assert "eval 321" in rules and "audit 123" in rules and "scored pool of 444" in rules
    assert "fewer than 91% of the public train items" in rules
    assert "rounded to 0.05" in rules and "more than 10% of either head" in rules
    assert "999 times" in scoring and "123 audit questions" in scoring
    assert "A challenger needs 0.6493 or more" in text_of(site / "index.html")


@pytest.mark.parametrize("value", [
    # numbers that must come from evaluator/rules.py, never be typed into a guide
    OFFICIAL.win_margin, OFFICIAL.eval_size, OFFICIAL.audit_size, OFFICIAL.n_params,
    OFFICIAL.svf_scale_count, OFFICIAL.duplicate_cosine, OFFICIAL.overfit_reject_gap,
    OFFICIAL.overfit_penalty_gap, OFFICIAL.overfit_penalty_factor, OFFICIAL.weight_cached,
    OFFICIAL.hidden_size, OFFICIAL.bootstrap_resamples, OFFICIAL.pool_size,
    OFFICIAL.duplicate_agreement, OFFICIAL.disclosure_precision, OFFICIAL.live_size,
])
def test_guides_hold_no_copy_of_a_rule(value):
    written = [f"{value}", f"{value:,}" if isinstance(value, int) else f"{value}"]
    for page in (REPO / "site").glob("*.md"):
        source = page.read_text(encoding="utf-8")
        for text in written:
            assert not re.search(rf"(?<![\w.]){re.escape(text)}(?![\w])", source), (page, text)


def test_corrupt_leaderboard_fails_the_build_with_its_name(tmp_path):
    (tmp_path / "leaderboard").mkdir()
    (tmp_path / "leaderboard/king.json").write_text("{oops", encoding="utf-8")
    with pytest.raises(SiteBuildError, match=re.escape("king.json is not valid JSON")):
        build_site(tmp_path / "public", tmp_path / "leaderboard", OFFICIAL)


def test_refuses_to_empty_a_folder_that_is_not_a_site(tmp_path):
    (tmp_path / "notes.txt").write_text("keep me", encoding="utf-8")
    with pytest.raises(SiteBuildError, match="not empty"):
        build_site(tmp_path, tmp_path / "nowhere", OFFICIAL)
    assert (tmp_path / "notes.txt").read_text(encoding="utf-8") == "keep me"


def _repo_copy(root: Path) -> Path:
    for name in ("site", "templates", "evaluator"):
        shutil.copytree(REPO / name, root / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "mkdocs.yml", root / "mkdocs.yml")
    return root


def test_a_page_in_site_may_not_shadow_a_generated_one(tmp_path):
    repo = _repo_copy(tmp_path / "repo")
    (repo / "site/history.md").write_text("# mine\n", encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--quiet"], cwd=repo,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    assert "history.md clashes with a generated page" in done.stderr


def test_plain_mkdocs_build_produces_the_whole_site(tmp_path, make_state):
    repo = _repo_copy(tmp_path / "repo")
    env = {**os.environ, "TINYROUTER_LEADERBOARD_DIR": str(make_state("busy"))}
    subprocess.run([sys.executable, "-m", "mkdocs", "build", "--quiet"], cwd=repo, env=env,
                   check=True, capture_output=True, timeout=120)
    for page in PAGES:
        assert (repo / "public" / page).is_file(), page
    assert (repo / "public/assets/charts/history.svg").is_file()


def test_command_builds_and_reports_errors(tmp_path, make_state, capsys):
    out = tmp_path / "out"
    assert main(["site", "build", "--leaderboard", str(make_state("one_king")),
                 "--out", str(out)]) == 0
    assert (out / "index.html").is_file() and "site built" in capsys.readouterr().out
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "todo.txt").write_text("keep me", encoding="utf-8")
    assert main(["site", "build", "--repo", str(tmp_path), "--out", str(tmp_path / "notes")]) == 1
    assert "not empty" in capsys.readouterr().err
