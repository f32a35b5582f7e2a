"""The ``Trace`` value: a request rate per step, each step lasting ``step_s`` seconds."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from traces.errors import TraceError


@dataclass(frozen=True)
class Trace:
    """Arrival rates in requests per second, one per step of ``step_s`` seconds.

    ``source`` says where the rates came from (file and window, or the generator and its
    parameters) and every transformation applied since; ``synthetic`` is true for any trace the
    project generated itself rather than read from recorded traffic.
    """

    rates_rps: tuple[float, ...]
    step_s: float = 1.0
    source: str = ""
    synthetic: bool = False
    _peak: float = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not (math.isfinite(self.step_s) and self.step_s > 0):
            raise TraceError(f"step_s must be a positive number, got {self.step_s!r}")
        rates = tuple(float(r) for r in self.rates_rps)
        for i, rate in enumerate(rates):
            if not (math.isfinite(rate) and rate >= 0):
                raise TraceError(f"{self.source or 'trace'}: step {i} has bad rate {rate!r}")
        object.__setattr__(self, "rates_rps", rates)
        object.__setattr__(self, "_peak", max(rates, default=0.0))

    def __len__(self) -> int:
        return len(self.rates_rps)

    @property
    def duration_s(self) -> float:
        """Seconds the whole trace lasts."""
        return len(self.rates_rps) * self.step_s

    @property
    def peak_rps(self) -> float:
        """The highest rate of any step (0 for an empty trace)."""
        return self._peak

    @property
    def mean_rps(self) -> float:
        """The time-averaged rate (0 for an empty trace)."""
        return sum(self.rates_rps) / len(self.rates_rps) if self.rates_rps else 0.0

    @property
    def expected_requests(self) -> float:
        """The mean number of arrivals over the whole trace."""
        return sum(self.rates_rps) * self.step_s

    def rate_at(self, t_s: float) -> float | None:
        """The rate at ``t_s`` seconds from the start, or None once the trace is over."""
        if t_s < 0:
            return self.rates_rps[0] if self.rates_rps else None
        index = int(t_s // self.step_s)
        return self.rates_rps[index] if index < len(self.rates_rps) else None
