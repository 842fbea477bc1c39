"""The hash-chained cost ledger: appends, verification, every kind of tampering, the CLI."""

from __future__ import annotations

import json
import threading

import pytest

from evaluator.cli import main
from evaluator.errors import LedgerError
from evaluator.pool.ledger import GENESIS, Ledger, entry_hash, verify_ledger


def write_ledger(path, n=4) -> list[dict]:
    ledger = Ledger(path)
    return [ledger.append("qwen3.5-35b-a3b", 100 + i, 20 + i, 0.001 * (i + 1), f"req-{i}")
            for i in range(n)]


def test_entries_chain_from_genesis_and_verify(tmp_path):
    path = tmp_path / "ledger.jsonl"
    entries = write_ledger(path)
    assert entries[0]["prev"] == GENESIS
    assert [e["prev"] for e in entries[1:]] == [e["hash"] for e in entries[:-1]]
    assert all(e["hash"] == entry_hash(e) for e in entries)
    summary = verify_ledger(path)
    assert summary.entries == 4
    assert summary.total_cost_usd == pytest.approx(0.010)
    assert summary.head == entries[-1]["hash"] == Ledger(path).head


def test_a_new_ledger_object_continues_the_chain(tmp_path):
    path = tmp_path / "ledger.jsonl"
    first = write_ledger(path, 2)
    later = Ledger(path).append("deepseek-v4-flash", 1, 1, 0.5, "req-x")
    assert later["prev"] == first[-1]["hash"]
    assert verify_ledger(path).entries == 3


def test_missing_or_empty_ledger_has_the_genesis_head(tmp_path):
    assert Ledger(tmp_path / "none.jsonl").head == GENESIS
    (tmp_path / "empty.jsonl").write_text("")
    assert verify_ledger(tmp_path / "empty.jsonl").head == GENESIS


def _edit_cost(lines):
    entry = json.loads(lines[1])
    entry["cost_usd"] = 0.0
    lines[1] = json.dumps(entry)


def _edit_and_rehash(lines):
    entry = json.loads(lines[1])
    entry["cost_usd"] = 0.0
    entry["hash"] = entry_hash(entry)
    lines[1] = json.dumps(entry)


def _swap(lines):
    lines[1], lines[2] = lines[2], lines[1]


TAMPERING = [
    # edited
    ("edited cost", _edit_cost, "line 2: hash does not match"),
    ("edited and rehashed", _edit_and_rehash, "line 3: prev does not match"),
    # deleted, inserted, reordered
    ("deleted", lambda lines: lines.pop(1), "line 2: prev does not match"),
    ("deleted first", lambda lines: lines.pop(0), "line 1: prev does not match"),
    ("inserted copy", lambda lines: lines.insert(2, lines[1]), "line 3: prev does not match"),
    ("reordered", _swap, "line 2: prev does not match"),
    # broken lines
    ("cut short", lambda lines: lines.__setitem__(2, lines[2][:40]), "line 3: not valid JSON"),
    ("blank line", lambda lines: lines.insert(1, ""), "line 2: not valid JSON"),
    ("extra field", lambda lines: lines.__setitem__(
        0, json.dumps({**json.loads(lines[0]), "note": "x"})), "line 1: not a ledger entry"),
    ("negative cost", lambda lines: lines.__setitem__(
        0, json.dumps({**json.loads(lines[0]), "cost_usd": -1})), "line 1: cost_usd"),
    ("infinite cost", lambda lines: lines.__setitem__(
        0, lines[0].replace('"cost_usd":', '"cost_usd":1e400,"was":')), "line 1: "),
]


# (prompt_tokens, completion_tokens, cost_usd) that no entry may carry
UNLEDGERABLE = [
    (10, 5, float("inf")), (10, 5, float("nan")), (10, 5, -0.01),
    (float("inf"), 5, 0.1), (-1, 5, 0.1), (10, 2.5, 0.1), (True, 5, 0.1),
]


@pytest.mark.parametrize(("prompt", "completion", "cost"), UNLEDGERABLE)
def test_an_entry_with_an_unusable_number_is_refused_and_nothing_written(tmp_path, prompt,
                                                                         completion, cost):
    ledger = Ledger(tmp_path / "ledger.jsonl")
    ledger.append("m", 1, 1, 0.5, "r0")
    with pytest.raises(LedgerError, match="not ledgered"):
        ledger.append("m", prompt, completion, cost, "r1")
    summary = verify_ledger(tmp_path / "ledger.jsonl")
    assert (summary.entries, summary.total_cost_usd) == (1, 0.5)


@pytest.mark.parametrize(("case", "tamper", "message"), TAMPERING, ids=[t[0] for t in TAMPERING])
def test_tampering_names_the_first_bad_line(tmp_path, case, tamper, message):
    path = tmp_path / "ledger.jsonl"
    write_ledger(path)
    lines = path.read_text().splitlines()
    tamper(lines)
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(LedgerError, match=message):
        verify_ledger(path)


def test_dropping_the_last_lines_is_caught_by_the_expected_head(tmp_path):
    path = tmp_path / "ledger.jsonl"
    entries = write_ledger(path)
    path.write_text("".join(line + "\n" for line in path.read_text().splitlines()[:-1]))
    assert verify_ledger(path).entries == 3
    with pytest.raises(LedgerError, match="expected head"):
        verify_ledger(path, expected_head=entries[-1]["hash"])


def test_concurrent_appends_from_threads_keep_one_chain(tmp_path):
    path = tmp_path / "ledger.jsonl"
    ledger = Ledger(path)

    def work(worker: int) -> None:
        for i in range(25):
            ledger.append("gemini-3.1-flash-lite", 10, 5, 0.01, f"w{worker}-{i}")

    threads = [threading.Thread(target=work, args=(w,)) for w in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    summary = verify_ledger(path)
    assert summary.entries == 200
    assert summary.total_cost_usd == pytest.approx(2.0)


def test_cli_prints_entries_total_and_head(tmp_path, capsys):
    path = tmp_path / "ledger.jsonl"
    entries = write_ledger(path)
    assert main(["ledger", "verify", str(path)]) == 0
    out = capsys.readouterr().out
    assert "entries: 4" in out
    assert "total_cost_usd: 0.010000" in out
    assert f"head: {entries[-1]['hash']}" in out


def test_cli_exits_1_naming_the_bad_line(tmp_path, capsys):
    path = tmp_path / "ledger.jsonl"
    write_ledger(path)
    lines = path.read_text().splitlines()
    _swap(lines)
    path.write_text("\n".join(lines) + "\n")
    assert main(["ledger", "verify", str(path)]) == 1
    assert "error: line 2:" in capsys.readouterr().err


def test_cli_checks_the_receipt_head(tmp_path, capsys):
    path = tmp_path / "ledger.jsonl"
    write_ledger(path)
    assert main(["ledger", "verify", str(path), "--head", GENESIS]) == 1
    assert "expected head" in capsys.readouterr().err


def test_cli_missing_file_is_an_error(tmp_path, capsys):
    assert main(["ledger", "verify", str(tmp_path / "nope.jsonl")]) == 1
    assert "cannot read ledger" in capsys.readouterr().err
