"""How long a chain's requests take by how many of its requests were in flight ahead of them,
measured: the evidence a chain's door judges by when its model cannot see the crowd.

A chain's first stage prices the stages after it from their queues and latency models
(:func:`slackwise_policies.admission.expected_finish`). What that arithmetic cannot see is the
crowd already inside the chain: the requests that were admitted a moment ago and are still at
the first stage will be ahead at every later one, and on a fleet whose stages share cores every
request in flight slows the others down. Live, with the img-query chain on one core at ten
times its capacity, a request's end-to-end latency grew by about 65 ms for each request in
flight ahead of it (median 69 ms alone, 228 ms behind two, 404 ms behind five); the door, whose
arithmetic said a few milliseconds more per request, admitted up to ten at once, and half of
them finished late.

:class:`Crowding` keeps, for each number ``n`` of requests ahead at admission, the end-to-end
latencies of the requests admitted with ``n`` ahead that finished within the last
``window_s``. Judged for a request with ``n`` ahead: the ``quantile`` of the latencies behind
``n`` (or behind the most that were seen: a crowd can only add), and above the largest ``n``
with evidence, that plus the slope the evidence shows per request ahead; the request is refused
when that exceeds ``aim`` of its budget. A request with nothing ahead is always admitted, as at
a function's door, so the evidence is never starved; a bucket whose evidence ages out is tried
again by extrapolation from the ones below it, one request deeper at a time. Pure: the time is
an argument.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

__all__ = ["Crowding", "CrowdingRefusal", "level_of"]


@dataclass(frozen=True)
class CrowdingRefusal:
    """A request with ``ahead`` in flight before it would take about ``expected_s``, which is
    ``late_s`` past what its budget allows."""

    ahead: int
    expected_s: float
    late_s: float


def level_of(ahead: int) -> int:
    """The level a count of requests ahead is kept under: itself up to 4, then the low end of
    its half-octave (4, 6, 8, 12, 16, 24, ...), so that a crowd that sweeps through counts it
    meets once each still leaves evidence enough at each level."""
    if ahead <= 4:
        return max(0, ahead)
    power = 1 << (ahead.bit_length() - 1)
    half = power >> 1
    return power + half if ahead >= power + half else power


class Crowding:
    """Latency by the requests in flight ahead, from evidence (see the module docstring)."""

    def __init__(
        self,
        *,
        quantile: float = 0.99,
        aim: float = 0.9,
        window_s: float = 10.0,
        min_samples: int = 4,
        keep: int = 64,
    ) -> None:
        if not 0.0 < quantile <= 1.0:
            raise ValueError(f"quantile must be in (0, 1], got {quantile!r}")
        if not 0.0 < aim <= 1.0:
            raise ValueError(f"aim must be in (0, 1], got {aim!r}")
        self.quantile = quantile
        self.aim = aim
        self.window_s = window_s
        self.min_samples = max(1, min_samples)
        self.keep = keep
        #: a level of requests ahead at admission (:func:`level_of`) -> (finished at,
        #: end-to-end latency s), oldest first
        self._seen: dict[int, deque[tuple[float, float]]] = {}
        #: the latency each request more ahead adds, as last measured over two levels or more
        #: (kept when the evidence narrows to one level: a flood holds the count at its limit,
        #: and the counts below it age out)
        self._slope_s = 0.0

    def observe(self, now: float, ahead: int, latency_s: float) -> None:
        """A request admitted with ``ahead`` in flight before it finished (or was given up) at
        ``now``, ``latency_s`` after it arrived."""
        key = level_of(ahead)
        seen = self._seen.get(key)
        if seen is None:
            seen = self._seen[key] = deque(maxlen=self.keep)
        seen.append((now, latency_s))

    def _levels(self, now: float) -> list[tuple[int, float]]:
        """(ahead, the quantile of its fresh latencies) for every count with enough evidence,
        fewest ahead first; stale evidence is dropped on the way."""
        levels = []
        for ahead in sorted(self._seen):
            seen = self._seen[ahead]
            while seen and seen[0][0] < now - self.window_s:
                seen.popleft()
            if len(seen) >= self.min_samples:
                values = sorted(latency for _, latency in seen)
                rank = min(len(values), max(1, math.ceil(self.quantile * len(values))))
                levels.append((ahead, values[rank - 1]))
        return levels

    def expected_s(self, now: float, ahead: int) -> float | None:
        """What a request admitted now with ``ahead`` in flight before it is expected to take
        (the quantile), or None with no evidence at or below ``ahead``."""
        levels = self._levels(now)
        if len(levels) >= 2:  # the slope per request ahead, kept for when one level is left
            (first, first_q), (top, top_q) = levels[0], levels[-1]
            self._slope_s = max(0.0, (top_q - first_q) / (top - first))
        key = level_of(ahead)
        below = [(n, q) for n, q in levels if n <= key]
        if not below:
            return None
        expected = max(q for _, q in below)
        top, top_q = below[-1]
        if top < ahead and not any(n > key for n, _ in levels):
            # nothing seen this deep: the slope of what was seen, per request more
            expected = max(expected, top_q + self._slope_s * (ahead - top))
        return expected

    def judge(self, now: float, ahead: int, budget_s: float) -> CrowdingRefusal | None:
        """Refuse a request arriving at ``now`` with ``ahead`` in flight before it and
        ``budget_s`` to its deadline when the evidence says it would take more than ``aim`` of
        it; None: admit. Nothing ahead is always admitted."""
        if ahead <= 0:
            return None
        expected = self.expected_s(now, ahead)
        if expected is None or expected <= self.aim * budget_s:
            return None
        return CrowdingRefusal(ahead, expected, expected - self.aim * budget_s)

    def deepest(self, now: float, budget_s: float, *, limit: int = 64) -> int:
        """The most requests ahead with which one is admitted now (for the status)."""
        ahead = 0
        while ahead < limit and self.judge(now, ahead + 1, budget_s) is None:
            ahead += 1
        return ahead

    def status(self, now: float, budget_s: float) -> dict[str, object]:
        """What the chain's door sees of its crowd now: the quantile per count ahead (ms) and
        the deepest admitted."""
        return {
            "quantile": self.quantile,
            "aim": self.aim,
            "ms_by_ahead": {str(n): round(1000.0 * q, 1) for n, q in self._levels(now)},
            "deepest_admitted": self.deepest(now, budget_s),
        }
