"""Arrival-rate prediction by linear regression over a history window (Swayam §4.2).

Swayam predicts each service's request rate ``t_setup`` seconds ahead by linear regression over
the recent request history (500 s in its evaluation), so that a replica asked for now is warm
when the load arrives. :class:`RatePredictor` keeps per-bucket arrival counts (one-second
buckets by default) for one function as seen by one adapter, and fits ``count = α + β·t`` by
least squares over the buckets of the window.

Rules chosen where the paper leaves room:

* **Only complete buckets are fitted.** The bucket ``now`` falls in is still filling; fitting it
  would read every prediction as a sudden drop. It counts in :meth:`RatePredictor.current`.
* **The window starts at the first arrival** (or at ``start`` when given): seconds before the
  predictor heard of the function are unknown, not zero. After that, a bucket without arrivals
  is a zero, so a function that goes quiet is predicted to stay quiet.
* **Little history.** With fewer than ``min_fit_buckets`` complete buckets the prediction is the
  mean rate so far (no trend from two points); with none, the rate since the first arrival.
* **Never negative**: a falling trend is clipped at zero.

Memory is bounded by the window: a deque of non-empty buckets (at most ``history_s / bucket_s``).
:meth:`RatePredictor.record` is O(1) amortised; :meth:`RatePredictor.predict` is O(window), called
once per autoscaling tick. Time is injected (monotonic seconds), as everywhere in the adapter.
"""

from __future__ import annotations

import math
from collections import deque

__all__ = ["RatePredictor"]


class RatePredictor:
    """Per-bucket arrival counts of one function and a least-squares forecast of its rate."""

    def __init__(
        self,
        *,
        history_s: float = 500.0,
        bucket_s: float = 1.0,
        current_window_s: float = 10.0,
        min_fit_buckets: int = 10,
        start: float | None = None,
    ) -> None:
        if not (math.isfinite(bucket_s) and bucket_s > 0.0):
            raise ValueError(f"bucket_s must be > 0, got {bucket_s!r}")
        if not (math.isfinite(history_s) and history_s >= 2.0 * bucket_s):
            raise ValueError(
                f"history_s must be at least two buckets ({2 * bucket_s:g}), got {history_s!r}"
            )
        if not (math.isfinite(current_window_s) and current_window_s > 0.0):
            raise ValueError(f"current_window_s must be > 0, got {current_window_s!r}")
        if min_fit_buckets < 2:
            raise ValueError(f"min_fit_buckets must be >= 2, got {min_fit_buckets!r}")
        if start is not None and not math.isfinite(start):
            raise ValueError(f"start must be finite, got {start!r}")
        self.history_s = history_s
        self.bucket_s = bucket_s
        self.current_window_s = current_window_s
        self.min_fit_buckets = min_fit_buckets
        self._buckets_in_window = max(2, round(history_s / bucket_s))
        self._counts: deque[list[int]] = deque()  # [bucket index, count], oldest first
        self._start = start
        self._total = 0

    def _index(self, now: float) -> int:
        return math.floor(now / self.bucket_s)

    def _prune(self, newest: int) -> None:
        oldest = newest - self._buckets_in_window
        counts = self._counts
        while counts and counts[0][0] <= oldest:
            counts.popleft()

    def record(self, now: float, count: int = 1) -> None:
        """Count ``count`` arrivals at ``now``. Times may repeat; a time older than the newest
        bucket is added to its own bucket when still in the window, else ignored."""
        if count < 0:
            raise ValueError(f"count must be >= 0, got {count!r}")
        if not math.isfinite(now):
            raise ValueError(f"now must be finite, got {now!r}")
        if count == 0:
            return
        if self._start is None:
            self._start = now
        index = self._index(now)
        counts = self._counts
        if counts and counts[-1][0] == index:
            counts[-1][1] += count
        elif not counts or counts[-1][0] < index:
            counts.append([index, count])
            self._prune(index)
        else:  # out of order: find its bucket (rare, short walk from the right)
            if index <= counts[-1][0] - self._buckets_in_window:
                return
            for i in range(len(counts) - 1, -1, -1):
                if counts[i][0] == index:
                    counts[i][1] += count
                    break
                if counts[i][0] < index:
                    counts.insert(i + 1, [index, count])
                    break
            else:
                counts.appendleft([index, count])
        self._total += count

    @property
    def total(self) -> int:
        """Arrivals recorded since the start (all time, for reports)."""
        return self._total

    def _first_index(self, now: float) -> int | None:
        if self._start is None:
            return None
        return max(self._index(self._start), self._index(now) - self._buckets_in_window + 1)

    def current(self, now: float, window_s: float | None = None) -> float:
        """The recent arrival rate (per second): arrivals in the last ``current_window_s``
        (or ``window_s``, when given: at most that window) with the filling bucket included,
        over that span, or over the time since the start when that is shorter (at least one
        bucket)."""
        if self._start is None:
            return 0.0
        self._prune(self._index(now))
        window = self.current_window_s if window_s is None else min(window_s, self.current_window_s)
        span = min(window, max(now - self._start, self.bucket_s))
        since = now - span
        arrivals = 0.0
        for index, count in reversed(self._counts):
            begin = index * self.bucket_s
            end = begin + self.bucket_s
            if end <= since:
                break
            # the bucket straddling the span's start counts in proportion
            arrivals += count if begin >= since else count * (end - since) / self.bucket_s
        return arrivals / span

    def predict(self, now: float, horizon_s: float = 0.0) -> float:
        """The arrival rate (per second) forecast ``horizon_s`` after ``now``; never negative."""
        if not (math.isfinite(horizon_s) and horizon_s >= 0.0):
            raise ValueError(f"horizon_s must be >= 0, got {horizon_s!r}")
        first = self._first_index(now)
        if first is None:
            return 0.0
        newest = self._index(now)
        self._prune(newest)
        last = newest - 1  # the last complete bucket
        m = last - first + 1
        if m < 1:
            return max(0.0, self.current(now))
        ys: list[tuple[int, int]] = [(i, c) for i, c in self._counts if first <= i <= last]
        sum_y = float(sum(c for _, c in ys))
        if m < self.min_fit_buckets:
            return sum_y / (m * self.bucket_s)
        # x = bucket index − first, over 0..m−1 (empty buckets are zeros: only Σx, Σx² see them)
        sum_x = m * (m - 1) / 2.0
        sum_xx = (m - 1) * m * (2 * m - 1) / 6.0
        sum_xy = float(sum((i - first) * c for i, c in ys))
        sxx = sum_xx - sum_x * sum_x / m
        slope = (sum_xy - sum_x * sum_y / m) / sxx
        intercept = (sum_y - slope * sum_x) / m
        # a bucket's count is its rate × bucket_s at its middle (x + 0.5 buckets after first)
        x_at = (now + horizon_s) / self.bucket_s - first - 0.5
        return max(0.0, (intercept + slope * x_at) / self.bucket_s)
