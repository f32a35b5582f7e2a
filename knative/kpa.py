"""Knative's Pod Autoscaler (KPA), re-implemented as a pure object with the time injected.

It follows Knative Serving's algorithm (``pkg/autoscaler/scaling/autoscaler.go``, the metric
buckets of ``pkg/autoscaler/aggregation`` and the KPA reconciler's ``scaler.go``):

* The caller records the observed metric of the revision (total concurrency, or requests per
  second) about once a second, zeros included, as Knative's scraper does. Samples go into
  one-second buckets, one set for the stable window (60 s) and one for the panic window (stable ×
  panic-window-percentage, rounded to whole seconds, at least 1 s). A window's average counts
  seconds with no sample *between* samples as zero, but neither reaches back before the first
  sample nor past the last one; a window of silence empties it (the average is then 0) and the
  next sample starts afresh. ``weighted-exponential`` aggregation weighs recent seconds more.
* ``desired = ceil(observed / target value)`` with target value ``target × utilization``, for
  the stable and the panic value, each kept within
  ``[floor(ready / max-scale-down-rate), ceil(max(ready, 1) × max-scale-up-rate)]``.
* Panic mode starts when ``desired_panic / max(ready, 1) ≥ panic-threshold`` (200 %). While
  panicking the larger of the two wins and the count never falls; panic ends at the first tick
  more than one stable window after the last tick over the threshold.
* A scale-down delay holds the highest count decided within the delay.
* min-scale / max-scale bound the result; a new revision is held at initial-scale until that many
  replicas have been ready once.
* Scale to zero: once the count is zero, an active revision stays at one replica until it has been
  active for a stable window, then goes inactive (the activator takes the traffic); its replicas
  are removed once it has been inactive for the longer of the scale-to-zero grace period and the
  pod retention period. With scale-to-zero disabled the floor is 1.

Before the first sample the KPA keeps the current count (Knative ignores a tick without metrics).
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

from slackwise_core.knative_scaling import ScalingSpec

#: Knative rounds window averages to this many decimal digits
_PRECISION = 6
#: weighted-exponential aggregation: the weights of a full window sum to at least this
_WEIGHT_PRECISION = 0.9999
#: weighted-exponential aggregation: the smallest per-second decay
_MIN_EXPONENT = 0.2


class _Buckets:
    """One window of one-second buckets, with Knative's first/last-write bookkeeping.

    Knative sums what its scraper and the activator report within a second; we are handed the
    revision's total, so a second holds the mean of the samples recorded in it.
    """

    def __init__(self, window_s: float, *, weighted: bool = False) -> None:
        self._size = max(1, math.ceil(window_s))
        self._sums: dict[int, float] = {}
        self._counts: dict[int, int] = {}
        self._first: int | None = None
        self._last: int | None = None
        self._coeff = (
            max(1.0 - (1.0 - _WEIGHT_PRECISION) ** (1.0 / self._size), _MIN_EXPONENT)
            if weighted
            else None
        )

    def record(self, now: float, value: float) -> None:
        second = math.floor(now)
        if self._last is not None and second <= self._last - self._size:
            return  # more than a window older than the newest sample
        if self._last is None or second - self._last >= self._size:
            self._sums.clear()
            self._counts.clear()
            self._first = second
        if self._first is None or second < self._first:
            self._first = second
        if self._last is None or second > self._last:
            self._last = second
            oldest = second - self._size
            for old in [b for b in self._sums if b <= oldest]:
                del self._sums[old]
                del self._counts[old]
        self._sums[second] = self._sums.get(second, 0.0) + value
        self._counts[second] = self._counts.get(second, 0) + 1

    @property
    def has_data(self) -> bool:
        return self._last is not None

    def _value(self, second: int) -> float:
        count = self._counts.get(second)
        return 0.0 if count is None else self._sums[second] / count

    def average(self, now: float) -> float:
        """The window's average at ``now`` (0 when empty)."""
        if self._last is None or self._first is None:
            return 0.0
        second = math.floor(now)
        gap = second - self._last
        if gap >= self._size:
            return 0.0
        if self._coeff is not None:
            return self._weighted(max(gap, 0))
        start = max(self._first, self._last - self._size + 1 + max(gap, 0))
        total = sum(self._value(b) for b in range(start, self._last + 1))
        return round(total / (self._last - start + 1), _PRECISION)

    def _weighted(self, gap: int) -> float:
        assert self._coeff is not None and self._last is not None
        multiplier = self._coeff * (1.0 - self._coeff) ** gap
        total = 0.0
        for i in range(self._size - gap):
            total += self._value(self._last - i) * multiplier
            multiplier *= 1.0 - self._coeff
        return total


@dataclass(frozen=True)
class Decision:
    """One KPA tick: the replica count wanted and why."""

    desired: int
    stable_value: float
    panic_value: float
    panicking: bool
    reason: str


class KPA:
    """The autoscaler for one revision; ``record`` samples, ``decide`` computes the count."""

    def __init__(self, spec: ScalingSpec) -> None:
        self.spec = spec
        weighted = spec.aggregation == "weighted-exponential"
        self._stable = _Buckets(spec.stable_window_s, weighted=weighted)
        self._panic = _Buckets(spec.panic_window_s, weighted=weighted)
        # Knative starts a restarted autoscaler in panic when more than one pod is ready; ours
        # lives as long as its revision, so it starts calm.
        self._panic_since: float | None = None
        self._max_panic_pods = 0
        self._delay: deque[tuple[float, int]] = deque()
        self._initial_reached = spec.initial_scale == 0
        self._active_since: float | None = None
        self._inactive_since: float | None = None

    @property
    def inactive_since(self) -> float | None:
        """When the revision went inactive (the activator took its traffic), None otherwise."""
        return self._inactive_since

    def record(self, now: float, value: float) -> None:
        """Record the observed metric (total concurrency or rps) at ``now``."""
        if value < 0:
            raise ValueError(f"metric value must be non-negative, got {value}")
        self._stable.record(now, value)
        self._panic.record(now, value)

    def decide(
        self, now: float, *, ready: int, current: int, min_scale: int | None = None
    ) -> Decision:
        """The replica count wanted at ``now``.

        ``ready`` replicas serve now; ``current`` exist (ready or starting). ``min_scale``
        overrides the spec's floor (a pinned minimum, as when a Revision's min-scale is patched).
        """
        spec = self.spec
        floor_scale = spec.min_scale if min_scale is None else min_scale
        if not self._initial_reached and ready >= spec.initial_scale:
            self._initial_reached = True

        if not self._stable.has_data:
            # Knative skips a tick without metrics; the current count stands.
            return self._finish(now, current, floor_scale, ready, current, 0.0, 0.0, "no data yet")
        # After a window of silence Knative reports no data (and so keeps its last count) while
        # its scraper, recording zeros every second, never lets that happen to a live revision;
        # we read the empty window as 0 so that a caller recording only traffic still scales down.
        stable = self._stable.average(now)
        panic = self._panic.average(now)

        ready_f = float(max(1, ready))
        max_up = math.ceil(spec.max_scale_up_rate * ready_f)
        # Knative lifts the scale-down limit for unreachable revisions; ours are always routed.
        max_down = math.floor(ready_f / spec.max_scale_down_rate)
        dspc = math.ceil(stable / spec.target_value)
        dppc = math.ceil(panic / spec.target_value)
        desired_stable = min(max(dspc, max_down), max_up)
        desired_panic = min(max(dppc, max_down), max_up)
        if spec.activation_scale > 1:
            if dspc > 0:
                desired_stable = max(desired_stable, spec.activation_scale)
            if dppc > 0:
                desired_panic = max(desired_panic, spec.activation_scale)

        if dppc / ready_f >= spec.panic_threshold:
            self._panic_since = now
        elif self._panic_since is not None and now - self._panic_since > spec.stable_window_s:
            self._panic_since = None
            self._max_panic_pods = 0

        desired = desired_stable
        reason = "stable"
        if self._panic_since is not None:
            reason = "panic"
            self._max_panic_pods = max(self._max_panic_pods, desired_stable, desired_panic)
            desired = self._max_panic_pods

        if spec.scale_down_delay_s > 0:
            self._delay.append((now, desired))
            while self._delay[0][0] <= now - spec.scale_down_delay_s:
                self._delay.popleft()
            held = max(count for _, count in self._delay)
            if held > desired:
                desired, reason = held, "scale-down delay"

        return self._finish(now, desired, floor_scale, ready, current, stable, panic, reason)

    def _finish(
        self,
        now: float,
        desired: int,
        floor_scale: int,
        ready: int,
        current: int,
        stable: float,
        panic: float,
        reason: str,
    ) -> Decision:
        spec = self.spec
        panicking = self._panic_since is not None
        if not self._initial_reached and desired < spec.initial_scale:
            desired, reason = spec.initial_scale, "initial scale"
        if spec.max_scale > 0 and desired > spec.max_scale:
            # Knative lets initial-scale exceed max-scale until reached; we cap it.
            desired, reason = spec.max_scale, "max-scale"
        if desired < floor_scale:
            desired, reason = floor_scale, "min-scale"
        if desired == 0 and not spec.enable_scale_to_zero:
            desired, reason = 1, "scale to zero disabled"
        if desired > 0:
            self._inactive_since = None
            threshold = max(1, floor_scale, 0 if self._initial_reached else spec.initial_scale)
            if self._active_since is None and ready >= threshold:
                self._active_since = now
            return Decision(desired, stable, panic, panicking, reason)

        if self._active_since is not None:
            if now - self._active_since < spec.stable_window_s:
                return Decision(1, stable, panic, panicking, "active for less than a window")
            self._active_since = None
        if self._inactive_since is None:
            self._inactive_since = now
        if current == 0:
            return Decision(0, stable, panic, panicking, "scaled to zero")
        # Knative may scale to zero sooner once the activator has proxied for the grace
        # period; we always wait the conservative max(grace, retention) after going inactive.
        wait_s = max(spec.scale_to_zero_grace_period_s, spec.scale_to_zero_pod_retention_s)
        if now - self._inactive_since < wait_s:
            hold = current if spec.max_scale == 0 else min(current, spec.max_scale)
            return Decision(hold, stable, panic, panicking, "inactive, waiting to scale to zero")
        return Decision(0, stable, panic, panicking, "scale to zero")
