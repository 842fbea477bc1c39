"""A submission: its folder, weights.safetensors and receipt.json.

Packing a training run into one is evaluator.train.pack.
"""

from evaluator.submission.folder import Submission, write_submission
from evaluator.submission.receipt import Receipt, load_receipt, parse_receipt
from evaluator.submission.weights import (
    read_theta,
    read_weights,
    sha256_file,
    tensors_from_theta,
    theta_from_tensors,
    write_weights,
)

__all__ = [
    "Receipt",
    "Submission",
    "load_receipt",
    "parse_receipt",
    "read_theta",
    "read_weights",
    "sha256_file",
    "tensors_from_theta",
    "theta_from_tensors",
    "write_submission",
    "write_weights",
]
