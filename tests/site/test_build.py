"""Site builds from fixture states: every page, strict, untrusted text as text, rules from code."""

from __future__ import annotations

import dataclasses
import html
import io
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import quote, unquote, urlsplit
from xml.etree import ElementTree

import markdown
import pytest
from conftest import article_of, build_site, html_files, text_of
from deferred import deferred

from evaluator.cli import main
from evaluator.errors import SiteBuildError
from evaluator.rules import OFFICIAL
from evaluator.site.follow import FEED_ENTRIES
from evaluator.site.markup import miner_id, miner_slug
from evaluator.verdict import walk_through

pytestmark = pytest.mark.slow  # every MkDocs build takes a few seconds

REPO = Path(__file__).resolve().parents[2]
PAGES = ("index.html", "history/index.html", "evaluations/index.html", "queue/index.html",
         "miners/index.html", "benchmarks/index.html", "fairness/index.html",
         "downloads/index.html", "rules/index.html", "faq/index.html", "rewards/index.html",
         "scoring/index.html", "submitting/index.html", "maintaining/index.html",
         "reference/index.html")

pd = deferred("pandas")


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
    # the crown rule as it is: against the king re-scored on the same items, and the interval
    assert ("A challenger is judged against this king re-scored in the same run, on the same "
            f"items: it must beat that composite by {OFFICIAL.win_margin:+g} or more (without the "
            "overfit factor), and the crown test must tell the lead from chance") in home
    assert f"{0.6123 + OFFICIAL.win_margin:.4f}" not in home
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
    assert len(re.findall(r"\b(king|lost|rejected|void|stale)\b", page)) >= len(data["results"]) == 54
    assert "Void: the pool failed on 4 of 60" in page
    breakdowns = pd.read_csv(site / "downloads/breakdowns.csv")
    crowned = {(r["miner"], r["generation"]) for r in data["results"] if r["outcome"] == "king"}
    assert set(zip(breakdowns["miner"], breakdowns["generation"], strict=True)) == crowned


def test_every_verdict_explains_itself_on_every_page_and_download(built_sites):
    site = built_sites["busy"]
    rows = pd.read_csv(site / "downloads/evaluations.csv")
    verdicts = json.loads((site / "downloads/leaderboard.json").read_text())["verdicts"]
    assert len(rows) == len(verdicts) == 55  # 54 evaluations and oscar's head stopped at gate 3
    assert rows["why"].notna().all()
    scored = rows[rows["shown_delta"].notna()]
    assert len(scored) >= 40
    # Δ is the shown composite minus the shown composite of the king it was judged against
    assert ((scored["shown_composite"] - scored["judged_against"] - scored["shown_delta"]).abs()
            < 1e-9).all()
    page, oscar = text_of(site / "evaluations/index.html"), rows[rows["miner"] == "oscar"].iloc[0]
    assert oscar["outcome"] == "rejected" and oscar["failed_gate"] == 3
    assert "rejected at gate 3" in page and "Rejected at gate 3 (duplicate)" in page
    for why in rows["why"]:
        assert why in page
    found = {m["id"]: m for m in json.loads((site / "downloads/miners.json").read_text())[
        "miners"]}  # what the Miners page's search shows of a miner without a page
    for miner, says in (("oscar", "Rejected at gate 3 (duplicate)"),
                        ("mallory", "Rejected: [x](javascript:alert(1))"),
                        ("ivan", "Void: the pool failed on 4 of 60")):
        assert any(says in v["why"] for v in found[miner]["verdicts"])


def test_the_fairness_page_shows_the_figures_and_what_each_rule_buys(built_sites):
    site = built_sites["busy"]
    page = text_of(site / "fairness/index.html")
    # honest penalty, now and with a fixed 150/50 split: rates with their 95% interval, to the
    # precision 2,000 trials support
    assert "19% (17–21%)" in page and "38% (36–40%)" in page and "19.1%" not in page
    assert "20 climbing campaigns" in page and "How often an honest head is penalised" in page
    assert "What the rule buys" in page and f"{OFFICIAL.audit_size}" in page
    # crown rates with their standard error, independent re-runs and shared live play; a rate
    # no trial hit shows its count, not a standard error of zero
    assert "0.13% ± 0.05%" in page and "1.3% ± 0.4%" in page and "0% (none of 6,000)" in page
    assert "Not simulated: a challenger differing on 10%" in page
    assert f"{OFFICIAL.duplicate_agreement:.0%} or more" in page
    # the campaign: P(at least one false crown) after 1,000, independent and its bound
    assert "72.8% ± 2.0%" in page and "91.0%" in page and "47.2%" in page
    # and the trade a looser final bar would make: fewer missed routers, more false crowns
    assert f"With a final bar of 2.326 instead of {OFFICIAL.crown_z_final}" in page
    assert "at least one of 300 with chance 48.3% ± 3.0%" in page and "50.7% ± 1.6%" in page
    # better heads: left-out rows say why
    assert "rejected as a copy" in page and "no room in the matrix" in page
    # live sessions per evaluation, expected and at worst
    assert "141 expected" in page and "246 in the costliest" in page and "360 at worst" in page
    # the memoriser beside the same head honest; the climber, with and without the rules
    assert "Memorising does not pay" in page and "22.9% ± 0.1%" in page
    assert "A climber cannot buy the crown" in page and "85.0% ± 9.0%" in page
    assert "+0.0065" in page
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


def test_kings_have_pages_and_every_miner_is_found_by_the_search(built_sites):
    site = built_sites["busy"]
    data = json.loads((site / "downloads/leaderboard.json").read_text())
    found = json.loads((site / "downloads/miners.json").read_text())["miners"]
    index = (site / "miners/index.html").read_text(encoding="utf-8")
    names = {miner_id(r["miner"]) for r in data["results"] + data["attempts"]}
    assert {m["id"] for m in found} == names and len(names) == 16
    kings = {miner_slug(k["miner"]) for k in data["history"]}
    pages = {p.name for p in (site / "miners").iterdir() if p.is_dir()}
    assert pages == kings and {m["page"] for m in found if m["page"]} == {
        f"miners/{quote(page)}/" for page in pages}
    for page in pages:
        assert f'href="{quote(page)}/"' in index
    ivan = next(m for m in found if m["id"] == "ivan")
    assert ivan["page"] is None and [v["outcome"] for v in ivan["verdicts"]] == ["lost", "void"]
    # a loser's verdict carries none of its crown test's figures, as the Evaluations page shows
    # it (they read the never-published audit)
    lost = ivan["verdicts"][0]
    assert lost["interval"] is None and lost["difference"] is None and lost["places"] == 2
    evaluations = (site / "evaluations/index.html").read_text(encoding="utf-8")
    assert 'href="../miners/?miner=ivan"' in evaluations


def test_evaluations_are_paged_newest_first(tmp_path, monkeypatch):
    from conftest import Board

    from evaluator.site import pages

    monkeypatch.setattr(pages, "EVALUATIONS_PER_PAGE", 2)
    monkeypatch.setattr(pages, "EVALUATION_PAGES", 3)
    board = Board(tmp_path / "leaderboard")
    board.submit("alice", 1, 0, "king", 0.6)
    for day, miner in enumerate(["bob", "carol", "dave", "erin"], start=1):
        board.submit(miner, 1, day, "lost", 0.5)
    site = build_site(tmp_path / "public", board.save(), OFFICIAL)
    first, second, third = (article_of(site / path) for path in (
        "evaluations/index.html", "evaluations/2/index.html", "evaluations/3/index.html"))
    assert "5 verdicts, 2 on this page" in first and "erin" in first and "dave" in first
    assert "Evaluations, page 2 of 3" in second and "carol" in second and "bob" in second
    assert "alice" in third and "older" not in third and "erin" not in third
    monkeypatch.setattr(pages, "EVALUATION_PAGES", 2)  # a season longer than the pages kept
    site = build_site(tmp_path / "public", board.save(), OFFICIAL)
    assert not (site / "evaluations/3").exists()
    assert "newest 4 of 5 verdicts" in article_of(site / "evaluations/2/index.html")
    nav = (site / "index.html").read_text(encoding="utf-8")
    assert "evaluations/2/" not in nav  # older pages are reached from the first, not the menu


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
                                                        "outcome": "lost"}, strict=False)])
    frame = pd.read_csv(io.StringIO(download_files(state, OFFICIAL)["evaluations.csv"]))
    assert frame["miner"][0] == "'=HYPERLINK(\"x\")"


def test_rules_pages_render_the_numbers_in_force(built_sites, make_state, tmp_path):
    official = {p: text_of(built_sites["one_king"] / f"{p}/index.html") for p in ("rules",
                                                                                   "scoring")}
    assert f"+ {OFFICIAL.win_margin}" in official["rules"]
    assert f"({OFFICIAL.max_turns} − avg_turns) / {OFFICIAL.max_turns - 1}" in official["scoring"]
    assert f"audit {OFFICIAL.audit_size}" in official["rules"]
    assert f"z > {OFFICIAL.crown_z_first}" in official["scoring"]
    # the worked decision is the verdict function's, for the rules in force
    walk = walk_through(OFFICIAL)
    assert f"so z = {walk['stage1']['z']:.2f}" in official["scoring"]
    assert f"z = {walk['stage2'][0]['z']:.2f} clears {OFFICIAL.crown_z_final}: crowned" in (
        official["scoring"])
    changed = dataclasses.replace(OFFICIAL, win_margin=0.037, max_turns=7, eval_size=321,
                                  audit_size=123, weight_novelty=0.09, duplicate_agreement=0.91,
                                  disclosure_precision=0.05, void_failure_share=0.1,
                                  crown_z_final=2.111)
    site = build_site(tmp_path / "public", make_state("one_king"), changed)
    rules, scoring = (text_of(site / f"{p}/index.html") for p in ("rules", "scoring"))
    assert "+ 0.037" in rules and f"+ {OFFICIAL.win_margin}" not in rules
    assert "(7 − avg_turns) / 6" in scoring and "321 eval questions" in scoring
    assert "0.09·novelty" in scoring
    assert "eval 321" in rules and "audit 123" in rules and "scored pool of 642" in rules
    assert "the same turn-1 model on 91% or more of the public train items" in rules
    assert "rounded to 0.05" in rules and "more than 10% of either head" in rules
    assert "z > 2.111" in scoring and "123 audit questions" in scoring
    assert f"so z = {walk_through(changed)['stage1']['z']:.2f}" in scoring
    assert "must beat that composite by +0.037 or more" in text_of(site / "index.html")


@pytest.mark.parametrize("value", [
    # numbers that must come from evaluator/rules.py, never be typed into a guide
    OFFICIAL.win_margin, OFFICIAL.eval_size, OFFICIAL.audit_size, OFFICIAL.n_params,
    OFFICIAL.svf_scale_count, OFFICIAL.duplicate_cosine, OFFICIAL.overfit_reject_gap,
    OFFICIAL.overfit_penalty_gap, OFFICIAL.overfit_penalty_factor, OFFICIAL.weight_cached,
    OFFICIAL.hidden_size, OFFICIAL.bootstrap_resamples, OFFICIAL.pool_size,
    OFFICIAL.duplicate_agreement, OFFICIAL.disclosure_precision, OFFICIAL.live_size,
    OFFICIAL.crown_z_first, OFFICIAL.crown_z_final, OFFICIAL.lose_z_first, OFFICIAL.audit_match_z,
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


REWARDS = {"programme": "Gittensor, Bittensor subnet 74", "currency": "TAO",
           "url": "https://gittensor.io/", "needs": ["a wallet whose hotkey is registered"],
           "note": "Check the programme's own eligibility rules."}


def test_plain_mkdocs_build_produces_the_whole_site(tmp_path, make_state):
    """With the maintainers' settings in the repository's mkdocs.yml: the rewards programme
    and the repository every link points at."""
    repo = _repo_copy(tmp_path / "repo")
    with (repo / "mkdocs.yml").open("a", encoding="utf-8") as config:
        config.write("extra:\n  rewards: " + json.dumps(REWARDS) + "\n")
    env = {**os.environ, "TINYROUTER_LEADERBOARD_DIR": str(make_state("busy")),
           "TINYROUTER_REPO_URL": "https://github.com/someone/their-fork"}
    subprocess.run([sys.executable, "-m", "mkdocs", "build", "--quiet"], cwd=repo, env=env,
                   check=True, capture_output=True, timeout=120)
    for page in PAGES:
        assert (repo / "public" / page).is_file(), page
    assert (repo / "public/assets/charts/history.svg").is_file()
    rewards = article_of(repo / "public/rewards/index.html")
    assert "Announced by the maintainers" in rewards and "Gittensor, Bittensor subnet 74" in rewards
    assert "paid in TAO" in rewards and "a wallet whose hotkey is registered" in rewards
    assert 'href="https://gittensor.io/"' in (repo / "public/rewards/index.html").read_text()
    history = (repo / "public/history/index.html").read_text(encoding="utf-8")
    assert 'href="https://github.com/someone/their-fork/pull/41"' in history


@pytest.mark.parametrize(("env", "repository"), [
    # the workflow's own repository, when nothing is configured
    ({"GITHUB_SERVER_URL": "https://github.com", "GITHUB_REPOSITORY": "org/board"},
     "https://github.com/org/board"),
    # nothing configured and no workflow: no repository link at all
    ({}, None),
])
def test_links_point_at_the_configured_repository(tmp_path, make_state, monkeypatch, env,
                                                  repository):
    for name in ("TINYROUTER_REPO_URL", "GITHUB_SERVER_URL", "GITHUB_REPOSITORY"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    site = build_site(tmp_path / "public", make_state("one_king"), OFFICIAL)
    home = (site / "index.html").read_text(encoding="utf-8")
    pull_links = set(re.findall(r'href="([^"]*)/pull/\d+"', home))
    if repository is None:
        assert pull_links == set() and 'class="md-source"' not in home and "#1" in text_of(
            site / "index.html")
    else:
        assert pull_links == {repository} and f'href="{repository}"' in home
    assert "tinyrouter/tinyrouter" not in home


def test_the_rewards_settings_are_text_and_a_plain_link(make_state):
    from evaluator.site.pages import generate
    from evaluator.site.state import load_state

    state = load_state(make_state("one_king"))
    hostile = {"programme": "<b>Free</b> [money](javascript:alert(1))", "url": "javascript:x()",
               "needs": ["a wallet", 3], "currency": 5}
    panel = markdown.markdown(generate(state, OFFICIAL, rewards=hostile).fragments[
        "rewards_panel"], extensions=["admonition", "tables"]).split("This section")[0]
    assert "<b>" not in panel and "<a" not in panel and "[money](javascript" in html.unescape(panel)
    assert "Its own rules" not in panel and "paid in" not in panel and "a wallet" in panel
    empty = generate(state, OFFICIAL, rewards=None).fragments["rewards_panel"]
    assert "No programme announced" in empty


def test_every_king_has_a_router_card_linked_from_home_and_history(built_sites):
    site = built_sites["busy"]
    kings = json.loads((site / "downloads/leaderboard.json").read_text())["history"]
    history = (site / "history/index.html").read_text(encoding="utf-8")
    for number, king in enumerate(kings, start=1):
        card = site / f"kings/@{king['miner']}/{king['generation']}/index.html"
        assert card.is_file(), card
        assert f'href="../kings/%40{king["miner"]}/{king["generation"]}/"' in history
        text = article_of(card)
        assert f"Reign {number} of {len(kings)}" in text and f"{king['composite']:.4f}" in text
        if number < len(kings):
            assert "Dethroned" in text and kings[number]["miner"] in text
    home = (site / "index.html").read_text(encoding="utf-8")
    last = kings[-1]
    assert f'href="kings/%40{last["miner"]}/{last["generation"]}/"' in home
    first, latest = (article_of(site / f"kings/@{k['miner']}/{k['generation']}/index.html")
                     for k in (kings[0], last))
    assert "No router card for this king" in first and "The first king" in first
    assert "Where it routes" not in first and "Not published for this king" in first
    assert "Where it routes" in latest and "Where it gains" in latest and "Reigning now" in latest
    assert "How it differs from the king before" in latest and "(was " in latest
    chart = f"assets/charts/kings/@{last['miner']}-{last['generation']}.svg"
    drawn = (site / chart).read_text()
    assert (site / chart).is_file() and "<svg" in drawn
    assert re.search(r">all items \(\d+\)<", drawn)  # each bar names its number of items
    assert not (site / f"assets/charts/kings/@{kings[0]['miner']}-1.svg").exists()


def test_cost_against_accuracy_on_home_and_in_the_downloads(built_sites):
    site = built_sites["busy"]
    home = (site / "index.html").read_text(encoding="utf-8")
    assert 'src="assets/charts/cost.svg"' in home and (site / "assets/charts/cost.svg").is_file()
    frame = pd.read_csv(site / "downloads/cost.csv")
    assert sorted(frame["kind"].value_counts().items()) == [("king", 5), ("lookup", 1),
                                                            ("model", 3), ("random", 1)]
    data = json.loads((site / "downloads/leaderboard.json").read_text())
    assert len(data["cost"]) == len(frame)
    reigning = frame[(frame["kind"] == "king") & (frame["miner"] == data["king"]["miner"])
                     & (frame["generation"] == data["king"]["generation"])]
    assert f"${reigning['cost_per_1k_usd'].iloc[0]:.2f}" in text_of(site / "index.html")
    assert "cost.csv" in text_of(site / "downloads/index.html")
    older = text_of(built_sites["one_king"] / "index.html")  # a record before costs
    assert "No cost figures yet" in older and "No metered cost published" in older
    assert not (built_sites["one_king"] / "assets/charts/cost.svg").exists()


def test_the_faq_reads_the_rules_in_force(tmp_path, make_state):
    changed = dataclasses.replace(OFFICIAL, win_margin=0.037, rate_limit_count=2,
                                  rate_limit_hours=12, duplicate_cosine=0.95,
                                  duplicate_agreement=0.9, disclosure_precision=0.05)
    site = build_site(tmp_path / "public", make_state("one_king"), changed)
    faq = article_of(site / "faq/index.html")
    assert "submit 2 heads in any 12 hours" in faq and "plus 0.037" in faq
    assert "cosine similarity of 0.95 or more" in faq and "on 90% or more" in faq
    assert "rounded to 0.05" in faq and "You may" in faq and "You may not" in faq
    for section in ("How is a tie decided?", "How do I appeal a gate result?",
                    "What is published about my head?"):
        assert section in faq


def test_one_miner_whatever_the_case_and_no_login_can_shadow_a_page(tmp_path):
    from conftest import Board

    board = Board(tmp_path / "leaderboard")
    board.submit("alice", 1, 0, "king", 0.6)
    board.submit("Bob", 1, 1, "lost", 0.55)
    board.submit("BoB", 2, 2, "king", 0.63)  # the most recent case GitHub reported
    board.submit("index", 1, 3, "king", 0.66)
    board.submit("README", 1, 4, "king", 0.69)
    board.submit("carol", 1, 5, "lost", 0.6)  # never crowned: found by the search, no page
    site = build_site(tmp_path / "public", board.save(), OFFICIAL)
    assert "Everyone who has submitted" in text_of(site / "miners/index.html")
    pages = sorted(p.name for p in (site / "miners").iterdir() if p.is_dir())
    assert pages == ["@alice", "@bob", "@index", "@readme"]
    bob = article_of(site / "miners/@bob/index.html")
    assert "Miner BoB" in bob and "2 attempts" in bob and "GitHub login: BoB" in bob
    evaluations = article_of(site / "evaluations/index.html")
    assert "Bob" not in evaluations.replace("BoB", "") and evaluations.count("BoB") == 2
    assert "Miner index" in article_of(site / "miners/@index/index.html")
    assert "Miner README" in article_of(site / "miners/@readme/index.html")


def test_what_looking_at_the_demo_site_found(tmp_path, make_state):
    """A first king's page, plurals, signless zeros, a dethroned king's badge, and the Rules page
    of a competition with a local encoder."""
    board = make_state("busy")
    lost = next(p for p in board.glob("results/*/*.json")
                if json.loads(p.read_text())["outcome"] == "lost")
    record = json.loads(lost.read_text())
    lost.write_text(json.dumps({**record, "delta": -0.0, "ci95": [-0.0, 0.05]}))
    demo = dataclasses.replace(OFFICIAL, encoder_id=str(tmp_path / "demo" / "encoder"))
    site = build_site(tmp_path / "public", board, demo)
    everything = " ".join(text_of(p) for p in html_files(site))
    assert "-0.00" not in everything and "−0.00" not in everything
    assert not re.search(r"\b1 (attempts|crowns|categories)\b", everything)
    kings = json.loads((site / "downloads/leaderboard.json").read_text())["history"]
    first = article_of(site / f"miners/@{kings[0]['miner']}/index.html")
    assert "the first king, with no one to beat" in first and "over the king it replaced" not in (
        first.split("Generation 1, crowned")[1].split("Generation")[0])
    evaluations = (site / "evaluations/index.html").read_text(encoding="utf-8")
    assert evaluations.count('class="tr-badge tr-former"') == len(kings) - 1
    assert evaluations.count('class="tr-badge tr-king"') == 1
    rules = article_of(site / "rules/index.html")
    assert "a locally built model (encoder)" in rules and str(tmp_path) not in everything
    assert "≤ 1,000,000" in rules and "1e+06" not in rules
    assert f"above {'$0.00'}" in rules and "$0.0 " not in rules


def test_command_builds_and_reports_errors(tmp_path, make_state, capsys):
    out = tmp_path / "out"
    assert main(["site", "build", "--leaderboard", str(make_state("one_king")),
                 "--out", str(out)]) == 0
    assert (out / "index.html").is_file() and "site built" in capsys.readouterr().out
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "todo.txt").write_text("keep me", encoding="utf-8")
    assert main(["site", "build", "--repo", str(tmp_path), "--out", str(tmp_path / "notes")]) == 1
    assert "not empty" in capsys.readouterr().err


def test_source_date_epoch_is_the_builds_now(tmp_path, make_state, monkeypatch):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1767323040")  # 2026-01-02 03:04 UTC
    site = build_site(tmp_path / "public", make_state("one_king"), OFFICIAL)
    assert "(this page: 2026-01-02 03:04 UTC)" in article_of(site / "queue/index.html")


def test_the_board_can_be_followed_by_feed_and_badge(built_sites):
    site, atom = built_sites["busy"], "{http://www.w3.org/2005/Atom}"
    feed = ElementTree.parse(site / "feed.xml").getroot()
    assert feed.tag == f"{atom}feed" and feed.findtext(f"{atom}updated") == "2026-10-20T04:48:00Z"
    entries = feed.findall(f"{atom}entry")
    verdicts = json.loads((site / "downloads/leaderboard.json").read_text())["verdicts"]
    assert len(entries) == min(FEED_ENTRIES, len(verdicts))
    assert len({e.findtext(f"{atom}id") for e in entries}) == len(entries)
    for entry, verdict in zip(entries, verdicts, strict=False):
        assert entry.findtext(f"{atom}summary") == verdict["why"]
        href = entry.find(f"{atom}link").get("href")
        link = urlsplit(href)  # relative without site_url; a miner without a page: the search
        assert (site / unquote(link.path) / "index.html").is_file(), href
        assert link.query in ("", f"miner={quote(miner_id(verdict['miner']), safe='')}"), href
    badge = json.loads((site / "badge/king.json").read_text())
    king = json.loads((site / "downloads/leaderboard.json").read_text())["king"]
    assert badge["schemaVersion"] == 1 and badge["label"] and badge["color"]
    assert badge["message"] == f"{king['miner']} g{king['generation']} · {king['composite']:.4f}"
    assert json.loads((built_sites["empty"] / "badge/king.json").read_text())["message"] == \
        "no king yet"
    home = article_of(site / "index.html")
    assert "Atom feed" in home and "img.shields.io/endpoint?url=SITE_URL" in home
    assert 'type="application/atom+xml"' in (site / "history/index.html").read_text()


def test_a_demo_sites_banner_names_every_rule_that_differs_and_its_links_fit_a_project_site(
        tmp_path, make_state):
    rules = tmp_path / "rules.json"
    rules.write_text(json.dumps({"eval_size": 90, "audit_size": 60, "train_fraction": 0.8,
                                 "encoder_id": str(tmp_path / "encoder")}))
    out = tmp_path / "out"
    assert main(["--competition", str(rules), "site", "build", "--leaderboard",
                 str(make_state("busy")), "--out", str(out),
                 "--site-url", "https://someone.github.io/tinyrouter/", "--demo"]) == 0
    for page in (out / "index.html", out / "rules/index.html", out / "maintaining/index.html"):
        banner = text_of(page).split("A demo board.", 1)[1].split("\n\n", 1)[0]
        for says in ("eval_size 90 (official 150)", f"audit_size 60 (official {OFFICIAL.audit_size})",
                     "pool_size 180 (official 300)", "train_fraction 0.8 (official 0.5)",
                     f"encoder_id a tiny Qwen3 built locally (official {OFFICIAL.encoder_id})"):
            assert says in banner, (page, banner)
        assert str(tmp_path) not in banner  # no machine path
    # on a project pages address: styled, bannered and linked under its path
    missing = (out / "404.html").read_text(encoding="utf-8")
    assert 'href="/tinyrouter/assets/tinyrouter.css"' in missing
    for page in (out / "404.html", out / "index.html", out / "queue/index.html"):
        assert "A demo board." in text_of(page)
    home = article_of(out / "index.html")
    assert ("img.shields.io/endpoint?url=https%3A//someone.github.io/tinyrouter/badge/king.json"
            in home)
    feed = ElementTree.parse(out / "feed.xml").getroot()
    links = [link.get("href") for link in feed.iter("{http://www.w3.org/2005/Atom}link")]
    assert all(link.startswith("https://someone.github.io/tinyrouter/") for link in links)


def measured(device):
    """Figures as `tinyrouter dev costs` writes them for one device."""
    return {"device": device, "dtype": "torch.float32", "threads": 2, "cores": 2, "load": 1.0,
            "tokens": 256, "questions": 8, "candidates": 4, "repeats": 3, "forward_s": 0.5,
            "prefix_s": 0.4, "tail_s": 0.05, "measured_at": "2026-12-07T12:00:00Z"}


def test_the_guides_read_the_measured_costs_and_the_demos_stage_times(tmp_path, monkeypatch,
                                                                      make_state):
    """Where the guides' figures come from: the costs `dev costs` measured and the stage times
    of a `dev demo` run, each as the shipped file says, none typed."""
    import re

    from evaluator.rules import OFFICIAL

    shipped = tmp_path / "data"  # where the guides read the figures the studies wrote
    shipped.mkdir()
    (shipped / "costs.json").write_text(json.dumps({"format": 1,
                                                    "devices": {"cpu": measured("cpu")}}))
    times = {"format": 1, "repeats": 3, "cores": 2, "measured_at": "2026-12-07T12:00:00Z",
             "load": [[0.1, 0.9]] * 3, "total": {"wall_s": 88.5, "cpu_s": 101.2},
             "stages": [{"title": "seal the hidden benchmark", "wall_s": 20.5, "cpu_s": 30.1}]}
    (shipped / "demo-times.json").write_text(json.dumps(times))
    monkeypatch.setattr("evaluator.resources.data_file", lambda name: shipped / name)
    out = tmp_path / "site"
    assert main(["site", "build", "--leaderboard", str(make_state("busy")), "--out",
                 str(out)]) == 0

    def text(page):
        return " ".join(re.sub(r"<[^>]+>", " ", (out / page / "index.html").read_text()).split())

    tails = OFFICIAL.train_generations * OFFICIAL.train_popsize * OFFICIAL.train_minibatch
    assert (f"{tails:,} × 0.050 s ≈ {round(tails * 0.05 / 3600, 1)} hours"
            in text("submitting"))
    items = len(OFFICIAL.benchmarks) * (OFFICIAL.pool_size + OFFICIAL.audit_size)
    live = 2 * len(OFFICIAL.benchmarks) * OFFICIAL.live_size * OFFICIAL.max_turns
    seconds = round(items * 0.4 + 2 * items * 0.05 + live * 0.5)
    assert f"≈ {seconds:,} seconds of encoder time on the cpu" in text("maintaining")
    assert "dev costs --device cuda" in text("maintaining")  # the GPU, not measured here
    reference = text("reference")
    assert "the median of 3 run(s) on 2 cores, 2026-12-07" in reference
    assert "0.1 / 0.9, 0.1 / 0.9, 0.1 / 0.9" in reference
    assert "seal the hidden benchmark 20.5 30.1" in reference
    assert "the whole demo 88.5 101.2" in reference
