"""`tinyrouter dev serving`: the routing overhead of a served request, without the pool.

B sessions ask the server's batcher (`serve.batcher.RoutingBatcher`) for their decisions turn
after turn, on transcripts built from demo corpus questions, with no pool call: what is timed
is the encoder, the head, the queue and the batching, per decision and per request (p50, p95,
throughput), and the encoder's CPU time, which a loaded machine inflates less than the clock.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import threading
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from evaluator.commands.output import write_json_out
from evaluator.errors import UsageError
from evaluator.rules import OFFICIAL, ROLES
from evaluator.serve.allowance import LENGTH_RATIO

SHAPES = ("tiny", "qwen3-0.6b")


def add_serving(p: argparse.ArgumentParser) -> None:
    p.description = ("Times the routing overhead of served requests (the encoder and the head "
                     "through the server's batcher; no pool calls): B sessions at once for each "
                     "B, each deciding turn after turn on growing transcripts of demo corpus "
                     "questions and answers. Prints p50 and p95 per decision and per request "
                     "(every turn of its session) and requests per second.")
    p.add_argument("--shape", choices=SHAPES, default="tiny",
                   help="the tiny checkpoint, or a random model with Qwen3-0.6B's shape (built "
                        "offline; the tiny tokenizer)")
    p.add_argument("--batch-sizes", default="1,4,16", metavar="B,…",
                   help="sessions playing at once")
    p.add_argument("--requests", type=int, default=32, metavar="N",
                   help="sessions per batch size (in waves of B)")
    p.add_argument("--turns", type=int, default=OFFICIAL.max_turns, metavar="T",
                   help="decisions per session (the rules' turn cap)")
    p.add_argument("--output-chars", type=int, default=0, metavar="C",
                   help="each turn's output padded to C characters (0: the corpus answer as "
                        "the simulator gives it)")
    p.add_argument("--length-ratio", type=float, default=LENGTH_RATIO, metavar="R",
                   help="in one pass, the longest transcript over the shortest, at most (the "
                        "server's; a large R puts every queued turn in one pass)")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="torch device")
    p.add_argument("--threads", type=int, metavar="N",
                   help="CPU threads for torch (default: torch's choice, every core)")
    p.add_argument("--seed", type=int, default=0, help="seed of the model, head and questions")
    p.add_argument("--json", metavar="OUT", help="also write the numbers here (- for stdout)")
    p.set_defaults(func=run)


PARSERS = {"serving": add_serving}


def batch_sizes(text: str) -> list[int]:
    try:
        sizes = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        sizes = []
    if not sizes or min(sizes) < 1:
        raise UsageError(f"--batch-sizes wants positive whole numbers, e.g. 1,4,16; got {text!r}")
    return sizes


def sessions(rules: Any, n: int, turns: int, seed: int, output_chars: int) -> list[list[str]]:
    """n sessions' transcripts, turn by turn: corpus questions, with answers and plans as the
    earlier turns' outputs (shown as the loop shows them), models and roles drawn."""
    from evaluator.benchmarks.corpus import load_corpus
    from evaluator.loop import Turn, coordinator_transcript, truncate_output

    corpus = load_corpus(rules)
    rng = np.random.default_rng(seed)
    out = []
    for index in rng.choice(len(corpus), n, replace=n > len(corpus)):
        entry = corpus[int(index)]
        played: list[Turn] = []
        transcripts = []
        for _ in range(turns):
            transcripts.append(coordinator_transcript(entry.item.prompt, played))
            text = entry.right if rng.random() < 0.5 else entry.wrong
            if output_chars:
                text = (text + "\n") * (output_chars // (len(text) + 1) + 1)
                text = text[:output_chars]
            played.append(Turn(model=str(rng.choice(rules.pool_names)), role=str(rng.choice(ROLES)),
                               text=text, shown=truncate_output(text, rules)))
        out.append(transcripts)
    return out


def build_router(shape: str, device: str, seed: int, workdir: str) -> Any:
    """A Router on the tiny checkpoint, or on a random Qwen3-0.6B-shaped body with the tiny
    tokenizer (its ids are valid in the larger vocabulary)."""
    import torch
    from transformers import AutoTokenizer

    from evaluator.coordinator.encoder import (
        Encoder,
        competition_for_encoder,
        load_encoder,
        random_model,
    )
    from evaluator.coordinator.router import Router
    from evaluator.coordinator.tiny import make_tiny
    from evaluator.studies.forwards import QWEN3_0_6B

    path = make_tiny(workdir, seed=seed)
    if shape == "tiny":
        rules = competition_for_encoder(path, OFFICIAL)
        return Router(load_encoder(str(path), rules, device), rules)
    dtype = torch.bfloat16 if device.startswith("cuda") else torch.float32
    config = {**QWEN3_0_6B, "hidden_size": OFFICIAL.hidden_size,
              "num_hidden_layers": OFFICIAL.num_layers}
    tokenizer = AutoTokenizer.from_pretrained(path)
    return Router(Encoder(random_model(config, seed, dtype, device), tokenizer, OFFICIAL),
                  OFFICIAL)


def play_wave(batcher: Any, wave: Sequence[list[str]]) -> tuple[list[float], list[float]]:
    """Each session on its own thread, turn after turn; (per-request, per-decision) seconds."""
    per_request: list[float] = []
    per_decision: list[float] = []
    lock = threading.Lock()

    def session(transcripts: list[str]) -> None:
        spent = []
        for text in transcripts:
            started = time.perf_counter()
            batcher.decide([text])
            spent.append(time.perf_counter() - started)
        with lock:
            per_request.append(sum(spent))
            per_decision.extend(spent)

    threads = [threading.Thread(target=session, args=(s,)) for s in wave]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return per_request, per_decision


def percentile(values: Sequence[float], q: float) -> float:
    return float(np.percentile(np.asarray(values) * 1000, q))


def measure(router: Any, theta: np.ndarray, played: list[list[str]], size: int,
            device: str, length_ratio: float = LENGTH_RATIO) -> dict[str, Any]:
    """One batch size: every session in waves of `size`, timed."""
    import torch

    from evaluator.serve.batcher import RoutingBatcher

    decide, cpu = router.bind(theta), {}

    def timed(texts: list[str]) -> Any:  # on the batcher's thread: the encoder's CPU time
        started = time.process_time()
        decisions = decide(texts)
        share = (time.process_time() - started) / len(texts)
        cpu.update(dict.fromkeys(texts, share))  # each transcript's share of its pass
        return decisions

    batcher = RoutingBatcher(timed, wait=0.0, length_ratio=length_ratio)
    try:
        play_wave(batcher, played[:size])  # warm-up: allocator, kernels, the tokenizer
        batcher.passes = batcher.decided = 0
        cpu.clear()
        per_request, per_decision = [], []
        sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
        sync()
        started = time.perf_counter()
        for first in range(0, len(played), size):
            requests, decisions = play_wave(batcher, played[first:first + size])
            per_request += requests
            per_decision += decisions
        sync()
        wall = time.perf_counter() - started
    finally:
        batcher.close()
    return {"batch_size": size, "requests": len(per_request),
            "request_ms_p50": percentile(per_request, 50),
            "request_ms_p95": percentile(per_request, 95),
            "decision_ms_p50": percentile(per_decision, 50),
            "decision_ms_p95": percentile(per_decision, 95),
            "requests_per_s": len(per_request) / wall,
            "decisions_per_s": len(per_decision) / wall,
            "transcripts_per_pass": batcher.decided / max(1, batcher.passes),
            "cpu_ms_per_decision": 1000 * statistics.mean(cpu[text] for s in played for text in s),
            "request_cpu_ms_p50": percentile([sum(cpu[text] for text in s) for s in played], 50)}


def run(args: argparse.Namespace) -> int:
    import torch

    sizes = batch_sizes(args.batch_sizes)
    for name in ("requests", "turns"):
        if getattr(args, name) < 1:
            raise UsageError(f"--{name.replace('_', '-')} must be at least 1")
    if args.output_chars < 0:
        raise UsageError("--output-chars must not be negative")
    if args.length_ratio < 1:
        raise UsageError("--length-ratio must be at least 1")
    if args.device == "cuda" and not torch.cuda.is_available():
        raise UsageError("--device cuda: torch sees no CUDA device here")
    if args.threads:
        torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as workdir:
        router = build_router(args.shape, args.device, args.seed, workdir)
    rules = router.rules
    rng = np.random.default_rng(args.seed)
    theta = np.concatenate([rng.normal(0, 1, rules.n_head_params),
                            np.ones(rules.svf_scale_count)]).astype(np.float32)
    played = sessions(rules, args.requests, args.turns, args.seed, args.output_chars)
    tokens = [len(ids) for ids in router.encoder.head_ids([s[-1] for s in played])]
    load_before = os.getloadavg()[0]
    rows = [measure(router, theta, played, size, args.device, args.length_ratio)
            for size in sizes]
    report = {"shape": args.shape, "device": args.device, "threads": torch.get_num_threads(),
              "turns": args.turns, "last_turn_tokens_median": statistics.median(tokens),
              "length_ratio": args.length_ratio,
              "load_average": [load_before, os.getloadavg()[0]], "rows": rows}
    print(f"{args.shape} on {args.device} ({report['threads']} threads), {args.turns} turns a "
          f"request, last turn's head input {report['last_turn_tokens_median']:.0f} tokens "
          f"(median); load average {load_before:.1f} before, {os.getloadavg()[0]:.1f} after")
    print(f"{'B':>4} {'request p50':>12} {'p95':>9} {'decision p50':>13} {'p95':>9} "
          f"{'requests/s':>11} {'decisions/s':>12} {'per pass':>9} {'CPU/decision':>13} "
          f"{'CPU/request p50':>16}")
    for row in rows:
        print(f"{row['batch_size']:>4} {row['request_ms_p50']:>9.1f} ms {row['request_ms_p95']:>6.1f} ms "
              f"{row['decision_ms_p50']:>10.1f} ms {row['decision_ms_p95']:>6.1f} ms "
              f"{row['requests_per_s']:>11.2f} {row['decisions_per_s']:>12.2f} "
              f"{row['transcripts_per_pass']:>9.2f} {row['cpu_ms_per_decision']:>10.1f} ms "
              f"{row['request_cpu_ms_p50']:>13.1f} ms")
    write_json_out(args.json, report)
    return 0
