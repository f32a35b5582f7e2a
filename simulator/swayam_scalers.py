"""The autoscalers of Swayam's resource comparison (Fig. 9), as simulator scalers.

* :class:`Clairvoyant` — Swayam's ClairA, which knows the future and "provisions in the past".
  Here the need of each ``tick_s`` window is the percentile model's fewest replicas
  (:func:`slackwise_policies.percentile.min_replicas`) for the *realised* arrival count of that
  window (:func:`window_needs`), with the true service curve and the SLA's service level and SLO:

  - **ClairA1** (``lookahead_s = 0, collect_s = 0``, run with zero cold start): at every window
    exactly its need, started instantly and released at the window's end: the size of the
    workload.
  - **ClairA2** (``lookahead_s = t_setup``, ``collect_s`` lazy collection, real cold start): a
    replica is started ``t_setup`` before the first window that needs it, so it is warm in time
    (its setup is paid for), and kept until no window in the last ``collect_s`` needed it, which
    is Swayam's idle backends collecting themselves after a garbage-collection period (five
    minutes in Fig. 9). At time 0 the first ``t_setup`` of need is ready ("in the past").

  Swayam's ClairA also schedules each request deadline-first knowing its computation time; here
  every scaler runs the same stage policy (the config's, GS by default: deadline-ordered), so the
  comparison isolates the replica counts. Both keep one replica while the function has work (a
  request always finds a server eventually).
* :class:`AdvisorScaler` — Knative's KPA with the live adapter's advisor pinning its floor: the
  live adapter's :class:`slackwise_policies.advisor_driver.AdvisorDriver` (advisor, hybrid
  keep-alive and evidence per function) is fed every arrival, every measured cold start (how
  long a batch waited for a replica) and the function's own learning latency model; each tick it
  decides with the KPA's last desired count in force and the pin is the KPA's ``min_scale``:
  replicas = max(pin, KPA).
* :class:`OwnedScaler` (``slackwise``) — the adapter owns the count: the same
  driver's decision *is* the replica count (no KPA under it), one replica kept while work is
  queued or in flight, zero when the advisor and the keep-alive both say so. A request that
  misses its SLO (or is refused as late) triggers a decision at once (Swayam Algorithm 1,
  lines 4–5), at most every ``urgent_gap_s``.
* ``kpa`` is :class:`simulator.scalers.KpaScaler` as it is.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

from simulator.scalers import FunctionState, KpaScaler
from slackwise_policies.advisor_driver import URGENT_GAP_S, AdvisorDriver
from slackwise_policies.advisor_settings import AdvisorSettings
from slackwise_policies.function_autoscaler import FunctionAutoscaler
from slackwise_policies.latency import LatencyModel

__all__ = ["AdvisorScaler", "Clairvoyant", "OwnedScaler", "clair_span", "window_needs"]

_EPS = 1e-9


def window_needs(
    arrivals: Sequence[float], *, tick_s: float, need: Callable[[float], int]
) -> list[int]:
    """Replicas needed in each ``[k·tick_s, (k+1)·tick_s)`` window: ``need(rate)`` for the rate
    the window's realised arrival count gives (cached per count: counts repeat)."""
    if not (math.isfinite(tick_s) and tick_s > 0):
        raise ValueError(f"tick_s must be > 0, got {tick_s!r}")
    if not arrivals:
        return []
    windows = math.floor(arrivals[-1] / tick_s) + 1
    counts = [0] * windows
    for t in arrivals:
        counts[min(windows - 1, max(0, math.floor(t / tick_s)))] += 1
    cache: dict[int, int] = {}
    out = []
    for c in counts:
        n = cache.get(c)
        if n is None:
            n = cache[c] = need(c / tick_s) if c else 0
        out.append(n)
    return out


def clair_span(
    now: float, windows: int, *, tick_s: float, ahead_s: float, collect_s: float
) -> tuple[int, int]:
    """The windows ``[lo, hi)`` a clairvoyant deciding at ``now`` takes its maximum over: from
    ``collect_s`` ago to the last one a replica started now could be the first to serve
    (``ahead_s`` + one tick ahead), within the ``windows`` there are."""
    lo = max(0, math.floor((now - collect_s) / tick_s + _EPS))
    hi = min(windows, math.ceil((now + ahead_s) / tick_s + 1.0 - _EPS))
    return lo, hi


class Clairvoyant:
    """ClairA1 or ClairA2 over precomputed window needs (see the module docstring)."""

    def __init__(
        self,
        needs: Mapping[str, Sequence[int]],
        *,
        tick_s: float,
        lookahead_s: Mapping[str, float] | None = None,
        collect_s: float = 0.0,
    ) -> None:
        if not (math.isfinite(tick_s) and tick_s > 0):
            raise ValueError(f"tick_s must be > 0, got {tick_s!r}")
        if not (math.isfinite(collect_s) and collect_s >= 0):
            raise ValueError(f"collect_s must be >= 0, got {collect_s!r}")
        self._needs = {name: list(values) for name, values in needs.items()}
        self._tick_s = tick_s
        self._lookahead = dict(lookahead_s or {})
        self.collect_s = collect_s

    @property
    def tick_s(self) -> float | None:
        return self._tick_s

    def wanted(self, now: float, function: str) -> int:
        """The most any window needs from ``collect_s`` ago to the last one a replica started
        now could be the first to serve (``lookahead_s`` + one tick ahead)."""
        needs = self._needs[function]
        ahead = self._lookahead.get(function, 0.0)
        lo, hi = clair_span(
            now, len(needs), tick_s=self._tick_s, ahead_s=ahead, collect_s=self.collect_s
        )
        return max(needs[lo:hi], default=0)

    def initial(self, function: str) -> int:
        return self.wanted(0.0, function)

    def observe(self, now: float, function: str, concurrency: float, rps: float) -> None:
        return None

    def wake(self, now: float, function: str, inflight: int) -> None:
        return None

    def decide(self, now: float, function: str, state: FunctionState) -> int:
        busy = 1 if state.inflight or state.queued else 0
        return max(self.wanted(now, function), busy)


class _Learning:
    """What both learning scalers share: the live adapter's
    :class:`slackwise_policies.advisor_driver.AdvisorDriver`, fed from the engine's events as
    ``adapter.serving.advisor_loop`` feeds it from the request path."""

    def __init__(
        self,
        settings: AdvisorSettings,
        *,
        owns: bool,
        slos_ms: Mapping[str, float],
        percentiles: Mapping[str, float],
        container_concurrency: Mapping[str, int],
        max_scale: Mapping[str, int],
        urgent_gap_s: float = URGENT_GAP_S,
    ) -> None:
        self.settings = settings
        self.driver = AdvisorDriver(settings, owns=owns, urgent_gap_s=urgent_gap_s)
        self._slos = dict(slos_ms)
        self._percentiles = dict(percentiles)
        self._concurrency = dict(container_concurrency)
        self._max_scale = dict(max_scale)

    @property
    def functions(self) -> dict[str, FunctionAutoscaler]:
        return self.driver.functions

    def bind(self, function: str, model: LatencyModel, limit: Callable[[], int]) -> None:
        self.driver.add(
            0.0,
            function,
            slo_ms=self._slos[function],
            percentile=self._percentiles[function],
            model=model,
            limit=limit,
            container_concurrency=self._concurrency[function],
            max_scale=self._max_scale[function],
        )

    def arrived(self, now: float, function: str, count: int) -> None:
        self.driver.arrived(now, function, count)

    def cold_start(self, now: float, function: str, seconds: float) -> None:
        self.driver.cold_start(now, function, seconds)

    def outcome(self, now: float, function: str, missed: bool, *, served: bool = True) -> None:
        self.driver.outcome(now, function, missed, served=served)

    def missed(self, now: float, function: str) -> bool:
        """Whether a miss at ``now`` asks the engine for a decision at once."""
        return self.driver.urgent(now, function)


class AdvisorScaler(_Learning):
    """Knative's KPA under the advisor's min-scale pin, as the live adapter runs it."""

    def __init__(
        self,
        kpa: KpaScaler,
        settings: AdvisorSettings,
        *,
        slos_ms: Mapping[str, float],
        percentiles: Mapping[str, float],
        container_concurrency: Mapping[str, int],
        max_scale: Mapping[str, int],
    ) -> None:
        super().__init__(
            settings,
            owns=False,
            slos_ms=slos_ms,
            percentiles=percentiles,
            container_concurrency=container_concurrency,
            max_scale=max_scale,
        )
        self.kpa = kpa
        self._desired: dict[str, int] = {}
        #: (time, function, pin) whenever a pin changed, for plots and tests
        self.pins: list[tuple[float, str, int]] = []

    @property
    def tick_s(self) -> float | None:
        return self.kpa.tick_s

    def initial(self, function: str) -> int:
        n = self.kpa.initial(function)
        self._desired[function] = n
        return n

    def observe(self, now: float, function: str, concurrency: float, rps: float) -> None:
        self.kpa.observe(now, function, concurrency, rps)

    def wake(self, now: float, function: str, inflight: int) -> None:
        self.kpa.wake(now, function, inflight)

    def decide(self, now: float, function: str, state: FunctionState) -> int:
        current = self._desired.get(function, 0)
        step = self.driver.step(now, function, current=current, overdue=state.overdue)
        assert step is not None  # a floor is always decided
        if step.write:
            self.pins.append((now, function, step.count))
            self.driver.written(now, function, step.target)
        self.kpa.pinned[function] = self.functions[function].pinned
        desired = self.kpa.decide(now, function, state)
        self._desired[function] = desired
        return desired


class OwnedScaler(_Learning):
    """The adapter's controller owns each function's replica count (see the module docstring)."""

    def __init__(
        self,
        settings: AdvisorSettings,
        *,
        slos_ms: Mapping[str, float],
        percentiles: Mapping[str, float],
        container_concurrency: Mapping[str, int],
        max_scale: Mapping[str, int],
        initial: Mapping[str, int],
        urgent_gap_s: float = URGENT_GAP_S,
    ) -> None:
        super().__init__(
            settings,
            owns=True,
            slos_ms=slos_ms,
            percentiles=percentiles,
            container_concurrency=container_concurrency,
            max_scale=max_scale,
            urgent_gap_s=urgent_gap_s,
        )
        self._initial = dict(initial)
        #: (time, function, count) whenever the count changed, for plots and tests
        self.counts: list[tuple[float, str, int]] = []
        self._count: dict[str, int] = {}

    @property
    def tick_s(self) -> float | None:
        return self.settings.tick_s

    def initial(self, function: str) -> int:
        n = self._initial.get(function, 0)
        self._count[function] = n
        return n

    def observe(self, now: float, function: str, concurrency: float, rps: float) -> None:
        return None

    def wake(self, now: float, function: str, inflight: int) -> None:
        return None

    def decide(self, now: float, function: str, state: FunctionState) -> int:
        current = self._count.get(function, 0)
        busy = bool(state.inflight or state.queued)  # no activator here: the driver keeps one
        step = self.driver.step(now, function, current=current, overdue=state.overdue, busy=busy)
        if step is None:  # no demand seen yet: the initial count stands, as live
            return current
        if step.write:
            self.driver.written(now, function, step.target)
        if step.count != current:
            self.counts.append((now, function, step.count))
            self._count[function] = step.count
        return step.count
