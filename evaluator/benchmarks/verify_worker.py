"""The math-verify worker: run as a script by `evaluator.benchmarks.verifier`, never imported by it.

It imports only the standard library and math-verify (so it runs however the package is
installed), answers `{"ready": true}` once the parsers are loaded, then reads one JSON line
`[answer, reference]` at a time and replies one JSON line: `{"same": true | false | null}`
(null: a side is not math), or `{"failed": reason}`.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from typing import IO, Any


def same(answer: str, reference: str) -> bool | None:
    """math-verify's judgement of two LaTeX answers in this process, with no time limit."""
    from math_verify import LatexExtractionConfig, parse, verify

    config = [LatexExtractionConfig()]
    gold = parse(f"${reference}$", extraction_config=config, parsing_timeout=None)
    target = parse(f"${answer}$", extraction_config=config, parsing_timeout=None)
    if not gold or not target:
        return None
    return verify(gold, target, timeout_seconds=None)


def send(pipe: IO[bytes], message: Any) -> None:
    pipe.write(json.dumps(message).encode() + b"\n")
    pipe.flush()


def serve() -> None:
    """Answer request lines on stdin until it closes; anything else printed goes to stderr."""
    replies = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    try:
        import math_verify  # noqa: F401  (sympy and the parsers: the start's whole cost)
    except ModuleNotFoundError as exc:
        send(replies, {"missing": exc.name})
        return
    logging.getLogger("math_verify").setLevel(logging.ERROR)  # its timeout is off: ours holds
    send(replies, {"ready": True})
    for line in sys.stdin.buffer:
        answer, reference = json.loads(line)
        try:
            send(replies, {"same": same(answer, reference)})
        except Exception as exc:  # math-verify may fail on odd input: that pair is wrong
            send(replies, {"failed": f"{type(exc).__name__}: {exc}"[:200]})


if __name__ == "__main__":
    serve()
