"""Agreement of the graders with another project's grading cases (beside the repo, in ../shared).

Cases tagged aime or mmlu_pro are outside this competition's rules; the `verdict`
cases belong to the Verifier parser, tested with the session.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evaluator.benchmarks import grade_batch

VECTORS = (Path(__file__).resolve().parents[2].parent / "shared" / "data"
           / "peer-grader-vectors" / "grader_vectors.json")
OUT_OF_SCOPE = {"aime", "mmlu_pro"}
BENCHMARK_OF = {"math": "math500", "choice": "mmlu", "code": "livecodebench"}
REQUIRED_AGREEMENT = 0.97

pytestmark = pytest.mark.skipif(not VECTORS.exists(), reason=f"{VECTORS} is not here")


def cases(key: str) -> list[dict]:
    return [c for c in json.loads(VECTORS.read_text())[key]
            if c.get("benchmark") not in OUT_OF_SCOPE]


def as_case(key: str, case: dict) -> dict:
    reference = case["tests"] if key == "code" else case["reference"]
    return {"benchmark": BENCHMARK_OF[key], "response": case["response"], "reference": reference}


@pytest.mark.parametrize("key", sorted(BENCHMARK_OF))
def test_agreement_with_the_peer_grading_cases(key, record_property):
    selected = cases(key)
    grades = grade_batch([as_case(key, c) for c in selected])
    disagreements = [(c["response"][:80], c.get("reference"), c["expected"])
                     for c, g in zip(selected, grades, strict=True)
                     if g.correct is not c["expected"]]
    agreement = 1 - len(disagreements) / len(selected)
    record_property(f"{key}_agreement", f"{agreement:.4f} over {len(selected)} cases")
    print(f"{key}: {agreement:.2%} agreement over {len(selected)} cases")
    assert agreement >= REQUIRED_AGREEMENT, disagreements
