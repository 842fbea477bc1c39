"""`tinyrouter serve`: the king (or any head) behind an OpenAI-compatible chat-completions API."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from evaluator.commands.evaluate import PRIVATE_DIR_ENV
from evaluator.errors import UsageError
from evaluator.pool.client import BASE_URL_ENV, DEFAULT_BASE_URL
from evaluator.serve.allowance import (
    DEFAULT_HOST,
    DEFAULT_PORT,
    MAX_REQUEST_BYTES,
    MAX_SESSIONS,
    REQUEST_TIMEOUT_SECONDS,
    REQUESTS_PER_MINUTE,
    SPEND_USD_PER_HOUR,
    TOKEN_ENV,
    ServeLimits,
)

LEDGER_FILE = "serve-ledger.jsonl"
DEMO_COMMAND = "tinyrouter serve --king ."  # in the demo's repo/, where its practise script ends


def add_serve(p: argparse.ArgumentParser) -> None:
    p.description = ("Serve a head behind OpenAI's chat-completions API (POST /v1/chat/completions, "
                     "streamed or not; GET /v1/models; GET /health). Each request plays the "
                     "evaluator's loop against the pool: the head picks model and role every "
                     "turn; the reply is the latest Worker output, and the response says which "
                     "models and roles answered, the turns and the cost. Binding beyond "
                     f"127.0.0.1 needs a bearer token in ${TOKEN_ENV}.")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--king", metavar="REPO", type=Path,
                       help="serve the reigning king of this checkout of the competition, its "
                            "weights checked against the board (the default, with REPO .)")
    which.add_argument("--head", metavar="PATH",
                       help="serve a training run (experiments/<run>), a submission folder or "
                            "a weights file instead")
    p.add_argument("--encoder", help="hub id or local folder (default: a run's own, else the "
                                     "rules' encoder)")
    p.add_argument("--device", choices=("cpu", "cuda"),
                   help="torch device (default: cuda when there is one)")
    p.add_argument("--threads", type=int, metavar="N", help="CPU threads for torch")
    p.add_argument("--host", default=DEFAULT_HOST,
                   help=f"address to bind; beyond loopback ${TOKEN_ENV} must be set")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help="port (0: a free one)")
    p.add_argument("--pool-url", help=f"the pool's base URL (default ${BASE_URL_ENV}, else "
                                      f"{DEFAULT_BASE_URL} with $OPENROUTER_API_KEY)")
    p.add_argument("--ledger", type=Path, help="the cost ledger every paid call is appended to "
                   f"(default: {LEDGER_FILE} in ${PRIVATE_DIR_ENV}, else in "
                   "~/.local/state/tinyrouter)")
    p.add_argument("--log-prompts", action="store_true",
                   help="put each request's prompt in its access log line (off: lengths only)")
    p.add_argument("--requests-per-minute", type=int, default=REQUESTS_PER_MINUTE, metavar="N",
                   help="requests a client (a remote address) may start a minute")
    p.add_argument("--spend-per-hour", type=float, default=SPEND_USD_PER_HOUR, metavar="USD",
                   help="what a client's requests may bill the pool in an hour")
    p.add_argument("--max-request-bytes", type=int, default=MAX_REQUEST_BYTES, metavar="N",
                   help="largest request body taken")
    p.add_argument("--timeout", type=float, default=REQUEST_TIMEOUT_SECONDS, metavar="S",
                   help="seconds a request may take, every turn and retry included")
    p.add_argument("--max-sessions", type=int, default=MAX_SESSIONS, metavar="N",
                   help="requests played at once (more are told to retry)")
    p.set_defaults(func=run)


PARSERS = {"serve": add_serve}


def demo_hint(practise_script: Path, repo: Path) -> list[str]:
    """What `tinyrouter demo` prints to serve its king against its simulator (if it has one)."""
    from evaluator.store import Store

    if Store(repo).king() is None:
        return []
    return [f"Serve the king behind an OpenAI-compatible API, against the simulator: "
            f". {practise_script} && {DEMO_COMMAND}",
            f"  then point any OpenAI client at http://{DEFAULT_HOST}:{DEFAULT_PORT}/v1 (the "
            "Reference guide's \"Serving the king\")"]


def default_ledger() -> Path:
    base = os.environ.get(PRIVATE_DIR_ENV) or Path(
        os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state", "tinyrouter")
    return Path(base, LEDGER_FILE)


def limits_from(args: argparse.Namespace) -> ServeLimits:
    try:
        return ServeLimits(requests_per_minute=args.requests_per_minute,
                           spend_usd_per_hour=args.spend_per_hour,
                           max_request_bytes=args.max_request_bytes,
                           request_timeout=args.timeout, max_sessions=args.max_sessions)
    except ValueError as exc:
        raise UsageError(str(exc)) from exc


def run(args: argparse.Namespace) -> int:
    import asyncio

    from evaluator import vault
    from evaluator.coordinator.router import load_router
    from evaluator.pool.client import OpenRouterClient
    from evaluator.pool.ledger import Ledger
    from evaluator.serve import ChatServer, head_at, king_of
    from evaluator.serve.endpoint import check_binding

    rules, limits = args.rules, limits_from(args)
    token = vault.take(TOKEN_ENV) or None
    check_binding(args.host, token)  # before minutes of loading
    served = head_at(args.head, rules) if args.head else king_of(args.king or Path("."), rules)
    asyncio.run(OpenRouterClient(rules, base_url=args.pool_url).aclose())  # a missing key, now
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    device = args.device
    if device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise UsageError("--device cuda: torch sees no CUDA device here; use --device cpu")
    router = load_router(args.encoder or served.encoder or rules.encoder_id, rules, device)
    ledger = Ledger(args.ledger or default_ledger())
    try:
        server = ChatServer(served, router.bind(served.head.theta), rules, args.pool_url, ledger,
                            limits, args.host, args.port, token, args.log_prompts)
    except OSError as exc:
        raise UsageError(f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}; "
                         "pick another --port") from exc
    pool = args.pool_url or os.environ.get(BASE_URL_ENV) or DEFAULT_BASE_URL
    print(f"serving {served.model_id} ({served.head.label}, weights "
          f"{served.weights_sha256[:12]}…) on {server.base_url}", flush=True)
    print(f"  pool {pool}; ledger {ledger.path}; "
          f"{'bearer token required' if token else 'no token (loopback only)'}; "
          f"on {router.encoder.device}; Ctrl-C stops", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0
