"""The embedded default, end to end: `tinyrouter demo` in a temporary folder."""

import contextlib
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from evaluator.benchmarks.sealing import open_benchmark
from evaluator.cli import main
from evaluator.leaderboard import validate_state
from evaluator.pool.ledger import verify_ledger
from evaluator.records import LOST, PUBLIC_FIELDS
from evaluator.rules import Competition
from evaluator.types import AnsweredItem

pytestmark = pytest.mark.slow


GUIDE = Path(__file__).parents[2] / "site" / "submitting.md"
MAINTAINING = Path(__file__).parents[2] / "site" / "maintaining.md"


def guide_commands(guide: Path, heading: str) -> list[str]:
    """The command lines of the first code block under a guide's heading."""
    section = guide.read_text(encoding="utf-8").split(heading + "\n", 1)[1]
    block = section.split("```bash\n", 1)[1].split("```", 1)[0]
    return [line for line in block.splitlines() if line.strip()]


def practise_commands() -> list[str]:
    """The command lines of the Submitting guide's "Practise on the demo" section."""
    return guide_commands(GUIDE, "## Practise on the demo")


def in_a_fresh_shell(commands: list[str], where: Path) -> subprocess.CompletedProcess:
    """Commands as a guide prints them, in one bash from `where` (the demo's parent); the
    simulator a sourced practise.sh started is stopped however the script ends (the trap's
    kill finds nothing once the guide's own kill has run: under -e its failure would become
    the script's exit status)."""
    script = "\n".join([commands[0],
                        'trap \'kill "$TINYROUTER_SIMULATOR_PID" 2>/dev/null || true\' EXIT',
                        *commands[1:]])
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    for name in ("TINYROUTER_COMPETITION", "OPENROUTER_BASE_URL", "BENCHMARK_PASSWORD"):
        env.pop(name, None)
    return subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=where, env=env,
                          capture_output=True, text=True, timeout=1800)


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("demo") / "demo"  # the guide's `--workdir demo`
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert main(["demo", "--workdir", str(workdir)]) == 0
    (workdir.parent / "printed.txt").write_text(printed.getvalue(), encoding="utf-8")
    return workdir


def test_each_hint_the_demo_prints_works_as_printed(demo):
    """The footer's "serve it" command serves the board at the address it names, and the
    practise script it names is the one the Submitting guide sources."""
    import shlex
    import time
    import urllib.request

    printed = (demo.parent / "printed.txt").read_text(encoding="utf-8").splitlines()
    serve = next(line.split("serve it: ", 1)[1] for line in printed if "serve it: " in line)
    address = next(line.split("then open ", 1)[1] for line in printed if "then open " in line)
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    server = subprocess.Popen(shlex.split(serve), env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE)
    try:
        page = None
        for _ in range(100):
            try:
                with urllib.request.urlopen(address, timeout=2) as response:
                    page = response.read().decode("utf-8")
                break
            except OSError:
                assert server.poll() is None, server.stderr.read().decode()
                time.sleep(0.1)
        assert page is not None and "TinyRouter" in page
    finally:
        server.terminate()
        server.wait(timeout=10)
    script = next(line.split(": . ", 1)[1] for line in printed
                  if line.startswith("Practise the miner's path here"))
    assert Path(script) == demo / "practise.sh" and Path(script).is_file()
    assert practise_commands()[1] == ". demo/practise.sh"  # the same file, from demo's parent


def read(path):
    return json.loads(path.read_text(encoding="utf-8"))


def test_leaderboard_is_valid_with_exactly_one_king(demo):
    rules = Competition.load(demo / "competition.json")
    board = demo / "repo" / "leaderboard"
    assert validate_state(demo / "repo", rules).results >= 2
    king = read(board / "king.json")["king"]
    assert king["miner"] in ("alice", "bob")
    assert len(read(board / "history.json")["kings"]) in (1, 2)
    outcomes = [read(board / "results" / m / "1.json")["outcome"] for m in ("alice", "bob")]
    # a barely trained second head may lose, or fall to the overfit gate's sampling noise
    assert outcomes[0] == "king" and outcomes[1] in ("king", "lost", "rejected")
    # the role fit makes the king answer, then verify: sessions end well before the turn cap
    reign = read(board / "results" / king["miner"] / "1.json")["per_benchmark"]
    assert all(b["avg_turns"] < 4 and b["efficiency"] > 0.1 for b in reign.values())


def test_second_miner_record_obeys_the_disclosure_rule(demo):
    record = read(demo / "repo" / "leaderboard" / "results" / "bob" / "1.json")
    if record["outcome"] == "lost":
        assert set(record) == set(PUBLIC_FIELDS[LOST])
        assert "per_benchmark" not in record and "paired" not in record
    elif record["outcome"] == "rejected":
        assert record["reason"].startswith("gate 5 (overfit)") and record["composite"] is None
        assert "per_benchmark" not in record
        assert read(demo / "private" / "bob-1.json")["reason"] == record["reason"]
        return
    else:
        assert set(record["per_benchmark"]) == {"math500", "mmlu", "livecodebench"}
    private = read(demo / "private" / "bob-1.json")
    if record["outcome"] == LOST:  # published at the disclosure precision
        assert round(private["composite"], 2) == record["composite"]
    else:
        assert private["composite"] == pytest.approx(record["composite"])


def test_a_copy_of_the_king_is_rejected_at_gate_3_and_spends_its_slot(demo):
    report = read(demo / "pr-3-gates.json")
    failed = report["failed_gate"]
    assert failed["number"] == 3 and "whatever the role rows" in failed["reason"]
    # the head copied is the king of the moment mallory submitted (a later head may reign now)
    assert re.search(r"submissions/(alice|bob)/1|PR #", failed["reason"])
    attempts = [json.loads(line) for line in
                (demo / "repo" / "leaderboard" / "attempts.jsonl").read_text().splitlines()]
    # the demo's own attempts, in order (a practise run in the same workspace may add more)
    assert [a["miner"] for a in attempts][:4] == ["alice", "bob", "mallory", "mnemo"]
    assert attempts[2]["gates"] == {"passed": False, "failed": 3}
    assert not (demo / "repo" / "submissions" / "mallory").exists()


def test_every_date_the_demo_records_is_in_the_order_it_happened(demo):
    """One clock for every stage: each pull request gated after the one before, evaluated
    after its gates, and the site built after everything it shows, at the time the demo ran."""
    from evaluator.files import parse_time

    board = demo / "repo" / "leaderboard"
    attempts = [json.loads(line) for line in (board / "attempts.jsonl").read_text().splitlines()]
    gated = {a["pr"]: parse_time(a["at"]) for a in attempts[:4]}
    assert list(gated) == [1, 2, 3, 4] and sorted(gated.values()) == list(gated.values())
    evaluated = {}
    for miner, pr in (("alice", 1), ("bob", 2), ("mnemo", 4)):
        evaluated[pr] = parse_time(read(board / "results" / miner / "1.json")["evaluated_at"])
        assert evaluated[pr] > gated[pr]
    assert evaluated[1] < evaluated[2] < gated[3] < gated[4] < evaluated[4]
    crowned = [parse_time(k["crowned_at"]) for k in read(board / "history.json")["kings"]]
    assert crowned[0] == evaluated[1] and sorted(crowned) == crowned
    sealed = parse_time(read(board / "manifest.json")["sealed_at"])
    assert sealed < min(gated.values())
    built = re.search(r"this page: (\d{4}-\d\d-\d\d \d\d:\d\d) UTC",
                      (demo / "site" / "queue" / "index.html").read_text(encoding="utf-8"))
    assert built and parse_time(built[1].replace(" ", "T") + ":00Z") >= evaluated[4]
    ran = (demo.parent / "printed.txt").stat().st_mtime
    assert evaluated[4].timestamp() <= ran  # nothing dated after the demo ran


def test_the_memorising_miner_is_never_crowned(demo):
    record = read(demo / "repo" / "leaderboard" / "results" / "mnemo" / "1.json")
    assert record["outcome"] in ("lost", "rejected")
    if record["outcome"] == "rejected":
        assert record["reason"].startswith("gate 5 (overfit)")
    manifest = read(demo / "repo" / "leaderboard" / "manifest.json")
    assert all(entry["splits"]["audit"]["count"] == 60 and entry["private"]["about"]
               for entry in manifest["benchmarks"].values())
    # it collected every public item, yet neither its audit nor its live questions are among them
    private = read(demo / "private" / "mnemo-1.json")
    played = [item["id"] for items in private["challenger"]["items"].values()
              for part in ("audit", "live") for item in items[part]]
    assert len(played) >= 3 * (60 + 20) and all("-private-" in item_id for item_id in played)


def test_the_fairness_figures_are_published_on_the_site(demo):
    from evaluator.store import validate

    figures = read(demo / "repo" / "leaderboard" / "fairness.json")
    validate("fairness", figures)
    page = (demo / "site" / "fairness" / "index.html").read_text(encoding="utf-8")
    assert "Chance does not crown" in page and "fairness.svg" in page


def test_site_home_page_names_the_king(demo):
    home = (demo / "site" / "index.html").read_text(encoding="utf-8")
    king = read(demo / "repo" / "leaderboard" / "king.json")["king"]
    assert king["miner"] in home and f"{king['composite']:.4f}" in home


def test_every_ledger_verifies_and_receipts_point_at_them(demo):
    seal = verify_ledger(demo / "private" / "seal-ledger.jsonl")
    data = verify_ledger(demo / "miners" / "data" / "ledger.jsonl")
    assert seal.entries > 0 and data.total_cost_usd > 0
    receipt = read(demo / "repo" / "submissions" / "alice" / "1" / "receipt.json")
    assert receipt["total_cost_usd"] > 0 and len(receipt["ledger_head"]) == 64


def test_no_plaintext_hidden_data_is_left_in_the_workspace(demo):
    rules = Competition.load(demo / "competition.json")
    sets = open_benchmark(demo / "hidden", "demo-password-not-a-secret", rules)
    prompts = {(row.item if isinstance(row, AnsweredItem) else row).prompt
               for splits in sets.values() for rows in splits.values() for row in rows}
    assert len(prompts) == sum(len(rows) for s in sets.values() for rows in s.values())
    # the retired season is in the open beside the leaderboard, and only there
    revealed = demo / "repo" / "leaderboard" / "revealed"
    assert any(p in (revealed / "math500.pool.json").read_text(encoding="utf-8")
               for p in prompts)
    for path in demo.rglob("*"):
        # the memoriser collected the public items the pool is drawn from: that is its attack
        if path.is_file() and path.parent != demo / "hidden" and revealed not in path.parents \
                and demo / "memoriser" not in path.parents and path.stat().st_size < 50_000_000:
            text = path.read_bytes().decode("utf-8", errors="ignore")
            leaked = [p for p in prompts if p in text]
            assert not leaked, f"{path.relative_to(demo)} holds a hidden question"


def test_the_retired_season_replays_and_a_changed_grade_is_named(demo, tmp_path, capsys):
    """Every verdict of the demo's season re-derived from the files `reveal --season` left
    beside the leaderboard; one published grade changed, and replay names it."""
    import shutil

    repo, competition = demo / "repo", ["--competition", str(demo / "competition.json")]
    capsys.readouterr()
    assert main([*competition, "replay", "--repo", str(repo)]) == 0
    out = capsys.readouterr().out
    results = [read(p) for p in (repo / "leaderboard" / "results").glob("*/1.json")]
    replayable = [r for r in results if r["partition_commitment"] is not None]
    assert f"{len(replayable)} of {len(replayable)} verdict(s) reproduced exactly" in out
    assert {"alice", "bob", "mnemo"} <= {r["miner"] for r in replayable}

    revealed = shutil.copytree(repo / "leaderboard" / "revealed", tmp_path / "revealed")
    path = revealed / "evaluations" / "alice" / "1.json"
    record = read(path)
    row = record["challenger"]["items"]["mmlu"]["eval"][0]
    row["correct"] = not row["correct"]
    path.write_text(json.dumps(record), encoding="utf-8")
    assert main([*competition, "replay", "--repo", str(repo), "--revealed", str(revealed)]) == 1
    out = capsys.readouterr().out
    assert (f"alice generation 1 (PR 1): king, NOT reproduced: the challenger: mmlu eval item "
            f"{row['id']}, the cached answer of {row['model']}") in out


def test_rerunning_replaces_an_earlier_demo_but_not_other_folders(tmp_path):
    other = tmp_path / "mine"
    other.mkdir()
    (other / "notes.txt").write_text("keep me")
    assert main(["demo", "--workdir", str(other)]) == 1
    assert (other / "notes.txt").read_text() == "keep me"


def test_summary_says_so_when_no_submission_became_king(tmp_path):
    from evaluator.commands.demo import Workspace, summary

    (tmp_path / "repo" / "leaderboard").mkdir(parents=True)
    (tmp_path / "repo" / "leaderboard" / "manifest.json").write_text('{"benchmarks": {}}')
    rejected = {"outcome": "rejected", "composite": None, "king_composite": None, "delta": None,
                "reason": "gate 5 (overfit): on math500 ..."}
    text = summary(Workspace(tmp_path, results={"alice": rejected, "bob": rejected}), 12.0)
    assert "No king: no submission passed every check." in text
    assert "alice    rejected" in text and "Finished in 12 s" in text


def test_the_summary_table_shows_every_loser_alike_and_the_isolation_below_it(tmp_path):
    from evaluator.commands.demo import Workspace, summary

    (tmp_path / "repo" / "leaderboard").mkdir(parents=True)
    (tmp_path / "repo" / "leaderboard" / "manifest.json").write_text('{"benchmarks": {}}')
    lost = {"outcome": "lost", "composite": 0.62, "delta": -0.2, "isolation": "bubblewrap"}
    text = summary(Workspace(tmp_path, results={
        "alice": {"outcome": "rejected", "composite": None, "reason": "gate 5 (overfit): x",
                  "isolation": "bubblewrap"},
        "bob": lost, "mnemo": {**lost, "composite": 0.7, "delta": -0.12},
        "mallory": {"outcome": "rejected", "failed_gate": {"number": 3, "name": "duplicate"}}}),
        9.0)
    rows = text.split("delta\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert [row.split()[0] for row in rows] == ["alice", "bob", "mallory", "mnemo"]
    assert "0.6200      0.8200  -0.2000" in rows[1] and "0.7000      0.8200  -0.1200" in rows[3]
    assert "gate 3 (duplicate): a copy of the king" in rows[2]
    after = text.split("\n\n", 3)
    assert any(part.startswith("Isolation of the code graded") for part in after)


def test_summary_explains_a_king_crowned_after_the_first_miner_was_rejected(tmp_path):
    from evaluator.commands.demo import Workspace, why

    ws = Workspace(tmp_path, results={
        "alice": {"outcome": "rejected", "reason": "gate 5 (overfit): on mmlu ..."},
        "bob": {"outcome": "king", "delta": None}})
    assert why(ws) == ("alice was rejected: gate 5 (overfit): on mmlu ...; bob was crowned, "
                       "the first to pass every check.")


def test_the_results_record_the_isolation_their_code_was_graded_under(demo):
    from evaluator import isolation

    for miner in ("alice", "bob"):
        record = read(demo / "repo" / "leaderboard" / "results" / miner / "1.json")
        assert record["isolation"] == isolation.current().describe()


def test_a_miner_practises_on_the_demo_and_a_maintainer_rehearses_as_the_guides_say(demo):
    """The Submitting guide's practise, then the Maintaining guide's rehearsal, each as
    printed: the practised head passes every check preflight runs, and its evaluation gives
    the same verdict on them (it is evaluated, not rejected before the hidden sets open)."""
    commands = practise_commands()
    assert commands[0] == "tinyrouter demo --workdir demo"  # what the fixture ran
    assert commands[1] == ". demo/practise.sh"
    run = in_a_fresh_shell(commands[1:], demo.parent)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    repo = demo / "repo"
    # score --king compares on the rows the king's receipt names and the run held out too
    assert "compared on rows neither head trained on" in run.stdout
    assert "same model on" in run.stdout  # diff
    assert "all gates passed" in run.stdout  # preflight and the simulated pull request
    assert "routes like no earlier head" in run.stdout  # preflight's behavioural check
    attempts = [json.loads(line) for line in
                (repo / "leaderboard" / "attempts.jsonl").read_text().splitlines()]
    assert attempts[-1]["miner"] == "carol" and attempts[-1]["gates"]["passed"]
    assert (repo / "submissions" / "carol" / "1" / "receipt.json").is_file()

    rehearsal = guide_commands(MAINTAINING, "### Rehearse a season offline")
    assert rehearsal[0] == ". demo/practise.sh"
    run = in_a_fresh_shell(rehearsal, demo.parent)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    result = read(repo / "result.json")
    assert result["outcome"] in ("king", "lost") or \
        result["reason"].startswith("gate 5 (overfit)"), result
    assert read(repo / "leaderboard" / "results" / "carol" / "1.json") == result


def test_the_demo_boards_cost_chart_is_drawn_from_its_download(demo):
    """The retired season's chart (every head the replay filled in, every baseline, the
    frontier), redrawn from cost.csv alone, is the site's, byte for byte, at both widths."""
    from browsing import cost_points_of

    from evaluator.site.cards import oracle_accuracy
    from evaluator.site.charts import FRAMES, cost_svg

    rules = Competition.load(demo / "competition.json")
    site = demo / "site"
    points = cost_points_of((site / "downloads" / "cost.csv").read_text(encoding="utf-8"))
    assert {p.kind for p in points} >= {"king", "head", "model", "random", "lookup"}
    manifest = read(demo / "repo" / "leaderboard" / "manifest.json")["benchmarks"]
    oracle = oracle_accuracy({b: e["baselines"] for b, e in manifest.items()}, rules.benchmarks)
    for frame, name in zip(FRAMES, ("cost.svg", "cost-narrow.svg"), strict=True):
        drawn = (site / "assets" / "charts" / name).read_text(encoding="utf-8")
        assert cost_svg(points, oracle, frame) == drawn


@pytest.mark.browser
def test_the_demo_board_in_a_browser(demo):
    """The board the demo built, as a visitor sees it: every page once, the pages taking turns
    at light and dark mode and a desktop and a phone width (no console error, no request to
    another host, charts loaded and readable, nothing wider than the screen outside a scroll
    box that says so; tests/site/test_browser.py visits every page of a busier board in all
    four), every verdict legible on a phone, and the router card's "where it gains" from
    public figures."""
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

    site = demo / "site"
    pages = sorted(p.parent.relative_to(site).as_posix() for p in site.rglob("index.html"))
    assert len(pages) >= 15
    with chromium() as browser, serving(site) as base:
        looks = [(scheme, width) for scheme in SCHEMES for width in WIDTHS]
        for number, path in enumerate(pages):
            guest = Visitor(browser, base, *looks[number % len(looks)])
            page = guest.visit("" if path == "." else f"{path}/")
            assert page.locator("article h1").count() == 1, path
            assert "demo" in page.locator(".md-banner").inner_text().lower(), path
            guest.check(f"demo-{path.replace('/', '-').strip('.-') or 'home'}")
            guest.close()
        for width in WIDTHS:  # the retired season's table, filled in by the replay
            guest = Visitor(browser, base, "light", width)
            leaderboard_rows(guest, site, "demo")
            guest.close()
        guest = Visitor(browser, base, "dark", "phone")
        phone_verdicts(guest, site, "demo")
        card = guest.visit(king_card(site)).locator("article").inner_text()
        assert "Where it gains" in card and "King's choices" in card
        guest.close()
