"""`tinyrouter pool simulate` serves the loopback pool simulator; `pool check` calls the pool."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from evaluator.benchmarks.corpus import load_corpus, load_personas, load_private_corpus, read_corpus
from evaluator.commands.output import write_json_out
from evaluator.errors import PoolError, UsageError
from evaluator.pool.client import BASE_URL_ENV
from evaluator.pool.simulator import FAULTS, Simulator, SimulatorServer, check_fault_rates
from evaluator.rules import Competition


def add_pool(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="pool_command", metavar="ACTION", required=True)
    simulate = actions.add_parser(
        "simulate", help="serve an OpenAI-compatible pool simulator on 127.0.0.1: personas named "
                         "like the pool models answer corpus items right or wrong by their "
                         "skills, deterministically from the seed")
    simulate.add_argument("--corpus", metavar="FILE", action="append", type=Path,
                          help="corpus JSONL (Item fields + responses.right/.wrong); "
                               "repeatable; default: the bundled demo corpus and its private "
                               "items (the demo's audit and live questions)")
    simulate.add_argument("--personas", metavar="FILE", type=Path,
                          help="persona skills JSON; default: the bundled personas")
    simulate.add_argument("--port", type=int, default=0, help="port (0: a free one)")
    simulate.add_argument("--seed", type=int, default=0,
                          help="seed of the right/wrong and fault draws")
    simulate.add_argument("--fault", metavar="KIND=RATE", action="append",
                          help="answer this share of requests with a fault, drawn from the "
                               "seed and the request; repeatable; kinds: " + ", ".join(FAULTS))
    simulate.set_defaults(func=run_simulate)
    check = actions.add_parser(
        "check", help="one cheap call per pool model through the real client: latency, tokens, "
                      "cost, finish reason, reasoning; exit 1 naming what is wrong (key, "
                      "credit, slug, a blocked request)")
    check.add_argument("--pool-url", help=f"the pool's base URL (default ${BASE_URL_ENV} or "
                                          "OpenRouter); the key comes from $OPENROUTER_API_KEY")
    check.add_argument("--json", dest="json_out", metavar="OUT",
                       help="also write the checks as JSON (- for standard output)")
    check.set_defaults(func=run_check)


PARSERS = {"pool": add_pool}


def load_inputs(corpus_files: list[Path] | None, personas_file: Path | None,
                rules: Competition) -> tuple[list, dict]:
    corpus = ([entry for path in corpus_files for entry in read_corpus(path)] if corpus_files
              else load_corpus(rules) + load_private_corpus(rules))
    if not personas_file:
        return corpus, load_personas(rules)
    try:
        personas = json.loads(personas_file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise PoolError(f"cannot read personas from {personas_file}: {exc}") from exc
    return corpus, personas


def parse_fault_rates(options: list[str]) -> dict[str, float]:
    """`["500=0.05", "hang=0.01"]` → `{"500": 0.05, "hang": 0.01}`, checked."""
    rates: dict[str, float] = {}
    for option in options:
        kind, _, rate = option.partition("=")
        try:
            rates[kind] = float(rate)
        except ValueError:
            raise UsageError(f"--fault wants KIND=RATE, e.g. 500=0.05; got {option!r}") from None
    try:
        return check_fault_rates(rates)
    except ValueError as exc:
        raise UsageError(f"--fault: {exc}") from exc


def run_check(args: argparse.Namespace) -> int:
    import asyncio

    from evaluator.pool.check import check_pool, reasoning_note

    checks = asyncio.run(check_pool(args.rules, args.pool_url))
    for c in checks:
        if c.ok:
            print(f"✓ {c.model:<22} {c.slug}: {c.seconds:.2f} s, {c.prompt_tokens}+"
                  f"{c.completion_tokens} tokens, ${c.cost_usd:.6f}, finish {c.finish_reason}; "
                  f"{reasoning_note(c, args.rules)}")
        else:
            print(f"✗ {c.model:<22} {c.slug}: {c.problem}")
    total = sum(c.cost_usd or 0.0 for c in checks)
    failed = [c for c in checks if not c.ok]
    print(f"{len(checks) - len(failed)} of {len(checks)} pool models answered; the check cost "
          f"${total:.6f}")
    write_json_out(args.json_out, [c.to_dict() for c in checks])
    return 1 if failed else 0


def run_simulate(args: argparse.Namespace) -> int:
    rates = parse_fault_rates(args.fault or [])
    corpus, personas = load_inputs(args.corpus, args.personas, args.rules)
    simulator = Simulator(corpus, personas, args.rules, seed=args.seed, fault_rates=rates)
    try:
        server = SimulatorServer(simulator, port=args.port)
    except OSError as exc:
        raise PoolError(f"cannot listen on 127.0.0.1:{args.port}: {exc.strerror or exc}") from exc
    faults = ", ".join(f"{kind} {rate:g}" for kind, rate in sorted(rates.items())) or "none"
    print(f"pool simulator: {len(corpus)} items, personas "
          f"{', '.join(sorted(simulator.skills))}, seed {args.seed}, fault rates: {faults}")
    print(f"serving on {server.base_url}  (export {BASE_URL_ENV}={server.base_url}); "
          "Ctrl-C stops", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0
