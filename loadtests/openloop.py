"""Open-loop load: each request leaves at its scheduled time, whether or not earlier ones returned.

Closed-loop tools (Locust's users) slow down when the server does and so hide queueing; an open
loop keeps the offered rate, which is what an SLO is measured against.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import httpx
import numpy as np


@dataclass(frozen=True)
class Outcome:
    """One request's fate; times in seconds relative to the start of the replay."""

    index: int
    scheduled_s: float
    sent_s: float
    latency_s: float
    status: int
    error: str = ""
    cold: bool = False
    compute_ms: float = 0.0
    platform_wait_ms: float = 0.0


def poisson_arrivals(
    rate_rps: float, duration_s: float, *, seed: int, start_s: float = 0.0
) -> list[float]:
    """Arrival times of a Poisson process of ``rate_rps`` over ``duration_s``, seeded."""
    if rate_rps < 0 or duration_s < 0:
        raise ValueError(f"rate and duration must be non-negative, got {rate_rps}, {duration_s}")
    rng = np.random.default_rng(seed)
    count = int(rng.poisson(rate_rps * duration_s))
    return sorted(start_s + float(t) for t in rng.uniform(0.0, duration_s, size=count))


async def replay(
    client: httpx.AsyncClient,
    url: str,
    arrivals: Sequence[float],
    body: Callable[[int], bytes],
    *,
    timeout_s: float = 60.0,
    headers: dict[str, str] | None = None,
) -> list[Outcome]:
    """POST ``body(i)`` to ``url`` at each arrival time; every request gets an outcome."""
    start = time.perf_counter()
    send_headers = {"content-type": "application/json", **(headers or {})}

    async def one(index: int, at: float) -> Outcome:
        delay = at - (time.perf_counter() - start)
        if delay > 0:
            await asyncio.sleep(delay)
        sent = time.perf_counter() - start
        try:
            response = await client.post(
                url, content=body(index), headers=send_headers, timeout=timeout_s
            )
        except httpx.HTTPError as exc:
            latency = time.perf_counter() - start - sent
            return Outcome(index, at, sent, latency, 0, error=f"{type(exc).__name__}: {exc}")
        latency = time.perf_counter() - start - sent
        error = "" if response.status_code < 400 else response.text[:200]
        return Outcome(
            index,
            at,
            sent,
            latency,
            response.status_code,
            error=error,
            cold=response.headers.get("x-cold-start") == "1",
            compute_ms=float(response.headers.get("x-compute-ms", 0.0)),
            platform_wait_ms=float(response.headers.get("x-platform-wait-ms", 0.0)),
        )

    return list(await asyncio.gather(*(one(i, at) for i, at in enumerate(arrivals))))
