"""What a cold start costs the SLA: the requests that arrive while a replica starts after a lull.

The hybrid keep-alive (:mod:`slackwise_policies.keepalive`) trades an idle replica's seconds
against a cold start priced in replica-seconds. Under a windowed SLA (Swayam's: 99 % of every
1,000 consecutive requests within the SLO) a cold start has a price of another kind: every
request that arrives while the replica starts waits out the setup time and misses, and once more
of them miss than one window may (10 for a P99 over 1,000), every window that holds them fails,
about ``window / step`` windows for one cold start. On a bursty function (Azure's LLM
code-completion trace, docs/simulator.md: most seconds empty, a median of 134 requests within
a setup time after each lull of ten seconds or more) two cold starts after lulls of 143 and 216 s
cost about 5.6 points of window compliance, where keeping the last replica through every lull
cost 4 % more replica-seconds.

:class:`Onsets` measures that price where it is paid: after each idle gap (a second or more
without arrivals, the keep-alive histogram's gaps), how many requests arrived within one setup
time of the first. When the median of the last ``samples`` such onsets is more than the window's
allowance, a cold start after a lull typically breaks the SLA, and the function keeps its last
replica through idle gaps of up to ``hold_s`` (an hour by default: a function idle that long
starts cold). A function whose lulls end with fewer requests than that keeps the
keep-alive's own windows and may go to zero. Pure: the time is an argument.
"""

from __future__ import annotations

import statistics
from collections import deque

from slackwise_policies.settings_error import integer, number

__all__ = ["HOLD_S", "SAMPLES", "Onsets"]

#: the onsets the median is taken over
SAMPLES = 50
#: the longest idle gap a breaking onset keeps the last replica through
HOLD_S = 3600.0


class Onsets:
    """The requests that arrived within one setup time after each recent idle gap, against the
    late requests one window of the SLA may hold (``allowance``)."""

    def __init__(self, *, allowance: int, samples: int = SAMPLES, hold_s: float = HOLD_S) -> None:
        integer("allowance", allowance, 0)
        integer("samples", samples, 1)
        number("hold_s", hold_s, allow_low=True)
        self.allowance = allowance
        self.hold_s = hold_s
        self._onsets: deque[int] = deque(maxlen=samples)
        #: the onset being counted: (when its gap ended, how long it counts, requests so far)
        self._open: tuple[float, float, int] | None = None

    def gap_ended(self, now: float, setup_s: float) -> None:
        """An idle gap ended at ``now``: count the next ``setup_s`` of arrivals (the arrival
        that ended it included, through :meth:`arrived`)."""
        self._close(now, force=True)
        self._open = (now, max(0.0, setup_s), 0)

    def arrived(self, now: float, count: int) -> None:
        """``count`` requests arrived at ``now``."""
        self._close(now)
        if self._open is not None:
            start, span, seen = self._open
            self._open = (start, span, seen + count)

    def _close(self, now: float, *, force: bool = False) -> None:
        if self._open is None:
            return
        start, span, seen = self._open
        if force or now >= start + span:
            self._onsets.append(seen)
            self._open = None

    def damage(self, now: float) -> float | None:
        """The median onset: the requests a cold start after a lull typically delays (None
        before any onset has been counted to its end)."""
        self._close(now)
        return statistics.median(self._onsets) if self._onsets else None

    def breaks(self, now: float) -> bool:
        """Whether a cold start after a lull typically puts more requests late than one window
        of the SLA may hold."""
        damage = self.damage(now)
        return damage is not None and damage > self.allowance

    def keeps(self, now: float, idle_since: float) -> bool:
        """Whether the last replica stays through the idle gap that began at ``idle_since``:
        a cold start would break a window, and the gap is not yet ``hold_s`` long."""
        return now - idle_since < self.hold_s and self.breaks(now)

    @property
    def reason(self) -> str:
        """The last verdict in words (the onsets counted to their end so far)."""
        damage = statistics.median(self._onsets) if self._onsets else None
        if damage is None:
            return "no lull counted yet"
        verdict = "more than" if damage > self.allowance else "within"
        return (
            f"a cold start after a lull delays about {damage:g} requests, {verdict} the "
            f"{self.allowance} a window of the SLA may miss"
        )
