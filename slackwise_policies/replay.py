"""The response-time percentile by replaying the controller's own batching on what it observed.

The analytic model (:mod:`slackwise_policies.percentile`) assumes one mean batch size and one
spread for every size. Under work-conserving, deadline-aware batching neither holds: on several
replicas half the batches are single requests while a busy spell leaves with batches of 15–20,
and the service time of each size has its own spread. That is why the analytic model is
optimistic on four or more replicas (``docs/advisor.md``). This model keeps nothing of that
algebra: it replays Poisson arrivals at the given rate through ``replicas × slots`` servers with
the batching rule the controller applies (:func:`slackwise_policies.batching.decide` with
``max_wait_ms: 0``: a free slot takes the longest queue prefix whose estimate ``E(n)`` still meets
the head's deadline, and a head that cannot make it leaves with the late requests behind it),
each batch's service drawn from a log-normal with the **median and P95 the controller observed
for that batch size** (:meth:`slackwise_policies.latency.LatencyModel.observed_ms`; the fitted
estimate and spread where a size has too few samples, and past the largest size observed no less
than the observed curve continued at its own slope: the sizes a rise in load brings are the ones
not yet seen). The batch-size distribution is then not assumed but produced by the same rule as
live.

It is a model, not the simulator: one function, a fixed SLO from arrival, FIFO order (equal to
deadline order under one SLO), no cold starts, no AIMD period, no waiting for company (a batch
held for company only makes waits longer than this predicts when the slots are busy, and shorter
otherwise: the controller waits only while slots are idle). It is deterministic (seeded, common
random numbers across replica counts, so the search compares like with like), pure, and costs
about ``requests`` × a few microseconds per evaluation: :func:`replay_min_replicas` caches
nothing; the advisor caches its answers per quantised rate and service.
"""

from __future__ import annotations

import bisect
import heapq
import math
import random
from collections import deque
from dataclasses import dataclass
from statistics import NormalDist
from typing import Protocol

from slackwise_policies.fewest import fewest_meeting

__all__ = [
    "ObservedService",
    "quantised_up",
    "replay_min_replicas",
    "replay_percentile",
    "windows_keep",
    "worst_window_ms",
]

_Z95 = NormalDist().inv_cdf(0.95)
#: arrivals beyond the percentile's tail: at least this many requests land above it
_TAIL_SAMPLES = 200
_MIN_REQUESTS = 4000
_WARMUP_FRACTION = 0.1


class _ObservedLatency(Protocol):
    """What :meth:`ObservedService.from_latency_model` reads from a latency model."""

    def estimate_ms(self, n: int) -> float: ...

    def spread(self, now: float) -> float: ...

    def observed_ms(
        self, n: int, now: float, recent_s: float | None = None
    ) -> tuple[float, float] | None: ...


def quantised_up(value: float, step: float = 0.02) -> float:
    """``value`` rounded up to the next power of ``1 + step`` (so equal services hash equal)."""
    if value <= 0.0:
        return 0.0
    base = math.log1p(step)
    return math.exp(math.ceil(math.log(value) / base - 1e-9) * base)


@dataclass(frozen=True, slots=True)
class ObservedService:
    """Per batch size ``n = 1..K`` (index ``n − 1``): the observed median and P95 round trip
    and the estimate ``E(n)`` the batching decision uses, in milliseconds; ``slots`` batches at
    once per replica (``containerConcurrency``)."""

    median_ms: tuple[float, ...]
    p95_ms: tuple[float, ...]
    estimate_ms: tuple[float, ...]
    slots: int = 1

    def __post_init__(self) -> None:
        k = len(self.median_ms)
        if k < 1 or len(self.p95_ms) != k or len(self.estimate_ms) != k:
            raise ValueError(
                "median_ms, p95_ms and estimate_ms need one value per batch size, "
                f"got {len(self.median_ms)}, {len(self.p95_ms)} and {len(self.estimate_ms)}"
            )
        for name in ("median_ms", "p95_ms", "estimate_ms"):
            for value in getattr(self, name):
                if not (math.isfinite(value) and value > 0.0):
                    raise ValueError(f"{name} must hold numbers > 0, got {value!r}")
        if isinstance(self.slots, bool) or self.slots < 1:
            raise ValueError(f"slots must be an integer >= 1, got {self.slots!r}")

    @property
    def batch_limit(self) -> int:
        return len(self.median_ms)

    @classmethod
    def from_latency_model(
        cls,
        model: _ObservedLatency,
        now: float,
        *,
        batch_limit: int,
        container_concurrency: int,
        recent_s: float | None = None,
    ) -> ObservedService:
        """What ``model`` has observed at ``now`` for batches up to ``batch_limit``: each size's
        window median and P95 (of the last ``recent_s`` only, where they hold enough), or, with
        too few samples, the estimate as the median and the estimate × spread as the P95; past
        the largest size observed, no less than the observed curve continued at the slope of its
        upper half (:func:`_beyond_observed`) with the pooled spread, for the service and for
        ``E(n)`` alike (the controller learns a size's cost from its first batches of it).
        Values are rounded up to 2 % steps (cache keys)."""
        spread = max(1.0, model.spread(now))
        limit = max(1, batch_limit)
        seen = {n: s for n in range(1, limit + 1) if (s := model.observed_ms(n, now, recent_s))}
        beyond = _beyond_observed(seen)
        medians, p95s, estimates = [], [], []
        for n in range(1, limit + 1):
            estimate = max(0.1, model.estimate_ms(n))
            median, p95 = seen.get(n) or (estimate, estimate * spread)
            if n not in seen and beyond is not None and n > beyond[0]:
                median, p95 = _continued(beyond, n, median, p95, spread)
                estimate = max(estimate, median)
            median = max(0.1, median)
            medians.append(quantised_up(median))
            p95s.append(quantised_up(max(median, p95)))
            estimates.append(quantised_up(estimate))
        for i in range(1, len(estimates)):  # E(n) is monotone for the decision's bisection
            estimates[i] = max(estimates[i], estimates[i - 1])
        return cls(tuple(medians), tuple(p95s), tuple(estimates), max(1, container_concurrency))


def _beyond_observed(seen: dict[int, tuple[float, float]]) -> tuple[int, float, float] | None:
    """How the observed curve continues past its largest size: ``(n, median, slope)``, the slope
    a least-squares fit of the medians over the upper half of the sizes seen (``None`` with
    fewer than three there: two noisy medians make a slope of anything). A batch's cost per
    instance at the sizes it has reached is what the next sizes cost; a line through every size
    seen is pulled flat by the small batches, whose fixed overhead hides the per-instance cost,
    and prices large batches low."""
    if not seen:
        return None
    top = max(seen)
    upper = [(n, seen[n][0]) for n in seen if n >= max(1, top // 2)]
    if len(upper) < 3:
        return None
    mean_n = sum(n for n, _ in upper) / len(upper)
    mean_m = sum(m for _, m in upper) / len(upper)
    sxx = sum((n - mean_n) ** 2 for n, _ in upper)
    sxy = sum((n - mean_n) * (m - mean_m) for n, m in upper)
    return top, seen[top][0], max(0.0, sxy / sxx)


def _continued(
    beyond: tuple[int, float, float], n: int, median: float, p95: float, spread: float
) -> tuple[float, float]:
    """The median and P95 of an unobserved size ``n`` past the observed ones: the larger of the
    estimate's and the observed curve's continuation, its P95 the pooled ``spread`` on it (one
    size's own P95/median, from its few samples, swings the count by half)."""
    top, top_median, slope = beyond
    continued = top_median + slope * (n - top)
    return max(median, continued), max(p95, continued * spread)


def _requests_for(percentile: float, requests: int | None) -> int:
    if requests is not None:
        if requests < 100:
            raise ValueError(f"requests must be >= 100, got {requests!r}")
        return requests
    tail = max(1e-6, 1.0 - percentile / 100.0)
    return max(_MIN_REQUESTS, math.ceil(_TAIL_SAMPLES / tail))


def _check(rate: float, replicas: int, slo_ms: float, percentile: float) -> None:
    if not (math.isfinite(rate) and rate > 0.0):
        raise ValueError(f"rate must be a finite number > 0, got {rate!r}")
    if isinstance(replicas, bool) or replicas < 1:
        raise ValueError(f"replicas must be an integer >= 1, got {replicas!r}")
    if not (math.isfinite(slo_ms) and slo_ms > 0.0):
        raise ValueError(f"slo_ms must be a finite number > 0, got {slo_ms!r}")
    if not (math.isfinite(percentile) and 0.0 < percentile < 100.0):
        raise ValueError(f"percentile must be within (0, 100) percent, got {percentile!r}")


def replay_percentile(
    rate: float,
    replicas: int,
    service: ObservedService,
    slo_ms: float,
    percentile: float,
    *,
    requests: int | None = None,
    seed: int = 1,
    window: int = 0,
) -> float:
    """The ``percentile`` response time (ms) of ``rate`` requests per second on ``replicas``,
    replayed (see the module docstring). ``requests`` defaults to enough that 200 land beyond
    the percentile (20 000 for P99); the first 10 % are a warm-up and not counted. A backlog
    that grows all run shows as a percentile far above the SLO, as it would live. With a
    ``window`` (Swayam's SLA: every ``window`` consecutive requests keep the percentile), the
    percentile of the worst such window instead (:func:`worst_window_ms`)."""
    latencies = _replayed(rate, replicas, service, slo_ms, percentile, requests, seed)
    if window:
        return worst_window_ms(latencies, window, percentile)
    counted = sorted(latencies)
    rank = max(0, math.ceil(percentile / 100.0 * len(counted)) - 1)
    return counted[rank]


def _replayed(
    rate: float,
    replicas: int,
    service: ObservedService,
    slo_ms: float,
    percentile: float,
    requests: int | None,
    seed: int,
) -> list[float]:
    """The replayed response times (ms) in arrival order, the warm-up left out."""
    _check(rate, replicas, slo_ms, percentile)
    count = _requests_for(percentile, requests)
    arrivals_rng = random.Random(seed)
    service_rng = random.Random(seed + 7919)
    limit = service.batch_limit
    slo_s = slo_ms / 1000.0
    estimates_s = [e / 1000.0 for e in service.estimate_ms]
    late_s = estimates_s[0]
    medians_s = [m / 1000.0 for m in service.median_ms]
    sigmas = [
        math.log(p / m) / _Z95 for p, m in zip(service.p95_ms, service.median_ms, strict=True)
    ]
    gauss = service_rng.gauss
    expo = arrivals_rng.expovariate
    free = replicas * service.slots
    done: list[float] = []  # completion times of the batches in flight
    queue: deque[float] = deque()  # arrival times, oldest first
    latencies: list[float] = []
    warmup = int(count * _WARMUP_FRACTION)
    issued = 0
    next_arrival = expo(rate)
    inf = math.inf
    while issued < count or queue:
        if done and done[0] <= next_arrival:
            now = heapq.heappop(done)
            free += 1
        else:
            now = next_arrival
            queue.append(now)
            issued += 1
            next_arrival = now + expo(rate) if issued < count else inf
        while free and queue:
            room_s = queue[0] + slo_s - now  # the head's time to its deadline
            if room_s < late_s:  # late head: it leaves with the late ones behind it
                take = 1
                cutoff = now + late_s - slo_s  # arrived by then: late too
                while take < len(queue) and take < limit and queue[take] <= cutoff:
                    take += 1
            else:  # the largest prefix whose estimate meets the head's deadline
                take = min(len(queue), limit, bisect.bisect_right(estimates_s, room_s))
            ms = medians_s[take - 1] * math.exp(sigmas[take - 1] * gauss(0.0, 1.0))
            finish = now + ms
            for _ in range(take):
                latencies.append(finish - queue.popleft())
            heapq.heappush(done, finish)
            free -= 1
    counted = latencies[warmup:] if len(latencies) > warmup else latencies
    return [value * 1000.0 for value in counted]


def _window_rule(window: int, percentile: float) -> tuple[int, int]:
    """How many of a window's requests may miss and still keep its percentile (by nearest rank),
    and the step its windows slide by (a hundredth of it, as Swayam's compliance counts)."""
    if isinstance(window, bool) or not isinstance(window, int) or window < 1:
        raise ValueError(f"window must be an integer >= 1, got {window!r}")
    rank = max(1, math.ceil(percentile / 100.0 * window))
    return window - rank, max(1, window // 100)


def worst_window_ms(latencies: list[float], window: int, percentile: float) -> float:
    """The ``percentile`` (nearest rank) of the worst of the windows of ``window`` consecutive
    ``latencies``, sliding by a hundredth of it; of them all when there are fewer. A window keeps
    the SLO exactly when its percentile is within it, so the worst window's is the value a count
    judged by windows must keep within the SLO."""
    allowed, step = _window_rule(window, percentile)
    if len(latencies) <= window:
        ordered = sorted(latencies)
        return ordered[len(ordered) - allowed - 1] if len(ordered) > allowed else 0.0
    current = sorted(latencies[:window])
    worst = current[window - allowed - 1]
    for start in range(1, len(latencies) - window + 1):
        del current[bisect.bisect_left(current, latencies[start - 1])]
        bisect.insort(current, latencies[start + window - 1])
        if start % step == 0:
            worst = max(worst, current[window - allowed - 1])
    return worst


def windows_keep(latencies: list[float], window: int, percentile: float, slo_ms: float) -> bool:
    """Whether every window of ``window`` consecutive ``latencies`` (sliding by a hundredth of
    it) keeps the ``percentile`` within ``slo_ms``: the same test as ``worst_window_ms(...) <=
    slo_ms``, by counting misses, a pass over the run."""
    allowed, step = _window_rule(window, percentile)
    missed = [value > slo_ms for value in latencies]
    if len(missed) <= window:
        return sum(missed) <= allowed
    inside = sum(missed[:window])
    if inside > allowed:
        return False
    for start in range(1, len(missed) - window + 1):
        inside += missed[start + window - 1] - missed[start - 1]
        if start % step == 0 and inside > allowed:
            return False
    return True


def replay_min_replicas(
    rate: float,
    slo_ms: float,
    percentile: float,
    service: ObservedService,
    *,
    max_replicas: int = 1000,
    requests: int | None = None,
    seed: int = 1,
    window: int = 0,
) -> int:
    """The fewest replicas whose replayed ``percentile`` is within ``slo_ms`` (``max_replicas``
    when none is); 0 at rate 0. Starts at the stability bound (full batches at their median)
    and gallops, then bisects, as :func:`slackwise_policies.percentile.min_replicas` does. With a
    ``window``, the percentile of every ``window`` consecutive requests (Swayam's SLA)."""
    if isinstance(max_replicas, bool) or max_replicas < 1:
        raise ValueError(f"max_replicas must be an integer >= 1, got {max_replicas!r}")
    if rate == 0.0:
        return 0

    def meets(replicas: int) -> bool:
        if window:
            latencies = _replayed(rate, replicas, service, slo_ms, percentile, requests, seed)
            return windows_keep(latencies, window, percentile, slo_ms)
        value = replay_percentile(
            rate, replicas, service, slo_ms, percentile, requests=requests, seed=seed
        )
        return value <= slo_ms

    k = service.batch_limit
    per_replica = k * service.slots * 1000.0 / service.median_ms[k - 1]
    return fewest_meeting(meets, max(1, math.ceil(rate / per_replica)), max_replicas)
