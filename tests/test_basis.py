"""Gate 3 on the public items' features: no credit for weight the features never use."""

import functools
import json
import shutil

import numpy as np
import pytest

from evaluator import fingerprints
from evaluator.basis import BASIS_FILE, BasisError, directions_of, read_basis, write_basis
from evaluator.gates import context_for, fingerprint, run_gates
from evaluator.rules import OFFICIAL
from evaluator.submission import Submission

N_MODELS = OFFICIAL.n_models
MANIFEST = {"benchmarks": {b: {"train_ids": [f"{b}-{i}" for i in range(3)]}
                           for b in OFFICIAL.benchmarks}}


def public_features(n: int = 400, used: int = 24, seed: int = 0) -> np.ndarray:
    """Head inputs of the public items: like a transformer's, they live near a few directions
    of the 1,024 (here `used` of them), with a little spread elsewhere."""
    rng = np.random.default_rng(seed)
    span = rng.normal(0, 1, (used, OFFICIAL.hidden_size))
    return rng.normal(0, 1, (n, used)) @ span + 1e-3 * rng.normal(0, 1, (n, OFFICIAL.hidden_size))


def lifted(head: np.ndarray, features: np.ndarray, cosine: float, seed: int = 1) -> np.ndarray:
    """A copy of `head` with weight added to its model rows only in directions the features
    barely use, until the plain rows' cosine with the original is `cosine`."""
    rng = np.random.default_rng(seed)
    unused = _right_singular_vectors(features.tobytes(), features.shape)[40:]  # beyond their span
    rows = head[:N_MODELS] - head[:N_MODELS].mean(axis=0)
    extra = rng.normal(0, 1, (N_MODELS, unused.shape[0])) @ unused
    extra -= extra.mean(axis=0)
    extra *= np.linalg.norm(rows) * np.sqrt(1 / cosine ** 2 - 1) / np.linalg.norm(extra)
    copy = head.copy()
    copy[:N_MODELS] += extra
    return copy


@functools.cache
def _right_singular_vectors(data: bytes, shape: tuple[int, int]) -> np.ndarray:
    features = np.frombuffer(data).reshape(shape)
    return np.linalg.svd(features, full_matrices=True)[2]


@functools.cache
def _public_basis() -> np.ndarray:
    return directions_of(public_features(), OFFICIAL)


@pytest.fixture
def board(repo):
    (repo / "leaderboard" / "manifest.json").write_text(json.dumps(MANIFEST))
    features = public_features()
    write_basis(repo / "leaderboard" / BASIS_FILE, _public_basis(), len(features), MANIFEST,
                OFFICIAL)
    return repo, features


def gates(repo, author="alice"):
    ctx = context_for(repo, author, OFFICIAL, pr=7, head_sha="a" * 40)
    return run_gates(Submission(repo, f"submissions/{author}/1", OFFICIAL), ctx)


@pytest.mark.slow
def test_a_head_lifted_in_unused_directions_routes_alike_and_is_caught(board, make_submission):
    repo, features = board
    original = np.random.default_rng(5).normal(0, 0.1, OFFICIAL.head_shape)
    make_submission(repo, "bob", 1, head=original)
    copy = lifted(original, features, cosine=0.90)
    assert float(fingerprint(copy, N_MODELS) @ fingerprint(original, N_MODELS)) == \
        pytest.approx(0.90, abs=5e-3)  # the plain rows are far below gate 3's line
    same = np.mean((features @ copy[:N_MODELS].T).argmax(1)
                   == (features @ original[:N_MODELS].T).argmax(1))
    assert same >= 0.98  # and yet it routes like the original
    make_submission(repo, "alice", 1, head=copy)
    failed = gates(repo).failed
    assert failed is not None and failed.number == 3
    assert "submissions/bob/1" in failed.reason and "on the public items' features" in failed.reason
    # the same board without the basis compares the plain rows, and the copy got through
    (repo / "leaderboard" / BASIS_FILE).unlink()
    assert gates(repo).passed


@pytest.mark.slow
def test_independent_heads_pass_with_the_basis(board, make_submission):
    repo, _ = board
    make_submission(repo, "bob", 1, seed=5)
    make_submission(repo, "alice", 1, seed=6)
    assert gates(repo).passed


@pytest.mark.slow
def test_recorded_fingerprints_are_compared_on_the_same_basis(board):
    _, features = board
    basis = read_basis(board[0] / "leaderboard" / BASIS_FILE, MANIFEST, OFFICIAL)
    rng = np.random.default_rng(9)
    heads = [rng.normal(0, 0.1, OFFICIAL.head_shape) for _ in range(4)]
    heads.append(lifted(heads[0], features, cosine=0.8))
    views = [fingerprint(h, N_MODELS) for h in heads]
    texts = [fingerprints.encode(v, N_MODELS) for v in views]
    found = fingerprints.cosines(views[-1], texts, OFFICIAL, basis.directions)
    full = [float(basis.project(views[-1], N_MODELS) @ basis.project(v, N_MODELS))
            for v in views]
    assert found == pytest.approx(full, abs=2e-3)
    assert found[0] > OFFICIAL.duplicate_cosine and max(found[1:4]) < 0.9


@pytest.mark.slow
@pytest.mark.parametrize(("spoil", "says"), [
    (lambda path: path.write_bytes(path.read_bytes()[:100]), "cannot be read"),
    (lambda path: write_basis(path, np.ones((2, OFFICIAL.hidden_size)), 2,
                              {"benchmarks": {}}, OFFICIAL), "other train ids"),
    (lambda path: write_basis(path, np.full((2, OFFICIAL.hidden_size), np.nan), 2, MANIFEST,
                              OFFICIAL), "finite directions"),
    (lambda path: write_basis(path, np.ones((2, 64)), 2, MANIFEST, OFFICIAL), "of 1024"),
])
def test_a_spoilt_basis_fails_gate_3_closed(board, make_submission, spoil, says):
    repo, _ = board
    spoil(repo / "leaderboard" / BASIS_FILE)
    with pytest.raises(BasisError, match=says):
        read_basis(repo / "leaderboard" / BASIS_FILE, MANIFEST, OFFICIAL)
    make_submission(repo, "alice", 1, seed=6)
    failed = gates(repo).failed
    assert failed is not None and failed.number == 3 and says in failed.reason
    assert "tinyrouter basis" in failed.reason


@pytest.mark.slow
def test_the_basis_keeps_what_the_features_use():
    features = public_features(used=24)
    directions = directions_of(features, OFFICIAL)
    assert 24 <= directions.shape[0] <= 30  # the used directions, not the noise
    weighed = np.linalg.norm(directions, axis=1)
    assert np.all(np.diff(weighed) <= 1e-9)  # largest first, scaled by use
    with pytest.raises(BasisError):
        directions_of(features[:, :64], OFFICIAL)


def bobs_attempt(repo, make_submission):
    """(bob's head, the gates' context for it, the attempt they record) on the board."""
    from evaluator.gates import attempt_of

    original = np.random.default_rng(5).normal(0, 0.1, OFFICIAL.head_shape)
    make_submission(repo, "bob", 1, head=original)
    ctx = context_for(repo, "bob", OFFICIAL, pr=6, head_sha="b" * 40)
    sub = Submission(repo, "submissions/bob/1", OFFICIAL)
    return original, ctx, attempt_of(sub, run_gates(sub, ctx), ctx, 1)


@pytest.mark.slow
def test_a_recorded_head_names_its_basis_and_gate_3_compares_on_it(board, make_submission):
    """The gates record each head's projection with the basis it was projected on; gate 3
    refuses a copy from it, and cannot compare a projection that names another basis."""
    from evaluator.records import Seen
    from evaluator.store import Store

    repo, features = board
    original, ctx, recorded = bobs_attempt(repo, make_submission)
    assert recorded.seen is not None and recorded.seen.basis == ctx.basis.digest
    Store(repo).record_attempt(recorded)
    assert Store(repo).attempts()[0].seen == recorded.seen  # validated, written, read back
    shutil.rmtree(repo / "submissions" / "bob")  # not merged: only its attempt is compared
    make_submission(repo, "alice", 1, head=lifted(original, features, cosine=0.9))
    failed = gates(repo).failed
    assert failed.number == 3 and "PR #6" in failed.reason
    # a projection recorded on another basis cannot be compared: the gate fails closed and
    # says what a maintainer does (a new basis is a new season, whose log starts empty)
    line = json.loads((repo / "leaderboard" / "attempts.jsonl").read_text())
    line["seen"] = Seen("0" * 16).to_dict()
    (repo / "leaderboard" / "attempts.jsonl").write_text(json.dumps(line) + "\n")
    failed = gates(repo).failed
    assert failed.number == 3 and "PR #6" in failed.reason
    assert "projected on the feature basis 0000000000000000" in failed.reason
    assert "rotate the log" in failed.reason
    # a damaged projection on the board's own basis, or one that names no basis, is a damaged
    # line: restored from git, not a reason to rotate the season away
    good = json.loads(json.dumps(line))
    good["seen"] = recorded.seen.to_dict()
    for broken, words in ((dict(good, fingerprint=good["fingerprint"][:-8]), "bytes was expected"),
                          ({k: v for k, v in good.items() if k != "seen"},
                           "names no feature basis")):
        (repo / "leaderboard" / "attempts.jsonl").write_text(json.dumps(broken) + "\n")
        failed = gates(repo).failed
        assert failed.number == 3 and words in failed.reason, failed.reason
        assert "restore the file from git" in failed.reason
        assert "rotate" not in failed.reason


@pytest.mark.slow
def test_on_a_basis_the_log_keeps_the_projection_alone(board, make_submission):
    """With a basis, an attempt's line keeps the fingerprint's projection on it (float16, under
    1.8 KB a line), and gate 3 reads the same cosines from it as from the full weights."""
    repo, features = board
    original, ctx, recorded = bobs_attempt(repo, make_submission)
    assert recorded.fingerprint.startswith(fingerprints.PROJECTED)
    assert len(json.dumps(recorded.to_dict())) < 1800
    with pytest.raises(ValueError, match="keeps only its projection"):
        fingerprints.decode(recorded.fingerprint, OFFICIAL)
    rng = np.random.default_rng(11)
    for cosine in (0.999, 0.991, 0.989, 0.95):
        copy = fingerprint(lifted(original, features, cosine=cosine, seed=int(rng.integers(99))),
                           N_MODELS)
        exact = float(ctx.basis.project(copy, N_MODELS)
                      @ ctx.basis.project(fingerprint(original, N_MODELS), N_MODELS))
        kept = fingerprints.cosines(copy, [recorded.fingerprint], OFFICIAL,
                                    ctx.basis.directions, [True])[0]
        assert kept == pytest.approx(exact, abs=1e-5)


def projected_line(values: np.ndarray) -> str:
    return fingerprints.PROJECTED + __import__("base64").b64encode(
        values.astype("<f2").tobytes()).decode()


@pytest.mark.parametrize(("text", "words"), [
    (projected_line(np.ones(10)), "of 104 bytes was expected"),
    (projected_line(np.full(2 * 26, np.nan)), "not a vector of finite numbers"),
    (projected_line(np.zeros(2 * 26)), "not a vector of finite numbers"),
    (fingerprints.PROJECTED + "%%%", "Only base64"),
])
def test_a_broken_projected_fingerprint_is_refused(text, words):
    directions = np.eye(26, OFFICIAL.hidden_size)
    mine = fingerprint(np.random.default_rng(0).normal(0, 1, OFFICIAL.head_shape), N_MODELS)
    with pytest.raises(ValueError, match=words):
        fingerprints.cosines(mine, [text], OFFICIAL, directions)


def test_a_projected_fingerprint_needs_the_board_to_have_a_basis():
    directions = np.eye(26, OFFICIAL.hidden_size)
    mine = fingerprint(np.random.default_rng(0).normal(0, 1, OFFICIAL.head_shape), N_MODELS)
    text = fingerprints.encode_projected(mine, N_MODELS, directions)
    assert fingerprints.cosines(mine, [text], OFFICIAL, directions)[0] == pytest.approx(1, abs=1e-5)
    with pytest.raises(fingerprints.OtherBasis, match="the board has none"):
        fingerprints.cosines(mine, [text], OFFICIAL)
    with pytest.raises(fingerprints.OtherBasis, match="another feature basis"):
        fingerprints.cosines(mine, [text], OFFICIAL, directions, [False])


def test_the_log_refuses_a_projected_fingerprint_that_names_no_basis(repo):
    from evaluator.errors import LeaderboardError
    from evaluator.records import Attempt
    from evaluator.store import Store

    text = fingerprints.encode_projected(
        fingerprint(np.random.default_rng(0).normal(0, 1, OFFICIAL.head_shape), N_MODELS),
        N_MODELS, np.eye(26, OFFICIAL.hidden_size))
    attempt = Attempt(miner="bob", generation=1, pr=6, head_sha="b" * 40,
                      at="2026-11-20T12:00:00Z", gates_passed=True, fingerprint=text)
    with pytest.raises(LeaderboardError, match="seen"):
        Store(repo).record_attempt(attempt)
    assert Store(repo).attempts() == []


# ---------------------------------------------------------------- the attempts index

def record(repo, login, pr, now, head=None):
    """The bot's gates on `login`'s generation-1 folder in PR `pr`, recording the attempt."""
    from evaluator.cli import main

    argv = ["gates", "--repo", str(repo), "--submission", f"submissions/{login}/1", "--author",
            login, "--pr", str(pr), "--head-sha", f"{pr:040x}", "--now", now, "--record-attempt"]
    return main(argv)


def assert_rebuilt_alike(repo, lines):
    """The index on disk is byte for byte the one built from scratch from the log."""
    from evaluator import attempts_index

    log = (repo / "leaderboard" / "attempts.jsonl").read_bytes()
    basis = index_of(repo)[1].basis
    rows = attempts_index.rows_of(log, 0, OFFICIAL, basis)
    assert len(rows) == lines
    assert (repo / "leaderboard" / attempts_index.INDEX_FILE).read_bytes() == \
        attempts_index.encode(rows, log, OFFICIAL, basis)


def index_of(repo):
    from evaluator import attempts_index

    ctx = context_for(repo, "nobody", OFFICIAL)
    return attempts_index.read(repo / "leaderboard", OFFICIAL, ctx.basis), ctx


@pytest.fixture
def season(board, make_submission):
    """A board where bob (PR 21), carol (PR 22) and dave (PR 23) recorded original heads."""
    repo, features = board
    rng = np.random.default_rng(5)
    heads = {}
    for pr, login in enumerate(("bob", "carol", "dave"), start=21):
        heads[login] = rng.normal(0, 0.1, OFFICIAL.head_shape)
        make_submission(repo, login, 1, head=heads[login])
        assert record(repo, login, pr, f"2026-12-0{pr - 20}T10:00:00Z") == 0
        shutil.rmtree(repo / "submissions" / login)  # not merged: only the attempt is compared
    return repo, features, heads


@pytest.mark.slow
def test_the_record_step_keeps_an_index_that_gate_3_reads_as_it_reads_the_log(
        season, make_submission):
    """Each recorded attempt brings the index up to date; the gates then parse only the
    author's and the PR's lines, and gate 3 decides from the index exactly as from the log."""
    from evaluator import attempts_index

    repo, features, heads = season
    index, ctx = index_of(repo)
    assert index is not None and ctx.index is not None and len(index.rows) == 3
    assert [a.miner for a in context_for(repo, "carol", OFFICIAL, pr=23).attempts] == [
        "carol", "dave"]  # hers and the PR's, in the log's order
    make_submission(repo, "alice", 1, head=lifted(heads["carol"], features, cosine=0.9))
    with_index = gates(repo).failed
    assert with_index.number == 3 and "PR #22 (carol" in with_index.reason
    (repo / "leaderboard" / attempts_index.INDEX_FILE).unlink()
    assert index_of(repo)[0] is None
    assert gates(repo).failed == with_index  # the log read in full decides alike
    # an independent head passes; its record rebuilds the index; her next PR an hour later
    # meets the rate limit through the index's lines of hers
    make_submission(repo, "erin", 1, seed=3)
    assert record(repo, "erin", 9, "2026-12-05T10:00:00Z") == 0
    assert len(index_of(repo)[0].rows) == 4
    make_submission(repo, "frank", 1, seed=4)
    assert record(repo, "frank", 24, "2026-12-05T10:40:00Z") == 0
    assert_rebuilt_alike(repo, 5)  # extended from the index the gates had read
    assert record(repo, "erin", 10, "2026-12-05T11:00:00Z") == 1
    assert index_of(repo)[0] is not None  # the rate limit records no attempt
    # a miner's own earlier head is no copy of anyone's
    shutil.rmtree(repo / "submissions" / "alice")
    make_submission(repo, "carol", 2, head=heads["carol"])
    ctx = context_for(repo, "carol", OFFICIAL, pr=11, head_sha="c" * 40)
    assert ctx.index is not None
    report = run_gates(Submission(repo, "submissions/carol/2", OFFICIAL), ctx)
    assert report.passed_gate(3), report.failed


@pytest.mark.slow
def test_an_index_that_does_not_match_is_not_used_and_the_next_record_mends_it(
        season, make_submission, caplog):
    from evaluator import attempts_index
    from evaluator.store import Store

    repo, features, heads = season
    path = repo / "leaderboard" / attempts_index.INDEX_FILE
    good = path.read_bytes()
    # another writer appended a line: the index no longer names the log, and is not used
    line = Store(repo).attempts()[0]
    Store(repo).record_attempt(type(line)(**{**line.__dict__, "pr": 12, "head_sha": "e" * 40}))
    assert index_of(repo)[0] is None
    assert "written for another state of attempts.jsonl" in caplog.text
    make_submission(repo, "erin", 1, seed=3)
    assert record(repo, "erin", 13, "2026-12-06T10:00:00Z") == 0
    assert_rebuilt_alike(repo, 5)  # extended from the index on disk, whose log is a prefix
    good = path.read_bytes()
    make_submission(repo, "alice", 1, head=lifted(heads["dave"], features, cosine=0.9))
    assert "PR #23 (dave" in gates(repo).failed.reason
    # damaged, for another basis, cut short: not used either
    for spoilt, why in ((good[:100] + bytes([good[100] ^ 1]) + good[101:], "it is damaged"),
                        (good[:12] + b"f" * 16 + good[28:], "another feature basis"),
                        (good[:40], "it is cut short")):
        path.write_bytes(spoilt)
        caplog.clear()
        assert index_of(repo)[0] is None and why in caplog.text
    # the next recorded attempt rebuilds it for every line
    make_submission(repo, "frank", 1, seed=4)
    assert record(repo, "frank", 14, "2026-12-06T10:00:00Z") == 0
    assert_rebuilt_alike(repo, 6)


def test_validate_refuses_an_index_whose_rows_do_not_describe_the_log(season):
    """The digests only say which log the index was written for; `leaderboard validate`
    rebuilds the rows from the log, so a wrong row is found (here: carol no original)."""
    from evaluator import attempts_index
    from evaluator.errors import LeaderboardError
    from evaluator.leaderboard import _check_attempts_index
    from evaluator.store import Store

    repo, _, _ = season
    _check_attempts_index(Store(repo, lenient=True), OFFICIAL)
    index, ctx = index_of(repo)
    rows = index.rows.copy()
    rows["flags"][1] = 0
    (repo / "leaderboard" / attempts_index.INDEX_FILE).write_bytes(
        attempts_index.encode(rows, index.log, OFFICIAL, ctx.basis))
    assert index_of(repo)[0] is not None  # the gates cannot tell: it names the log
    with pytest.raises(LeaderboardError, match=r"attempts.index row 2 does not describe .* delete"):
        _check_attempts_index(Store(repo, lenient=True), OFFICIAL)


def test_a_log_the_index_cannot_describe_gets_none(season):
    """An original whose line keeps no projection on the board's basis (recorded before it):
    no index; the gates read the log in full, which compares it as before."""
    from evaluator import attempts_index
    from evaluator.store import Store

    repo, _, heads = season
    line = Store(repo).attempts()[0]
    whole = fingerprints.encode(fingerprint(heads["bob"], N_MODELS), N_MODELS)
    Store(repo).record_attempt(type(line)(**{**line.__dict__, "pr": 12, "head_sha": "e" * 40,
                                             "fingerprint": whole, "seen": None}))
    assert attempts_index.update(repo / "leaderboard", OFFICIAL, index_of(repo)[1].basis) is False
    assert not (repo / "leaderboard" / attempts_index.INDEX_FILE).exists()


def test_a_head_with_nothing_on_the_basis_keeps_the_index(season, make_submission):
    """A head whose model rows are all alike passes (its role rows route) and is kept whole,
    with nothing on the basis: gate 3 finds a cosine of 0 with it, so the index keeps it as
    no original rather than giving up for the rest of the season."""
    repo, _, _ = season
    head = np.zeros(OFFICIAL.head_shape)
    head[N_MODELS:] = 0.1  # role rows only
    make_submission(repo, "grace", 1, head=head)
    assert record(repo, "grace", 31, "2026-12-07T10:00:00Z") == 0
    index, _ = index_of(repo)
    assert index is not None and len(index.rows) == 4 and index.rows["flags"][-1] == 0
    assert_rebuilt_alike(repo, 4)


def test_an_index_whose_rows_do_not_point_at_their_lines_is_not_used(season, caplog):
    """Rows sealed with the right digests but the wrong offsets (only someone who can push
    to main could write them): the gates notice the lines they read, and read the log."""
    from evaluator import attempts_index

    repo, _, _ = season
    index, ctx = index_of(repo)
    rows = index.rows.copy()
    rows["offset"] = rows["offset"][[1, 0, 2]]  # bob's row points at carol's line
    (repo / "leaderboard" / attempts_index.INDEX_FILE).write_bytes(
        attempts_index.encode(rows, index.log, OFFICIAL, ctx.basis))
    ctx = context_for(repo, "bob", OFFICIAL, pr=40)
    assert ctx.index is None and [a.miner for a in ctx.attempts] == ["bob", "carol", "dave"]
    assert "row 1 does not point at its line" in caplog.text


def test_without_a_pr_the_index_gives_the_lines_of_no_pr(season):
    """Run without --pr (a local check), the record step compares with the lines of no PR,
    as the whole log gives them; and --pr must be a real PR's number."""
    from evaluator import attempts_index
    from evaluator.cli import main
    from evaluator.records import Attempt
    from evaluator.store import Store

    repo, _, _ = season
    line = Store(repo).attempts()[0]
    Store(repo).record_attempt(Attempt(**{**line.__dict__, "pr": None, "head_sha": None}))
    attempts_index.update(repo / "leaderboard", OFFICIAL, index_of(repo)[1].basis)
    ctx = context_for(repo, "erin", OFFICIAL)
    assert ctx.index is not None and [(a.miner, a.pr) for a in ctx.attempts] == [("bob", None)]
    assert main(["gates", "--repo", str(repo), "--submission", "submissions/bob/1",
                 "--author", "bob", "--pr", "-1"]) == 2
