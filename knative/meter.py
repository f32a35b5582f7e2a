"""Time-weighted concurrency and request counts, as Knative's queue-proxy reports them.

Pure: every method takes ``now``. The platform calls :meth:`ConcurrencyMeter.arrive` and
:meth:`ConcurrencyMeter.depart` around each request (queued or executing) and, once a second,
:meth:`ConcurrencyMeter.sample` for the average concurrency and the request rate since the last
sample; those feed the KPA.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Sample:
    """One reporting period."""

    concurrency: float
    rps: float
    period_s: float


class ConcurrencyMeter:
    """Integrates in-flight requests over time."""

    def __init__(self, now: float) -> None:
        self.in_flight = 0
        self._since = now
        self._last_change = now
        self._area = 0.0
        self._arrivals = 0

    def _advance(self, now: float) -> None:
        if now > self._last_change:
            self._area += self.in_flight * (now - self._last_change)
            self._last_change = now

    def arrive(self, now: float) -> None:
        self._advance(now)
        self.in_flight += 1
        self._arrivals += 1

    def depart(self, now: float) -> None:
        if self.in_flight <= 0:
            raise ValueError("depart without a matching arrive")
        self._advance(now)
        self.in_flight -= 1

    def sample(self, now: float) -> Sample:
        """Average concurrency and rate since the previous sample; starts a new period."""
        self._advance(now)
        period = now - self._since
        if period <= 0:
            result = Sample(float(self.in_flight), 0.0, 0.0)
        else:
            result = Sample(self._area / period, self._arrivals / period, period)
        self._since = now
        self._area = 0.0
        self._arrivals = 0
        return result
