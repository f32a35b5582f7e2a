"""The burst threshold ``U`` from evidence: how far the seconds have run above what was sized for.

Swayam multiplies the forecast rate by a fixed burst threshold ``U`` (2 in its evaluation) so
that the seconds that run above the forecast still find replicas. How far they run above it is a
property of the traffic: on the Fig. 9 traces the cheapest fixed ``U`` that keeps the SLA ranges
from 1.3 (Twitter) to 2 (NASA, whose seconds swing by half their rate: docs/simulator.md). With
``advisor.burst_u: auto`` the advisor measures it instead of assuming it:

* **A surprise** is one complete second's arrival rate over the rate the count serving it was
  sized for: the rate the advisor sized for (its forecast or the current rate, before ``U``) at
  the last decision at least one setup time before the second began, because a replica asked for
  after that was not up in time to serve it.
* **U** is the SLO's percentile of the surprises of the last ``history_s`` seconds (the advisor's
  regression window): the seconds that run above ``U`` times the sizing are as rare as the
  requests the SLO lets be late. It is at least 1 (a count never sized below its forecast) and
  at most ``most``; until ``min_samples`` seconds have been judged it is ``start`` (Swayam's 2).

Poisson noise is part of what is measured, on purpose: at a low rate a second's arrivals vary by
a larger share of the rate, and a small fleet has less slack to absorb them. Pure: the time is an
argument; :class:`adapter.policies.advisor.Advisor` feeds it at each decision.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable

__all__ = ["BurstThreshold"]

#: seconds judged before the measured U replaces the start value
MIN_SAMPLES = 60
#: the largest measured U (a cold start's first burst reads as a surprise of thousands)
MOST = 3.0


class BurstThreshold:
    """One function's surprises over the last ``history_s`` and the ``U`` they ask for."""

    def __init__(
        self,
        *,
        percentile: float,
        history_s: float,
        start: float,
        most: float = MOST,
        min_samples: int = MIN_SAMPLES,
    ) -> None:
        if not 0.0 < percentile < 100.0:
            raise ValueError(f"percentile must be within (0, 100), got {percentile!r}")
        if not (math.isfinite(history_s) and history_s > 0.0):
            raise ValueError(f"history_s must be > 0, got {history_s!r}")
        if not 1.0 <= start <= most:
            raise ValueError(f"start must be within [1, most], got {start!r}")
        if min_samples < 1:
            raise ValueError(f"min_samples must be >= 1, got {min_samples!r}")
        self.percentile = percentile
        self.history_s = history_s
        self.start = start
        self.most = most
        self.min_samples = min_samples
        #: (when, local rate the count was sized for before U), oldest first
        self._sized: deque[tuple[float, float]] = deque()
        #: (second's start, surprise), oldest first
        self._surprises: deque[tuple[float, float]] = deque()
        self._judged: float = -math.inf
        self._u = start

    @property
    def judged(self) -> float:
        """The start of the last second judged (-inf before the first)."""
        return self._judged

    @property
    def u(self) -> float:
        """The threshold as last measured (``start`` before ``min_samples`` seconds)."""
        return self._u

    def sized(self, now: float, rate: float) -> None:
        """The advisor sized for ``rate`` requests per second (before ``U``) at ``now``."""
        if self._sized and self._sized[-1][0] == now:
            self._sized[-1] = (now, rate)
        else:
            self._sized.append((now, rate))

    def judge(self, seconds: Iterable[tuple[float, float]], setup_s: float) -> float:
        """Judge each complete second ``(start, arrival rate)`` not judged before against the
        sizing in force one ``setup_s`` before it began; returns ``U`` now."""
        sized = self._sized
        for start, rate in seconds:
            if start <= self._judged:
                continue
            self._judged = start
            cutoff = start - setup_s
            while len(sized) > 1 and sized[1][0] <= cutoff:
                sized.popleft()
            if not sized or sized[0][0] > cutoff or sized[0][1] <= 0.0:
                continue  # nothing was sized in time for this second
            self._surprises.append((start, rate / sized[0][1]))
        surprises = self._surprises
        while surprises and surprises[0][0] < self._judged - self.history_s:
            surprises.popleft()
        if len(surprises) >= self.min_samples:
            ordered = sorted(s for _, s in surprises)
            rank = max(0, math.ceil(self.percentile / 100.0 * len(ordered)) - 1)
            self._u = min(self.most, max(1.0, ordered[rank]))
        return self._u
