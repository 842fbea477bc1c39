"""What `tinyrouter serve` allows: its defaults, and each client's request and spend windows.

These are the tool's defaults, not competition rules: an operator changes them with the
command's options (`tinyrouter serve --help` shows them). A client is a remote address.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8080
TOKEN_ENV = "TINYROUTER_SERVE_TOKEN"  # the bearer token clients must send
MIN_TOKEN_CHARS = 24  # `openssl rand -hex 16` gives 32
REQUESTS_PER_MINUTE = 30  # per client
SPEND_USD_PER_HOUR = 1.0  # per client, what its requests' pool calls billed
MAX_REQUEST_BYTES = 128 * 1024  # a chat request's body
REQUEST_TIMEOUT_SECONDS = 300.0  # a whole request: every turn, retries included
RETRY_AFTER_SECONDS = 30  # the hint a pool failure or a timeout carries
MAX_SESSIONS = 16  # chat requests played at once; more are told to retry
MAX_CONNECTIONS = 64  # open connections (a thread each); more are refused
CONNECTIONS_PER_CLIENT = 8  # open connections of one client, so one cannot hold them all
READ_TIMEOUT_SECONDS = 30.0  # a client that stops sending mid-request is dropped
BATCH_WAIT_SECONDS = 0.0  # extra wait for turns to batch with (0: those queued while busy)
MAX_BATCH = 32  # transcripts taken at once
LENGTH_RATIO = 1.25  # in one forward pass, the longest transcript over the shortest, at most
MINUTE, HOUR = 60.0, 3600.0


@dataclass(frozen=True)
class ServeLimits:
    """The server's limits; `tinyrouter serve` takes each as an option."""

    requests_per_minute: int = REQUESTS_PER_MINUTE
    spend_usd_per_hour: float = SPEND_USD_PER_HOUR
    max_request_bytes: int = MAX_REQUEST_BYTES
    request_timeout: float = REQUEST_TIMEOUT_SECONDS
    retry_after: int = RETRY_AFTER_SECONDS
    max_sessions: int = MAX_SESSIONS
    max_connections: int = MAX_CONNECTIONS
    connections_per_client: int = CONNECTIONS_PER_CLIENT
    read_timeout: float = READ_TIMEOUT_SECONDS
    batch_wait: float = BATCH_WAIT_SECONDS
    max_batch: int = MAX_BATCH
    length_ratio: float = LENGTH_RATIO

    def __post_init__(self) -> None:
        bad = [name for name, value in vars(self).items()
               if (value < 0 if name == "batch_wait" else not value > 0)]
        bad += ["length_ratio"] if self.length_ratio < 1 else []
        if bad:
            raise ValueError(f"limits must be positive (batch_wait may be 0): {', '.join(bad)}")


@dataclass(frozen=True)
class Refusal:
    """Why a client may not start another request now, and when it may."""

    code: str  # "requests" or "spend"
    retry_after: int


class Allowances:
    """Each client's requests in the last minute and spend in the last hour; thread-safe.
    A request is admitted while the client is under both limits, so its own cost may take the
    client past the spend limit once."""

    def __init__(self, limits: ServeLimits, clock: Callable[[], float] = time.monotonic):
        self.limits = limits
        self._clock = clock
        self._lock = threading.Lock()
        self._requests: dict[str, deque[float]] = {}
        self._spend: dict[str, deque[tuple[float, float]]] = {}

    def admit(self, client: str) -> Refusal | None:
        """None, counting the request; or why not, with how long to wait."""
        now = self._clock()
        with self._lock:
            self._forget(now)
            requests = self._requests.setdefault(client, deque())
            spend = self._spend.get(client, deque())
            if len(requests) >= self.limits.requests_per_minute:
                return Refusal("requests", _wait(requests[0] + MINUTE - now))
            if sum(usd for _, usd in spend) >= self.limits.spend_usd_per_hour:
                return Refusal("spend", _wait(spend[0][0] + HOUR - now))
            requests.append(now)
            return None

    def charge(self, client: str, usd: float) -> None:
        if usd > 0:
            with self._lock:
                self._spend.setdefault(client, deque()).append((self._clock(), usd))

    def spent(self, client: str) -> float:
        with self._lock:
            self._forget(self._clock())
            return sum(usd for _, usd in self._spend.get(client, ()))

    def _forget(self, now: float) -> None:
        """Drop what left the windows, and clients with nothing left (the maps stay small)."""
        for windows, span, when in ((self._requests, MINUTE, lambda t: t),
                                    (self._spend, HOUR, lambda entry: entry[0])):
            for client in list(windows):
                window = windows[client]
                while window and when(window[0]) <= now - span:
                    window.popleft()
                if not window:
                    del windows[client]


def _wait(seconds: float) -> int:
    return max(1, int(seconds + 0.999))
