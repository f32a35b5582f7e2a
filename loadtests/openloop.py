"""Open-loop load: each request leaves at its scheduled time, whether or not earlier ones returned.

Closed-loop tools (Locust's users) slow down when the server does and so hide queueing; an open
loop keeps the offered rate, which is what an SLO is measured against.

``run_open_loop`` walks a sorted schedule and creates one send task per arrival when its time
comes; the tasks never wait for one another, so slow answers cannot delay later sends. What can
delay them is the event loop itself (CPU saturation of the load generator), so every record keeps
both its scheduled and its actual send time, and ``summarize`` reports the lag between them.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx
import numpy as np

logger = logging.getLogger(__name__)

#: response headers kept in each record (what the adapter and functions report)
HEADERS_OF_INTEREST: tuple[str, ...] = (
    "x-cold-start",
    "x-compute-ms",
    "x-batch-size",
    "x-platform-wait-ms",
    "x-arrived-cold",
    "server-timing",
)
#: a request sent later than this after its scheduled time counts as late
LATE_S = 0.010


@dataclass(frozen=True, slots=True)
class Record:
    """One request; times in seconds from the start of the run, ``status`` 0 when no answer."""

    index: int
    scheduled_s: float
    sent_s: float
    latency_s: float
    status: int
    error: str = ""
    headers: Mapping[str, str] = field(default_factory=dict)

    @property
    def lag_s(self) -> float:
        """How late the request left compared with its schedule."""
        return self.sent_s - self.scheduled_s

    @property
    def ok(self) -> bool:
        """Whether an answer below 400 came back."""
        return 0 < self.status < 400

    @property
    def cold(self) -> bool:
        """Whether the function says the request met a cold start (``x-cold-start``)."""
        return self.headers.get("x-cold-start") == "1"

    def header_ms(self, name: str) -> float:
        """A milliseconds header of the answer (``x-compute-ms``...), 0 when absent or bad."""
        try:
            return float(self.headers.get(name, 0.0))
        except ValueError:
            return 0.0

    def to_json(self) -> dict[str, Any]:
        """The record as one JSON object (a line of a records file)."""
        return {
            "index": self.index,
            "scheduled": round(self.scheduled_s, 6),
            "sent": round(self.sent_s, 6),
            "lag": round(self.lag_s, 6),
            "latency": round(self.latency_s, 6),
            "status": self.status,
            "error": self.error,
            "headers": dict(self.headers),
        }


@dataclass(frozen=True)
class Progress:
    """A snapshot during a run, for a progress line."""

    t_s: float
    sent: int
    answered: int
    errors: int
    in_flight: int
    max_lag_s: float  # since the previous snapshot


@dataclass
class _Counters:
    sent: int = 0
    answered: int = 0
    errors: int = 0
    in_flight: int = 0
    max_lag_s: float = 0.0


class _Sender:
    """What the open loop's requests share: the clients, the target, the records and counters."""

    def __init__(
        self,
        clients: list[httpx.AsyncClient],
        url: str,
        body: Callable[[int], bytes],
        headers: Mapping[str, str],
        timeout_s: float,
        count: int,
    ) -> None:
        self.clients, self.url, self.body = clients, url, body
        self.headers, self.timeout_s = headers, timeout_s
        self.records: list[Record | None] = [None] * count
        self.counters = _Counters()
        self.loop = asyncio.get_running_loop()
        self.start = self.loop.time()

    def now(self) -> float:
        return self.loop.time() - self.start

    async def send(self, index: int, at: float) -> None:
        """Request ``index``, due at ``at``: its one record."""
        counters = self.counters
        sent = self.now()
        counters.sent += 1
        counters.in_flight += 1
        counters.max_lag_s = max(counters.max_lag_s, sent - at)
        try:
            response = await self.clients[index % len(self.clients)].post(
                self.url, content=self.body(index), headers=self.headers, timeout=self.timeout_s
            )
        except Exception as exc:  # any failure to get an answer is that request's record
            counters.errors += 1
            error = f"{type(exc).__name__}: {exc}"
            self.records[index] = Record(index, at, sent, self.now() - sent, 0, error)
            return
        finally:
            counters.in_flight -= 1
        latency = self.now() - sent
        counters.answered += 1
        status = response.status_code
        error = ""
        if status >= 400:
            counters.errors += 1
            error = response.text[:200]
        kept = {k: v for k in HEADERS_OF_INTEREST if (v := response.headers.get(k)) is not None}
        self.records[index] = Record(index, at, sent, latency, status, error, kept)

    async def report(self, progress: Callable[[Progress], None], every_s: float) -> None:
        """``progress`` every ``every_s``, until cancelled."""
        while True:
            await asyncio.sleep(every_s)
            c = self.counters
            progress(Progress(self.now(), c.sent, c.answered, c.errors, c.in_flight, c.max_lag_s))
            c.max_lag_s = 0.0


async def run_open_loop(
    client: httpx.AsyncClient | Sequence[httpx.AsyncClient],
    url: str,
    schedule: Sequence[float],
    body: Callable[[int], bytes],
    *,
    timeout_s: float = 60.0,
    headers: Mapping[str, str] | None = None,
    progress: Callable[[Progress], None] | None = None,
    progress_every_s: float = 5.0,
    stop: asyncio.Event | None = None,
) -> list[Record]:
    """POST ``body(i)`` to ``url`` at ``schedule[i]`` seconds from now; one record per request sent.

    Every request sent gets exactly one record, in index order, once all have answered or timed
    out. Setting ``stop`` ends the sending early; requests already sent are still awaited.

    Given several clients, request ``i`` goes through ``client[i % len(client)]``: httpcore's
    connection pool does work proportional to its open connections on every request, so many
    small pools cost far less CPU per request than one big one when many requests are in flight.
    """
    clients = [client] if isinstance(client, httpx.AsyncClient) else list(client)
    if not clients:
        raise ValueError("run_open_loop needs at least one client")
    send_headers = {"content-type": "application/json", **(headers or {})}
    order = list(range(len(schedule)))
    if any(b < a for a, b in itertools.pairwise(schedule)):
        order.sort(key=schedule.__getitem__)
    sender = _Sender(clients, url, body, send_headers, timeout_s, len(schedule))
    loop = sender.loop
    tasks: set[asyncio.Task[None]] = set()
    reporter = None
    if progress is not None:
        reporter = loop.create_task(sender.report(progress, progress_every_s))
    try:
        position = 0
        while position < len(order):
            if stop is not None and stop.is_set():
                logger.info("stopped after %d of %d requests", position, len(order))
                break
            now = sender.now()
            at = schedule[order[position]]
            if at > now:
                await asyncio.sleep(min(at - now, 0.25))
                continue
            while position < len(order) and schedule[order[position]] <= now:
                index = order[position]
                task = loop.create_task(sender.send(index, schedule[index]))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
                position += 1
        if tasks:
            await asyncio.wait(set(tasks))
    finally:
        if reporter is not None:
            reporter.cancel()
        for task in tasks:
            task.cancel()
    return [r for r in sender.records if r is not None]


@dataclass(frozen=True)
class Summary:
    """What a run achieved; latencies and lags in seconds (NaN when nothing to measure)."""

    requests: int
    ok: int
    errors_by_status: Mapping[str, int]
    duration_s: float
    latency_p50_s: float
    latency_p95_s: float
    latency_p99_s: float
    lag_p50_s: float
    lag_p99_s: float
    lag_max_s: float
    late: int  # sent more than LATE_S after schedule

    @property
    def achieved_rps(self) -> float:
        """Requests sent per second of the run."""
        return self.requests / self.duration_s if self.duration_s > 0 else 0.0

    @property
    def goodput_rps(self) -> float:
        """Successful answers per second of the run."""
        return self.ok / self.duration_s if self.duration_s > 0 else 0.0


def _percentile(values: Sequence[float], q: float) -> float:
    return float(np.percentile(values, q)) if len(values) else math.nan


def _error_key(record: Record) -> str:
    if record.status:
        return str(record.status)
    return record.error.split(":", 1)[0] or "no answer"


def summarize(records: Sequence[Record], duration_s: float) -> Summary:
    """Counts, latency percentiles of the answered requests, and send-lag statistics."""
    answered = [r.latency_s for r in records if r.status]
    lags = [r.lag_s for r in records]
    errors = Counter(_error_key(r) for r in records if not r.ok)
    return Summary(
        requests=len(records),
        ok=sum(1 for r in records if r.ok),
        errors_by_status=dict(sorted(errors.items())),
        duration_s=duration_s,
        latency_p50_s=_percentile(answered, 50),
        latency_p95_s=_percentile(answered, 95),
        latency_p99_s=_percentile(answered, 99),
        lag_p50_s=_percentile(lags, 50),
        lag_p99_s=_percentile(lags, 99),
        lag_max_s=max(lags, default=math.nan),
        late=sum(1 for lag in lags if lag > LATE_S),
    )


def poisson_arrivals(
    rate_rps: float, duration_s: float, *, seed: int, start_s: float = 0.0
) -> list[float]:
    """Arrival times of a Poisson process of ``rate_rps`` over ``duration_s``, seeded."""
    if rate_rps < 0 or duration_s < 0:
        raise ValueError(f"rate and duration must be non-negative, got {rate_rps}, {duration_s}")
    rng = np.random.default_rng(seed)
    count = int(rng.poisson(rate_rps * duration_s))
    return sorted(start_s + float(t) for t in rng.uniform(0.0, duration_s, size=count))
