"""One thread owns the encoder; requests that arrive together are decided in few passes.

Each request's session calls `decide` from its own thread, once per turn. The calls queue
here; the encoder's thread takes everything queued (after waiting `wait` seconds for more,
up to `max_batch` transcripts) and runs the head's `Decide` once per group of transcripts of
similar length, handing each caller its decisions. A pass pads every row to its longest and
attention grows with the square of the length, so one pass over a 100-token and a
1,000-token transcript costs more than two passes on a CPU (`tinyrouter dev serving`).
The encoder's SVF layer is bound per pass, so no other thread may use it: this thread is the
only caller.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from evaluator.errors import TinyRouterError
from evaluator.loop import Decide
from evaluator.serve.allowance import LENGTH_RATIO
from evaluator.types import Decision


@dataclass
class _Waiting:
    transcripts: list[str]
    done: threading.Event = field(default_factory=threading.Event)
    decisions: list[Decision] | None = None
    error: BaseException | None = None


class RoutingBatcher:
    """`decide(transcripts)` from any thread, batched through one `Decide` (a bound router)."""

    def __init__(self, decide: Decide, wait: float = 0.0, max_batch: int = 32,
                 length_ratio: float = LENGTH_RATIO):
        self._decide = decide
        self.wait, self.max_batch, self.length_ratio = wait, max_batch, length_ratio
        self._queue: list[_Waiting] = []
        self._ready = threading.Condition()
        self._closed = False
        self.passes = self.decided = 0  # forward passes run, and transcripts decided
        self._thread = threading.Thread(target=self._serve, name="routing", daemon=True)
        self._thread.start()

    def decide(self, transcripts: list[str]) -> list[Decision]:
        """The decisions for these transcripts, in order (blocks until their pass ran)."""
        waiting = _Waiting(list(transcripts))
        with self._ready:
            if self._closed:
                raise TinyRouterError("the router has stopped")
            self._queue.append(waiting)
            self._ready.notify()
        waiting.done.wait()
        if waiting.error is not None:
            raise waiting.error
        assert waiting.decisions is not None
        return waiting.decisions

    def close(self) -> None:
        """Stop after the queued calls; later calls are refused."""
        with self._ready:
            self._closed = True
            self._ready.notify()
        self._thread.join()

    def _take(self) -> list[_Waiting] | None:
        with self._ready:
            while not self._queue and not self._closed:
                self._ready.wait()
            if not self._queue:
                return None
            deadline = time.monotonic() + self.wait
            while (sum(len(w.transcripts) for w in self._queue) < self.max_batch
                   and not self._closed and (left := deadline - time.monotonic()) > 0):
                self._ready.wait(left)
            taken, count = [], 0
            while self._queue and (not taken or
                                   count + len(self._queue[0].transcripts) <= self.max_batch):
                count += len(self._queue[0].transcripts)
                taken.append(self._queue.pop(0))
            return taken

    def _serve(self) -> None:
        while (batch := self._take()) is not None:
            texts = [text for waiting in batch for text in waiting.transcripts]
            try:
                decisions = self._decide_grouped(texts)
            except Exception as exc:  # each caller gets it; this thread goes on
                for waiting in batch:
                    waiting.error = exc
                    waiting.done.set()
                continue
            start = 0
            for waiting in batch:
                waiting.decisions = decisions[start:start + len(waiting.transcripts)]
                start += len(waiting.transcripts)
                waiting.done.set()

    def _decide_grouped(self, texts: list[str]) -> list[Decision]:
        decisions: list[Decision | None] = [None] * len(texts)
        for group in length_groups([len(text) for text in texts], self.length_ratio):
            found = self._decide([texts[i] for i in group])
            if len(found) != len(group):
                raise TinyRouterError(f"the router returned {len(found)} decisions for "
                                      f"{len(group)} transcripts")
            for index, decision in zip(group, found, strict=True):
                decisions[index] = decision
            self.passes += 1
            self.decided += len(group)
        return decisions  # type: ignore[return-value]


def length_groups(lengths: list[int], ratio: float) -> list[list[int]]:
    """Indices grouped by length, shortest first: in a group the longest is at most `ratio`
    times the shortest."""
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    groups: list[list[int]] = []
    for i in order:
        if groups and lengths[i] <= ratio * max(1, lengths[groups[-1][0]]):
            groups[-1].append(i)
        else:
            groups.append([i])
    return groups
