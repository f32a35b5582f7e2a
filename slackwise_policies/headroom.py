"""Headroom from evidence: spare capacity in proportion to how volatile the service has shown.

The advisor's count is the fewest replicas that keep the SLO percentile at the rate it forecasts
(× ``U``) on the service times it has observed. When the service slows at once (bigger inputs, a
neighbour, a throttled node), the count rises within a second or two, but the new replicas need a
setup time; until they are up, the replicas in place serve what they can, and a count with no
spare has nothing to lose. A fixed spare replica would cover that and cost a replica everywhere.
So the spare follows what the function has *measured* of its own volatility, and goes when the
service has been calm for a while:

* **Service swings.** Each decision reads the latency model's drift (the batches of the last
  second against the window's median at their sizes, :meth:`LatencyModel.drift`); the median of
  the last ``smooth`` readings is a swing when it reaches ``calm`` (1.25: a single slow batch, a
  collection pause, is noise). A swing of ``f`` says that one setup time's worth of service can
  cost ``f`` times the work the model expected.
* **Rate swings.** The rate over the last setup time (how long a replica takes to start *now*)
  against the rate the count was sized for a setup time ago (the current window's, times ``U``):
  growth the count could not absorb before a new replica was up. It counts only where it exceeds
  what Poisson noise explains (three standard deviations), so a second's noise at a low rate does
  not buy a replica.
* **The factor.** The largest swing seen within ``memory_s``, ``g``, multiplies the rate the model
  sizes for: ``1 + scale × (g - 1)``, at most ``most`` (3). ``scale`` is ``advisor.headroom``:
  ``auto`` (0.5: half the largest swing seen; 1 covers all of it, at a cost docs/advisor.md
  measures), 0 (none: the lean count), or any other number (docs/advisor.md draws the curve it
  moves along). A service that stays calm
  for ``memory_s`` (300 s: Swayam's collection period in its Fig. 9, and longer than the gap
  between the swings of a service that keeps swinging) holds no spare; the advisor's scale-in
  rule then lets the replicas go.

While a swing is under way (one was seen within ``settle_s``, 10 s, the window the current rate is
taken over; or the advisor replays the recent service times already: the drift or the evidence's
floor) the factor stays out, so the model does not count the same swing twice; it applies once
the service is steady again, for the next one. Pure: the time is an argument.
"""

from __future__ import annotations

import math
import statistics
from collections import deque
from dataclasses import dataclass

from slackwise_policies.settings_error import SettingsError

__all__ = ["Headroom", "HeadroomConfig", "parse_headroom"]

#: a swing smaller than this is noise
CALM = 1.25
#: standard deviations of Poisson noise a rate swing must exceed
NOISE_SIGMAS = 3.0
#: ``headroom: auto``: half the largest swing seen (full cover holds two to five times the lean
#: count for minutes after a twofold swing in the simulator: docs/advisor.md)
AUTO = 0.5
#: the largest factor on the rate, whatever the setting and the swing (a stall's batches read as
#: a swing of a hundred)
MOST = 3.0


def parse_headroom(value: object) -> float:
    """``advisor.headroom``'s value as the scale: ``auto`` is 1, a number ``>= 0`` itself;
    raises :class:`SettingsError` naming the value otherwise."""
    if value == "auto" or value is None:
        return AUTO
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise SettingsError("headroom", f"must be auto or a number >= 0, got {value!r}")
    if not (math.isfinite(value) and value >= 0.0):
        raise SettingsError("headroom", f"must be auto or a number >= 0, got {value!r}")
    return float(value)


@dataclass(frozen=True, kw_only=True)
class HeadroomConfig:
    """``scale`` (``advisor.headroom``), how long a swing is remembered, what counts as one,
    and the largest factor."""

    scale: float = AUTO
    memory_s: float = 300.0
    calm: float = CALM
    smooth: int = 3
    most: float = MOST
    settle_s: float = 10.0

    def __post_init__(self) -> None:
        parse_headroom(self.scale)
        if not (self.memory_s > 0.0 and self.calm > 1.0 and self.most >= 1.0):
            raise ValueError("memory_s must be > 0, calm > 1 and most >= 1")
        if not 0.0 <= self.settle_s < self.memory_s:
            raise ValueError("settle_s must be >= 0 and below memory_s")
        if self.smooth < 1:
            raise ValueError(f"smooth must be >= 1, got {self.smooth!r}")


class Headroom:
    """One function's swings over the last ``memory_s`` and the factor they ask for."""

    def __init__(self, config: HeadroomConfig | None = None) -> None:
        self.config = config or HeadroomConfig()
        self._drifts: deque[float] = deque(maxlen=self.config.smooth)
        #: (when, swing, what): swings at or above ``calm``, oldest first
        self._swings: deque[tuple[float, float, str]] = deque()
        #: (when, requests per second the count was sized for)
        self._sized: deque[tuple[float, float]] = deque()
        self.reason: str | None = None
        self._last_swing = -math.inf

    def observe(
        self,
        now: float,
        *,
        drift: float | None,
        recent_rate: float,
        recent_s: float,
        sized_rate: float,
    ) -> None:
        """One decision's evidence at ``now``: the latency model's ``drift`` (None: too few
        batches to say), the rate over the last ``recent_s`` (one setup time), and the rate the
        count is sized for now (the current window's rate × ``U``)."""
        cfg = self.config
        if drift is not None:
            self._drifts.append(drift)
            if len(self._drifts) == cfg.smooth:
                swing = statistics.median(self._drifts)
                if swing >= cfg.calm:
                    self._remember(now, swing, f"service {swing:.2f}x its median")
        sized = self._sized
        sized.append((now, sized_rate))
        while len(sized) > 1 and sized[1][0] <= now - recent_s:
            sized.popleft()
        then_t, then_rate = sized[0]
        if then_t <= now - recent_s and then_rate > 0.0 and recent_s > 0.0:
            expected = then_rate * recent_s  # requests the count was sized for over the span
            seen = recent_rate * recent_s
            if seen > expected + NOISE_SIGMAS * math.sqrt(expected):
                swing = seen / expected
                if swing >= cfg.calm:
                    self._remember(now, swing, f"rate {swing:.2f}x what the count was sized for")

    def _remember(self, now: float, swing: float, what: str) -> None:
        self._last_swing = now
        swings = self._swings
        while swings and swings[-1][1] <= swing:  # a sliding maximum: keep only what can lead
            swings.pop()
        swings.append((now, swing, what))

    def factor(self, now: float) -> float:
        """The multiplier on the rate the model sizes for at ``now`` (1: no spare)."""
        cfg = self.config
        swings = self._swings
        while swings and swings[0][0] < now - cfg.memory_s:
            swings.popleft()
        if not swings or cfg.scale == 0.0:
            self.reason = None
            return 1.0
        when, swing, what = swings[0]
        if now - self._last_swing < cfg.settle_s:
            # under way: the model's recent rate and service times carry it once already
            self.reason = f"{what}, under way: no spare on top until it settles"
            return 1.0
        factor = min(cfg.most, 1.0 + cfg.scale * (swing - 1.0))
        self.reason = f"{what}, {now - when:.0f} s ago: sized for {factor:.2f}x the rate"
        return factor
