"""Sealing: round trips, every tampering case fails cleanly, and the manifest checks out."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import pytest

from evaluator import cli, vault
from evaluator.baselines import from_answered
from evaluator.benchmarks import sealing
from evaluator.benchmarks.sealing import (
    MAGIC,
    PASSWORD_ENV,
    KdfParams,
    build_manifest,
    commitment,
    load_manifest,
    open_benchmark,
    open_split,
    open_train_items,
    seal_benchmarks,
    seal_split,
    sealed_path,
    train_path,
    verify_benchmark,
)
from evaluator.benchmarks.splits import Private
from evaluator.errors import BenchmarkError
from evaluator.leaderboard import validate
from evaluator.rules import OFFICIAL, SEALED_SPLITS
from evaluator.types import AnsweredItem, Item, ModelAnswer

PASSWORD = "correct horse battery staple"
SEED = "a-secret-seed-of-enough-length"
FAST = KdfParams(log2_n=10)  # the official cost is 2^17; tests only need the format
SMALL = dataclasses.replace(OFFICIAL, eval_size=6, audit_size=3, live_size=2,
                            benchmarks=("math500", "mmlu"))
SECRET_PROMPT = "What is the hidden question number"


def items(benchmark: str, n: int = 18) -> list[Item]:
    return [Item(benchmark, f"{benchmark}-{i}", f"{SECRET_PROMPT} {i}?", str(i), "algebra")
            for i in range(n)]


def privates(benchmarks=SMALL.benchmarks, n: int = 5) -> dict[str, Private]:
    """Each benchmark's private source (the audit's 3 and the live split's 2): items that are
    not in the public `items`."""
    return {b: Private([Item(b, f"{b}-new-{i}", f"{SECRET_PROMPT} new {i}?", str(i), "algebra")
                        for i in range(n)], f"{n} questions written for the tests")
            for b in benchmarks}


def fake_answer(todo: list[Item]) -> list[AnsweredItem]:
    """Model k answers item i correctly when (i + k) % 3 != 0: a deterministic mix."""
    return [AnsweredItem(item, {m: ModelAnswer(f"answer {item.reference}",
                                               (int(item.reference) + k) % 3 != 0, "x", 0.001)
                                for k, m in enumerate(SMALL.pool_names)})
            for item in todo]


@pytest.fixture
def sealed(tmp_path: Path) -> tuple[Path, Path]:
    """A sealed two-benchmark set under SMALL rules: (directory, manifest path)."""
    out, manifest = tmp_path / "sealed", tmp_path / "leaderboard" / "manifest.json"
    seal_benchmarks({b: items(b) for b in SMALL.benchmarks}, fake_answer, out, manifest,
                    PASSWORD, SEED, SMALL, privates(), FAST)
    return out, manifest


ROWS = [{"id": "a", "prompt": "x"}, {"id": "b", "prompt": "ünï"}]


def test_split_round_trip(tmp_path):
    path = tmp_path / "math500.eval.sealed"
    promised = seal_split(path, ROWS, "math500", "eval", PASSWORD, FAST)
    opened = open_split(path, "math500", "eval", PASSWORD)
    assert opened.rows == ROWS
    assert opened.commitment == promised == commitment(ROWS, bytes.fromhex(opened.salt))
    assert b"prompt" not in path.read_bytes()  # nothing readable on disk
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no leftover temp file


def test_sealing_twice_gives_fresh_salts_nonces_and_commitments(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    assert seal_split(a, ROWS, "math500", "eval", PASSWORD, FAST) != seal_split(
        b, ROWS, "math500", "eval", PASSWORD, FAST)
    assert a.read_bytes() != b.read_bytes()


def _flip(offset_from_end: int):
    def tamper(raw: bytes) -> bytes:
        at = len(raw) - offset_from_end
        return raw[:at] + bytes([raw[at] ^ 1]) + raw[at + 1:]
    return tamper


def _flip_nonce(raw: bytes) -> bytes:
    at = raw.index(b'"nonce":"') + len(b'"nonce":"')
    return raw[:at] + (b"1" if raw[at:at + 1] == b"0" else b"0") + raw[at + 1:]


def _edit(old: bytes, new: bytes):
    return lambda raw: raw.replace(old, new, 1)


@pytest.mark.parametrize("sealed_as, tamper, password, expect", [
    # wrong password
    ("eval", None, "not the password", "wrong BENCHMARK_PASSWORD"),
    # a flipped byte in the tag, in the ciphertext, in the header's nonce
    ("eval", _flip(1), PASSWORD, "cannot decrypt"),
    ("eval", _flip(20), PASSWORD, "cannot decrypt"),
    ("eval", _flip_nonce, PASSWORD, "cannot decrypt"),
    # truncated: in the body, or inside the header
    ("eval", lambda raw: raw[:-5], PASSWORD, "cannot decrypt"),
    ("eval", lambda raw: raw[:len(MAGIC) + 10], PASSWORD, "damaged header"),
    # not a sealed file at all
    ("eval", lambda raw: b'[{"id": 1}]', PASSWORD, "not a sealed"),
    # the audit file renamed to eval; and with its header edited to claim eval too
    ("audit", None, PASSWORD, "renamed or swapped"),
    ("audit", _edit(b'"split":"audit"', b'"split":"eval"'), PASSWORD, "cannot decrypt"),
    # a newer format, and a forged KDF cost that would exhaust memory
    ("eval", _edit(b'"format":1', b'"format":2'), PASSWORD, "format 2"),
    ("eval", _edit(b'"log2_n":10', b'"log2_n":30'), PASSWORD, "out of bounds"),
])
def test_tampering_fails_cleanly(tmp_path, sealed_as, tamper, password, expect):
    path = tmp_path / "math500.eval.sealed"
    seal_split(path, ROWS, "math500", sealed_as, PASSWORD, FAST)
    if tamper is not None:
        path.write_bytes(tamper(path.read_bytes()))
    with pytest.raises(BenchmarkError, match=expect):
        open_split(path, "math500", "eval", password)


# A whole sealed benchmark -------------------------------------------------------------------


def test_open_benchmark_gives_answered_items_and_live_items(sealed):
    out, _ = sealed
    opened = open_benchmark(out, PASSWORD, SMALL)
    assert set(opened) == set(SMALL.benchmarks)
    for splits in opened.values():
        assert {s: len(rows) for s, rows in splits.items()} == SMALL.sealed_sizes
        assert all(isinstance(row, AnsweredItem) for row in splits["pool"])
        assert all(isinstance(row, Item) for row in splits["live"])
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [f"{b}.{s}.sealed" for b in SMALL.benchmarks for s in SEALED_SPLITS]
        + [f"{b}.train.jsonl" for b in SMALL.benchmarks])


def test_manifest_has_the_public_contract_and_verifies(sealed):
    out, manifest_path = sealed
    manifest = load_manifest(manifest_path)
    assert manifest_path.read_text().endswith("}\n")
    validate("manifest", manifest)  # the JSON Schema the leaderboard checks
    opened = open_benchmark(out, PASSWORD, SMALL)
    for benchmark, entry in manifest["benchmarks"].items():
        assert {s: v["count"] for s, v in entry["splits"].items()} == SMALL.sealed_sizes
        hidden = {row.item.id if isinstance(row, AnsweredItem) else row.id
                  for rows in opened[benchmark].values() for row in rows}
        assert len(entry["train_ids"]) == round((18 - SMALL.pool_size) * SMALL.train_fraction)
        assert not hidden & set(entry["train_ids"])
        assert entry["baselines"] == from_answered(opened[benchmark]["pool"], SMALL.pool_names)
        train = open_train_items(out, manifest, SMALL)[benchmark]
        assert [item.id for item in train] == entry["train_ids"]
        assert set(entry["baselines"]) == {"per_model", "best_single", "random", "oracle",
                                           "by_category", "cost_per_1k_usd"}
        by_category = entry["baselines"]["by_category"]
        assert sum(c["items"] for c in by_category.values()) == SMALL.pool_size
        assert set(entry["baselines"]["cost_per_1k_usd"]) == set(SMALL.pool_names)
    assert verify_benchmark(out, PASSWORD, manifest, SMALL) == {
        b: SMALL.sealed_sizes for b in SMALL.benchmarks}
    assert SECRET_PROMPT not in manifest_path.read_text()


def _rehashed(manifest: dict, edit) -> dict:
    edited = json.loads(json.dumps(manifest))
    edit(edited)
    return build_manifest(edited["benchmarks"], edited["sealed_at"])


def _copy(source: Path, target: Path) -> None:
    target.write_bytes(source.read_bytes())


def _swap(out: Path) -> None:
    a, b = sealed_path(out, "math500", "pool"), sealed_path(out, "mmlu", "pool")
    raw = a.read_bytes()
    a.write_bytes(b.read_bytes())
    b.write_bytes(raw)


@pytest.mark.parametrize("break_it, expect", [
    # the manifest edited by hand (hash no longer matches)
    (lambda out, m: m["benchmarks"]["mmlu"]["splits"]["pool"].update(count=7), "edited"),
    # a consistent manifest that lies about a count, a commitment, the train ids or baselines
    (lambda out, m: _rehashed(m, lambda e: e["benchmarks"]["mmlu"]["splits"]["pool"].update(
        count=7)), "the manifest says 7"),
    (lambda out, m: _rehashed(m, lambda e: e["benchmarks"]["mmlu"]["splits"]["live"].update(
        commitment="0" * 64)), "commitment"),
    (lambda out, m: _rehashed(m, lambda e: e["benchmarks"]["math500"]["train_ids"].append(
        open_benchmark(out, PASSWORD, SMALL)["math500"]["live"][0].id)), "train ids"),
    (lambda out, m: _rehashed(m, lambda e: e["benchmarks"]["math500"]["baselines"].update(
        random=1.0)), "baselines"),
    (lambda out, m: _rehashed(m, lambda e: e["benchmarks"].pop("mmlu")), "no entry for mmlu"),
    # files swapped between benchmarks, or one missing
    (lambda out, m: _swap(out), "renamed or swapped"),
    (lambda out, m: sealed_path(out, "mmlu", "live").unlink(), "cannot read"),
    # the public train items: from another seal, or gone
    (lambda out, m: _copy(train_path(out, "math500"), train_path(out, "mmlu")), "another seal"),
    (lambda out, m: train_path(out, "mmlu").unlink(), "public train items"),
])
def test_verify_catches_every_inconsistency(sealed, break_it, expect):
    out, manifest_path = sealed
    manifest = load_manifest(manifest_path)
    manifest = break_it(out, manifest) or manifest
    with pytest.raises(BenchmarkError, match=expect):
        verify_benchmark(out, PASSWORD, manifest, SMALL)


def test_a_count_that_breaks_the_rules_is_refused(sealed):
    out, _ = sealed
    stricter = dataclasses.replace(SMALL, eval_size=7)
    with pytest.raises(BenchmarkError, match="holds 12 items; the rules want 14"):
        open_benchmark(out, PASSWORD, stricter)


def test_sealing_one_benchmark_keeps_the_others_in_the_manifest(sealed):
    out, manifest_path = sealed
    before = load_manifest(manifest_path)["benchmarks"]
    seal_benchmarks({"mmlu": items("mmlu")}, fake_answer, out, manifest_path, PASSWORD, SEED,
                    SMALL, privates(), FAST)
    after = load_manifest(manifest_path)
    assert after["benchmarks"]["math500"] == before["math500"]
    # same seed, same items: same draw, but fresh salts give new commitments
    assert after["benchmarks"]["mmlu"]["train_ids"] == before["mmlu"]["train_ids"]
    assert after["benchmarks"]["mmlu"]["splits"] != before["mmlu"]["splits"]
    verify_benchmark(out, PASSWORD, after, SMALL)


def test_answers_out_of_order_are_refused(tmp_path):
    with pytest.raises(BenchmarkError, match="do not match the items asked"):
        seal_benchmarks({"mmlu": items("mmlu")}, lambda todo: fake_answer(todo[::-1]),
                        tmp_path, tmp_path / "m.json", PASSWORD, SEED, SMALL, privates(), FAST)


@pytest.mark.parametrize(("source", "message"), [
    (privates(n=4), r"holds 4 items; the rules draw 5 from it \(audit 3, live 2\)"),
    ({"mmlu": Private([*privates(n=5)["mmlu"].items, items("mmlu")[0]], "x")},
     r"holds 1 item\(s\) of the public dataset"),
    ({"mmlu": Private([Item("math500", "m-1", "q", "1", "algebra")] * 6, "x")},
     "items of another benchmark or repeated ids"),
])
def test_a_private_source_that_is_not_private_and_whole_is_refused(tmp_path, source, message):
    with pytest.raises(BenchmarkError, match=message):
        seal_benchmarks({"mmlu": items("mmlu")}, fake_answer, tmp_path, tmp_path / "m.json",
                        PASSWORD, SEED, SMALL, {"mmlu": source["mmlu"]}, FAST)


def test_the_audit_and_live_splits_are_sealed_from_the_private_source_never_published(sealed):
    out, manifest_path = sealed
    entry = load_manifest(manifest_path)["benchmarks"]["mmlu"]
    assert entry["private"] == {"about": "5 questions written for the tests"}
    assert entry["splits"]["audit"]["count"] == SMALL.audit_size
    opened = open_benchmark(out, PASSWORD, SMALL)["mmlu"]
    assert all(r.item.id.startswith("mmlu-new-") and r.answers for r in opened["audit"])
    # the live questions too: a head fitted to the public answers knows nothing of them
    assert all(item.id.startswith("mmlu-new-") for item in opened["live"])
    assert len({r.item.id for r in opened["audit"]} | {i.id for i in opened["live"]}) == 5
    assert SECRET_PROMPT not in manifest_path.read_text()


@pytest.mark.parametrize("password, new, refused", [
    ("", False, "set BENCHMARK_PASSWORD"),
    ("hunter2", True, "too weak to seal with: use a secret of at least 16"),
    ("hunter2", False, None),  # an existing seal is opened with what it was sealed with
    ("0123456789abcdef", True, None),
])
def test_password_comes_from_the_environment_and_a_new_seal_needs_a_strong_one(
        monkeypatch, password, new, refused):
    monkeypatch.setenv(PASSWORD_ENV, password)
    if refused:
        with pytest.raises(BenchmarkError, match=refused):
            sealing.password_from_env(new=new)
    else:
        assert sealing.password_from_env(new=new) == password
    assert PASSWORD_ENV not in os.environ  # read once: no child process inherits it


# The verify-benchmark command --------------------------------------------------------------


@pytest.mark.parametrize("password, tamper, code, expect", [
    (PASSWORD, False, 0, "math500: pool 12, live 2, audit 3 — counts and commitments match"),
    ("wrong password", False, 1, "error: cannot decrypt math500.pool.sealed: wrong"),
    (PASSWORD, True, 1, "error: cannot decrypt mmlu.pool.sealed"),
])
def test_verify_command(sealed, tmp_path, monkeypatch, capsys, password, tamper, code, expect):
    out, manifest = sealed
    rules_file = tmp_path / "small.json"
    rules_file.write_text(json.dumps({"eval_size": 6, "audit_size": 3, "live_size": 2,
                                      "benchmarks": list(SMALL.benchmarks)}))
    if tamper:
        path = sealed_path(out, "mmlu", "pool")
        path.write_bytes(path.read_bytes()[:-1])
    monkeypatch.setenv(PASSWORD_ENV, password)
    assert cli.main(["--competition", str(rules_file), "verify-benchmark", "--dir", str(out),
                     "--manifest", str(manifest)]) == code
    captured = capsys.readouterr()
    assert expect in (captured.out if code == 0 else captured.err)
    assert SECRET_PROMPT not in captured.out + captured.err


def _drop_row(record: dict) -> None:
    record["rows"].pop()


def _other_salt(record: dict) -> None:
    record["commitment_salt"] = "00" * 32


@pytest.mark.parametrize("edit, code, expect", [
    (None, 0, "mmlu live, 2 items — matches the manifest's commitment"),
    # a reveal that drops or changes a question, or claims another salt, is caught
    (_drop_row, 1, "does not match the manifest's commitment"),
    (lambda r: r["rows"][0].update(prompt="another question"), 1, "does not match"),
    (_other_salt, 1, "does not match"),
])
def test_a_revealed_split_is_checked_by_anyone(sealed, tmp_path, monkeypatch, capsys,
                                               edit, code, expect):
    out, manifest = sealed
    monkeypatch.setenv(PASSWORD_ENV, PASSWORD)
    revealed = tmp_path / "mmlu.live.json"
    assert cli.main(["reveal", "--dir", str(out), "--split", "mmlu.live",
                     "--out", str(revealed)]) == 0
    record = json.loads(revealed.read_text())
    if edit:
        edit(record)
        revealed.write_text(json.dumps(record))
    assert PASSWORD_ENV not in os.environ  # the reveal took it out of the environment
    vault.forget()  # checking a reveal needs no secret
    assert cli.main(["verify-benchmark", "--manifest", str(manifest),
                     "--revealed", str(revealed)]) == code
    captured = capsys.readouterr()
    assert expect in (captured.out if code == 0 else captured.err)


def test_a_reveal_is_never_printed_where_a_log_would_keep_it(sealed, monkeypatch, capsys):
    out, _ = sealed
    monkeypatch.setenv(PASSWORD_ENV, PASSWORD)
    assert cli.main(["reveal", "--dir", str(out), "--split", "mmlu.live", "--out", "-"]) == 2
    captured = capsys.readouterr()
    assert "a file only" in captured.err and captured.out == ""


def _answers_right_unless(hard: set[str]):
    """Every model right on every item but those whose id is in `hard`, where all are wrong."""
    def answer(todo: list[Item]) -> list[AnsweredItem]:
        return [AnsweredItem(item, {m: ModelAnswer("x", item.id not in hard, "x", 0.001)
                                    for m in SMALL.pool_names}) for item in todo]
    return answer


@pytest.mark.parametrize(("wrong_on", "sealed_ok"), [
    # the audit as hard as the pool: every answer right on both
    (set(), True),
    # the audit much harder than the pool: its items all wrong, the pool's all right
    ({f"mmlu-new-{i}" for i in range(40)}, False),
    # or much easier
    ({f"mmlu-{i}" for i in range(18)}, False),
])
def test_an_audit_unlike_its_pool_is_refused_before_anything_is_sealed(tmp_path, wrong_on,
                                                                        sealed_ok):
    """The crown reads the audit alone: an audit harder than the pool would read an honest
    head's gain as a smaller one, so sealing compares the best single model's accuracy on the
    two and refuses, naming the fix, when they are more than `audit_match_z` standard errors
    apart."""
    rules = dataclasses.replace(SMALL, audit_size=20, live_size=2, benchmarks=("mmlu",))
    source = {"mmlu": Private([Item("mmlu", f"mmlu-new-{i}", f"q {i}", "1", "algebra")
                               for i in range(22)], "x")}
    out = tmp_path / "sealed"
    seal = lambda: seal_benchmarks({"mmlu": items("mmlu", 40)}, _answers_right_unless(wrong_on),  # noqa: E731
                                   out, tmp_path / "m.json", PASSWORD, SEED, rules, source, FAST)
    if sealed_ok:
        seal()
        assert sealed_path(out, "mmlu", "audit").is_file()
        return
    with pytest.raises(BenchmarkError, match=r"standard errors apart .*same subjects and levels"):
        seal()
    assert not out.exists() or not list(out.iterdir())
    assert not (tmp_path / "m.json").exists()
