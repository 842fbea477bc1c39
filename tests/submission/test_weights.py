"""weights.safetensors read as hostile data, and the θ layout."""

import json
import pickle
import struct

import numpy as np
import pytest

from evaluator.errors import SubmissionError
from evaluator.rules import OFFICIAL
from evaluator.submission import read_weights, tensors_from_theta, theta_from_tensors

HEAD_BYTES = 4 * 6 * 1024
SCALE_BYTES = 4 * 7168


def safetensors(header, data: bytes) -> bytes:
    raw = header if isinstance(header, bytes) else json.dumps(header).encode()
    return struct.pack("<Q", len(raw)) + raw + data


def header(head_dtype="F32", head_shape=(6, 1024), scales_shape=(7168,), **extra):
    head_n = 4 * int(np.prod(head_shape))
    scale_n = 4 * int(np.prod(scales_shape))
    h = {"head": {"dtype": head_dtype, "shape": list(head_shape), "data_offsets": [0, head_n]},
         "svf_scales": {"dtype": "F32", "shape": list(scales_shape),
                        "data_offsets": [head_n, head_n + scale_n]}}
    h.update(extra)
    return h


GOOD_DATA = b"\x00" * (HEAD_BYTES + SCALE_BYTES)

HOSTILE_WEIGHTS = [
    # not a safetensors file at all
    ("pickle", pickle.dumps({"head": [1.0]}), "header"),
    ("garbage", b"\x89PNG\r\n\x1a\n" + b"x" * 200, "header"),
    ("empty", b"", "too short"),
    ("huge header length", struct.pack("<Q", 2**62) + b"{}", "at most"),
    ("header past end", struct.pack("<Q", 900) + b"{}", "past the end"),
    ("header not json", safetensors(b"{not json", GOOD_DATA), "not valid JSON"),
    ("header is a list", safetensors([1, 2], GOOD_DATA), "not a JSON object"),
    ("duplicate keys", safetensors(b'{"head": {}, "head": {}}', GOOD_DATA), "repeats"),
    # wrong tensors
    ("missing scales", safetensors({"head": header()["head"]}, GOOD_DATA[:HEAD_BYTES]), "exactly"),
    ("extra tensor", safetensors(header(extra={"dtype": "F32", "shape": [1],
                                               "data_offsets": [57344, 57348]}),
                                 GOOD_DATA + b"\0" * 4), "exactly"),
    ("renamed tensor", safetensors({"Head": header()["head"],
                                    "svf_scales": header()["svf_scales"]}, GOOD_DATA), "exactly"),
    ("float16 head", safetensors(header(head_dtype="F16"), GOOD_DATA), "float32"),
    ("transposed head", safetensors(header(head_shape=(1024, 6)), GOOD_DATA), "shape"),
    ("float shape", safetensors({"head": dict(header()["head"], shape=[6.0, 1024.0]),
                                 "svf_scales": header()["svf_scales"]}, GOOD_DATA), "shape"),
    ("short scales", safetensors(header(scales_shape=(1024,)), GOOD_DATA[:HEAD_BYTES + 4096]),
     "shape"),
    # bad offsets and sizes
    ("truncated data", safetensors(header(), GOOD_DATA[:-8]), "truncated"),
    ("padded data", safetensors(header(), GOOD_DATA + b"\0" * 64), "truncated or padded"),
    ("overlapping offsets", safetensors(
        {"head": {"dtype": "F32", "shape": [6, 1024], "data_offsets": [0, HEAD_BYTES]},
         "svf_scales": {"dtype": "F32", "shape": [7168], "data_offsets": [4, 4 + SCALE_BYTES]}},
        GOOD_DATA), "overlap"),
    ("offsets not ints", safetensors(
        {"head": {"dtype": "F32", "shape": [6, 1024], "data_offsets": [0.0, HEAD_BYTES]},
         "svf_scales": header()["svf_scales"]}, GOOD_DATA), "malformed"),
    ("extra entry field", safetensors(
        {"head": dict(header()["head"], shape2=[1]), "svf_scales": header()["svf_scales"]},
        GOOD_DATA), "exactly dtype"),
    ("bad metadata", safetensors(header(__metadata__={"a": 1}), GOOD_DATA), "__metadata__"),
]


@pytest.mark.parametrize(("case", "blob", "message"), HOSTILE_WEIGHTS,
                         ids=[c[0] for c in HOSTILE_WEIGHTS])
def test_hostile_weights_are_refused_with_a_reason(tmp_path, case, blob, message):
    path = tmp_path / "weights.safetensors"
    path.write_bytes(blob)
    with pytest.raises(SubmissionError, match=message):
        read_weights(path, rules=OFFICIAL)


def test_oversize_weights_file_is_refused_before_reading(tmp_path):
    path = tmp_path / "weights.safetensors"
    path.write_bytes(b"\0" * (OFFICIAL.max_weights_bytes + 1))
    with pytest.raises(SubmissionError, match="at most"):
        read_weights(path, rules=OFFICIAL)


def test_handmade_file_with_metadata_loads(tmp_path):
    path = tmp_path / "weights.safetensors"
    data = np.arange(6 * 1024, dtype="<f4").tobytes() + np.ones(7168, "<f4").tobytes()
    path.write_bytes(safetensors(header(__metadata__={"format": "pt"}), data))
    head, scales = read_weights(path, rules=OFFICIAL)
    assert head[1, 0] == 1024 and scales.sum() == 7168


def test_theta_round_trip_keeps_the_spec_layout():
    theta = np.arange(OFFICIAL.n_params, dtype=np.float32)
    head, scales = tensors_from_theta(theta, rules=OFFICIAL)
    assert head.shape == (6, 1024) and head[0, 1] == 1 and head[1, 0] == 1024
    assert scales[0] == 6 * 1024
    assert np.array_equal(theta_from_tensors(head, scales), theta)
    with pytest.raises(SubmissionError, match="13312"):
        tensors_from_theta(theta[:-1], rules=OFFICIAL)
