"""Arrival schedules: when each request of an experiment is sent, in seconds from its start.

Within each step the arrivals form a Poisson process at that step's rate: the count is Poisson
with mean ``rate × step_s`` and the times are uniform within the step, which is the same process.
Seeded with ``numpy.random.default_rng`` so a schedule is reproducible.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from traces.errors import TraceError
from traces.trace import Trace


def poisson_schedule(trace: Trace, *, seed: int, until_s: float | None = None) -> list[float]:
    """Sorted arrival offsets for ``trace``, dropping any at or after ``until_s``."""
    if until_s is not None and not (math.isfinite(until_s) and until_s >= 0):
        raise TraceError(f"until_s must be a non-negative number, got {until_s!r}")
    rng = np.random.default_rng(seed)
    rates = np.asarray(trace.rates_rps, dtype=float)
    counts = rng.poisson(rates * trace.step_s)
    starts = np.repeat(np.arange(len(rates), dtype=float) * trace.step_s, counts)
    times = np.sort(starts + rng.uniform(0.0, trace.step_s, size=int(counts.sum())))
    if until_s is not None:
        times = times[: int(np.searchsorted(times, until_s, side="left"))]
    return [float(t) for t in times]


def exact_schedule(
    times_s: Sequence[float], *, speedup: float = 1.0, until_s: float | None = None
) -> list[float]:
    """Recorded arrival times replayed as they were (optionally ``speedup`` times faster)."""
    if not (math.isfinite(speedup) and speedup > 0):
        raise TraceError(f"speedup must be a positive number, got {speedup!r}")
    out = sorted(t / speedup for t in times_s)
    if out and out[0] < 0:
        raise TraceError(f"arrival times must be non-negative, got {out[0]!r}")
    if until_s is not None:
        out = [t for t in out if t < until_s]
    return out
