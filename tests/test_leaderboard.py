"""Leaderboard state: schemas, king-of-the-hill transitions, idempotent and atomic apply."""

import copy
import dataclasses
import json

import jsonschema
import pytest

from evaluator.errors import LeaderboardError
from evaluator.files import dumps
from evaluator.leaderboard import (
    Checked,
    apply_result,
    check_private,
    check_result,
    seed_king,
    validate_state,
)
from evaluator.records import Attempt, King
from evaluator.rules import NAME_RE, OFFICIAL, SEALED_SPLITS
from evaluator.store import SCHEMA_FILES, Store, schema, validate

BENCHES = OFFICIAL.benchmarks


def components(score):
    return {"cached_acc": 0.8, "audit_acc": 0.78, "live_acc": 0.7, "avg_turns": 2.0,
            "efficiency": 0.525, "novelty": 0.5, "overfit_penalty": 1.0, "score": score}


COMMITMENT = "9" * 64
# what every scored record also says: no king compared with, no code graded, every earlier
# head compared
UNCHECKED = {"against": None, "isolation": None, "not_compared": None}


def crowned(miner="alice", generation=1, pr=12, composite=0.6, king=None, sha="a"):
    """A new king as published: over a king, with the crown test that crowned it."""
    record = {"format": 1, "miner": miner, "generation": generation, "pr": pr,
              "head_sha": sha * 40, "evaluated_at": f"2026-11-{10 + generation:02d}T12:00:00Z",
              "outcome": "king", "composite": composite, "king_composite": king,
              "delta": None if king is None else composite - king, "reason": None,
              "ci95": None if king is None else [0.01, 0.05], "crown_test": None,
              "per_benchmark": {b: components(composite) for b in BENCHES},
              "live_cost_usd": 0.41, "benchmark_manifest": "f" * 64,
              "partition_commitment": COMMITMENT, "router_card": None, **UNCHECKED}
    return record if king is None else with_test(record, 1, composite - king, 9.0)


def lost(miner="bob", generation=1, pr=13, composite=0.5, delta=-0.1):
    """A loss as published: no interval, and only where its crown test ended."""
    return {"format": 1, "miner": miner, "generation": generation, "pr": pr,
            "head_sha": "b" * 40, "evaluated_at": "2026-11-20T12:00:00Z", "outcome": "lost",
            "composite": composite, "delta": delta, "ci95": None,
            "crown_test": {"stage": 2, "live_items": 60, "live_sessions": 360},
            "benchmark_manifest": "f" * 64, "partition_commitment": COMMITMENT, **UNCHECKED}


def rejected(miner="carol", generation=1, pr=14, reason="gate 5 (overfit): on mmlu …"):
    return {"format": 1, "miner": miner, "generation": generation, "pr": pr,
            "head_sha": "c" * 40, "evaluated_at": "2026-11-20T12:00:00Z",
            "outcome": "rejected", "reason": reason, "composite": None, "delta": None,
            "benchmark_manifest": None, "partition_commitment": None,
            "isolation": None, "not_compared": None}


def with_test(record, stage, difference, z):
    """The record with a published crown test after `stage`."""
    return {**record, "crown_test": {"stage": stage, "difference": difference,
                                     "weighted": difference, "se": 0.01, "z": z,
                                     "live_items": 20 * stage, "live_sessions": 120}}


def unscored(outcome, at="2026-11-20T12:00:00Z", sha="d", reason="void: the pool failed"):
    return {**rejected(miner="dave", pr=15, reason=reason), "outcome": outcome,
            "head_sha": sha * 40, "evaluated_at": at}


def snapshot(repo):
    root = repo / "leaderboard"
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file()}


# ---------------------------------------------------------------- schemas


@pytest.mark.parametrize("kind", sorted(SCHEMA_FILES))
def test_schemas_are_valid_draft_2020_12(kind):
    jsonschema.Draft202012Validator.check_schema(schema(kind))


def test_schema_name_pattern_is_the_rules_pattern():
    assert schema("result")["$defs"]["name"]["pattern"] == f"^{NAME_RE.pattern}(?![\\s\\S])"


@pytest.mark.parametrize("record", [crowned(), crowned(king=0.58, composite=0.6), lost(),
                                    rejected(), unscored("void"), unscored("stale")])
def test_records_of_every_outcome_validate(record):
    check_result(record, rules=OFFICIAL)


def _without(record, key):
    return {k: v for k, v in record.items() if k != key}


BAD_RESULTS = [
    # a loss must not disclose components, the king's composite or a reason
    ("loss with breakdown", {**lost(), "per_benchmark": crowned()["per_benchmark"]},
     "per_benchmark"),
    ("loss with the king's composite", {**lost(), "king_composite": 0.6}, "king_composite"),
    ("loss without its crown test", {**lost(), "crown_test": None}, "crown_test"),
    ("loss with reason", {**lost(), "reason": None}, "reason"),
    ("loss without its null interval", _without(lost(), "ci95"), "ci95"),
    # nor anything read on the never-published audit: its interval, its test's figures
    ("loss with an interval", {**lost(), "ci95": [0.0, 0.05]}, "ci95"),
    ("loss with its test's figures", with_test(lost(), 2, 0.01, 0.4), "crown_test"),
    # every record carries every field of its outcome (null where it has nothing to say)
    ("king without isolation", _without(crowned(), "isolation"), "isolation"),
    ("loss without against", _without(lost(), "against"), "against"),
    ("rejection without not_compared", _without(rejected(), "not_compared"), "not_compared"),
    # a rejection has no score
    ("rejection with composite", {**rejected(), "composite": 0.5}, "composite"),
    ("rejection without reason", _without(rejected(), "reason"), "reason"),
    # identity fields
    ("hostile miner", {**lost(), "miner": "<img src=x onerror=alert(1)>"}, "miner"),
    ("short sha", {**lost(), "head_sha": "abc"}, "head_sha"),
    # `$` in a searched pattern would let a trailing newline through
    ("miner with a newline", {**lost(), "miner": "alice\n"}, "miner"),
    ("sha with a newline", {**lost(), "head_sha": "a" * 40 + "\n"}, "head_sha"),
    ("local time", {**lost(), "evaluated_at": "2026-11-20T12:00:00+02:00"}, "evaluated_at"),
    ("unknown outcome", {**lost(), "outcome": "won"}, "outcome"),
    ("string composite", {**crowned(), "composite": "0.6"}, "composite"),
    ("missing component", {**crowned(), "per_benchmark": {
        b: _without(components(0.6), "novelty") for b in BENCHES}}, "novelty"),
]


@pytest.mark.parametrize(("case", "record", "mentions"), BAD_RESULTS,
                         ids=[row[0] for row in BAD_RESULTS])
def test_schema_rejects(case, record, mentions):
    with pytest.raises(LeaderboardError, match="schema"):
        check_result(record, rules=OFFICIAL)


@pytest.mark.parametrize(("record", "ok"), [
    # a king's own crown test decides, by the verdict's rule (tests/test_verdict.py)
    (with_test(crowned(composite=0.8, king=0.69), 1, 0.03, 3.5), True),
    (with_test(crowned(composite=0.8, king=0.69), 1, 0.03, 3.0), False),
    (with_test(crowned(composite=0.8, king=0.69), 2, 0.01, 9.0), False),
    # a king over a king without its crown test crowned nothing
    ({**crowned(composite=0.8, king=0.69), "crown_test": None}, False),
    # a loss shows none of its test's figures; its delta (the eval half) may pass the margin
    (lost(composite=0.62, delta=0.05), True),
])
def test_a_king_must_clear_its_crown_test(record, ok):
    if ok:
        check_result(record, rules=OFFICIAL)
    else:
        with pytest.raises(LeaderboardError, match="crowned without its crown test"):
            check_result(record, rules=OFFICIAL)


def test_composite_must_be_the_mean_of_the_scores():
    record = crowned()
    record["per_benchmark"]["mmlu"]["score"] = 0.9
    with pytest.raises(LeaderboardError, match="mean"):
        check_result(record, rules=OFFICIAL)


def test_benchmarks_must_be_the_rules_benchmarks():
    record = crowned()
    record["per_benchmark"]["gsm8k"] = record["per_benchmark"].pop("mmlu")
    with pytest.raises(LeaderboardError, match="per_benchmark"):
        check_result(record, rules=OFFICIAL)


# ---------------------------------------------------------------- transitions


def test_first_king_writes_king_history_and_result(repo):
    applied = apply_result(repo, crowned(), rules=OFFICIAL)
    assert applied.crowned
    assert sorted(applied.changed) == ["leaderboard/history.json", "leaderboard/king.json",
                                       "leaderboard/results/alice/1.json"]
    king = Store(repo).king()
    assert (king.miner, king.pr, king.previous) == ("alice", 12, None)
    assert king.ci95 is None  # the first king beat no one
    assert king.crowned_at == "2026-11-11T12:00:00Z"
    assert [k.miner for k in Store(repo).history()] == ["alice"]
    assert validate_state(repo, rules=OFFICIAL) == Checked(files=2, results=1)


def test_dethroning_records_the_previous_king(repo):
    apply_result(repo, crowned(), rules=OFFICIAL)
    apply_result(repo, crowned("bob", 1, pr=20, composite=0.7, king=0.61, sha="d"), rules=OFFICIAL)
    king = Store(repo).king()
    assert king.miner == "bob"
    assert king.previous.to_dict() == {"miner": "alice", "generation": 1, "composite": 0.61}
    history = Store(repo).history()
    assert [(h.miner, h.delta, h.ci95) for h in history] == [
        ("alice", None, None), ("bob", pytest.approx(0.09), (0.01, 0.05))]
    assert history[1].scores == {b: 0.7 for b in BENCHES}
    validate_state(repo, rules=OFFICIAL)


@pytest.mark.parametrize("record", [lost(), rejected()])
def test_loss_and_rejection_leave_the_king_alone(repo, record):
    apply_result(repo, crowned(), rules=OFFICIAL)
    before = (Store(repo).king(), Store(repo).history())
    applied = apply_result(repo, record, rules=OFFICIAL)
    assert applied.changed == [f"leaderboard/results/{record['miner']}/1.json"]
    assert (Store(repo).king(), Store(repo).history()) == before
    assert json.loads((repo / applied.changed[0]).read_text()) == record


@pytest.mark.parametrize("record", [crowned(), lost(), rejected(),
                                    crowned("bob", 1, pr=20, composite=0.7, king=0.61)])
def test_apply_twice_changes_nothing(repo, record):
    if record.get("king_composite", 0.6) is not None:
        apply_result(repo, crowned("zed", 1, pr=2, composite=0.6, sha="e"), rules=OFFICIAL)
    apply_result(repo, record, rules=OFFICIAL)
    before = snapshot(repo)
    again = apply_result(repo, copy.deepcopy(record), rules=OFFICIAL)
    assert again.changed == [] and snapshot(repo) == before


def test_a_re_evaluation_of_the_same_commit_keeps_the_first_record(repo):
    apply_result(repo, lost(), rules=OFFICIAL)
    before = snapshot(repo)
    apply_result(repo, {**lost(), "evaluated_at": "2026-11-21T00:00:00Z"}, rules=OFFICIAL)
    assert snapshot(repo) == before


def test_another_commit_cannot_overwrite_a_result(repo):
    apply_result(repo, lost(), rules=OFFICIAL)
    with pytest.raises(LeaderboardError, match="cannot replace"):
        apply_result(repo, {**lost(), "head_sha": "9" * 40}, rules=OFFICIAL)


def test_void_and_stale_evaluations_keep_their_own_files_beside_the_decisive_one(repo):
    store = Store(repo)
    # three evaluations of one head: void, then stale, then decisive (each its own start time)
    for record in (unscored("void"), unscored("stale", at="2026-11-21T08:30:00Z"),
                   {**lost(miner="dave", pr=15), "head_sha": "d" * 40,
                    "evaluated_at": "2026-11-22T09:00:00Z"}):
        apply_result(repo, record, OFFICIAL)
        before = snapshot(repo)
        assert apply_result(repo, record, OFFICIAL).changed == []  # idempotent
        assert snapshot(repo) == before
    names = sorted(p.name for p in (repo / "leaderboard/results/dave").iterdir())
    assert names == ["1.json", "1.stale.20261121T083000Z.json", "1.void.20261120T120000Z.json"]
    assert {r.outcome for r in store.results()} == {"void", "stale", "lost"}
    # void, then a decisive result of the same head: the attempt counts again
    assert store.refunded_heads() == frozenset()
    assert validate_state(repo, OFFICIAL).results == 3


def test_an_interrupted_apply_finishes_without_duplicates(repo):
    record = crowned()
    apply_result(repo, record, rules=OFFICIAL)
    (repo / "leaderboard/results/alice/1.json").unlink()  # as if the run died before the last write
    applied = apply_result(repo, record, rules=OFFICIAL)
    assert applied.changed == ["leaderboard/results/alice/1.json"]
    assert len(Store(repo).history()) == 1
    validate_state(repo, rules=OFFICIAL)


STALE_CASES = [
    # scored without a king while one reigns
    (crowned(), crowned("bob", 1, pr=20, composite=0.7, sha="d"), "scored without a king"),
    # scored against an older king, before the current one was crowned
    (crowned("zed", 5, pr=2, sha="e"), crowned("bob", 1, pr=20, composite=0.7, king=0.6, sha="d"),
     "before zed generation 5 was crowned"),
]


@pytest.mark.parametrize(("first", "record", "message"), STALE_CASES)
def test_a_crown_against_a_replaced_king_is_recorded_stale(repo, first, record, message):
    apply_result(repo, first, rules=OFFICIAL)
    king_before = Store(repo).king()
    applied = apply_result(repo, record, rules=OFFICIAL)
    assert (applied.outcome, applied.crowned) == ("stale", False)
    assert message in applied.record["reason"]
    assert applied.record["composite"] is None and "per_benchmark" not in applied.record
    assert applied.changed == ["leaderboard/results/bob/1.stale.20261111T120000Z.json"]
    assert Store(repo).king() == king_before
    assert apply_result(repo, record, rules=OFFICIAL).changed == []  # a re-run keeps it
    validate_state(repo, rules=OFFICIAL)


def test_a_result_compared_with_a_king_the_board_never_had_is_refused(repo):
    before = snapshot(repo)
    with pytest.raises(LeaderboardError, match="has none"):
        apply_result(repo, crowned("bob", 1, pr=20, composite=0.7, king=0.6, sha="d"), OFFICIAL)
    assert snapshot(repo) == before


def king_of(record):
    return King.crowned(record, None)


AGAINST = [
    # the king it was scored against (read from the commit it ran on) is the reigning one
    ("crown, same king", crowned("bob", 1, pr=20, composite=0.7, king=0.6, sha="d"), "zed",
     "king"),
    ("loss, same king", lost(), "zed", "lost"),
    # another king was crowned while it ran: a crown and a loss are both stale
    ("crown, king replaced", crowned("bob", 1, pr=20, composite=0.7, king=0.6, sha="d"),
     "older", "stale"),
    ("loss, king replaced", lost(), "older", "stale"),
    ("crown, scored without a king", crowned("bob", 1, pr=20, composite=0.7, sha="d"), None,
     "stale"),
    # a rejection does not depend on which king reigns
    ("rejection, king replaced", rejected(), "older", "rejected"),
]


@pytest.mark.parametrize(("case", "record", "against", "outcome"), AGAINST,
                         ids=[row[0] for row in AGAINST])
def test_the_king_an_evaluation_ran_against_decides_staleness(repo, case, record, against,
                                                              outcome):
    older = crowned("old", 1, pr=1, sha="f")
    apply_result(repo, older, rules=OFFICIAL)
    apply_result(repo, crowned("zed", 5, pr=2, sha="e", composite=0.7, king=0.6), OFFICIAL)
    scored = {"zed": Store(repo).king(), "older": king_of(older), None: None}[against]
    applied = apply_result(repo, record, OFFICIAL, against=scored)
    assert applied.outcome == outcome
    assert (Store(repo).king().miner == "bob") is (outcome == "king")
    if outcome == "stale":
        assert "was crowned while it ran" in applied.record["reason"]


def test_writes_are_deterministic_json(repo):
    apply_result(repo, crowned(), rules=OFFICIAL)
    text = (repo / "leaderboard/king.json").read_text()
    assert text == dumps(json.loads(text)) and text.endswith("}\n")
    assert not list((repo / "leaderboard").rglob("*.tmp"))


# ---------------------------------------------------------------- seed king and validate


def _edit_number(path, key: str, literal: str) -> None:
    """Set every `key` in a JSON file to a literal written as text (NaN, 1e400, ...)."""
    text, marker = path.read_text(), f'"{key}": '
    assert marker in text
    lines = [line.split(marker)[0] + marker + literal + ("," if line.rstrip().endswith(",") else "")
             if marker in line else line for line in text.splitlines()]
    path.write_text("\n".join(lines) + "\n")


def test_seed_king_installs_the_first_king(repo, make_submission):
    folder = make_submission(repo, "alice", 1)
    seed_king(repo, folder, crowned(pr=None), rules=OFFICIAL)
    assert Store(repo).king().pr is None
    validate_state(repo, rules=OFFICIAL)


@pytest.mark.parametrize(("setup", "record", "message"), [
    ("king", crowned("bob", 1, pr=None, sha="d"), "already reigns"),
    ("", crowned("bob", 1, pr=None), "not for alice/1"),
    ("", {**lost(miner="alice"), "pr": None}, "outcome"),
])
def test_seed_king_refuses(repo, make_submission, setup, record, message):
    folder = make_submission(repo, "alice", 1)
    if setup == "king":
        apply_result(repo, crowned("zed", 1, pr=2, sha="e"), rules=OFFICIAL)
    with pytest.raises(LeaderboardError, match=message):
        seed_king(repo, folder, record, rules=OFFICIAL)


def test_seed_king_needs_the_committed_submission(repo):
    with pytest.raises(LeaderboardError, match="weights"):
        seed_king(repo, repo / "submissions/alice/1", crowned(pr=None), rules=OFFICIAL)


def test_validate_refuses_a_king_whose_folder_is_not_checked_out(repo, make_submission, capsys):
    from evaluator.cli import main

    apply_result(repo, crowned(), rules=OFFICIAL)
    assert main(["leaderboard", "validate", "--repo", str(repo)]) == 1
    assert "submissions/alice/1/weights.safetensors is not in this checkout" in (
        capsys.readouterr().err)
    make_submission(repo, "alice", 1)
    assert main(["leaderboard", "validate", "--repo", str(repo)]) == 0


def test_empty_leaderboard_is_valid(repo):
    assert validate_state(repo, rules=OFFICIAL) == Checked(files=0, results=0)


@pytest.mark.parametrize(("tamper", "message"), [
    # the current king must close the history
    (lambda r: (r / "leaderboard/history.json").write_text(dumps({"format": 1, "kings": []})),
     "history"),
    # a result filed under another miner's name
    (lambda r: (r / "leaderboard/results/alice/1.json").rename(
        r / "leaderboard/results/alice/2.json"), "move it"),
    # a result edited after it was recorded (the record job attested the digest it recorded),
    # and a digest line lost, left behind or garbled
    (lambda r: _edit_number(r / "leaderboard/results/alice/1.json", "live_cost_usd", "0.5"),
     "changed after it was recorded"),
    (lambda r: (r / "leaderboard/results.sha256").write_text(""), "has no digest"),
    (lambda r: (r / "leaderboard/results.sha256").write_text(
        (r / "leaderboard/results.sha256").read_text() + "0" * 64 + "  results/bob/1.json\n"),
     "names results/bob/1.json, which is not on the board"),
    (lambda r: (r / "leaderboard/results.sha256").write_text("a digest\n"), "line 1"),
    # a broken attempt line, a broken queue event
    (lambda r: (r / "leaderboard/attempts.jsonl").write_text('{"miner": "x"}\n'), "line 1"),
    (lambda r: (r / "leaderboard/queue.jsonl").write_text('{"event": "evaluating"}\n'),
     "queue.jsonl line 1"),
    # hand-edited king.json
    (lambda r: (r / "leaderboard/king.json").write_text('{"format": 1, "king": {}}\n'),
     "king schema"),
    (lambda r: (r / "leaderboard/king.json").write_text("{"), "not valid JSON"),
    # a cost no arithmetic can use, in the king's record and in its result
    (lambda r: _edit_number(r / "leaderboard/king.json", "composite", "Infinity"),
     "not valid JSON"),
    (lambda r: _edit_number(r / "leaderboard/results/alice/1.json", "live_cost_usd", "1e400"),
     "not valid JSON"),
    (lambda r: _edit_number(r / "leaderboard/results/alice/1.json", "live_cost_usd", "NaN"),
     "not valid JSON"),
])
def test_validate_state_catches_tampering(repo, tamper, message):
    apply_result(repo, crowned(), rules=OFFICIAL)
    tamper(repo)
    with pytest.raises(LeaderboardError, match=message):
        validate_state(repo, rules=OFFICIAL)


def test_every_result_file_has_the_digest_sha256sum_checks(repo):
    import subprocess

    apply_result(repo, crowned(), rules=OFFICIAL)
    apply_result(repo, lost(), rules=OFFICIAL)
    apply_result(repo, lost(), rules=OFFICIAL)  # already recorded: no second line
    board = repo / "leaderboard"
    assert [line.split("  ")[1] for line in (board / "results.sha256").read_text().splitlines()] \
        == ["results/alice/1.json", "results/bob/1.json"]
    checked = subprocess.run(["sha256sum", "--check", "--strict", "results.sha256"], cwd=board,
                             capture_output=True, text=True)
    assert checked.returncode == 0 and checked.stdout.count(": OK") == 2


def test_attempt_lines_follow_the_attempt_schema(repo):
    Store(repo).record_attempt(Attempt("alice", 1, 12, "a" * 40, "2026-11-20T12:00:00Z",
                                       "b" * 64, "q7:AAAA", True, None))
    validate("attempt", json.loads((repo / "leaderboard/attempts.jsonl").read_text()))
    assert validate_state(repo, rules=OFFICIAL) == Checked(files=1, results=0)


def test_manifest_schema_accepts_the_contract_shape(repo):
    manifest = {"format": 1, "sealed_at": "2026-11-20T12:00:00Z", "manifest_hash": "0" * 64,
                "benchmarks": {b: {"splits": {s: {"count": n, "commitment": "1" * 64}
                                              for s, n in OFFICIAL.sealed_sizes.items()},
                                   "train_ids": ["x1", "x2"],
                                   "baselines": {"per_model": {m: 0.5 for m in OFFICIAL.pool_names},
                                                 "best_single": {"model": "m", "accuracy": 0.5},
                                                 "random": 0.4, "oracle": 0.8}}
                               for b in BENCHES}}
    validate("manifest", manifest)
    with pytest.raises(LeaderboardError, match="manifest"):
        validate("manifest", {**manifest, "salt": "00"})


def test_rules_of_another_competition_apply(repo):
    wide = dataclasses.replace(OFFICIAL, win_margin=0.2)
    apply_result(repo, crowned(), rules=OFFICIAL)
    with pytest.raises(LeaderboardError, match="margin"):
        apply_result(repo, crowned("bob", 1, pr=20, composite=0.7, king=0.61, sha="d"), wide)


def test_split_names_in_the_manifest_schema_are_the_rules():
    names = schema("manifest")["properties"]["benchmarks"]["additionalProperties"]["properties"][
        "splits"]["propertyNames"]["enum"]
    assert names == list(SEALED_SPLITS)


def evaluated():
    """A public result and its private record, as `tinyrouter evaluate` writes them."""
    from evaluator.records import Partition, Result

    drawn = Partition(seed="5e" * 32, salt="a1" * 16)
    record = Result.from_dict({**crowned(), "partition_commitment": drawn.commitment})
    record = dataclasses.replace(record, partition=drawn)
    precision = OFFICIAL.disclosure_precision
    return record.public(precision), record.private(precision)


@pytest.mark.parametrize(("tamper", "message"), [
    # the seed or the commitment replaced: the result does not follow from its seed
    (lambda pub, priv: priv["partition"].update(seed="00" * 32), "partition seed"),
    (lambda pub, priv: pub.update(partition_commitment="0" * 64), r"another evaluation|seed"),
    # a private record of another evaluation
    (lambda pub, priv: priv["public"].update(pr=99), "another evaluation"),
    # a private record without its seed, saying it drew none, for a public one that committed
    (lambda pub, priv: priv.update(partition=None, partition_commitment=None), "seed|follow"),
    (lambda pub, priv: priv.update(partition=None), "holds no partition seed"),
    # public figures the private ones do not give (the private copy of the public view agrees)
    (lambda pub, priv: [d.update(composite=0.99) for d in (pub, priv["public"])],
     "composite do not follow"),
    (lambda pub, priv: [d["per_benchmark"]["mmlu"].update(score=0.1)
                        for d in (pub, priv["public"])], "per_benchmark do not follow"),
])
def test_a_result_must_match_its_private_record(repo, tamper, message):
    public, private = evaluated()
    check_private(public, private, OFFICIAL)
    tamper(public, private)
    with pytest.raises(LeaderboardError, match=message):
        check_private(public, private, OFFICIAL)


def test_apply_with_the_private_record_refuses_a_mismatch(repo, tmp_path, capsys):
    from evaluator.cli import main

    public, private = evaluated()
    private["partition"]["salt"] = "ff" * 16
    (tmp_path / "r.json").write_text(json.dumps(public))
    (tmp_path / "p.json").write_text(json.dumps(private))
    assert main(["leaderboard", "apply", str(tmp_path / "r.json"), "--private",
                 str(tmp_path / "p.json"), "--repo", str(repo)]) == 1
    assert "partition seed does not match" in capsys.readouterr().err
    assert not (repo / "leaderboard" / "king.json").exists()


def test_validate_checks_named_results_alone_when_asked(repo, tmp_path, capsys):
    from evaluator.cli import main

    public, _ = evaluated()
    (tmp_path / "r.json").write_text(json.dumps(public))
    (repo / "leaderboard" / "king.json").write_text("not json")  # the state is not read
    assert main(["leaderboard", "validate", "--results-only", str(tmp_path / "r.json"),
                 "--repo", str(repo)]) == 0
    assert "1 named result(s) valid" in capsys.readouterr().out
    assert main(["leaderboard", "validate", str(tmp_path / "r.json"), "--repo", str(repo)]) == 1
    (tmp_path / "r.json").write_text(json.dumps({**public, "composite": "high"}))
    assert main(["leaderboard", "validate", "--results-only", str(tmp_path / "r.json"),
                 "--repo", str(repo)]) == 1
    assert main(["leaderboard", "validate", "--results-only", "--repo", str(repo)]) == 2


# ---------------------------------------------------------------- marking a stuck entry

STUCK = "c" * 40


def mark(repo, *extra: str, head: str = STUCK, state: str = "failed",
         reason: str = "the runner lost power") -> int:
    from evaluator.cli import main

    return main(["leaderboard", "mark", "--pr", "9", "--head-sha", head, "--state", state,
                 "--reason", reason, "--repo", str(repo), *extra])


def gated(repo, head: str = STUCK) -> None:
    Store(repo).record_attempt(Attempt("carol", 1, 9, head, "2026-11-22T12:00:00Z",
                                       gates_passed=True))


def test_marking_a_stuck_entry_settles_it_with_its_reason_and_refunds_the_slot(repo, capsys):
    gated(repo)
    assert mark(repo, reason="the runner\nlost  power") == 0
    [event] = Store(repo).queue_events()
    assert (event["event"], event["miner"], event["generation"], event["reason"]) == \
        ("failed", "carol", 1, "the runner lost power")  # one line, as the Queue page shows it
    assert Store(repo).refunded_heads() == {STUCK}
    assert "commit leaderboard/queue.jsonl" in capsys.readouterr().out
    assert mark(repo) == 0 and len(Store(repo).queue_events()) == 1  # again: nothing changes


@pytest.mark.parametrize(("setup", "argv", "code", "says"), [
    # a head with a decisive result, or already marked otherwise, is never overwritten
    ("decided", {}, 1, "is already rejected (rejected: its weights); it is not marked failed"),
    ("declined", {}, 1, "is already declined (a maintainer said no); it is not marked failed"),
    # a head the gates never passed is not in the queue
    (None, {}, 1, "records no gates pass for PR 9"),
    # bad input
    ("gated", {"head": "c" * 12}, 2, "is not a full lowercase commit SHA"),
    ("gated", {"reason": " \n "}, 1, "the reason is empty"),
])
def test_marking_refuses_what_it_must_not_settle(repo, capsys, setup, argv, code, says):
    if setup:
        gated(repo)
    if setup == "decided":
        Store(repo).write_result({**rejected(pr=9, reason="rejected: its weights"),
                                  "head_sha": STUCK, "evaluated_at": "2026-11-23T12:00:00Z"})
    if setup == "declined":
        assert mark(repo, state="declined", reason="a maintainer said no") == 0
    before = Store(repo).queue_events()
    assert mark(repo, **argv) == code
    assert says in capsys.readouterr().err
    assert Store(repo).queue_events() == before


def test_marking_asks_for_a_state_it_knows(repo, capsys):
    gated(repo)
    with pytest.raises(SystemExit):
        mark(repo, state="lost")
    assert "invalid choice: 'lost'" in capsys.readouterr().err
