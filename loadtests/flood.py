"""The flood: the open loop for overload benchmarks, lean HTTP/1.1 with Poisson sends from
callbacks and answers parsed in C, counting outcomes (the experiments' open loop, which keeps a
record of every request with its headers, is :mod:`loadtests.openloop`).

At the rates the overload benchmark asks for (tens of thousands of requests a second from one
Python process on the same two cores as the server under test) the generator's own cost decides
what it can measure: a generator that runs late reads answers late and counts its own delay as
the server's. So this one keeps no task, coroutine or future per request: a single timer sends
every request that is due, on an idle keep-alive connection (or a new one), each connection an
``asyncio.Protocol`` whose answers ``httptools`` parses, and one sweep a tenth of a second times
out what waited too long. Latency is measured from the scheduled send time and from when the
request really left; the caller turns them into its result (``benchmarks/loadgen.py``).
"""

from __future__ import annotations

import asyncio
import re
import socket
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

import httptools

__all__ = ["OpenLoop", "Outcome", "Recorder", "Request"]


@dataclass
class Outcome:
    """What the requests scheduled after the warm-up met, as the caller sums them up."""

    latencies: list[float] = field(default_factory=list)  # from the scheduled time, s
    from_send: list[float] = field(default_factory=list)  # from when it left, s (answered 200)
    lags: list[float] = field(default_factory=list)  # how late it left, s
    sent_at: list[float] = field(default_factory=list)
    batches: list[int] = field(default_factory=list)
    #: (batch size, queue ms, upstream round trip ms, total ms) of each answer that says them
    #: (``X-Batch-Size`` and the adapter's ``Server-Timing``): the round trip is what its latency
    #: model learnt from; total is the adapter's time from arrival to answer
    timings: list[tuple[int, float, float, float]] = field(default_factory=list)
    errors: dict[str, int] = field(default_factory=dict)
    reasons: dict[str, int] = field(default_factory=dict)
    refusal_ms: list[float] = field(default_factory=list)
    #: admitted, then answered 503 because its deadline passed before its batch left (the
    #: adapter's ``DeadlinePruned``): a miss of an admitted request, not a refusal at the door
    given_up: int = 0
    no_retry_after: int = 0
    dropped: int = 0


#: what the adapter's reason says when it gave an admitted request up (``DeadlinePruned``)
_GIVEN_UP = b"deadline passed"
#: the entries of a single function's ``Server-Timing`` (``queue;dur=1.20, upstream;dur=...``)
_TIMING = re.compile(rb"(?:^|[ ,])([a-z]+);dur=([0-9.]+)")


class Request:
    """One scheduled request: when it was due (s from the start), whether it counts, how late
    it left and when it left (on the generator's clock)."""

    __slots__ = ("at", "counted", "lag", "sent")

    def __init__(self, at: float, counted: bool, lag: float, sent: float) -> None:
        self.at = at
        self.counted = counted
        self.lag = lag
        self.sent = sent


class _Client(asyncio.Protocol):
    """One connection: a request at a time, its answer parsed by httptools."""

    def __init__(self, gen: OpenLoop, first: Request, data: bytes) -> None:
        self.gen = gen
        self.parser = httptools.HttpResponseParser(self)
        self.transport: asyncio.Transport | None = None
        self.request: Request | None = first
        self._first = data
        self._retry_after = False
        self._batch = b""
        self._timing = b""
        self._body: list[bytes] = []

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self.request is not None:
            self.request.sent = self.gen.loop.time()
            transport.write(self._first)  # type: ignore[attr-defined]

    def send(self, request: Request, data: bytes) -> None:
        assert self.transport is not None
        self.request = request
        self.transport.write(data)

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError:
            self._end("BadResponse")

    def on_message_begin(self) -> None:
        self._retry_after = False
        self._batch = b""
        self._timing = b""
        self._body = []

    def on_header(self, name: bytes, value: bytes) -> None:
        name = name.lower()
        if name == b"retry-after":
            self._retry_after = True
        elif name == b"x-batch-size":
            self._batch = value
        elif name == b"server-timing" and self.gen.timings:
            self._timing = value

    def on_body(self, body: bytes) -> None:
        self._body.append(body)

    def on_message_complete(self) -> None:
        request, self.request = self.request, None
        self.gen.busy.discard(self)
        if request is not None:
            status = self.parser.get_status_code()
            self.gen.answered(request, status, self._retry_after, self._batch, self._body)
            if status == 200 and request.counted and self._timing:
                self.gen.timing(self._batch, self._timing)
        if not self.parser.should_keep_alive():
            self.close()
        else:
            self.gen.idle.append(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        self.gen.busy.discard(self)
        self._end("Http1ConnectionError")

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()
            self.transport = None

    def _end(self, error: str) -> None:
        request, self.request = self.request, None
        if request is not None:
            self.gen.failed(request, error)
        self.close()


class Recorder(ABC):
    """An open loop's settings and what it makes of each answer: the :class:`Outcome` of the
    counted requests. ``start`` and :meth:`now` are on one clock (seconds); a subclass sets up
    its own sending in :meth:`_setup`."""

    start = 0.0

    def __init__(
        self,
        host: str,
        port: int,
        requests: list[bytes],
        *,
        warmup_s: float,
        timeout_s: float,
        max_in_flight: int,
        timings: bool = False,
    ) -> None:
        self.outcome = Outcome()
        self.host = host
        self.port = port
        self.requests = requests
        self._next = 0
        self.warmup_s = warmup_s
        self.timeout_s = timeout_s
        self.max_in_flight = max_in_flight
        #: keep each answer's Server-Timing (only when asked: it is a regex per answer)
        self.timings = timings
        self._setup()

    @abstractmethod
    def _setup(self) -> None:
        """Make what this loop sends with (called at the end of ``__init__``)."""

    @abstractmethod
    def now(self) -> float:
        """The loop's clock, seconds."""

    def answered(
        self, request: Request, status: int, retry_after: bool, batch: bytes, body: list[bytes]
    ) -> None:
        done = self.now()
        out = self.outcome
        if not request.counted:
            return
        out.lags.append(request.lag)
        if status == 200:
            out.latencies.append(done - self.start - request.at)
            out.from_send.append(done - request.sent)
            if batch.isdigit():
                out.batches.append(int(batch))
            return
        key = str(status)
        out.errors[key] = out.errors.get(key, 0) + 1
        text = b"".join(body)[:200]
        kind = re.sub(rb"[0-9.]+", b"N", text[:90]).decode("latin-1")
        out.reasons[kind] = out.reasons.get(kind, 0) + 1
        if status in (429, 503):
            out.no_retry_after += not retry_after
            if status == 503 and _GIVEN_UP in text:
                out.given_up += 1
            else:
                out.refusal_ms.append((done - request.sent) * 1000.0)

    def timing(self, batch: bytes, timing: bytes) -> None:
        """Keep the answer's batch size and its adapter's queue, upstream and total times."""
        found = dict(_TIMING.findall(timing))
        if batch.isdigit() and all(k in found for k in (b"queue", b"upstream", b"total")):
            queue, upstream, total = (float(found[k]) for k in (b"queue", b"upstream", b"total"))
            self.outcome.timings.append((int(batch), queue, upstream, total))

    def failed(self, request: Request, error: str) -> None:
        if request.counted:
            self.outcome.lags.append(request.lag)
            self.outcome.errors[error] = self.outcome.errors.get(error, 0) + 1


class OpenLoop(Recorder):
    """Sends ``schedule`` (seconds from the start) to ``host:port``, the ``requests`` (whole
    HTTP requests) in turn, over keep-alive connections (a new one while none is idle)."""

    def _setup(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.idle: list[_Client] = []
        self.busy: set[_Client] = set()
        self.opening = 0
        self.start = self.loop.time()
        self._tasks: set[asyncio.Task[Any]] = set()

    def now(self) -> float:
        return self.loop.time()

    async def run(self, schedule: list[float], on_measuring: Any) -> Outcome:
        loop, start = self.loop, self.start
        announced = False
        sweep = loop.call_later(0.1, self._sweep)
        i, n = 0, len(schedule)
        while i < n:
            now = loop.time() - start
            if not announced and schedule[i] >= self.warmup_s:
                if now < self.warmup_s:
                    await asyncio.sleep(self.warmup_s - now)
                on_measuring()
                announced = True
                continue
            if schedule[i] > now:
                await asyncio.sleep(schedule[i] - now)
                now = loop.time() - start
            # what is due within the timer's resolution (a millisecond: waking for less spins)
            due = now + 0.001
            while i < n and schedule[i] <= due and (announced or schedule[i] < self.warmup_s):
                self._send(schedule[i], now)
                i += 1
        if not announced:
            on_measuring()
        while self.busy or self.opening:
            await asyncio.sleep(0.05)
        sweep.cancel()
        for client in self.idle:
            client.close()
        return self.outcome

    def _send(self, at: float, now: float) -> None:
        counted = at >= self.warmup_s
        if len(self.busy) + self.opening >= self.max_in_flight:
            self.outcome.dropped += int(counted)  # every client waits: not sent
            return
        request = Request(at, counted, now - at, self.loop.time())
        if counted:
            self.outcome.sent_at.append(now)
        data = self.requests[self._next % len(self.requests)]
        self._next += 1
        while self.idle:
            client = self.idle.pop()
            if client.transport is not None:
                self.busy.add(client)
                client.send(request, data)
                return
        self.opening += 1
        task = self.loop.create_task(self._open(request, data))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _open(self, request: Request, data: bytes) -> None:
        try:
            _, client = await asyncio.wait_for(
                self.loop.create_connection(
                    lambda: _Client(self, request, data), self.host, self.port
                ),
                self.timeout_s,
            )
        except TimeoutError:
            self.failed(request, "Http1Timeout")
            return
        except OSError:
            self.failed(request, "Http1ConnectError")
            return
        finally:
            self.opening -= 1
        if client.request is not None:
            self.busy.add(client)

    def _sweep(self) -> None:
        """Time out every request that waited ``timeout_s`` (its connection is closed)."""
        now = self.loop.time()
        for client in list(self.busy):
            request = client.request
            if request is None or client.transport is None:
                self.busy.discard(client)
            elif request.sent and now - request.sent > self.timeout_s:
                client.request = None
                self.failed(request, "Http1Timeout")
                client.close()
                self.busy.discard(client)
        self.loop.call_later(0.1, self._sweep)
