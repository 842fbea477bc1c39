"""A loopback OpenAI-compatible pool for tests and the demo: personas with skills, no network.

Each persona is named like a pool model and has a probability of being right per benchmark
and item category. For a corpus item the Worker answers with the item's right or subtly wrong
response, drawn deterministically from (model, item, role, turn, seed); a Thinker plan earlier
in the transcript raises the chance; a Verifier judges the latest Worker output, more
accurately the stronger the persona.

Every failure the client's policy names can be played (FAULTS): queued with `inject`, or drawn
at `fault_rates` from the seed, the request and how often that request was seen, so a run
with the same seed meets the same faults and a retried request can recover.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from evaluator.benchmarks.corpus import load_corpus, load_personas, load_private_corpus
from evaluator.loop import THINKER, TURN_HEADER_RE, VERIFIER, WORKER
from evaluator.rules import ROLES, Competition

PLAN_GAIN = 0.5  # share of the Worker's remaining error a perfect Thinker's plan removes
UNKNOWN_SKILL = 0.5
CHARS_PER_TOKEN = 4
POLL_SECONDS = 0.02  # how soon stop() returns
CONTEXT_LENGTH = 262_144  # the simulator's own window, listed on /models; it never truncates
CREATED = 1_767_225_600  # a fixed /models timestamp, so listings are deterministic
# the reasoning tokens a persona reports for an effort, counted within its completion tokens
REASONING_TOKENS = {"minimal": 4, "low": 8, "medium": 32, "high": 128}
HANG_SECONDS = 600.0  # a hung request holds its connection this long, or until stop()

# The faults, by name: what the response is.
FAULTS = {
    "429": "rate limited, with Retry-After",
    "500": "server error", "502": "bad gateway", "503": "no provider available, with Retry-After",
    "400": "bad request", "401": "key refused", "402": "out of credit (no metadata)",
    "402-in-flight": "in-flight budget full, with metadata and Retry-After",
    "403": "key may not use the model", "403-moderation": "input flagged by moderation",
    "404": "no such model",
    "error-body": "HTTP 200 carrying an error object",
    "finish-error": "HTTP 200, finish_reason error, partial text, billed",
    "finish-length": "HTTP 200, finish_reason length, content null, billed",
    "finish-content-filter": "HTTP 200, finish_reason content_filter, content null, billed",
    "empty": "HTTP 200 with no choices, not billed",
    "malformed": "HTTP 200 with half a JSON body",
    "usage-overflow": "HTTP 200 whose prompt_tokens is infinite (as 1e400 parses)",
    "usage-negative": "HTTP 200 with a negative completion_tokens",
    "cost-nan": "HTTP 200 whose cost is NaN",
    "slow": "the answer after slow_seconds", "hang": "no answer until the client gives up",
    "drop": "the connection closed without a response",
}
IN_FLIGHT_METADATA = {"reason": "in_flight_budget_exhausted",
                      "limit_source": "openrouter_in_flight_budget",
                      "remedy_hint": "Retry after your in-flight requests settle."}
GENERATION_ERROR = {"code": 502, "message": "Provider disconnected mid-stream",
                    "metadata": {"error_type": "provider_unavailable"}}

PLANS = {
    "math500": "Plan: restate what is asked, pick the relation that links the given quantities, "
               "simplify step by step, and check the result against the conditions before "
               "committing to it.",
    "mmlu": "Plan: recall the key fact the question tests, rule out each option that "
            "contradicts it, and compare the remaining options on the exact wording.",
    "livecodebench": "Plan: read the input format carefully, choose a direct algorithm within "
                     "the limits, handle empty and boundary inputs, and print exactly the "
                     "required output.",
}
DEFAULT_PLAN = "Plan: break the problem into small steps and check each step before moving on."
NO_WORK = "There is no solution in the transcript to check yet.\nVERDICT: REVISE"
JUDGED = {True: "The latest solution checks out against the question.\nVERDICT: ACCEPT",
          False: "The latest solution does not hold up; rework it.\nVERDICT: REVISE"}
UNKNOWN_ITEM = "I do not recognise this question."
_ROLE_RE = re.compile(rf"\byou are the ({'|'.join(ROLES)})\b", re.IGNORECASE)


def uniform(*parts: object) -> float:
    """A deterministic draw in [0, 1) from its parts."""
    digest = hashlib.sha256("|".join(map(str, parts)).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2.0**64


class Simulator:
    """Answers chat completion requests from a corpus and persona skills."""

    def __init__(self, corpus: Iterable[Any], personas: dict[str, Any], rules: Competition,
                 seed: int = 0, retry_after: float = 1.0,
                 slow_seconds: float = 5.0, hang_seconds: float = HANG_SECONDS,
                 fault_rates: Mapping[str, float] | None = None):
        self.entries = list(corpus)  # CorpusItems: .item, .right, .wrong
        self.skills = personas.get("personas", personas)
        self.seed = seed
        self.rules = rules
        self.retry_after = retry_after
        self.slow_seconds = slow_seconds
        self.hang_seconds = hang_seconds
        self.fault_rates = check_fault_rates(fault_rates or {})
        self.requests = 0
        self._faults: list[str] = []
        self._seen: dict[str, int] = {}
        self._lock = threading.Lock()
        self._by_line: dict[str, list[Any]] = {}
        for entry in self.entries:
            lines = entry.item.prompt.strip().splitlines()
            if lines:  # an empty prompt would match every request
                self._by_line.setdefault(lines[0].strip(), []).append(entry)
        self._models = {m.slug: m.name for m in rules.pool} | {m.name: m.name for m in rules.pool}

    def inject(self, *faults: str) -> None:
        """Queue faults; each following request consumes one (see FAULTS)."""
        _check_known(faults)
        with self._lock:
            self._faults.extend(faults)

    def next_fault(self, raw: bytes = b"") -> str | None:
        """The queued fault, else one drawn at the fault rates for this request's n-th sight."""
        key = hashlib.sha256(raw).hexdigest()
        with self._lock:
            self.requests += 1
            if self._faults:
                return self._faults.pop(0)
            seen = self._seen[key] = self._seen.get(key, 0) + 1
        return self.draw_fault(key, seen)

    def draw_fault(self, key: str, seen: int) -> str | None:
        draw, edge = uniform(self.seed, "fault", key, seen), 0.0
        for fault, rate in sorted(self.fault_rates.items()):
            edge += rate
            if draw < edge:
                return fault
        return None

    # answering ---------------------------------------------------------------------------

    def skill(self, model: str, benchmark: str, category: str) -> float:
        by_category = self.skills.get(model, {}).get(benchmark, {})
        if category in by_category:
            return float(by_category[category])
        values = [float(v) for v in by_category.values()]
        return sum(values) / len(values) if values else UNKNOWN_SKILL

    def find(self, text: str) -> Any | None:
        """The corpus entry whose prompt the text contains (the longest, if several)."""
        found = [entry for line in text.splitlines()
                 for entry in self._by_line.get(line.strip(), ())
                 if entry.item.prompt.strip() in text]
        return max(found, key=lambda e: len(e.item.prompt), default=None)

    def answer(self, model: str, messages: list[dict]) -> str:
        """The persona's reply to a conversation in the loop's message format."""
        system = " ".join(str(m.get("content", "")) for m in messages if m.get("role") == "system")
        user = str(next((m.get("content", "") for m in reversed(messages)
                         if m.get("role") == "user"), ""))
        named = _ROLE_RE.search(system)
        role = named.group(1).capitalize() if named else WORKER
        query, turns = split_transcript(user)
        entry = self.find(query)
        if entry is None:
            return UNKNOWN_ITEM
        turn = len(turns) + 1
        item = entry.item
        if role == THINKER:
            return PLANS.get(item.benchmark, DEFAULT_PLAN)
        if role == VERIFIER:
            return self._verdict(model, entry, turns, turn)
        plans = [self.skill(m, item.benchmark, item.category) for r, m, _ in turns if r == THINKER]
        return entry.right if self.worker_right(model, item, turn, plans) else entry.wrong

    def worker_right(self, model: str, item: Any, turn: int = 1,
                     plans: Sequence[float] = ()) -> bool:
        """Whether the persona's Worker answer to the item at this turn is right; `plans` are
        the skills of the Thinkers that planned before it (the best one helps)."""
        p = self.skill(model, item.benchmark, item.category)
        if plans:
            p += (1 - p) * PLAN_GAIN * max(plans)
        return uniform(self.seed, model, item.benchmark, item.id, WORKER, turn) < p

    def _verdict(self, model: str, entry: Any, turns: list[tuple[str, str, str]],
                 turn: int) -> str:
        work = [body for role, _, body in turns if role == WORKER]
        if not work:
            return NO_WORK
        is_right = work[-1].strip() == entry.right.strip()
        accuracy = 0.5 + 0.5 * self.skill(model, entry.item.benchmark, entry.item.category)
        honest = uniform(self.seed, model, entry.item.benchmark, entry.item.id, VERIFIER,
                         turn) < accuracy
        return JUDGED[is_right if honest else not is_right]

    def respond(self, raw: bytes, fault: str | None) -> tuple[int, dict[str, Any], dict[str, str]]:
        """(status, JSON, headers) for a request body under a fault (None: a plain answer)."""
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        if fault in STATUS_FAULTS:
            return STATUS_FAULTS[fault](self, body)
        if body is None:
            return 400, _error(400, "the body is not JSON"), {}
        status, payload = self.complete(body)
        if status == 200 and fault in SHAPED_FAULTS:
            payload = SHAPED_FAULTS[fault](self, payload, body)
        return status, payload, {}

    def bill(self, payload: dict[str, Any], completion_tokens: int) -> None:
        """Set a response's completion tokens and the cost they come to."""
        usage = payload["usage"]
        model = self._models[str(payload["model"])]
        usage["completion_tokens"] = completion_tokens
        usage["total_tokens"] = usage["prompt_tokens"] + completion_tokens
        usage["cost"] = self.rules.pool_model(model).cost_usd(usage["prompt_tokens"],
                                                              completion_tokens)

    def models(self) -> dict[str, Any]:
        """The /models listing: the OpenAI client's fields plus OpenRouter's."""
        return {"object": "list", "data": [_model_entry(m) for m in self.rules.pool]}

    def complete(self, body: Any) -> tuple[int, dict[str, Any]]:
        """A chat completions response (status, JSON) for a request body."""
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            return 400, _error(400, "the body must be a JSON object with a messages list")
        model = self._models.get(str(body.get("model")))
        if model is None:
            return 404, _error(404, f"{body.get('model')!r} is not a valid model ID")
        messages = [m for m in body["messages"] if isinstance(m, dict)]
        text = self.answer(model, messages)
        prompt_tokens = max(1, sum(len(str(m.get("content", ""))) for m in messages)
                            // CHARS_PER_TOKEN)
        completion_tokens = max(1, len(text) // CHARS_PER_TOKEN)
        cost = self.rules.pool_model(model).cost_usd(prompt_tokens, completion_tokens)
        effort = body.get("reasoning", {}).get("effort") if isinstance(
            body.get("reasoning"), dict) else None
        reasoning = min(completion_tokens, REASONING_TOKENS.get(effort, 0))
        request_id = "gen-sim-" + hashlib.sha256(
            json.dumps([self.seed, model, messages], sort_keys=True).encode()).hexdigest()[:24]
        return 200, {
            "id": request_id, "object": "chat.completion", "created": int(time.time()),
            "model": body["model"],
            "choices": [{"index": 0, "finish_reason": "stop", "native_finish_reason": "stop",
                         "message": {"role": "assistant", "content": text}}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens, "cost": cost,
                      "completion_tokens_details": {"reasoning_tokens": reasoning}}}


def split_transcript(user: str) -> tuple[str, list[tuple[str, str, str]]]:
    """The query and the (role, model, output) blocks of a loop user message."""
    headers = list(TURN_HEADER_RE.finditer(user))
    query_end = headers[0].start() if headers else len(user)
    turns = []
    for index, header in enumerate(headers):
        end = headers[index + 1].start() if index + 1 < len(headers) else len(user)
        body = user[header.end() + 1:end]
        if index + 1 == len(headers):
            body = re.sub(r"\n\nTurn \d+: respond as the \w+\.\s*$", "", body)
        turns.append((header.group(2), header.group(3), body.rstrip("\n")))
    return user[:query_end], turns


def _error(status: int, message: str, metadata: dict[str, Any] | None = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": status, "message": message}
    if metadata is not None:
        error["metadata"] = metadata
    return {"error": error}


def _check_known(faults: Iterable[str]) -> None:
    unknown = [fault for fault in faults if fault not in FAULTS]
    if unknown:
        raise ValueError(f"unknown faults {unknown}; known: {', '.join(FAULTS)}")


def check_fault_rates(rates: Mapping[str, float]) -> dict[str, float]:
    """The rates as a dict, once every fault is known, every rate in [0, 1] and their sum <= 1."""
    _check_known(rates)
    bad = [f"{fault}={rate}" for fault, rate in rates.items() if not 0 <= rate <= 1]
    if bad:
        raise ValueError(f"fault rates must lie in [0, 1]: {', '.join(bad)}")
    if sum(rates.values()) > 1:
        raise ValueError(f"fault rates add up to {sum(rates.values()):g}, more than 1")
    return {fault: float(rate) for fault, rate in rates.items()}


def _model_entry(model: Any) -> dict[str, Any]:
    per_token = Decimal(10) ** 6
    return {"id": model.slug, "object": "model", "created": CREATED,
            "owned_by": model.slug.split("/")[0], "name": model.name,
            "canonical_slug": model.slug, "context_length": CONTEXT_LENGTH,
            "pricing": {"prompt": format(Decimal(str(model.usd_per_m_prompt)) / per_token, "f"),
                        "completion": format(Decimal(str(model.usd_per_m_completion)) / per_token,
                                             "f")}}


# faults ------------------------------------------------------------------------------------


def _status_fault(status: int, metadata: dict[str, Any] | None = None, retry: bool = False):
    def reply(sim: Simulator, body: Any) -> tuple[int, dict[str, Any], dict[str, str]]:
        headers = {"Retry-After": _seconds(sim.retry_after)} if retry else {}
        return status, _error(status, "injected fault", metadata), headers

    return reply


def _moderation(sim: Simulator, body: Any) -> tuple[int, dict[str, Any], dict[str, str]]:
    """OpenRouter's moderation error: it quotes up to 100 characters of the flagged input."""
    messages = body.get("messages") if isinstance(body, dict) else None
    text = " ".join(str(m.get("content", "")) for m in messages or [] if isinstance(m, dict))
    flagged = text if len(text) <= 100 else text[:48] + "..." + text[-49:]
    metadata = {"reasons": ["injected"], "flagged_input": flagged,
                "provider_name": "simulator", "model_slug": str((body or {}).get("model"))}
    return 403, _error(403, "Your input was flagged", metadata), {}


def _finish(reason: str, keep: float | None, error: dict[str, Any] | None = None):
    """A 200 whose choice ends with `reason`, keeping that share of the text (None: null)."""

    def shape(sim: Simulator, payload: dict[str, Any], body: dict) -> dict[str, Any]:
        choice = payload["choices"][0]
        text = choice["message"]["content"]
        kept = None if keep is None else text[: int(len(text) * keep)]
        choice["message"]["content"] = kept
        choice["finish_reason"] = choice["native_finish_reason"] = reason
        if error is not None:
            choice["error"] = error
        tokens = (int(body.get("max_tokens") or sim.rules.max_completion_tokens)
                  if reason == "length" else len(kept or "") // CHARS_PER_TOKEN)
        sim.bill(payload, tokens)
        return payload

    return shape


def _empty(sim: Simulator, payload: dict[str, Any], body: dict) -> dict[str, Any]:
    return {key: value for key, value in payload.items() if key != "usage"} | {"choices": []}


def _error_body(sim: Simulator, payload: dict[str, Any], body: dict) -> dict[str, Any]:
    return {"id": payload["id"], **_error(502, "Provider returned error",
                                          {"error_type": "provider_unavailable"})}


STATUS_FAULTS = {
    **{code: _status_fault(int(code)) for code in ("400", "401", "402", "403", "404", "500",
                                                     "502")},
    # OpenRouter documents Retry-After on 429 and 503
    **{code: _status_fault(int(code), retry=True) for code in ("429", "503")},
    "402-in-flight": _status_fault(402, IN_FLIGHT_METADATA, retry=True),
    "403-moderation": _moderation,
}
def _usage(**fields: Any) -> Callable[[Simulator, dict[str, Any], dict], dict[str, Any]]:
    def shape(sim: Simulator, payload: dict[str, Any], body: dict) -> dict[str, Any]:
        return payload | {"usage": payload["usage"] | fields}

    return shape


SHAPED_FAULTS = {
    "usage-overflow": _usage(prompt_tokens=float("inf")),
    "usage-negative": _usage(completion_tokens=-5),
    "cost-nan": _usage(cost=float("nan")),
    "finish-error": _finish("error", 0.5, GENERATION_ERROR),
    "finish-length": _finish("length", None),
    "finish-content-filter": _finish("content_filter", None),
    "empty": _empty,
    "error-body": _error_body,
}


# the HTTP server -------------------------------------------------------------------------


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: the demo sends thousands of requests
    disable_nagle_algorithm = True  # else headers and body meet a 40 ms delayed ACK
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass  # requests carry hidden items; never log them

    def do_GET(self) -> None:
        if self.path.rstrip("/").endswith("/models"):
            self._send(200, json.dumps(self.server.simulator.models()).encode())
        else:
            self._send(404, json.dumps(_error(404, "not found")).encode())

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self._send(404, json.dumps(_error(404, "not found")).encode())
            return
        sim = self.server.simulator
        fault = sim.next_fault(raw)
        if fault in ("drop", "hang"):
            if fault == "hang":
                self.server.stopping.wait(sim.hang_seconds)
            self.close_connection = True
            return
        if fault == "slow":
            time.sleep(sim.slow_seconds)
        status, payload, headers = sim.respond(raw, fault)
        body = json.dumps(payload).encode()
        self._send(status, body[: len(body) // 2] if fault == "malformed" else body, headers)

    def _send(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client gave up (a timeout test)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], simulator: Simulator):
        super().__init__(address, _Handler)
        self.simulator = simulator
        self.stopping = threading.Event()  # releases hung requests

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client hanging up mid-response is normal under fault injection


def _seconds(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


class SimulatorServer:
    """The simulator on 127.0.0.1 in a background thread: `start()`, `base_url`, `stop()`."""

    def __init__(self, simulator: Simulator, host: str = "127.0.0.1", port: int = 0):
        self.simulator = simulator
        self._server = _Server((host, port), simulator)
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def start(self) -> SimulatorServer:
        self._thread = threading.Thread(target=self._server.serve_forever, args=(POLL_SECONDS,),
                                        name="pool-simulator", daemon=True)
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        self._server.serve_forever()

    def stop(self) -> None:
        self._server.stopping.set()
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join()
            self._thread = None
        self._server.server_close()


@contextmanager
def serve_simulator(simulator: Simulator, host: str = "127.0.0.1",
                    port: int = 0) -> Iterator[str]:
    """`with serve_simulator(sim) as base_url:` a running loopback server, stopped on exit."""
    server = SimulatorServer(simulator, host, port).start()
    try:
        yield server.base_url
    finally:
        server.stop()


def bundled_simulator(rules: Competition, seed: int = 0,
                      fault_rates: Mapping[str, float] | None = None) -> Simulator:
    """The simulator over the bundled demo corpus, its private items and persona skills."""
    return Simulator(load_corpus(rules) + load_private_corpus(rules), load_personas(rules), rules,
                     seed=seed,
                     fault_rates=fault_rates)

