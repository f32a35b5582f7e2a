"""What the decision to wait for company reads from the live path (time injected, pure).

:func:`slackwise_policies.batching.decide` waits for a bigger batch only when the arrivals expected
within
the remaining slack make one worth its wait. It needs two measurements:

- :class:`RecentRate`: the function's arrival rate in instances per second over the last
  ``window_s`` (one second by default: long enough to average a Poisson stream of tens of
  requests per second, short enough to follow a burst).
- :class:`PathMargin`: how much of a request's SLO the path spends outside the batch round trip
  that the latency model sees: from the adapter taking the request until it is queued (reading
  and parsing the body), and from the batch's answer until the client's answer is written
  (resuming the handler, encoding). Its P95 over recent requests, plus a fixed ``floor_ms`` for
  the legs nobody in the adapter can time (the client's own send and receive).
"""

from __future__ import annotations

import bisect
from collections import deque

__all__ = ["FIRST_SPAN", "PathMargin", "RecentRate"]

#: the least share of its window over which :meth:`RecentRate.rate` reads its first arrivals
FIRST_SPAN = 0.01


class RecentRate:
    """Instances per second that arrived within the last ``window_s``."""

    __slots__ = ("_events", "_first", "_total", "window_s")

    def __init__(self, window_s: float = 1.0) -> None:
        if not window_s > 0:
            raise ValueError(f"window_s must be positive, got {window_s!r}")
        self.window_s = window_s
        self._events: deque[tuple[float, int]] = deque()
        self._total = 0
        self._first: float | None = None

    def record(self, now: float, size: int = 1) -> None:
        if self._first is None:
            self._first = now
        self._events.append((now, size))
        self._total += size
        self._prune(now)

    def _prune(self, now: float) -> None:
        horizon = now - self.window_s
        events = self._events
        while events and events[0][0] <= horizon:
            self._total -= events.popleft()[1]

    def rate(self, now: float, *, since_first: bool = False) -> float:
        """Arrivals in ``(now - window_s, now]``, per second.

        ``since_first``: within the first ``window_s`` after the first arrival, over the time
        since that arrival (at least :data:`FIRST_SPAN` of the window) instead of over a window
        that has not passed yet. The batch that keeps up with a flood that starts with the
        process is then read from its first hundredth of a second, not from a tenth of its rate
        at 0.1 s, which sent it in batches too small to carry it (WL1-GPU's first second under
        GS-T, docs/simulator.md). The door reads the window as it is: what it admits early in a
        flood is priced against the company it has seen, not the company it may get."""
        self._prune(now)
        span = self.window_s
        first = self._first
        if since_first and first is not None and now - first < span:
            span = max(now - first, FIRST_SPAN * span)
        return self._total / span


class PathMargin:
    """P95 of recent path-overhead samples (ms) plus ``floor_ms``; at most ``maxlen`` kept."""

    __slots__ = ("_samples", "_sorted", "floor_ms")

    def __init__(self, *, floor_ms: float = 1.0, maxlen: int = 512) -> None:
        if floor_ms < 0:
            raise ValueError(f"floor_ms must be >= 0, got {floor_ms!r}")
        self.floor_ms = floor_ms
        self._samples: deque[float] = deque(maxlen=maxlen)
        self._sorted: list[float] = []

    def observe(self, overhead_ms: float) -> None:
        if len(self._samples) == self._samples.maxlen:
            oldest = self._samples[0]
            del self._sorted[bisect.bisect_left(self._sorted, oldest)]
        self._samples.append(overhead_ms)
        bisect.insort(self._sorted, overhead_ms)

    def margin_ms(self) -> float:
        """The margin to keep off a batch's dispatch timeout."""
        if not self._sorted:
            return self.floor_ms
        rank = max(0, int(0.95 * len(self._sorted) + 0.5) - 1)
        return self.floor_ms + max(0.0, self._sorted[rank])
