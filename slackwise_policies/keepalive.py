"""How long to keep an idle function warm: the hybrid histogram policy of "Serverless in the Wild".

Knative keeps a replica after the last request for a fixed time: the KPA's stable window (60 s)
must see no traffic before it wants zero, then the scale-to-zero grace period (30 s) passes, so
about 90 s whatever the function's traffic looks like. A function invoked every 2 minutes then
pays a cold start on every request; one invoked every 5 seconds pays 90 s of idle replica after
its last burst even when it never comes back.

Shahrad et al. (USENIX ATC'20, §4.2) instead keep, per application, a histogram of *idle times*
(the gaps between the end of one invocation and the start of the next) and derive two windows
from it: a **pre-warm** window (the head, 5th percentile, less a margin) during which the
instance is unloaded because the next call is unlikely that soon, and a **keep-alive** window
(up to the tail, 99th percentile, plus a margin) during which it is kept loaded. When the
histogram is not representative (too few samples, too flat, or too many gaps beyond its range)
they fall back to a fixed keep-alive.

:class:`KeepAlive` does the same for one function with times in seconds, and adds a **break-even**
bound: keeping a replica warm for ``T`` after it goes idle costs ``E[min(G, T)]`` replica-seconds
(``G`` the idle gap), and letting it go costs a cold start when ``G > T``, priced at
``cold_start_cost_s`` replica-seconds (its own start-up plus the SLO damage of the requests it
delays, priced by the operator). The threshold minimising ``E[min(G, T)] + C·P(G > T)`` over the
histogram caps the keep-alive window: beyond it waiting is dearer than a cold start. Pre-warming
starts ``setup_s`` early so the replica is ready when the window opens.

The histogram holds the last ``max_samples`` gaps (bounded memory, and it follows a function
whose pattern drifts). Pure: gaps and times are arguments; nothing reads a clock.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass
from typing import Literal

__all__ = ["KeepAlive", "KeepAliveConfig", "KeepAliveWindow", "Source"]

#: ``histogram``: windows from the gaps seen; ``fallback``: the fixed keep-alive
Source = Literal["histogram", "fallback"]


def _check(name: str, ok: bool, value: object, what: str) -> None:
    if not ok:
        raise ValueError(f"{name} must be {what}, got {value!r}")


@dataclass(frozen=True, kw_only=True, slots=True)
class KeepAliveConfig:
    """Histogram and policy settings (seconds and percent as named).

    ``bin_s``/``range_s``: histogram bins and range (gaps above ``range_s`` are out of bounds);
    ``head_percentile``/``tail_percentile`` and ``margin`` (a fraction) shape the windows;
    the histogram is representative with at least ``min_samples`` gaps, a bin-count coefficient
    of variation of at least ``min_cv`` and at most ``max_out_of_bounds`` of its gaps out of
    range; otherwise ``fallback_keep_alive_s`` applies (Knative's 60 s stable window + 30 s
    grace by default). ``cold_start_cost_s`` (replica-seconds; None: no bound) sets the
    break-even; ``setup_s`` is how early a pre-warm must begin.
    """

    bin_s: float = 1.0
    range_s: float = 3600.0
    head_percentile: float = 5.0
    tail_percentile: float = 99.0
    margin: float = 0.10
    min_samples: int = 10
    min_cv: float = 2.0
    max_out_of_bounds: float = 0.5
    max_samples: int = 1000
    fallback_keep_alive_s: float = 90.0
    cold_start_cost_s: float | None = None
    setup_s: float = 0.0

    def __post_init__(self) -> None:
        finite = math.isfinite
        _check("bin_s", finite(self.bin_s) and self.bin_s > 0, self.bin_s, "> 0")
        _check(
            "range_s",
            finite(self.range_s) and self.range_s >= self.bin_s,
            self.range_s,
            f">= bin_s ({self.bin_s:g})",
        )
        for name in ("head_percentile", "tail_percentile"):
            value = getattr(self, name)
            _check(name, finite(value) and 0.0 < value < 100.0, value, "within (0, 100)")
        _check(
            "tail_percentile",
            self.tail_percentile > self.head_percentile,
            self.tail_percentile,
            f"> head_percentile ({self.head_percentile:g})",
        )
        _check(
            "margin", finite(self.margin) and 0.0 <= self.margin < 1.0, self.margin, "within [0, 1)"
        )
        _check("min_samples", self.min_samples >= 1, self.min_samples, ">= 1")
        _check("min_cv", finite(self.min_cv) and self.min_cv >= 0, self.min_cv, ">= 0")
        _check(
            "max_out_of_bounds",
            0.0 <= self.max_out_of_bounds <= 1.0,
            self.max_out_of_bounds,
            "within [0, 1]",
        )
        _check(
            "max_samples",
            self.max_samples >= self.min_samples,
            self.max_samples,
            f">= min_samples ({self.min_samples})",
        )
        _check(
            "fallback_keep_alive_s",
            finite(self.fallback_keep_alive_s) and self.fallback_keep_alive_s >= 0,
            self.fallback_keep_alive_s,
            ">= 0",
        )
        cost = self.cold_start_cost_s
        _check(
            "cold_start_cost_s", cost is None or (finite(cost) and cost >= 0), cost, "None or >= 0"
        )
        _check("setup_s", finite(self.setup_s) and self.setup_s >= 0, self.setup_s, ">= 0")


@dataclass(frozen=True, slots=True)
class KeepAliveWindow:
    """Seconds after a replica goes idle: release it during ``[0, prewarm_s − setup_s)`` (when
    that is not empty), keep it (or start it again) from then until ``keep_until_s``, release it
    after. ``break_even_s`` is the cost-optimal threshold (None without a cold-start price)."""

    prewarm_s: float
    keep_until_s: float
    source: Source
    reason: str
    break_even_s: float | None


class KeepAlive:
    """The idle-gap histogram of one function and the keep-warm windows it implies."""

    def __init__(self, config: KeepAliveConfig | None = None) -> None:
        self.config = config or KeepAliveConfig()
        self._gaps: deque[float] = deque()
        self._bins: dict[int, int] = {}
        self._out_of_bounds = 0
        self._cached: KeepAliveWindow | None = None

    def _bin(self, gap_s: float) -> int | None:
        if gap_s > self.config.range_s:
            return None
        return min(math.floor(gap_s / self.config.bin_s), self._bin_count() - 1)

    def _bin_count(self) -> int:
        return max(1, math.ceil(self.config.range_s / self.config.bin_s))

    def observe_gap(self, gap_s: float) -> None:
        """One idle gap: from the end of the last activity to the next arrival."""
        if not (math.isfinite(gap_s) and gap_s >= 0.0):
            raise ValueError(f"gap_s must be a finite number >= 0, got {gap_s!r}")
        self._add(gap_s, +1)
        self._gaps.append(gap_s)
        if len(self._gaps) > self.config.max_samples:
            self._add(self._gaps.popleft(), -1)
        self._cached = None

    def _add(self, gap_s: float, delta: int) -> None:
        index = self._bin(gap_s)
        if index is None:
            self._out_of_bounds += delta
            return
        count = self._bins.get(index, 0) + delta
        if count:
            self._bins[index] = count
        else:
            del self._bins[index]

    @property
    def samples(self) -> int:
        """Gaps in the histogram (out-of-bounds ones included)."""
        return len(self._gaps)

    def _percentile_bin(self, percentile: float) -> int:
        """The bin holding the nearest-rank ``percentile`` of the in-range gaps."""
        rank = max(1, math.ceil(percentile / 100.0 * sum(self._bins.values())))
        seen = 0
        for index in sorted(self._bins):
            seen += self._bins[index]
            if seen >= rank:
                return index
        return max(self._bins)

    def _cv(self) -> float:
        n = self._bin_count()
        counts = list(self._bins.values())
        mean = sum(counts) / n
        if mean == 0.0:
            return 0.0
        var = (sum(c * c for c in counts) / n) - mean * mean
        return math.sqrt(max(0.0, var)) / mean

    def _break_even(self) -> float | None:
        """argmin over bin edges T of E[min(G, T)] + C·P(G > T), over every gap kept."""
        cost = self.config.cold_start_cost_s
        if cost is None or not self._gaps:
            return None
        gaps = sorted(self._gaps)
        n = len(gaps)
        best_t = 0.0  # T = 0: every non-zero gap costs a cold start
        best = cost * sum(1 for g in gaps if g > 0.0) / n
        prefix = 0.0  # sum of gaps ≤ T
        i = 0
        edges = sorted({math.ceil(g / self.config.bin_s) * self.config.bin_s for g in gaps})
        for t in edges:
            while i < n and gaps[i] <= t:
                prefix += gaps[i]
                i += 1
            value = (prefix + t * (n - i) + cost * (n - i)) / n
            if value < best:
                best_t, best = t, value
        return best_t

    def window(self) -> KeepAliveWindow:
        """The current windows, from the histogram when it is representative."""
        if self._cached is not None:
            return self._cached
        cfg = self.config
        in_range = sum(self._bins.values())
        if len(self._gaps) < cfg.min_samples:
            why = f"{len(self._gaps)} gaps, fewer than {cfg.min_samples}"
        elif self._out_of_bounds > cfg.max_out_of_bounds * len(self._gaps):
            why = f"{self._out_of_bounds} of {len(self._gaps)} gaps beyond {cfg.range_s:g} s"
        elif in_range == 0 or self._cv() < cfg.min_cv:
            why = f"histogram too flat (bin-count CV {self._cv():.2f} < {cfg.min_cv:g})"
        else:
            why = ""
        if why:
            result = KeepAliveWindow(0.0, cfg.fallback_keep_alive_s, "fallback", why, None)
        else:
            head = self._percentile_bin(cfg.head_percentile) * cfg.bin_s
            tail = (self._percentile_bin(cfg.tail_percentile) + 1) * cfg.bin_s
            prewarm = head * (1.0 - cfg.margin)
            keep_until = tail * (1.0 + cfg.margin)
            even = self._break_even()
            reason = f"P{cfg.head_percentile:g}={head:g}s, P{cfg.tail_percentile:g}={tail:g}s"
            if even is not None and even < keep_until:
                keep_until = even
                reason += f", capped at break-even {even:g}s"
            if keep_until <= prewarm:  # no window worth keeping: let it go at once
                prewarm = keep_until = 0.0
            result = KeepAliveWindow(prewarm, keep_until, "histogram", reason, even)
        self._cached = result
        return result

    def keep_alive_s(self, now: float) -> float:
        """How long after going idle a replica should stay (the end of the keep-alive window)."""
        return self.window().keep_until_s

    def should_keep_warm(self, now: float, idle_since: float) -> bool:
        """Whether a replica idle since ``idle_since`` should be warm at ``now`` (kept, or
        started again ``setup_s`` before the pre-warm window opens)."""
        if not (math.isfinite(now) and math.isfinite(idle_since)):
            raise ValueError(f"now and idle_since must be finite, got {now!r}, {idle_since!r}")
        w = self.window()
        idle = now - idle_since
        if idle < 0.0:
            return True  # not idle yet
        start = max(0.0, w.prewarm_s - self.config.setup_s)
        return start <= idle < w.keep_until_s
