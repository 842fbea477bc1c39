"""A submission folder: written whole or not at all, read back exactly."""

import numpy as np
import pytest

from evaluator.errors import SubmissionError
from evaluator.rules import OFFICIAL
from evaluator.submission import load_receipt, read_weights, sha256_file


def test_written_submission_reads_back(repo, make_submission):
    folder = make_submission(repo, "alice", 1, seed=3)
    head, scales = read_weights(folder / "weights.safetensors", rules=OFFICIAL)
    receipt = load_receipt(folder / "receipt.json", rules=OFFICIAL)
    assert receipt.miner == "alice" and receipt.n_params == OFFICIAL.n_params
    assert receipt.weights_sha256 == sha256_file(folder / "weights.safetensors")
    assert head.dtype == np.float32 and scales.shape == (7168,)


def test_write_submission_leaves_nothing_on_failure(repo, make_submission):
    make_submission(repo, "alice", 1)
    with pytest.raises(SubmissionError, match="already exists"):
        make_submission(repo, "alice", 1)
    with pytest.raises(SubmissionError, match="login"):
        make_submission(repo, "../evil", 1)
    with pytest.raises(SubmissionError):
        make_submission(repo, "alice", 2, created_at="yesterday")
    assert sorted(p.name for p in (repo / "submissions" / "alice").iterdir()) == ["1"]
