import json
import os
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from evaluator.gates import GATES, GateContext, parse_changes, routing_view, run_gates
from evaluator.records import Attempt
from evaluator.rules import OFFICIAL
from evaluator.submission import Submission

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def gates_for(repo, relpath="submissions/alice/1", author="alice", changes=None, pr=7,
              attempts=()):
    ctx = GateContext(author=author, now=NOW, rules=OFFICIAL, changes=changes, pr=pr,
                      attempts=list(attempts))
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

def attempt(hours_ago, pr=1, miner="alice", generation=0):
    at = (NOW - timedelta(hours=hours_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return Attempt(miner, generation, pr, "a" * 40, at)


RATE_CASES = [
    ("no attempts", [], True),
    ("yesterday's attempt, 25 h ago", [attempt(25)], True),
    ("second attempt inside 24 h", [attempt(3)], False),
    ("just inside the window", [attempt(23.99)], False),
    ("same PR re-run does not count", [attempt(1, pr=7, generation=1)], True),
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

def transform(kind):
    def apply(head):
        h = head.astype(np.float64)
        if kind == "exact":
            return h
        if kind == "shifted":  # the same vector added to every row of a group leaves softmax alone
            return np.vstack([h[:3] + h[0], h[3:] - 2 * h[4]])
        if kind == "rescaled":
            return np.vstack([h[:3] * 7.5, h[3:] * 0.2])
        if kind == "noised":
            return h + np.random.default_rng(1).normal(0, 0.005, h.shape)
        raise AssertionError(kind)
    return apply


@pytest.mark.parametrize("kind", ["exact", "shifted", "rescaled", "noised"])
def test_copies_of_an_earlier_submission_are_caught(repo, make_submission, kind):
    from evaluator.submission import read_weights
    original = make_submission(repo, "bob", 1, seed=5)
    head, scales = read_weights(original / "weights.safetensors", rules=OFFICIAL)
    make_submission(repo, "alice", 1, head=transform(kind)(head).astype(np.float32), scales=scales)
    report = gates_for(repo)
    assert report.failed.number == 3 and "submissions/bob/1" in report.failed.reason


def test_independent_heads_are_not_duplicates(repo, make_submission):
    make_submission(repo, "bob", 1, seed=5)
    make_submission(repo, "alice", 1, seed=6)
    assert gates_for(repo).passed


def test_routing_view_ignores_group_shift_and_scale():
    head = np.random.default_rng(0).normal(size=(6, 16))
    view = routing_view(head, 3)
    assert np.linalg.norm(view) == pytest.approx(1.0)
    assert routing_view(transform("shifted")(head), 3) @ view == pytest.approx(1.0)


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
