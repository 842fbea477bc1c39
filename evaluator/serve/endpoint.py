"""The HTTP side of `tinyrouter serve`: OpenAI's chat-completions API over the standard library.

Routes: `POST /v1/chat/completions` (plain, or streamed as server-sent events exactly as
OpenAI streams: `data: {chunk}` lines and `data: [DONE]`), `GET /v1/models`,
`GET /v1/models/{id}` and `GET /health`. A server bound beyond loopback refuses to start
without a bearer token; with one, every `/v1` route asks for it. Each connection has its own
thread; each request is admitted only under its client's request and spend allowances, the
size cap and the cap on sessions at once. One JSON access line per request, without the
prompt unless asked; never a header.
"""

from __future__ import annotations

import contextlib
import hmac
import ipaddress
import json
import logging
import secrets
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from evaluator.errors import UsageError
from evaluator.files import format_time, utc_now
from evaluator.loop import Decide
from evaluator.pool.client import RetryPolicy
from evaluator.pool.ledger import Ledger
from evaluator.rules import Competition
from evaluator.serve.allowance import MIN_TOKEN_CHARS, TOKEN_ENV, Allowances, ServeLimits
from evaluator.serve.batcher import RoutingBatcher
from evaluator.serve.reply import GONE, POOL_RETRY, ClientGone, ConversationPlayer, Reply
from evaluator.serve.served import ServedHead
from evaluator.serve.wire import (
    AUTH,
    DONE,
    INVALID,
    NOT_FOUND,
    OVERLOADED,
    RATE_LIMIT,
    ApiError,
    ChatRequest,
    chunk,
    completion,
    event,
    model_card,
    parse_chat,
    pieces,
    usage_chunk,
)

access_log = logging.getLogger("evaluator.serve.access")
CHAT_PATH, MODELS_PATH, HEALTH_PATH = "/v1/chat/completions", "/v1/models", "/health"
POLL_SECONDS = 0.05  # how soon stop() returns


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a name other than localhost may resolve anywhere


def check_binding(host: str, token: str | None) -> None:
    """Loopback serves this machine; anything else needs a bearer token worth the name."""
    if token is not None and len(token) < MIN_TOKEN_CHARS:
        raise UsageError(f"{TOKEN_ENV} is {len(token)} characters; use at least "
                         f"{MIN_TOKEN_CHARS} (e.g. `openssl rand -hex 16`)")
    if not is_loopback(host) and not token:
        raise UsageError(f"binding {host!r} serves other machines, and the pool bills you for "
                         f"their calls: set {TOKEN_ENV} to a secret token clients must send "
                         "(or bind 127.0.0.1)")


def _overloaded(limits: ServeLimits) -> bytes:
    body = json.dumps(ApiError(503, OVERLOADED, "too many open connections; retry shortly",
                               "overloaded").body()).encode()
    return (f"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nRetry-After: {limits.retry_after}\r\n"
            f"Connection: close\r\n\r\n").encode() + body


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    server_version, sys_version = "tinyrouter", ""
    server: _HTTPServer

    def setup(self) -> None:
        self.timeout = self.server.app.limits.read_timeout  # a silent client is dropped
        super().setup()

    def log_message(self, format: str, *args: Any) -> None:
        pass  # the access log below says what happened, without the request line

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """http.server's own refusals (a malformed request line, an unknown method), as JSON."""
        self._begin()
        self.close_connection = True
        kind = INVALID if code < 500 else "server_error"
        self._json(code, ApiError(code, kind, message or "the request was refused").body())
        self._end()

    # ------------------------------------------------------------ plumbing

    def _json(self, status: int, body: dict[str, Any], headers: dict[str, str] | None = None
              ) -> None:
        raw = json.dumps(body, ensure_ascii=False).encode()
        self._record["status"] = status
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            if self.close_connection:
                self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(raw)
        except OSError:
            self.close_connection = True  # the client went away; nothing left to tell it

    def _fail(self, error: ApiError, headers: dict[str, str] | None = None) -> None:
        self._record["error"] = error.code or error.kind
        self._json(error.status, error.body(), {**error.headers(), **(headers or {})})

    def _authorised(self) -> bool:
        token = self.server.app.token
        if token is None:
            return True
        given = self.headers.get("Authorization", "")
        scheme, _, value = given.partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(value.strip().encode(),
                                                                  token.encode())

    def _begin(self) -> None:
        self._started = time.perf_counter()
        self._record: dict[str, Any] = {"at": format_time(utc_now(), micro=True),
                                        "client": self.client_address[0],
                                        "method": getattr(self, "command", None),
                                        "path": str(getattr(self, "path", "")).split("?")[0][:200]}

    def _end(self) -> None:
        self._record["ms"] = round(1000 * (time.perf_counter() - self._started), 1)
        access_log.info(json.dumps(self._record, sort_keys=True, ensure_ascii=False))

    # ------------------------------------------------------------ routes

    def do_GET(self) -> None:
        self._begin()
        try:
            self._get(self.path.split("?")[0].rstrip("/"))
        finally:
            self._end()

    def do_POST(self) -> None:
        self._begin()
        try:
            self._post(self.path.split("?")[0].rstrip("/"))
        finally:
            self._end()

    def _get(self, path: str) -> None:
        app = self.server.app
        served = app.served
        if path == HEALTH_PATH:
            self._json(200, {"status": "ok", "model": served.model_id,
                             "weights_sha256": served.weights_sha256})
            return
        if not path.startswith(MODELS_PATH):
            self._fail(ApiError(404, NOT_FOUND, f"no route {path or '/'}", "not_found"))
            return
        if not self._authorised():
            self._fail(_unauthorised())
            return
        card = model_card(served.model_id, served.created, served.owner, served.weights_sha256)
        if path == MODELS_PATH:
            self._json(200, {"object": "list", "data": [card]})
        elif path == f"{MODELS_PATH}/{served.model_id}":
            self._json(200, card)
        else:
            self._fail(ApiError(404, NOT_FOUND, f"the model {path[len(MODELS_PATH) + 1:][:100]!r} "
                                f"does not exist; this server routes through "
                                f"{served.model_id!r}", "model_not_found"))

    def _post(self, path: str) -> None:
        app = self.server.app
        keep_alive = not self.close_connection
        self.close_connection = True  # until the body is read, nothing else can follow
        if path != CHAT_PATH:
            self._fail(ApiError(404, NOT_FOUND, f"no route {path or '/'}", "not_found"))
            return
        if not self._authorised():
            self._fail(_unauthorised())
            return
        refusal = app.allowances.admit(self.client_address[0])
        if refusal is not None:
            what = (f"{app.limits.requests_per_minute} requests a minute" if
                    refusal.code == "requests" else
                    f"${app.limits.spend_usd_per_hour:g} of pool calls an hour")
            self._fail(ApiError(429, RATE_LIMIT, f"this client has used its {what}; retry in "
                                f"{refusal.retry_after} s", f"{refusal.code}_limit_exceeded",
                                retry_after=refusal.retry_after))
            return
        raw = self._body(app.limits)
        if raw is None:
            return
        self.close_connection = not keep_alive
        try:
            request = parse_chat(raw, app.served.model_id)
        except ApiError as error:
            self._fail(error)
            return
        if not app.sessions.acquire(blocking=False):
            self._fail(ApiError(503, OVERLOADED, f"the server is playing {app.limits.max_sessions} "
                                f"sessions already; retry in {app.limits.retry_after} s",
                                "overloaded", retry_after=app.limits.retry_after))
            return
        try:
            self._chat(request)
        finally:
            app.sessions.release()

    def _body(self, limits: ServeLimits) -> bytes | None:
        """The request body, or None once the client has been told why not."""
        if self.headers.get("Transfer-Encoding"):
            self._fail(ApiError(411, INVALID, "send the body with a Content-Length",
                                "length_required"))
            return None
        try:
            length = int(self.headers.get("Content-Length") or "")
        except ValueError:
            length = -1
        if length < 0:
            self._fail(ApiError(411, INVALID, "send the body with a Content-Length",
                                "length_required"))
            return None
        if length > limits.max_request_bytes:
            self._fail(ApiError(413, INVALID, f"the request is {length} bytes; this server "
                                f"takes at most {limits.max_request_bytes}",
                                "request_too_large"))
            return None
        try:
            raw = self.rfile.read(length)
        except OSError:
            raw = b""
        if len(raw) != length:
            self._fail(ApiError(400, INVALID, "the body ended before its Content-Length"))
            return None
        return raw

    # ------------------------------------------------------------ chat

    def _chat(self, request: ChatRequest) -> None:
        app = self.server.app
        request_id, created = "chatcmpl-" + secrets.token_hex(12), int(time.time())
        self._record.update(id=request_id, stream=request.stream, messages=request.messages,
                            prompt_chars=len(request.query))
        if app.log_prompts:
            self._record["prompt"] = request.query
        if request.stream:
            reply = self._stream(request, request_id, created)
        else:
            reply = app.player.answer(request_id, request.query)
            headers = {"X-Request-Id": request_id, **reply.headers()}
            if reply.error is not None:
                self._fail(reply.error, headers)
            else:
                self._json(200, completion(request_id, created, app.served.model_id,
                                           reply.answer, reply.finish_reason, reply.usage(),
                                           reply.summary(request.transcript)), headers)
        app.allowances.charge(self.client_address[0], reply.cost_usd)
        t = reply.trajectory
        self._record.update(turns=len(reply.decisions), cost_usd=reply.cost_usd,
                            models=[d.model for d in reply.decisions],
                            roles=[d.role for d in reply.decisions],
                            routing_ms=round(1000 * reply.routing_seconds, 3),
                            stop=None if t is None else t.stop)
        if reply.error is not None:
            self._record.update(status=reply.error.status,
                                error=reply.error.code or reply.error.kind)

    def _stream(self, request: ChatRequest, request_id: str, created: int) -> Reply:
        app = self.server.app
        model = app.served.model_id
        self.close_connection = True  # the stream ends when the connection does
        self._record["status"] = 200

        def send(data: bytes) -> None:
            try:
                self.wfile.write(data)
            except OSError as exc:
                raise ClientGone from exc

        def on_decision(turn: int, decision: Any) -> None:
            send(event(chunk(request_id, created, model, {}, tinyrouter={
                "turn": turn, "model": decision.model, "role": decision.role})))

        try:
            self.send_response(200)
            for name, value in {"Content-Type": "text/event-stream", "Cache-Control": "no-cache",
                                "Connection": "close", "X-Request-Id": request_id}.items():
                self.send_header(name, value)
            self.end_headers()
            send(event(chunk(request_id, created, model, {"role": "assistant", "content": ""})))
        except (OSError, ClientGone):
            self._record["status"] = GONE
            return Reply(request_id)
        reply = app.player.answer(request_id, request.query, on_decision)
        try:
            if reply.error is not None:
                if reply.error.status != GONE:
                    send(event(reply.error.body()))  # OpenAI's clients raise it
                return reply
            for piece in pieces(reply.answer):
                send(event(chunk(request_id, created, model, {"content": piece})))
            send(event(chunk(request_id, created, model, {}, reply.finish_reason,
                             tinyrouter=reply.summary(request.transcript))))
            if request.include_usage:
                send(event(usage_chunk(request_id, created, model, reply.usage())))
            send(DONE)
        except ClientGone:
            self._record["status"] = GONE
        return reply


def _unauthorised() -> ApiError:
    return ApiError(401, AUTH, "the bearer token is missing or wrong: send "
                    "`Authorization: Bearer <token>` with the server's token", "invalid_api_key")


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], app: ChatServer):
        self.app = app
        self._lock = threading.Lock()
        self._open: dict[str, int] = {}  # open connections by client
        self.address_family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        super().__init__(address, _Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        """A thread for the connection, unless the server or this client has enough open."""
        client, limits = client_address[0], self.app.limits
        with self._lock:
            admitted = (sum(self._open.values()) < limits.max_connections
                        and self._open.get(client, 0) < limits.connections_per_client)
            if admitted:
                self._open[client] = self._open.get(client, 0) + 1
        if not admitted:
            with contextlib.suppress(OSError):
                request.sendall(_overloaded(limits))
            self.shutdown_request(request)
            return
        super().process_request(request, client_address)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            with self._lock:
                self._open[client_address[0]] -= 1
                if not self._open[client_address[0]]:
                    del self._open[client_address[0]]

    def handle_error(self, request: Any, client_address: Any) -> None:
        logging.getLogger(__name__).exception("a connection from %s failed", client_address[0])


class ChatServer:
    """The endpoint for one head: `start()` (a background thread) or `serve_forever()`, then
    `stop()`. `decide` is the head's (a bound router): one thread runs it, batching the
    requests' turns. `token` None serves without auth, on loopback only."""

    def __init__(self, served: ServedHead, decide: Decide, rules: Competition,
                 pool_url: str | None, ledger: Ledger | None, limits: ServeLimits,
                 host: str, port: int, token: str | None = None, log_prompts: bool = False,
                 retry: RetryPolicy = POOL_RETRY):
        check_binding(host, token)
        self.served, self.limits = served, limits
        self.token, self.log_prompts = token or None, log_prompts
        self.allowances = Allowances(limits)
        self.sessions = threading.BoundedSemaphore(limits.max_sessions)
        self._http = _HTTPServer((host, port), self)
        self.batcher = RoutingBatcher(decide, limits.batch_wait, limits.max_batch,
                                      limits.length_ratio)
        self.player = ConversationPlayer(rules, self.batcher.decide, pool_url, ledger, limits,
                                         retry)
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        host, port = self._http.server_address[:2]
        return f"http://{f'[{host}]' if ':' in host else host}:{port}/v1"

    def start(self) -> ChatServer:
        self._thread = threading.Thread(target=self._http.serve_forever, args=(POLL_SECONDS,),
                                        name="serve", daemon=True)
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        self._http.serve_forever(POLL_SECONDS)

    def stop(self) -> None:
        if self._thread is not None:
            self._http.shutdown()
            self._thread.join()
            self._thread = None
        self._http.server_close()
        self.batcher.close()
