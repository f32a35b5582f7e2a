"""The windows of observed round trips a :class:`slackwise_policies.latency.LatencyModel` reads
its medians, means and tails from."""

from __future__ import annotations

import bisect
import math
from collections import deque

__all__ = ["Window", "nearest_rank"]


def nearest_rank(ordered: list[float], q: float) -> float:
    """The nearest-rank ``q`` quantile of the sorted ``ordered`` (not empty)."""
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


class Window:
    """Timestamped values younger than ``window_s``, at most ``maxlen``, kept sorted as well so
    that the P95 is a lookup: every batch updates a window and the batching decision reads P95s
    all the time (a sort per read was most of the simulator's run time)."""

    __slots__ = ("_items", "_maxlen", "_sorted", "_sum", "_window_s")

    def __init__(self, window_s: float, maxlen: int) -> None:
        self._window_s = window_s
        self._maxlen = maxlen
        self._items: deque[tuple[float, float]] = deque()
        self._sorted: list[float] = []
        self._sum = 0.0

    def _drop_oldest(self) -> None:
        _, value = self._items.popleft()
        del self._sorted[bisect.bisect_left(self._sorted, value)]
        self._sum -= value

    def add(self, now: float, value: float) -> None:
        if len(self._items) >= self._maxlen:
            self._drop_oldest()
        self._items.append((now, value))
        bisect.insort(self._sorted, value)
        self._sum += value

    def prune(self, now: float) -> int:
        horizon = now - self._window_s
        items = self._items
        while items and items[0][0] < horizon:
            self._drop_oldest()
        return len(items)

    def mean(self) -> float:
        """The mean of the values (the window must not be empty)."""
        return self._sum / len(self._items)

    def p95(self) -> float:
        """The nearest-rank P95 (the window must not be empty)."""
        return self.quantile(0.95)

    def recent(self, now: float, seconds: float) -> list[float]:
        """The round trips (ms) of the batches that ran entirely within the last ``seconds``
        before ``now`` (sent and answered in them), sorted: one sent before, to a replica that
        then stalled, measures the stall and not the service as it is now."""
        horizon = now - seconds
        values = []
        for t, value in reversed(self._items):
            if t < horizon:
                break
            if t - value / 1000.0 >= horizon:
                values.append(value)
        return sorted(values)

    def quantile(self, q: float) -> float:
        """The nearest-rank ``q`` quantile, ``0 < q ≤ 1`` (the window must not be empty)."""
        return nearest_rank(self._sorted, q)
