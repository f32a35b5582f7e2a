"""A chain's SLO split by what binds: each stage the budget its function needs to carry its load.

GrandSLAM's Eq. 4 (:mod:`slackwise_policies.slack`) gives a stage a share of its app's SLO in
proportion to its latency at the batch sizes in use. Whether a function carries its load depends
on something else: how large its batches can grow within its budget. A function whose nodes are
few for its share of the load needs batches of ``n`` with ``slots · n / L(n)`` at or above its
rate, and so a budget of at least ``L(n)`` plus the wait for a slot; Eq. 4 prices it at the small
batches it runs while it keeps up, gives it too little once the load grows, and its batches then
never reach the size that would carry the load.

The split here answers, for the measured mix of apps, the question the throughput ceiling
(:mod:`simulator.bounds`) answers without a queueing margin:

* :func:`least_budget_ms`: the least stage budget with which a function's ``slots`` carry
  ``rate`` requests a second: over the batch sizes ``n`` within its maximum whose utilisation
  ``rate · mean(n) / (slots · n)`` stays within ``utilisation`` (1 by default: the function
  keeps up), the least ``L(n) · (1 + wait / slots)`` (its own batch, and the batch in progress
  ahead of it on the next slot to free; ``wait`` 0 is the ceiling's question). What a batch
  carries is judged by its mean latency, what it needs of the SLO by ``L``, the P95 live: a
  function serving small and large inputs has a P95 far above its mean, and judged by the P95
  it looked as if it needed batches larger than it does, whose budget the chain's other stages
  needed for their own large inputs. A function that cannot batch (its largest batch is 1:
  its batches cost at least their members apart) absorbs a burst only by queueing, so its
  budget is its request's time plus the P95 of an M/M/c queue's wait at its utilisation
  (:func:`queue_wait_ms`, Erlang's C), which grows without bound as the utilisation nears 1.
* :func:`highest_rate`: the highest total rate, in the measured mix, at which every app's least
  budgets along its path still fit its SLO.
* :func:`floor_split`: an app's split at that rate. It starts from Eq. 4's (the stages' latency
  at the batch sizes in use) and raises every stage whose Eq. 4 budget is under its least budget
  to that budget, taking the time from the other stages in Eq. 4's proportions. Where no stage
  needs more than Eq. 4 gives it (the SLO is loose for the fleet, or no function binds), the
  split *is* Eq. 4's.

The floors are priced at the measured rate (``headroom`` 1), at most the highest rate, and with
no utilisation margin: the room for bursts is the slot's wait and the P95 they are priced at.
With a margin on top (85 % of the capacity, priced at 1.25 × the measured rate, as first built)
the binding stage was priced at the highest rate the chain fits whenever the load came within
a quarter of it, took every millisecond the other stages did not strictly need, and its batches
grew past what carried the load (docs/simulator.md, GS-T).

:class:`ThroughputSplit` keeps the measured mix (app arrivals, decayed with a half-life) and
recomputes every app's split once a period; the budgets it returns are the ``estimates_ms`` a
proportional :class:`slackwise_policies.slack.StagePolicy` splits by, so slack forwarding
re-splits the time left over the remaining stages in the same proportions, and admission is
unchanged. Pure: the clock is an argument.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

__all__ = [
    "AppPath",
    "StageFleet",
    "ThroughputSplit",
    "floor_split",
    "highest_rate",
    "least_budget_ms",
    "queue_wait_ms",
]

#: the floors are priced at this multiple of the measured rate (at most the highest rate)
HEADROOM = 1.0
#: the share of a function's capacity (at its batches' mean latency) they may use
UTILISATION = 1.0


@dataclass(frozen=True, slots=True)
class StageFleet:
    """One function as the split sees it: its latency estimate (ms) at a batch size, which its
    budget must hold, the batches it can run at once, its largest batch, and the mean latency
    (ms) at a batch size, which its throughput is made of (the estimate when None)."""

    estimate_ms: Callable[[int], float]
    slots: int
    max_batch: int
    mean_ms: Callable[[int], float] | None = None


@dataclass(frozen=True, slots=True)
class AppPath:
    """One app: its functions in order and its SLO (ms)."""

    stages: tuple[str, ...]
    slo_ms: float


def least_budget_ms(
    fleet: StageFleet, rate_rps: float, *, utilisation: float = UTILISATION, wait: float = 1.0
) -> float:
    """The least stage budget (ms) with which ``fleet`` carries ``rate_rps``; ``inf`` when no
    batch within its maximum does. Whether a batch size carries the rate is judged by its mean
    latency, the budget it needs by its estimate."""
    if not 0.0 < utilisation <= 1.0:
        raise ValueError(f"utilisation must be in (0, 1], got {utilisation!r}")
    slots = max(1, fleet.slots)
    factor = 1.0 + max(0.0, wait) / slots
    mean_ms = fleet.estimate_ms if fleet.mean_ms is None else fleet.mean_ms
    if fleet.max_batch <= 1:  # it cannot batch: a burst only queues
        service = max(mean_ms(1), 1e-6)
        busy = rate_rps * service / (slots * 1000.0)
        if busy > utilisation or busy >= 1.0:
            return math.inf
        alone = max(fleet.estimate_ms(1), 1e-6)
        queued = queue_wait_ms(slots, busy, service) if wait > 0.0 else 0.0
        return max(alone * factor, alone + queued)
    best = math.inf
    for n in range(1, max(1, fleet.max_batch) + 1):
        if rate_rps * max(mean_ms(n), 1e-6) <= utilisation * slots * n * 1000.0:
            best = min(best, max(fleet.estimate_ms(n), 1e-6) * factor)
            if rate_rps <= 0.0:
                break
    return best


def queue_wait_ms(slots: int, busy: float, service_ms: float, quantile: float = 0.95) -> float:
    """The ``quantile`` of a request's wait (ms) for one of ``slots`` servers, each busy
    ``busy`` of the time (< 1) and serving a request in ``service_ms`` on average: the M/M/c
    queue, whose wait exceeds ``t`` with probability ``C · exp(-slots · (1 - busy) · t /
    service_ms)``, ``C`` Erlang's C (the chance a request waits at all)."""
    if not 0.0 <= busy < 1.0:
        raise ValueError(f"busy must be in [0, 1), got {busy!r}")
    if busy == 0.0:
        return 0.0
    offered = busy * slots
    blocked = 1.0  # Erlang's B by its recursion over the servers, then C from it
    for k in range(1, slots + 1):
        blocked = offered * blocked / (k + offered * blocked)
    waits = blocked / (1.0 - busy * (1.0 - blocked))
    tail = 1.0 - quantile
    if waits <= tail:
        return 0.0
    return math.log(waits / tail) * service_ms / (slots * (1.0 - busy))


def _loads(
    mix: Mapping[str, float], apps: Mapping[str, AppPath], rate_rps: float
) -> dict[str, float]:
    """Each function's requests a second when the apps arrive at ``rate_rps`` in ``mix``."""
    out: dict[str, float] = {}
    for name, share in mix.items():
        for fn in apps[name].stages:
            out[fn] = out.get(fn, 0.0) + rate_rps * share
    return out


def _needs(
    fleets: Mapping[str, StageFleet],
    loads: Mapping[str, float],
    utilisation: float,
    wait: float,
) -> dict[str, float]:
    return {
        fn: least_budget_ms(fleets[fn], loads.get(fn, 0.0), utilisation=utilisation, wait=wait)
        for fn in fleets
    }


def _fits(apps: Mapping[str, AppPath], needs: Mapping[str, float]) -> bool:
    return all(sum(needs[fn] for fn in a.stages) <= a.slo_ms for a in apps.values())


def highest_rate(
    fleets: Mapping[str, StageFleet],
    apps: Mapping[str, AppPath],
    mix: Mapping[str, float],
    *,
    utilisation: float = UTILISATION,
    wait: float = 1.0,
    tolerance: float = 0.005,
) -> float:
    """The highest total rate (app requests a second, in ``mix``'s proportions, which sum to 1)
    at which every app's least budgets fit its SLO; 0 when they do not fit even at no load."""
    if not _fits(apps, _needs(fleets, {}, utilisation, wait)):
        return 0.0
    high = 1.0
    while _fits(apps, _needs(fleets, _loads(mix, apps, high), utilisation, wait)):
        high *= 2.0
        if high > 1e9:
            return high
    low = high / 2.0 if high > 1.0 else 0.0
    while high - low > tolerance * max(high, 1e-9):
        mid = (low + high) / 2.0
        if _fits(apps, _needs(fleets, _loads(mix, apps, mid), utilisation, wait)):
            low = mid
        else:
            high = mid
    return low


def floor_split(slo_ms: float, eq4_ms: Sequence[float], floors_ms: Sequence[float]) -> list[float]:
    """Eq. 4's split of ``slo_ms`` by ``eq4_ms``, with every stage raised to its floor and the
    time that takes from the others taken in Eq. 4's proportions (ms; the budgets sum to
    ``slo_ms``). When the floors alone exceed the SLO, the split is in proportion to them."""
    if len(eq4_ms) != len(floors_ms) or not eq4_ms:
        raise ValueError("one estimate and one floor per stage")
    floors = [max(0.0, f) for f in floors_ms]
    if sum(floors) >= slo_ms:
        total = sum(floors)
        return (
            [slo_ms * f / total for f in floors]
            if total > 0
            else [slo_ms / len(floors)] * len(floors)
        )
    weights = [max(0.0, e) for e in eq4_ms]
    if sum(weights) <= 0.0:
        weights = [1.0] * len(weights)
    raised: set[int] = set()
    while True:  # water-filling: at most one pass per stage
        free = [k for k in range(len(weights)) if k not in raised]
        rest = slo_ms - sum(floors[k] for k in raised)
        total = sum(weights[k] for k in free)
        budgets = [0.0] * len(weights)
        for k in raised:
            budgets[k] = floors[k]
        for k in free:
            budgets[k] = rest * (weights[k] / total if total > 0 else 1.0 / len(free))
        under = [k for k in free if budgets[k] < floors[k]]
        if not under:
            return budgets
        raised.update(under)


class ThroughputSplit:
    """The measured mix of apps and each app's split at the highest rate the fleet carries,
    recomputed once every ``period_s`` (see the module docstring)."""

    def __init__(
        self,
        apps: Mapping[str, AppPath],
        *,
        period_s: float = 1.0,
        half_life_s: float = 10.0,
        utilisation: float = UTILISATION,
        wait: float = 1.0,
        headroom: float = HEADROOM,
    ) -> None:
        if not apps:
            raise ValueError("a split needs at least one app")
        if not (period_s > 0.0 and half_life_s > 0.0):
            raise ValueError(
                f"period_s and half_life_s must be > 0, got {period_s!r}, {half_life_s!r}"
            )
        self.apps = dict(apps)
        self.period_s = period_s
        self.half_life_s = half_life_s
        self.utilisation = utilisation
        self.wait = wait
        self.headroom = headroom
        #: the rate the floors are priced at: the measured rate with headroom, at most the highest
        self.target_rps = 0.0
        self._counts = dict.fromkeys(self.apps, 0.0)
        self._counted_at = 0.0
        self._first: float | None = None
        self._floors: dict[str, float] = {}
        self._computed_at = -math.inf
        #: the highest rate found at the latest recompute (app requests a second)
        self.rate_rps = 0.0

    def observe(self, app: str, now: float) -> None:
        """Count one request of ``app`` arriving at ``now``."""
        self._decay(now)
        if self._first is None:
            self._first = now
        self._counts[app] = self._counts.get(app, 0.0) + 1.0

    def _decay(self, now: float) -> None:
        if now > self._counted_at:
            keep = 0.5 ** ((now - self._counted_at) / self.half_life_s)
            for name in self._counts:
                self._counts[name] *= keep
            self._counted_at = now

    def mix(self) -> dict[str, float]:
        """Each app's share of the recent arrivals (equal shares before any)."""
        total = sum(self._counts.values())
        if total <= 0.0:
            return {name: 1.0 / len(self.apps) for name in self.apps}
        return {name: c / total for name, c in self._counts.items()}

    def measured_rps(self) -> float:
        """The recent arrival rate of all apps together (requests a second): the decayed count
        over the decayed time it was counted in (the whole half-life window once it has run)."""
        if self._first is None:
            return 0.0
        span = self._counted_at - self._first
        window = self.half_life_s / math.log(2.0) * (1.0 - 0.5 ** (span / self.half_life_s))
        total = sum(self._counts.values())
        return total / window if window > 0.0 else 0.0

    def due(self, now: float) -> bool:
        """Whether the split is to be recomputed at ``now``."""
        return now - self._computed_at >= self.period_s

    def recompute(self, now: float, fleets: Mapping[str, StageFleet]) -> None:
        """Find the highest rate in the measured mix on ``fleets`` and each function's least
        budget there."""
        self._decay(now)
        mix = self.mix()
        u, w = self.utilisation, self.wait
        self.rate_rps = highest_rate(fleets, self.apps, mix, utilisation=u, wait=w)
        self.target_rps = min(self.rate_rps, self.headroom * self.measured_rps())
        loads = _loads(mix, self.apps, self.target_rps)
        self._floors = _needs(fleets, loads, u, w)
        self._computed_at = now

    def floor_ms(self, function: str) -> float:
        """``function``'s least budget (ms) at the latest recompute (0 before the first)."""
        return self._floors.get(function, 0.0)

    def budgets_ms(self, app: str, eq4_ms: Sequence[float]) -> list[float]:
        """``app``'s stage budgets (ms): Eq. 4's split by ``eq4_ms`` with each stage raised to
        the least budget its function needs at the highest rate (Eq. 4's alone before the
        first recompute)."""
        path = self.apps[app]
        if not self._floors:
            return list(floor_split(path.slo_ms, eq4_ms, [0.0] * len(eq4_ms)))
        floors = [self._floors.get(fn, 0.0) for fn in path.stages]
        floors = [f if math.isfinite(f) else path.slo_ms for f in floors]
        return floor_split(path.slo_ms, eq4_ms, floors)
