"""A loopback OpenAI-compatible pool for tests and the demo: personas with skills, no network.

Each persona is named like a pool model and has a probability of being right per benchmark
and item category. For a corpus item the Worker answers with the item's right or subtly wrong
response, drawn deterministically from (model, item, role, turn, seed); a Thinker plan earlier
in the transcript raises the chance; a Verifier judges the latest Worker output, more
accurately the stronger the persona. Faults can be queued to exercise a client's retries.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from evaluator.loop import THINKER, TURN_HEADER_RE, VERIFIER, WORKER
from evaluator.pool.corpus import load_corpus, load_personas
from evaluator.rules import ROLES, Competition

PLAN_GAIN = 0.5  # share of the Worker's remaining error a perfect Thinker's plan removes
UNKNOWN_SKILL = 0.5
CHARS_PER_TOKEN = 4
POLL_SECONDS = 0.02  # how soon stop() returns
FAULTS = ("429", "500", "502", "503", "400", "401", "402", "403", "404",
          "slow", "malformed", "empty", "drop")

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
                 slow_seconds: float = 5.0):
        self.entries = list(corpus)  # CorpusItems: .item, .right, .wrong
        self.skills = personas.get("personas", personas)
        self.seed = seed
        self.rules = rules
        self.retry_after = retry_after
        self.slow_seconds = slow_seconds
        self.requests = 0
        self._faults: list[str] = []
        self._lock = threading.Lock()
        self._by_line: dict[str, list[Any]] = {}
        for entry in self.entries:
            lines = entry.item.prompt.strip().splitlines()
            if lines:  # an empty prompt would match every request
                self._by_line.setdefault(lines[0].strip(), []).append(entry)
        self._models = {m.slug: m.name for m in rules.pool} | {m.name: m.name for m in rules.pool}

    def inject(self, *faults: str) -> None:
        """Queue faults; each following request consumes one (see FAULTS)."""
        unknown = [fault for fault in faults if fault not in FAULTS]
        if unknown:
            raise ValueError(f"unknown faults {unknown}; known: {', '.join(FAULTS)}")
        with self._lock:
            self._faults.extend(faults)

    def next_fault(self) -> str | None:
        with self._lock:
            self.requests += 1
            return self._faults.pop(0) if self._faults else None

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
        p = self.skill(model, item.benchmark, item.category)
        plans = [self.skill(m, item.benchmark, item.category) for r, m, _ in turns if r == THINKER]
        if plans:
            p += (1 - p) * PLAN_GAIN * max(plans)
        right = uniform(self.seed, model, item.benchmark, item.id, WORKER, turn) < p
        return entry.right if right else entry.wrong

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
        request_id = "gen-sim-" + hashlib.sha256(
            json.dumps([self.seed, model, messages], sort_keys=True).encode()).hexdigest()[:24]
        return 200, {
            "id": request_id, "object": "chat.completion", "created": int(time.time()),
            "model": body["model"],
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": text}}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens, "cost": cost}}


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


def _error(status: int, message: str) -> dict[str, Any]:
    return {"error": {"code": status, "message": message}}


# the HTTP server -------------------------------------------------------------------------


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: the demo sends thousands of requests
    disable_nagle_algorithm = True  # else headers and body meet a 40 ms delayed ACK
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass  # requests carry hidden items; never log them

    def do_GET(self) -> None:
        if self.path.rstrip("/").endswith("/models"):
            sim = self.server.simulator
            data = [{"id": m.slug, "name": m.name} for m in sim.rules.pool]
            self._send(200, json.dumps({"data": data}).encode())
        else:
            self._send(404, json.dumps(_error(404, "not found")).encode())

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self._send(404, json.dumps(_error(404, "not found")).encode())
            return
        sim = self.server.simulator
        fault = sim.next_fault()
        if fault == "drop":
            self.close_connection = True
            return
        if fault == "slow":
            time.sleep(sim.slow_seconds)
        if fault is not None and fault.isdigit():
            headers = {"Retry-After": _seconds(sim.retry_after)} if fault == "429" else {}
            self._send(int(fault), json.dumps(_error(int(fault), "injected fault")).encode(),
                       headers)
            return
        try:
            status, payload = sim.complete(json.loads(raw))
        except ValueError:
            status, payload = 400, _error(400, "the body is not JSON")
        if fault == "empty":
            payload["choices"] = []
        body = json.dumps(payload).encode()
        self._send(status, body[: len(body) // 2] if fault == "malformed" else body)

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


def bundled_simulator(rules: Competition, seed: int = 0) -> Simulator:
    """The simulator over the bundled demo corpus and persona skills."""
    return Simulator(load_corpus(rules), load_personas(rules), rules, seed=seed)

