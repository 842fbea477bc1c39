"""A retired season replayed (evaluator/replay.py, `reveal --season`, `tinyrouter replay`): every
verdict re-derived from the published files exactly, and each kind of tampering named."""

import copy
import dataclasses
import json
import zlib
from datetime import UTC, datetime, timedelta

import pytest
from evaluation_fakes import (
    ALWAYS_0,
    ALWAYS_2,
    DRAWN,
    RULES,
    SMALL,
    SMART,
    STRICT,
    FakePool,
    LinearRouter,
    contender,
    make_sets,
    seal_sets,
)

from evaluator import cli
from evaluator.evaluate import evaluate
from evaluator.files import dumps
from evaluator.leaderboard import apply_result
from evaluator.records import Partition, Result
from evaluator.replay import (
    COMMITMENT,
    FIGURE,
    GRADE,
    ITEMS,
    RECORD,
    Season,
    replay,
    replay_season,
)
from evaluator.store import Store

T0 = datetime(2026, 11, 2, 12, 0, tzinfo=UTC)
PRECISION = RULES.disclosure_precision
PASSWORD = "correct horse battery staple"
# the season: alice always asks model 0 and is the first king; bob reads the category and
# dethrones her; carol always asks the model that is never right, and loses to bob
HEADS = (("alice", ALWAYS_0, None), ("bob", SMART, "alice"), ("carol", ALWAYS_2, "bob"))


class VariedPool(FakePool):
    """Each session costs its own amount, as real ones do (a record's cost is a sum of floats,
    which replay must add in the order the evaluation did)."""

    def __call__(self, bench, items, policy):
        return [dataclasses.replace(o, cost_usd=o.cost_usd * (1 + zlib.crc32(o.item_id.encode())
                                                              % 97 / 31))
                for o in super().__call__(bench, items, policy)]


def play_season(sets, rules=RULES):
    """Each head evaluated in turn against the reigning one: the private records, in order."""
    heads, records = {}, []
    for number, (login, route, king) in enumerate(HEADS):
        heads[login] = contender(route, miner=login, pr=number + 1)
        drawn = DRAWN if number == 0 else Partition.draw()
        records.append(evaluate(heads[login], heads.get(king), sets, LinearRouter(), VariedPool(),
                                rules, now=T0 + timedelta(days=number),
                                manifest_hash="f" * 64, drawn=drawn))
    return records


def revealed(records, sets) -> Season:
    """The season as `reveal --season` publishes it: the splits' rows and each private record."""
    rows = {bench: {split: [r.to_dict() for r in items] for split, items in splits.items()}
            for bench, splits in sets.items()}
    return Season(rows, {(*r.key, r.evaluated_at): Result.from_dict(json.loads(dumps(
        r.private(PRECISION)))) for r in records})  # as written: its keys sorted


def published(record: Result) -> Result:
    """The board's file of an evaluation: its public record, read back."""
    return Result.from_dict(record.public(PRECISION))


@pytest.fixture(scope="module")
def season():
    sets = make_sets()
    return sets, play_season(sets)


def test_every_verdict_of_the_season_is_reproduced_exactly(season):
    sets, records = season
    replayed = replay_season(revealed(records, sets), map(published, records), RULES)
    assert [(r.published.miner, r.published.outcome) for r in replayed] == [
        ("alice", "king"), ("bob", "king"), ("carol", "lost")]
    assert all(r.reproduced for r in replayed), [r.difference for r in replayed]
    bob, carol = replayed[1].result, replayed[2].result
    # the full figures behind a loss's rounded ones, and who each was judged against
    assert carol.composite == records[2].composite and carol.crown_test["z"] < 0
    assert (carol.against.miner, bob.against.miner) == ("bob", "alice")


def _items(record: Result, head: str = "challenger_run") -> dict:
    return getattr(record, head).items


def flip_cached_grade(record, sets):
    row = _items(record)["mmlu"]["eval"][3]
    row["correct"] = not row["correct"]
    return f"mmlu eval item {row['id']}, the cached answer of {row['model']}"


def flip_live_grade(record, sets):
    row = _items(record)["math500"]["live"][0]
    row["correct"] = not row["correct"]
    return "composite" if record.outcome == "king" else None  # a loss's figures are rounded


def swap_eval_items(record, sets):
    rows = _items(record)["livecodebench"]["eval"]
    rows[0], rows[1] = rows[1], rows[0]
    return "livecodebench eval item 1"


def another_seed(record, sets):
    return dataclasses.replace(record, partition=Partition.draw())


def drop_a_live_question(record, sets):
    _items(record)["mmlu"]["live"].pop()
    return "live questions per benchmark"


def change_a_revealed_answer(record, sets):
    row = sets["math500"]["audit"][0]
    answer = row["answers"][_items(record)["math500"]["audit"][0]["model"]]
    answer["correct"] = not answer["correct"]
    return f"math500 audit item {row['item']['id']}"


TAMPERING = [
    # the record's own figures
    ("bob", flip_cached_grade, GRADE),
    ("bob", flip_live_grade, FIGURE),
    ("carol", flip_live_grade, FIGURE),
    ("carol", swap_eval_items, ITEMS),
    ("carol", drop_a_live_question, ITEMS),
    ("bob", another_seed, COMMITMENT),
    # the revealed split (a real reveal is also checked against the manifest's commitment)
    ("carol", change_a_revealed_answer, GRADE),
]


@pytest.mark.parametrize(("who", "tamper", "check"), TAMPERING,
                         ids=[f"{w}-{t.__name__}" for w, t, _ in TAMPERING])
def test_tampering_with_what_was_published_is_named(season, who, tamper, check):
    sets, records = season
    record = copy.deepcopy(next(r for r in records if r.miner == who))
    sets = copy.deepcopy({b: {s: [r.to_dict() for r in rows] for s, rows in splits.items()}
                          for b, splits in sets.items()})
    said = tamper(record, sets)
    if isinstance(said, Result):
        record, said = said, None
    one = replay(published(next(r for r in records if r.miner == who)),
                 Result.from_dict(record.private(PRECISION)), sets, RULES)
    assert not one.reproduced and one.difference.check == check, one.difference
    if said:
        assert said in one.difference.where, one.difference.sentence


def test_a_published_figure_that_was_not_computed_is_named(season):
    sets, records = season
    carol = records[2].public(PRECISION)
    forged = Result.from_dict({**carol, "composite": carol["composite"] + 0.01})
    one = replay(forged, Result.from_dict(records[2].private(PRECISION)),
                 revealed(records, sets).sets, RULES)
    assert one.difference.check == FIGURE and one.difference.where == "composite"
    assert "published 0." in one.difference.sentence
    missing = replay(published(records[2]), None, revealed(records, sets).sets, RULES)
    assert missing.difference.check == RECORD


def test_an_overfit_rejection_is_replayed_from_the_cached_items_alone():
    sets = make_sets(broken_audit=("mmlu",), rules=STRICT)
    record = evaluate(contender(SMART, miner="dora"), None, sets, LinearRouter(), FakePool(),
                      STRICT, now=T0, manifest_hash="f" * 64, drawn=DRAWN)
    assert record.outcome == "rejected" and record.reason.startswith("gate 5 (overfit)")
    [one] = replay_season(revealed([record], sets), [published(record)], STRICT)
    assert one.reproduced and one.result.reason == record.reason


# ---------------------------------------------------------------- the commands

@pytest.fixture
def board(tmp_path, repo, monkeypatch):
    """A repository whose leaderboard holds the season, the sealed benchmark, and the private
    records where the runner kept them (one of them in a folder of its own, as `evaluate`
    files them by default)."""
    sets = make_sets()
    sealed = seal_sets(tmp_path / "sealed", sets, PASSWORD, repo)
    private = tmp_path / "private"
    for record in play_season(sets):
        apply_result(repo, record.public(PRECISION), RULES)
        folder = private / (f"{record.miner}-1-pr{record.pr}" if record.miner == "bob" else "")
        folder.mkdir(parents=True, exist_ok=True)
        name = "private.json" if record.miner == "bob" else f"{record.miner}-1.json"
        (folder / name).write_text(json.dumps(record.private(PRECISION)))
        (folder / f"{record.miner}-result.json").write_text(json.dumps(
            record.public(PRECISION)))  # a public result beside it is passed over
    competition = tmp_path / "competition.json"
    competition.write_text(json.dumps(SMALL))
    monkeypatch.setenv("BENCHMARK_PASSWORD", PASSWORD)
    return {"repo": repo, "sealed": sealed, "private": private, "competition": competition}


def tinyrouter(board, *argv):
    return cli.main(["--competition", str(board["competition"]), *map(str, argv)])


def test_reveal_the_season_then_replay_it(board, capsys):
    assert tinyrouter(board, "reveal", "--season", "--dir", board["sealed"], "--records",
                      board["private"], "--repo", board["repo"]) == 0
    folder = Store(board["repo"]).file("revealed")
    assert sorted(p.name for p in folder.glob("*.json")) == sorted(
        f"{b}.{s}.json" for b in RULES.benchmarks for s in ("audit", "live", "pool"))
    assert sorted(p.parent.name for p in folder.glob("evaluations/*/1.json")) == [
        "alice", "bob", "carol"]
    capsys.readouterr()
    assert tinyrouter(board, "replay", "--repo", board["repo"]) == 0
    out = capsys.readouterr().out
    assert "3 of 3 verdict(s) reproduced exactly" in out
    # a loss published none of its crown test's figures; a king did
    lines = {line.split(" (PR")[0]: line for line in out.splitlines()}
    assert "lost (composite 0." in lines["carol generation 1"]
    assert ", z " not in lines["carol generation 1"] and ", z " in lines["bob generation 1"]
    # an archived season replays from its own folder, manifest included
    archive = board["repo"] / "leaderboard" / "seasons" / "1"
    archive.mkdir(parents=True)
    for name in ("results", "results.sha256", "revealed", "manifest.json"):
        (board["repo"] / "leaderboard" / name).rename(archive / name)
    assert tinyrouter(board, "replay", "--leaderboard", archive) == 0
    assert "3 of 3 verdict(s) reproduced exactly" in capsys.readouterr().out
    folder = archive / "revealed"

    # one grade changed in a published record: named, and the command fails
    path = folder / "evaluations" / "bob" / "1.json"
    record = json.loads(path.read_text())
    row = record["challenger"]["items"]["math500"]["audit"][5]
    row["correct"] = not row["correct"]
    path.write_text(json.dumps(record))
    assert tinyrouter(board, "replay", "--leaderboard", archive) == 1
    out = capsys.readouterr().out
    assert f"bob generation 1 (PR 2): king, NOT reproduced: the challenger: math500 audit item " \
           f"{row['id']}, the cached answer of {row['model']}" in out
    assert "2 of 3 verdict(s) reproduced exactly; 1 not" in out


def test_reveal_refuses_a_season_with_a_verdict_whose_record_is_missing(board, capsys):
    (board["private"] / "carol-1.json").unlink()
    assert tinyrouter(board, "reveal", "--season", "--dir", board["sealed"], "--records",
                      board["private"], "--repo", board["repo"]) == 1
    assert "no private record of 1 published verdict(s), e.g. carol generation 1" in \
        capsys.readouterr().err
    assert not Store(board["repo"]).file("revealed").exists()  # nothing half-published


def test_replay_without_a_revealed_season_says_how_to_publish_one(board, capsys):
    assert tinyrouter(board, "replay", "--repo", board["repo"]) == 1
    assert "reveal --season" in capsys.readouterr().err


def test_the_board_fills_in_from_the_replay(board):
    """Before the season retires a loser's row shows its rounded composite only; once it is
    revealed, every row shows what the replay re-derived, and a verdict that is not reproduced
    keeps its published figures and says so."""
    from evaluator.site.board import head_rows, replays
    from evaluator.site.state import load_state

    leaderboard = Store(board["repo"]).root

    def rows():
        state = load_state(leaderboard)
        return {row.miner: row for row in head_rows(state, RULES, replays(state, RULES))}

    before = rows()
    assert before["carol"].figures == "hidden" and before["carol"].cached_acc is None
    assert before["bob"].figures == "published" and before["bob"].cached_acc is not None
    assert tinyrouter(board, "reveal", "--season", "--dir", board["sealed"], "--records",
                      board["private"], "--repo", board["repo"]) == 0
    after = rows()
    carol = Result.from_dict(json.loads(
        (leaderboard / "revealed/evaluations/carol/1.json").read_text()))
    assert after["carol"].figures == "replayed" and after["carol"].places == 4
    assert after["carol"].composite == carol.composite != before["carol"].composite
    assert after["carol"].cached_acc == pytest.approx(
        sum(s.cached_acc for s in carol.per_benchmark.values()) / 3)
    assert after["carol"].cost_per_1k_usd == pytest.approx(
        1000 * carol.challenger_run.live_cost_usd / (3 * RULES.live_size))
    # bob dethroned alice and carol fell far behind bob: one place each
    assert [(after[m].rank_best, after[m].rank_worst) for m in ("bob", "alice", "carol")] == [
        (1, 1), (2, 3), (2, 3)]

    path = leaderboard / "revealed/evaluations/carol/1.json"
    record = json.loads(path.read_text())
    record["challenger"]["items"]["mmlu"]["live"][0]["n_turns"] += 1
    path.write_text(json.dumps(record))
    tampered = rows()["carol"]
    assert tampered.figures == "not reproduced" and tampered.cached_acc is None
    assert tampered.composite == before["carol"].composite
