"""Service times of a simulated function, drawn from its measured batch-latency profile.

A profile (``functions.profile_format``) gives, per measured batch size, the median and the P95
of a batch's latency. :class:`ServiceCurve` interpolates both linearly between measured sizes
(and extends the last segment's slope past the largest, never downwards) and draws a batch's
service time from a log-normal with that median whose 95th percentile is the measured P95:
``median × exp(σ·Z)`` with ``σ = ln(P95 / median) / 1.645``. The HTTP round trip table is used
when the profile has one (it is what the adapter waits for), else the in-process one.

``deterministic`` curves return the median every time (queueing-theory checks, ablations).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from importlib.resources.abc import Traversable
from pathlib import Path

from functions.profile_format import Profile, load_profile

__all__ = ["Z95", "ServiceCurve"]

#: the standard normal's 95th percentile
Z95 = 1.6448536269514722


def _interpolate(sizes: tuple[int, ...], values: tuple[float, ...], n: int) -> float:
    if n <= sizes[0]:
        return values[0] * (n / sizes[0]) if sizes[0] > 1 else values[0]
    for i in range(1, len(sizes)):
        if n <= sizes[i]:
            x0, x1, y0, y1 = sizes[i - 1], sizes[i], values[i - 1], values[i]
            return y0 + (y1 - y0) * (n - x0) / (x1 - x0)
    if len(sizes) == 1:
        return values[0]
    slope = max(0.0, (values[-1] - values[-2]) / (sizes[-1] - sizes[-2]))
    return values[-1] + slope * (n - sizes[-1])


@dataclass(frozen=True)
class ServiceCurve:
    """Median and P95 batch latency (ms) by batch size, the prior fit and the cold start."""

    name: str
    sizes: tuple[int, ...]
    medians_ms: tuple[float, ...]
    p95s_ms: tuple[float, ...]
    prior_a_ms: float
    prior_b_ms: float
    cold_start_s: float
    source: str = ""

    def __post_init__(self) -> None:
        count = len(self.sizes)
        if not count or len(self.medians_ms) != count or len(self.p95s_ms) != count:
            raise ValueError(f"{self.name}: a curve needs one median and one P95 per size")
        if list(self.sizes) != sorted(set(self.sizes)) or self.sizes[0] < 1:
            raise ValueError(f"{self.name}: batch sizes must be increasing and >= 1")
        if any(not m > 0 for m in self.medians_ms):
            raise ValueError(f"{self.name}: medians must be positive, got {self.medians_ms}")

    @classmethod
    def from_profile(
        cls, profile: Profile, *, name: str | None = None, source: str = ""
    ) -> ServiceCurve:
        stats = profile.http or profile.inprocess
        if not stats:
            raise ValueError(f"profile {profile.kind!r} has no batch latencies")
        sizes = tuple(sorted(stats))
        cold = profile.cold_start_s
        cold_s = cold.ready_s if cold.ready_s is not None else cold.load_ms / 1000.0
        return cls(
            name=name or profile.kind,
            sizes=sizes,
            medians_ms=tuple(stats[n].median for n in sizes),
            p95s_ms=tuple(max(stats[n].p95, stats[n].median) for n in sizes),
            prior_a_ms=profile.linear_fit.a_ms,
            prior_b_ms=profile.linear_fit.b_ms_per_item,
            cold_start_s=cold_s,
            source=source,
        )

    @classmethod
    def load(cls, path: Path | Traversable, *, name: str | None = None) -> ServiceCurve:
        """Read a profile file (raises ``ProfileFormatError`` naming the key)."""
        return cls.from_profile(load_profile(path), name=name, source=str(path))

    def median_ms(self, n: int) -> float:
        return _interpolate(self.sizes, self.medians_ms, n)

    def p95_ms(self, n: int) -> float:
        return max(self.median_ms(n), _interpolate(self.sizes, self.p95s_ms, n))

    def tables(self, max_batch: int, *, deterministic: bool) -> tuple[list[float], list[float]]:
        """``(median_ms, sigma)`` indexed by batch size ``0..max_batch`` (index 0 unused)."""
        medians = [0.0] + [self.median_ms(n) for n in range(1, max_batch + 1)]
        if deterministic:
            return medians, [0.0] * (max_batch + 1)
        sigmas = [0.0] + [
            math.log(self.p95_ms(n) / self.median_ms(n)) / Z95 for n in range(1, max_batch + 1)
        ]
        return medians, sigmas
