import base64
import dataclasses
import json
import os
import shutil
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from evaluator.changes import parse_changes
from evaluator.copies import DISGUISES, disguise, evading
from evaluator.gates import (
    GATES,
    GateContext,
    attempt_of,
    decode_fingerprint,
    encode_fingerprint,
    fingerprint,
    run_gates,
)
from evaluator.records import Attempt
from evaluator.rules import OFFICIAL
from evaluator.store import Store
from evaluator.submission import Submission, read_weights

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


HEAD = "a" * 40  # the head SHA the gates below run on


def gates_for(repo, relpath="submissions/alice/1", author="alice", changes=None, pr=7,
              attempts=(), shown_at=None):
    ctx = GateContext(author=author, now=NOW, rules=OFFICIAL, changes=changes, pr=pr,
                      head_sha=HEAD, attempts=list(attempts),
                      refunded=Store(repo).refunded_heads(), shown_at=shown_at)
    return run_gates(Submission(repo, relpath, OFFICIAL), ctx)


def added(*names, folder="submissions/alice/1"):
    return parse_changes("".join(f"A\t{folder}/{n}\n" for n in names))


def test_chain_is_data_in_spec_order():
    assert [(g.number, g.name) for g in GATES] == [
        (0, "scope"), (1, "rate limit"), (2, "weight sanity"), (3, "duplicate"), (4, "receipt")]


def test_valid_submission_passes_every_gate(repo, make_submission):
    make_submission(repo, "alice", 1)
    report = gates_for(repo, changes=added("weights.safetensors", "receipt.json", "README.md"))
    assert report.passed, report.to_dict()
    assert report.failed is None and len(report.results) == 5


def test_first_failure_stops_the_chain(repo, make_submission):
    make_submission(repo, "alice", 1)
    report = gates_for(repo, author="mallory")
    assert report.failed.number == 0
    assert [r.passed for r in report.results] == [False, None, None, None, None]


# ---------------------------------------------------------------- gate 0: scope

SCOPE_CHANGES = [
    # the PR reaches outside its folder
    ("edits code", "A\tsubmissions/alice/1/weights.safetensors\nM\tevaluator/gates.py\n",
     "modifies 'evaluator/gates.py'"),
    ("adds a workflow", "A\t.github/workflows/x.yml\n", "outside"),
    ("edits leaderboard", "M\tleaderboard/king.json\n", "modifies"),
    ("another miner's folder", "A\tsubmissions/bob/1/weights.safetensors\n", "outside"),
    ("deletes a file", "D\tsubmissions/alice/0/receipt.json\n", "deletes"),
    ("renames into the folder", "R100\tsubmissions/bob/1/receipt.json\tsubmissions/alice/1/receipt.json\n",
     "renames"),
    ("nested file", "A\tsubmissions/alice/1/extra/weights.safetensors\n", "outside"),
    ("disallowed name", "A\tsubmissions/alice/1/train.py\n", "'train.py' is not allowed"),
    ("file name with a tab", "A\tsubmissions/alice/1/a\tb\tc\tREADME.md\n", "unreadable change"),
    # odd names, quoted as `git diff --name-status` quotes them
    ("folder name with a trailing newline", 'A\t"submissions/alice/1\\n/weights.safetensors"\n',
     "control character (U+000A)"),
    ("file name with a tab, quoted", 'A\t"submissions/alice/1/README.md\\t"\n',
     "control character (U+0009)"),
    ("non-UTF-8 file name", 'A\t"submissions/alice/1/\\377.md"\n', "b'\\xff.md' is not valid UTF-8"),
    ("look-alike letter", "A\tsubmissions/alice/1/RE\u0410DME.md\n", "U+0410, which is not ASCII"),
    ("zero-width space", "A\tsubmissions/alice/1/README\u200b.md\n", "U+200B"),
]


@pytest.mark.parametrize(("case", "diff", "message"), SCOPE_CHANGES, ids=[c[0] for c in SCOPE_CHANGES])
def test_scope_refuses_changes_outside_the_folder(repo, make_submission, case, diff, message):
    make_submission(repo, "alice", 1)
    report = gates_for(repo, changes=parse_changes(diff))
    assert report.failed.number == 0 and message in report.failed.reason


SCOPE_PATHS = [
    ("author is not the folder", "submissions/alice/1", "bob", "PR author"),
    ("traversal", "submissions/../../etc/1", "alice", "one folder"),
    ("absolute path", "/etc/passwd/1", "alice", "one folder"),
    ("too deep", "submissions/alice/1/x", "alice", "one folder"),
    ("not a login", "submissions/al$ce/1", "al$ce", "login"),
    ("generation not a number", "submissions/alice/one", "alice", "positive whole number"),
    ("generation zero", "submissions/alice/0", "alice", "positive whole number"),
    ("generation skips", "submissions/alice/3", "alice", "next generation is 1"),
    ("missing folder", "submissions/alice/1", "alice", "does not exist"),
    # odd names: matched on ASCII patterns in full, and said why
    ("generation with a trailing newline", "submissions/alice/1\n", "alice", "U+000A"),
    ("look-alike digit", "submissions/alice/\u0661", "alice", "U+0661, which is not ASCII"),
    ("look-alike login", "submissions/\u0430lice/1", "alice", "U+0430, which is not ASCII"),
    ("non-UTF-8 login", "submissions/al\udcffce/1", "alice", "b'al\\xffce' is not valid UTF-8"),
]


@pytest.mark.parametrize(("case", "relpath", "author", "message"), SCOPE_PATHS,
                         ids=[c[0] for c in SCOPE_PATHS])
def test_scope_refuses_bad_folders(repo, make_submission, case, relpath, author, message):
    if case != "missing folder":
        make_submission(repo, "alice", 1)
        folder = repo / relpath
        if not folder.exists() and case == "generation skips":
            (repo / "submissions/alice/1").rename(folder)
    report = gates_for(repo, relpath, author)
    assert report.failed.number == 0 and message in report.failed.reason


def test_author_match_is_case_insensitive(repo, make_submission):
    make_submission(repo, "Alice", 1)
    assert gates_for(repo, "submissions/Alice/1", "alice").passed


FOLDER_DEFECTS = [
    ("extra file", lambda f: (f / "notes.txt").write_text("hi"), "unexpected"),
    ("missing receipt", lambda f: (f / "receipt.json").unlink(), "missing receipt.json"),
    ("missing weights", lambda f: (f / "weights.safetensors").unlink(), "missing weights"),
    ("symlinked weights", lambda f: ((f / "weights.safetensors").unlink(),
                                     (f / "weights.safetensors").symlink_to("/etc/passwd")),
     "regular file"),
    ("fifo readme", lambda f: ((f / "README.md").unlink(), os.mkfifo(f / "README.md")),
     "regular file"),
    ("subfolder", lambda f: (f / "extra").mkdir(), "unexpected"),
    ("oversize readme", lambda f: (f / "README.md").write_bytes(b"x" * (OFFICIAL.max_readme_bytes + 1)),
     "cap"),
    # odd file names fail with a reason, before "unexpected file"
    ("trailing newline", lambda f: (f / "README.md\n").write_text("x"), "U+000A"),
    ("non-UTF-8 name", lambda f: (f / os.fsdecode(b"\xff.md")).write_text("x"),
     "b'\\xff.md' is not valid UTF-8"),
    ("look-alike name", lambda f: (f / "RE\u0410DME.md").write_text("x"), "not ASCII"),
    ("escape sequence", lambda f: (f / "a\x1b[31m").write_text("x"), "U+001B"),
]


@pytest.mark.parametrize(("case", "damage", "message"), FOLDER_DEFECTS,
                         ids=[c[0] for c in FOLDER_DEFECTS])
def test_scope_refuses_folder_contents(repo, make_submission, case, damage, message):
    damage(make_submission(repo, "alice", 1))
    report = gates_for(repo)
    assert report.failed.number == 0 and message in report.failed.reason


def test_symlinked_folder_is_refused(repo, make_submission, tmp_path_factory):
    real = make_submission(tmp_path_factory.mktemp("elsewhere"), "alice", 1)
    (repo / "submissions/alice").mkdir()
    (repo / "submissions/alice/1").symlink_to(real, target_is_directory=True)
    report = gates_for(repo)
    assert report.failed.number == 0 and "link" in report.failed.reason


# ---------------------------------------------------------------- gate 1: rate limit

def attempt(hours_ago, pr=1, miner="alice", generation=0, head_sha="b" * 40):
    at = (NOW - timedelta(hours=hours_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return Attempt(miner, generation, pr, head_sha, at)


RATE_CASES = [
    ("no attempts", [], True),
    ("yesterday's attempt, 25 h ago", [attempt(25)], True),
    ("second attempt inside 24 h", [attempt(3)], False),
    ("just inside the window", [attempt(23.99)], False),
    # one attempt per head: re-running the same head is free, a new head is a new attempt
    ("same head re-run does not count", [attempt(1, pr=7, generation=1, head_sha=HEAD)], True),
    ("a new head on the same PR counts", [attempt(1, pr=7, generation=1)], False),
    ("another miner's attempt", [attempt(1, miner="bob")], True),
    ("login differs only in case", [attempt(1, miner="ALICE")], False),
]


@pytest.mark.parametrize(("case", "attempts", "passes"), RATE_CASES, ids=[c[0] for c in RATE_CASES])
def test_rate_limit(repo, make_submission, case, attempts, passes):
    make_submission(repo, "alice", 1)
    # the earlier attempts used generation 0 so the folder's generation stays 1
    report = gates_for(repo, attempts=attempts)
    gate1 = report.results[1]
    assert gate1.passed is passes
    if not passes:
        assert "next slot opens at" in gate1.reason


def test_an_attempt_whose_evaluation_was_void_is_refunded(repo, make_submission):
    make_submission(repo, "alice", 1)
    spent = attempt(3, pr=6, generation=0, head_sha="e" * 40)
    assert gates_for(repo, attempts=[spent]).results[1].passed is False
    void = {"format": 1, "miner": "alice", "generation": 1, "pr": 6, "head_sha": "e" * 40,
            "evaluated_at": "2026-11-29T09:00:00Z", "outcome": "void",
            "reason": "void: the pool failed", "composite": None, "delta": None,
            "benchmark_manifest": None, "partition_commitment": None, "isolation": None,
            "not_compared": None}
    Store(repo).write_result(void)
    assert gates_for(repo, attempts=[spent]).results[1].passed is True


# ---------------------------------------------------------------- gate 2: weights

def with_head(head_change=None, scales_change=None):
    def damage(head, scales):
        if head_change:
            head = head_change(head.copy())
        if scales_change:
            scales = scales_change(scales.copy())
        return head, scales
    return damage


def put(array, index, value):
    array.flat[index] = value
    return array


WEIGHT_DEFECTS = [
    ("NaN in head", with_head(lambda h: put(h, 5, np.nan)), "NaN or Inf"),
    ("Inf in scales", with_head(scales_change=lambda s: put(s, 9, np.inf)), "NaN or Inf"),
    ("all-zero head", with_head(lambda h: h * 0), "all zeros"),
    ("huge value", with_head(lambda h: put(h, 0, 2e6)), "magnitude"),
    ("huge scale", with_head(scales_change=lambda s: put(s, 0, -1e7)), "magnitude"),
]


@pytest.mark.parametrize(("case", "damage", "message"), WEIGHT_DEFECTS, ids=[c[0] for c in WEIGHT_DEFECTS])
def test_weight_sanity(repo, make_submission, trained_weights, case, damage, message):
    head, scales = damage(*trained_weights(0))
    make_submission(repo, "alice", 1, head=head, scales=scales)
    report = gates_for(repo)
    assert report.failed.number == 2 and message in report.failed.reason


def test_garbage_weights_fail_gate_2_not_with_a_traceback(repo, make_submission):
    folder = make_submission(repo, "alice", 1)
    (folder / "weights.safetensors").write_bytes(b"\x80\x04\x95garbage-pickle")
    report = gates_for(repo)
    assert report.failed.number == 2 and "header" in report.failed.reason


# ---------------------------------------------------------------- gate 3: duplicates

def copy_of(kind, head, scales):
    return disguise(kind, head, scales, OFFICIAL.n_models)


COPIES = sorted(DISGUISES)


@pytest.mark.parametrize("kind", COPIES)
def test_copies_of_a_merged_submission_are_caught(repo, make_submission, kind):
    original = make_submission(repo, "bob", 1, seed=5)
    head, scales = read_weights(original / "weights.safetensors", OFFICIAL)
    head, scales = copy_of(kind, head, scales)
    make_submission(repo, "alice", 1, head=head, scales=scales)
    report = gates_for(repo)
    assert report.failed.number == 3 and "submissions/bob/1" in report.failed.reason


def recorded(repo, make_submission, login, seed, pr, passed=True, **receipt):
    """An earlier attempt of another PR, recorded as the gates command records it."""
    folder = make_submission(repo, login, 1, seed=seed, **receipt)
    sub = Submission(repo, f"submissions/{login}/1", OFFICIAL)
    ctx = GateContext(author=login, now=NOW, rules=OFFICIAL, pr=pr, head_sha=f"{pr:040x}")
    report = run_gates(sub, ctx, GATES[2:])
    attempt = dataclasses.replace(attempt_of(sub, report, ctx, 1), gates_passed=passed,
                                  at="2026-11-27T12:00:00Z")  # outside the rate window
    shutil.rmtree(folder)  # an open or closed PR: its folder never reached the base branch
    return attempt


@pytest.mark.parametrize("kind", COPIES)
def test_copies_of_a_pending_attempt_are_caught(repo, make_submission, kind):
    earlier = recorded(repo, make_submission, "bob", seed=5, pr=40)
    head = decode_fingerprint(earlier.fingerprint, OFFICIAL).astype(np.float32)
    original = np.vstack([head.reshape(3, -1), np.ones((3, OFFICIAL.hidden_size))])
    head, scales = copy_of(kind, original, np.ones(OFFICIAL.svf_scale_count))
    make_submission(repo, "alice", 1, head=head, scales=scales)
    report = gates_for(repo, attempts=[earlier])
    assert report.failed.number == 3 and "the attempt of PR #40 (bob" in report.failed.reason


# (when GitHub showed the earlier-recorded alike head, when it showed this one, caught)
SHOWN = [
    # the head recorded first was also shown first: this one is the copy
    ("2026-11-28T10:00:00Z", "2026-11-28T10:00:05Z", True),
    # recorded first, but shown after this one (its gates job pushed first): this one is the
    # original, and passes
    ("2026-11-28T10:00:05Z", "2026-11-28T10:00:00Z", False),
    # shown in the same second: the lower pull request number was opened first
    ("2026-11-28T10:00:00Z", "2026-11-28T10:00:00Z", False),
]


@pytest.mark.parametrize(("theirs", "mine", "caught"), SHOWN)
def test_gate_3_compares_with_heads_github_showed_earlier_not_with_earlier_lines(
        repo, make_submission, theirs, mine, caught):
    """The log's order is the order in which gates jobs pushed; which head is the original is
    when GitHub first showed each on a pull request."""
    earlier = dataclasses.replace(recorded(repo, make_submission, "bob", seed=5, pr=40),
                                  shown_at=theirs)
    head, scales = copy_of("models shifted", decode_fingerprint(
        earlier.fingerprint, OFFICIAL).astype(np.float32).reshape(3, -1),
        np.ones(OFFICIAL.svf_scale_count))
    make_submission(repo, "alice", 1, head=np.vstack([head, np.ones((3, OFFICIAL.hidden_size))]),
                    scales=scales)
    report = gates_for(repo, attempts=[earlier], shown_at=mine)
    assert (report.failed is not None and report.failed.number == 3) is caught


def test_a_copy_is_found_among_a_season_of_attempts(repo, make_submission):
    rng = np.random.default_rng(3)
    heads = [rng.normal(0, 0.1, OFFICIAL.head_shape) for _ in range(300)]
    season = [Attempt(miner=f"m{i}", generation=1, pr=100 + i, head_sha=f"{i:040x}",
                      at="2026-11-20T12:00:00Z", gates_passed=True,
                      fingerprint=encode_fingerprint(fingerprint(h, 3), 3))
              for i, h in enumerate(heads)]
    make_submission(repo, "alice", 1, head=copy_of("models shifted", heads[280],
                                                   np.ones(OFFICIAL.svf_scale_count))[0])
    report = gates_for(repo, attempts=season)
    assert report.failed.number == 3 and "the attempt of PR #380 (m280" in report.failed.reason


LINE = OFFICIAL.duplicate_cosine


@pytest.mark.parametrize(("cosine", "caught"), [(1 - (1 - LINE) / 2, True), (2 * LINE - 1, False),
                                                (0.995, False), (0.9, False)])
def test_gate_3_draws_its_line_at_the_cosine_rule(repo, make_submission, cosine, caught):
    original = make_submission(repo, "bob", 1, seed=5)
    head, scales = read_weights(original / "weights.safetensors", OFFICIAL)
    moved = evading(head, cosine, OFFICIAL.n_models)
    assert float(fingerprint(moved, 3) @ fingerprint(head, 3)) == pytest.approx(cosine, abs=1e-6)
    make_submission(repo, "alice", 1, head=moved, scales=scales)
    report = gates_for(repo)
    # past the line, a copy is left to the behavioural check during evaluation
    assert (report.failed is not None and report.failed.number == 3) is caught


def test_independent_heads_are_not_duplicates(repo, make_submission):
    make_submission(repo, "bob", 1, seed=5)
    earlier = recorded(repo, make_submission, "carol", seed=7, pr=40)
    make_submission(repo, "alice", 1, seed=6)
    assert gates_for(repo, attempts=[earlier]).passed


@pytest.mark.parametrize(("login", "pr", "failed_gate", "compared"), [
    ("alice", 7, None, False),  # this PR's older head
    ("Alice", 41, 4, False),  # the miner's own head, stopped at gate 4 and now resubmitted
    ("bob", 41, 4, True),  # another miner's head stopped at gate 4: still its author's
    ("bob", 41, 3, False),  # a copy itself: its original is compared instead
    ("bob", 41, 2, False),  # insane weights: nothing to copy
])
def test_which_earlier_attempts_gate_3_compares(repo, make_submission, login, pr, failed_gate,
                                                compared):
    earlier = dataclasses.replace(recorded(repo, make_submission, login.lower(), seed=6, pr=pr),
                                  miner=login, gates_passed=failed_gate is None,
                                  failed_gate=failed_gate)
    generation = 2 if login == "Alice" else 1  # the own head's slot and generation are spent
    make_submission(repo, "alice", generation, seed=6)
    report = gates_for(repo, f"submissions/alice/{generation}", attempts=[earlier])
    assert report.failed is None or report.failed.number == 3, report.failed
    assert (report.failed is not None) is compared


@pytest.mark.parametrize(("fingerprint", "passed"), [
    # an earlier attempt whose fingerprint cannot be read: the gate fails closed
    (None, True),
    ("not base64!", True),
    (base64.b64encode(b"\x00" * 10).decode(), True),
    ("q7:" + base64.b64encode(b"\x00" * 10).decode(), True),
    ("q7:" + base64.b64encode(b"\x00" * 1800).decode(), True),  # scales of zero
])
def test_an_unreadable_fingerprint_fails_the_gate_closed(repo, make_submission, fingerprint,
                                                         passed):
    earlier = dataclasses.replace(recorded(repo, make_submission, "bob", seed=5, pr=40),
                                  fingerprint=fingerprint, gates_passed=passed)
    make_submission(repo, "alice", 1, seed=6)
    report = gates_for(repo, attempts=[earlier])
    assert report.failed.number == 3
    assert "has no readable fingerprint" in report.failed.reason
    assert "restore the file from git" in report.failed.reason


def test_the_fingerprint_ignores_shift_and_scale_and_is_compact():
    head = np.random.default_rng(0).normal(size=(6, 16))
    view = fingerprint(head, 3)
    assert np.linalg.norm(view) == pytest.approx(1.0)
    shifted = np.vstack([head[:3] * 3 + head[1], -head[3:]])
    assert fingerprint(shifted, 3) @ view == pytest.approx(1.0)
    rules = dataclasses.replace(OFFICIAL, hidden_size=16)
    assert decode_fingerprint(encode_fingerprint(view, 3), rules) @ view == pytest.approx(1.0, abs=1e-3)
    # a line in no format the log writes (bare float16 rows, say) is refused, not guessed at
    bare = base64.b64encode(view.astype("<f2").tobytes()).decode()
    with pytest.raises(ValueError, match="starts with 'q7:' or 'p16:'"):
        decode_fingerprint(bare, rules)


def test_an_attempts_line_stays_under_3_kb(repo, make_submission):
    attempt = recorded(repo, make_submission, "a" * 39, seed=5, pr=999999)
    attempt = dataclasses.replace(attempt, generation=99999, head_sha="f" * 40)
    assert len(json.dumps(attempt.to_dict(), sort_keys=True)) <= 3 * 1024


CUTS = (0.995, OFFICIAL.duplicate_cosine + 5e-4, OFFICIAL.duplicate_cosine - 5e-4, 0.985, 0.95)


@pytest.mark.parametrize("seed", range(5))
def test_stored_fingerprints_decide_every_copy_as_the_full_ones_do(seed):
    """Gate 3 against a pending attempt decides from the stored fingerprint: on every
    disguised copy, and on copies moved just past or short of the line, as from the weights."""
    rng = np.random.default_rng(seed)
    head, scales = rng.normal(0, 0.1, OFFICIAL.head_shape), np.ones(OFFICIAL.svf_scale_count)
    original = fingerprint(head, 3)
    stored = decode_fingerprint(encode_fingerprint(original, 3), OFFICIAL)
    copies = [copy_of(kind, head, scales)[0] for kind in COPIES]
    copies += [evading(head, cosine, 3, seed=seed) for cosine in CUTS]
    for copy in copies:
        mine = fingerprint(copy, 3)
        full, kept = float(mine @ original), float(mine @ stored)
        assert abs(kept - full) < 3e-4
        assert (kept >= OFFICIAL.duplicate_cosine) == (full >= OFFICIAL.duplicate_cosine)


# ---------------------------------------------------------------- gate 4: receipt

def rewrite_receipt(folder, **changes):
    path = folder / "receipt.json"
    data = json.loads(path.read_text())
    data.update(changes)
    path.write_text(json.dumps(data))


RECEIPT_DEFECTS = [
    ("wrong pool", {"pool": ["gpt-5", "b", "c"]}, "pool must be"),
    ("wrong n_params", {"n_params": 13311}, "n_params must be 13312"),
    ("weights hash mismatch", {"weights_sha256": "0" * 64}, "does not match"),
    ("zero cost", {"total_cost_usd": 0}, "more than"),
    ("two generations", {"fitness_history": [{"generation": 0, "mean": 0, "max": 0, "best": 0}] * 2},
     "at least 3"),
    ("other miner", {"miner": "bob"}, "miner is 'bob'"),
    ("other generation", {"generation": 2}, "generation is 2"),
    ("schema", {"extra": True}, "unknown field"),
]


@pytest.mark.parametrize(("case", "changes", "message"), RECEIPT_DEFECTS, ids=[c[0] for c in RECEIPT_DEFECTS])
def test_receipt_gate(repo, make_submission, case, changes, message):
    rewrite_receipt(make_submission(repo, "alice", 1), **changes)
    report = gates_for(repo)
    assert report.failed.number == 4 and message in report.failed.reason


def test_the_evaluations_re_check_lets_the_original_through_and_stops_the_copy(repo,
                                                                             make_submission):
    """The copy's gates job recorded first, the original's after; at evaluation each head is
    judged against every head GitHub showed before it, however late its line."""
    from evaluator.recheck import recheck

    store = Store(repo)
    head, scales = read_weights(make_submission(repo, "alice", 1, seed=5)
                                / "weights.safetensors", OFFICIAL)
    shutil.rmtree(repo / "submissions" / "alice")  # a pull request's folder is not on main

    def checked(login: str, pr: int, shown: str | None = None) -> str | None:
        make_submission(repo, login, 1, head=head, scales=scales)  # the copy: the same weights
        sub, sha = Submission(repo, f"submissions/{login}/1", OFFICIAL), f"{pr:040x}"
        if shown is not None:
            ctx = GateContext(author=login, now=NOW, rules=OFFICIAL, pr=pr, head_sha=sha,
                              shown_at=shown)
            store.record_attempt(attempt_of(sub, run_gates(sub, ctx, GATES[2:]), ctx, 1))
            found = None
        else:
            found = recheck(repo, f"submissions/{login}/1", pr, OFFICIAL, head_sha=sha)
        shutil.rmtree(repo / "submissions" / login)
        return found

    checked("bob", 8, "2026-11-28T10:00:05Z")  # the copy's gates job pushed first
    checked("alice", 7, "2026-11-28T10:00:00Z")
    assert checked("alice", 7) is None
    copy = checked("bob", 8)
    assert copy is not None and copy.startswith("gate 3 (duplicate)") and "PR #7" in copy
