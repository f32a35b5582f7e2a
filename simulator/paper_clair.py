"""Swayam's clairvoyant autoscalers as the paper defines them (§6.4, Fig. 9): ClairA1 and ClairA2.

ClairA knows each request's processing time ``c`` in advance and can provision a backend in the
past. It is *deadline-driven*: a request arriving at ``t`` runs as late as its deadline allows,
at ``t + RT_max - c``, on an idle backend that was provisioned (in the past, if need be) to be
ready then. So every request finishes exactly at its deadline and the SLA always holds.

Where the function batches (``max_batch`` > 1; the paper's backends serve one request at a time,
``max_batch`` 1 is its rule exactly), the head request leaves at the latest time its deadline
allows for the batch it goes in, and the batch holds every waiting request that arrived by then
(up to ``max_batch``): the largest ``n`` for which ``n`` requests have arrived by
``deadline - L(n)``. Later requests have later deadlines (one app, one ``RT_max``), so every member
finishes in time. ``L(n)`` is drawn once a batch from the profile's lognormal, as the
simulator's engine draws every other scaler's batch times (ClairA knows it in advance).

* **ClairA1**: zero setup, a backend exists only while it computes (immediate scale-in): its
  replica-seconds are the integral of the replicas busy (``slots`` batches each) over time, the
  size of the workload.
* **ClairA2**: Swayam-like: a backend takes the function's setup time (provisioned that long
  before its first batch, in the past) and is collected lazily: at every ``collect_s`` tick, a
  backend that has been idle since the previous tick is removed; until then it stays, warm and
  counted. A batch goes to the backend that was busy most recently, so the others go idle and
  are collected; a new backend is provisioned only when none has a free slot.

Pure functions over the arrival times; no simulation run.
"""

from __future__ import annotations

import bisect
import heapq
import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from simulator.compliance import compliance_pct

__all__ = [
    "Batch",
    "ClairOutcome",
    "clair_a1",
    "clair_a2",
    "deadline_batches",
    "most_running",
    "paper_row",
]


@dataclass(frozen=True, slots=True)
class Batch:
    """A batch ClairA runs: its first request's index, its size, its start and its length (s)."""

    first: int
    size: int
    start: float
    length: float

    @property
    def end(self) -> float:
        return self.start + self.length


def deadline_batches(
    arrivals: Sequence[float],
    rt_s: float,
    latency_s: Callable[[int, float], float],
    max_batch: int,
    draws: Callable[[], float] = lambda: 0.0,
) -> list[Batch]:
    """The batches of the deadline-driven rule, in start order, for ``arrivals`` (sorted, s).

    ``latency_s(n, z)``: a batch of ``n``'s processing time for the batch's draw ``z`` (one per
    batch, from ``draws``: the time ClairA knows in advance, from the same distribution the
    other scalers' batches take theirs)."""
    times = list(arrivals)
    batches = []
    i = 0
    while i < len(times):
        deadline = times[i] + rt_s
        z = draws()

        def fits(n: int, i: int = i, deadline: float = deadline, z: float = z) -> bool:
            return bisect.bisect_right(times, deadline - latency_s(n, z) - 1e-6, lo=i) - i >= n

        lo, hi = 1, min(max_batch, len(times) - i)
        while lo < hi:  # the largest n that fits (fits(n) implies fits(n - 1))
            mid = (lo + hi + 1) // 2
            lo, hi = (mid, hi) if fits(mid) else (lo, mid - 1)
        length = latency_s(lo, z)
        # a head whose SLO is below L(1) cannot be served in time: it starts when it arrives
        # (a microsecond early: the float sum of start and length must not land past it)
        start = max(times[i + lo - 1], deadline - length - 1e-6)
        batches.append(Batch(i, lo, start, length))
        i += lo
    return batches


@dataclass(frozen=True, slots=True)
class ClairOutcome:
    """What a clairvoyant used: replica-seconds, the most replicas at once, and each request's
    latency (s, in arrival order)."""

    replica_seconds: float
    peak_replicas: int
    latencies: np.ndarray
    end_s: float


def _latencies(arrivals: Sequence[float], batches: list[Batch]) -> np.ndarray:
    out = np.empty(len(arrivals))
    for b in batches:
        out[b.first : b.first + b.size] = b.end - np.asarray(arrivals[b.first : b.first + b.size])
    return out


def clair_a1(arrivals: Sequence[float], batches: list[Batch], *, slots: int) -> ClairOutcome:
    """ClairA1: replicas only while they compute, ``slots`` batches each."""
    events = sorted([(b.start, 1) for b in batches] + [(b.end, -1) for b in batches])
    busy, peak, last, total = 0, 0, 0.0, 0.0
    for t, change in events:
        total += math.ceil(busy / slots) * (t - last)
        busy += change
        last = t
        peak = max(peak, math.ceil(busy / slots))
    end = max((b.end for b in batches), default=0.0)
    return ClairOutcome(total, peak, _latencies(arrivals, batches), end)


@dataclass(slots=True)
class _Backend:
    created: float
    free_at: list[float]  # each slot's end of its current batch
    last_end: float


def clair_a2(
    arrivals: Sequence[float],
    batches: list[Batch],
    *,
    slots: int,
    setup_s: float,
    collect_s: float,
) -> ClairOutcome:
    """ClairA2: backends provisioned ``setup_s`` before they are needed, collected at the first
    ``collect_s`` tick after a whole period idle; the run ends at the last completion."""
    end = max((b.end for b in batches), default=0.0)
    live: list[_Backend] = []
    total, peak, next_tick = 0.0, 0, collect_s
    for b in batches:
        while next_tick <= b.start:  # the collections due before this batch starts
            kept = []
            for k in live:
                if max(k.free_at) <= next_tick - collect_s:
                    total += next_tick - k.created
                else:
                    kept.append(k)
            live = kept
            next_tick += collect_s
        ready = [k for k in live if min(k.free_at) <= b.start]
        if ready:
            backend = max(ready, key=lambda k: k.last_end)  # the most recently busy
        else:
            backend = _Backend(b.start - setup_s, [b.start] * slots, b.start)
            live.append(backend)
        slot = min(range(slots), key=lambda s: backend.free_at[s])
        backend.free_at[slot] = b.end
        backend.last_end = max(backend.last_end, b.end)
        peak = max(peak, len(live))
    total += sum(end - k.created for k in live)
    return ClairOutcome(total, peak, _latencies(arrivals, batches), end)


def most_running(batches: list[Batch]) -> int:
    """The most batches running at once (ClairA1's peak is this over ``slots``, rounded up)."""
    running: list[float] = []
    most = 0
    for b in batches:
        while running and running[0] <= b.start:
            heapq.heappop(running)
        heapq.heappush(running, b.end)
        most = max(most, len(running))
    return most


def paper_row(
    name: str,
    arrivals: Sequence[float],
    *,
    slo_ms: float,
    level_pct: float,
    medians_ms: Sequence[float],
    sigmas: Sequence[float],
    seed: int,
    max_batch: int,
    slots: int,
    setup_s: float,
    collect_s: float,
    window: int,
    step: int,
) -> dict[str, Any]:
    """``clair_a1`` or ``clair_a2`` over ``arrivals``: the comparison's row (the keys every
    scaler's row has; compliance is computed from the latencies, not assumed). ``medians_ms``
    and ``sigmas`` by batch size (index 0 unused): the service curve's lognormal, as the
    simulator's engine draws batches from it (:meth:`simulator.service.ServiceCurve.tables`)."""
    rng = random.Random(seed)

    def latency_s(n: int, z: float) -> float:  # lognormal about the median, as the engine's
        return medians_ms[n] * math.exp(sigmas[n] * z) / 1000.0

    draws = (lambda: rng.gauss(0.0, 1.0)) if any(sigmas) else (lambda: 0.0)
    batches = deadline_batches(arrivals, slo_ms / 1000.0, latency_s, max_batch, draws)
    if name == "clair_a1":
        out = clair_a1(arrivals, batches, slots=slots)
        setup_s = 0.0
    else:
        out = clair_a2(arrivals, batches, slots=slots, setup_s=setup_s, collect_s=collect_s)
    ms = out.latencies * 1000.0
    duration = out.end_s
    compliant = compliance_pct(
        ms, rt_max_ms=slo_ms, service_level_pct=level_pct, window=window, step=step
    )
    return {
        "replica_seconds": round(out.replica_seconds, 3),
        "compliance_pct": round(compliant, 3),
        "violation_pct": round(100.0 * float(np.mean(ms > slo_ms)), 4) if len(ms) else 0.0,
        "cold_start_hits": 0,
        "requests": len(arrivals),
        "p50_ms": round(float(np.percentile(ms, 50)), 3) if len(ms) else 0.0,
        "p99_ms": round(float(np.percentile(ms, 99)), 3) if len(ms) else 0.0,
        "mean_batch": round(len(arrivals) / len(batches), 3) if batches else 0.0,
        "mean_replicas": round(out.replica_seconds / duration, 3) if duration else 0.0,
        "peak_replicas": out.peak_replicas,
        "cold_batches": 0,
        "duration_s": round(duration, 3),
        "bootstrap": None,
        "setup_s": round(setup_s, 3),
        "batches": len(batches),
    }
