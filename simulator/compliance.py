"""Swayam's SLA compliance frequency: the share of sliding windows of requests that meet the SLA.

Swayam (Middleware'17 §5, "Interpreting the figures"; Fig. 9) measures compliance over a fixed
number of requests rather than a time interval: take the requests in arrival order, a window of
1000 consecutive ones sliding by 10, and call a window compliant when at least ``SL`` % of its
requests finished within ``RT_max``. The compliance frequency is the percentage of compliant
windows. A burst therefore fails many overlapping windows, not one interval: the metric is
stricter than a time-smoothed percentile, as the paper notes.

Edge rules chosen here: fewer requests than a window make one window of all of them; no request
at all is vacuously compliant (100 %). A window meets the SLA when its count of good requests is
at least ``⌈SL/100 × window⌉`` (integer arithmetic, so 99 % of 1000 is exactly 990).
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

__all__ = ["compliance_pct", "compliant_windows"]


def compliant_windows(
    good: npt.ArrayLike, *, service_level_pct: float, window: int = 1000, step: int = 10
) -> tuple[int, int]:
    """``(compliant, total)`` windows over ``good`` (one boolean per request, arrival order)."""
    if not (math.isfinite(service_level_pct) and 0.0 < service_level_pct <= 100.0):
        raise ValueError(f"service_level_pct must be within (0, 100], got {service_level_pct!r}")
    if window < 1 or step < 1:
        raise ValueError(f"window and step must be >= 1, got {window!r} and {step!r}")
    flags = np.asarray(good, dtype=bool)
    n = len(flags)
    if n == 0:
        return 0, 0
    size = min(window, n)
    need = math.ceil(service_level_pct / 100.0 * size - 1e-9)
    cumulative = np.concatenate(([0], np.cumsum(flags, dtype=np.int64)))
    starts = np.arange(0, n - size + 1, step)
    counts = cumulative[starts + size] - cumulative[starts]
    return int(np.count_nonzero(counts >= need)), len(starts)


def compliance_pct(
    latencies_ms: npt.ArrayLike,
    *,
    rt_max_ms: float,
    service_level_pct: float,
    window: int = 1000,
    step: int = 10,
) -> float:
    """Percent of windows in which at least ``service_level_pct`` % of the requests (latencies
    in arrival order) finished within ``rt_max_ms``."""
    lat = np.asarray(latencies_ms, dtype=np.float64)
    ok, total = compliant_windows(
        lat <= rt_max_ms, service_level_pct=service_level_pct, window=window, step=step
    )
    return 100.0 if total == 0 else 100.0 * ok / total
