"""The discrete-event engine: app requests walk their chains through shared function queues.

Virtual time, one heap of events (arrival, batch done, re-decide, replica ready, metric sample,
scaler tick). Every decision is made by the objects the live adapter uses, called the way
``adapter.serving.dispatcher`` calls them:

* each function has an :class:`adapter.policies.queue.RequestQueue` (in the policy's order), an
  :class:`adapter.policies.latency.LatencyModel` seeded from the profile's linear fit (as
  ``adapter.serving.app.latency_prior``) that learns from every finished batch, optionally the
  ``slackwise`` preset's :class:`adapter.policies.aimd.AIMD`, and a
  :class:`adapter.policies.estimates.BatchSizeTracker`;
* whenever something changes at a function (an arrival, a finished batch, a timer it asked for,
  a replica becoming ready) the engine takes :func:`adapter.policies.scheduling.next_batch` steps
  until it
  sends nothing more, with the dispatcher's slot count (ready replicas × containerConcurrency, or
  one slot while none is ready) and pops ``decision.take`` requests;
* a request entering stage ``k`` of its app gets the deadline
  :meth:`adapter.policies.slack.StagePolicy.stage_deadline` gives it, from the stages' latency
  estimates
  at their batch sizes in use (:func:`adapter.policies.estimates.stage_estimates`).

What the engine adds is only the world: Poisson (or trace-driven) arrivals, batch service times
drawn from the measured profile (:class:`simulator.service.ServiceCurve`), replicas started and
stopped by a :class:`simulator.scaling.Scaler` with the profile's cold start, and accounting.
A batch sent while no replica is ready waits for one (the activator) and counts as cold.
Replica-seconds are counted from a replica's creation (cold start included) to its removal or the
end of the run (the last completion), as ``knative.local.platform``'s ledger counts them.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import math
import random
from array import array
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from adapter.policies.aimd import AIMD
from adapter.policies.batching import BatchDecision
from adapter.policies.estimates import BatchSizeTracker, stage_estimates
from adapter.policies.latency import LatencyModel
from adapter.policies.modes import SLACKWISE
from adapter.policies.queue import RequestQueue
from adapter.policies.scheduling import next_batch
from adapter.policies.slack import StagePolicy
from knative.meter import ConcurrencyMeter
from simulator.config import SimConfig, SimFunction
from simulator.scaling import FixedScaler, FunctionState, KpaScaler, Scaler, ScalerHooks
from simulator.service import ServiceCurve

__all__ = [
    "AppResult",
    "FunctionResult",
    "SimRequest",
    "SimResult",
    "Simulation",
    "StageResult",
    "app_slos_ms",
    "make_scaler",
]

_ARRIVAL, _DONE, _WAKE, _READY, _SAMPLE, _TICK = range(6)


class SimRequest:
    """One app request as it walks its chain; what the shared queue orders and batches."""

    __slots__ = (
        "app",
        "arrival",
        "deadline",
        "dispatched",
        "due",
        "entered",
        "hopeless",
        "index",
        "seq",
        "stage",
    )
    #: every simulated request is one instance and is never cancelled by its client
    size = 1
    cancelled = False

    def __init__(self, app: int, index: int, arrival: float, due: float) -> None:
        self.app = app
        self.index = index
        self.seq = index
        self.arrival = arrival
        self.due = due
        self.deadline = due
        self.stage = 0
        self.entered = arrival
        self.dispatched = arrival
        self.hopeless = False


@dataclass(frozen=True, slots=True)
class StageResult:
    """Mean time per request at one stage of an app (Fig. 11's stacked bars)."""

    function: str
    queue_ms: float
    compute_ms: float


@dataclass(frozen=True, slots=True)
class AppResult:
    name: str
    slo_ms: float
    requests: int
    violation_pct: float
    p50_ms: float
    p99_ms: float
    mean_ms: float
    stages: tuple[StageResult, ...]


@dataclass(frozen=True, slots=True)
class FunctionResult:
    name: str
    batches: int
    mean_batch: float
    cold_batches: int
    replica_seconds: float
    peak_replicas: int
    #: measured requests that reached the function while it had no ready replica
    cold_start_hits: int = 0


@dataclass(frozen=True, slots=True)
class SimResult:
    """One run of one policy: the measured requests (after the warm-up) and the fleet's cost."""

    policy: str
    rate_rps: float
    requests: int
    violation_pct: float
    p50_ms: float
    p99_ms: float
    mean_ms: float
    mean_batch: float
    replica_seconds: float
    duration_s: float
    events: int
    apps: tuple[AppResult, ...]
    functions: tuple[FunctionResult, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "rate_rps": round(self.rate_rps, 3),
            "violation_pct": round(self.violation_pct, 4),
            "p50_ms": round(self.p50_ms, 3),
            "p99_ms": round(self.p99_ms, 3),
            "mean_ms": round(self.mean_ms, 3),
            "mean_batch": round(self.mean_batch, 3),
            "replica_seconds": round(self.replica_seconds, 3),
            "duration_s": round(self.duration_s, 3),
            "stages": {
                a.name: [
                    {"function": s.function, "queue_ms": round(s.queue_ms, 3),
                     "compute_ms": round(s.compute_ms, 3)}
                    for s in a.stages
                ]
                for a in self.apps
            },
            "apps": {
                a.name: {"slo_ms": round(a.slo_ms, 3), "requests": a.requests,
                         "violation_pct": round(a.violation_pct, 4), "p50_ms": round(a.p50_ms, 3),
                         "p99_ms": round(a.p99_ms, 3), "mean_ms": round(a.mean_ms, 3)}
                for a in self.apps
            },
            "functions": {
                f.name: {"batches": f.batches, "mean_batch": round(f.mean_batch, 3),
                         "cold_batches": f.cold_batches, "cold_start_hits": f.cold_start_hits,
                         "replica_seconds": round(f.replica_seconds, 3),
                         "peak_replicas": f.peak_replicas}
                for f in self.functions
            },
        }  # fmt: skip


def app_slos_ms(config: SimConfig, curves: Mapping[str, ServiceCurve]) -> dict[str, float]:
    """Each app's SLO: ``slo_ms``, or ``slo_factor`` × the sum of its stages' batch-1 medians."""
    return {
        name: app.slo_ms
        if app.slo_ms is not None
        else app.slo_factor * sum(curves[s].median_ms(1) for s in app.stages)
        for name, app in config.apps.items()
    }


def make_scaler(config: SimConfig) -> Scaler:
    """The config's scaler: fixed nodes per function, or Knative's KPA."""
    if config.scaling == "fixed":
        return FixedScaler({n: f.nodes for n, f in config.functions.items()})
    return KpaScaler(
        {n: f.scaling for n, f in config.functions.items()},
        tick_s=config.autoscaler.tick_interval_s,
    )


class _LaggedP95:
    """A function's :class:`LatencyModel` as the scheduler reads it, with the P95 refreshed
    every ``every`` warm batches or ``max_age_s`` of virtual time rather than after each one.

    The model's P95 where a batch size's window is thin is ``estimate × spread``, and the
    spread is a nearest-rank percentile over up to 1024 recent ratios, recomputed (a sort)
    after every observed batch. At millions of batches that sort is most of the run; a P95 a
    few batches old changes no decision that matters (it only sets the dispatch timeout, and
    with ``max_wait_ms: 0`` only the timeout's label). ``estimate_ms`` is the model's own.
    """

    __slots__ = ("_cache", "_filled_at", "_filled_samples", "estimate_ms", "every", "max_age_s",
                 "model")  # fmt: skip

    def __init__(self, model: LatencyModel, *, every: int = 32, max_age_s: float = 0.25) -> None:
        self.model = model
        self.estimate_ms = model.estimate_ms
        self.every = every
        self.max_age_s = max_age_s
        self._cache: dict[int, float] = {}
        self._filled_at = -math.inf
        self._filled_samples = -every

    def p95_ms(self, n: int, now: float) -> float:
        model = self.model
        if (
            model.warm_samples - self._filled_samples >= self.every
            or now - self._filled_at >= self.max_age_s
        ):
            self._cache.clear()
            self._filled_at = now
            self._filled_samples = model.warm_samples
        value = self._cache.get(n)
        if value is None:
            value = self._cache[n] = model.p95_ms(n, now)
        return value


class _Station:
    """One function: its queue, its models and its replicas."""

    __slots__ = (
        "aimd",
        "batches",
        "closed_s",
        "cold_batches",
        "cold_hits",
        "cold_s",
        "concurrency",
        "desired",
        "inflight",
        "instances",
        "limit",
        "max_batch",
        "medians",
        "meter",
        "model",
        "name",
        "next_id",
        "parked",
        "peak",
        "queue",
        "reader",
        "ready",
        "ready_created",
        "sigmas",
        "starting",
        "tracker",
        "version",
        "wake_at",
    )

    def __init__(
        self, fn: SimFunction, curve: ServiceCurve, policy: StagePolicy, config: SimConfig
    ) -> None:
        self.name = fn.name
        self.max_batch = fn.max_batch
        self.concurrency = fn.container_concurrency
        self.cold_s = curve.cold_start_s if fn.cold_start_s is None else fn.cold_start_s
        self.medians, self.sigmas = curve.tables(
            fn.max_batch, deterministic=config.service == "deterministic"
        )
        self.queue: RequestQueue[SimRequest] = RequestQueue(policy.order)
        # seeded as adapter.serving.app.latency_prior seeds the live one
        self.model = LatencyModel.from_prior(max(curve.prior_a_ms, 0.1), max(curve.prior_b_ms, 0.0))
        self.reader = _LaggedP95(self.model)
        self.tracker = BatchSizeTracker(alpha=config.estimate_alpha)
        self.aimd: AIMD | None = None
        if config.aimd:
            self.aimd = SLACKWISE.aimd_for(fn.max_batch)
        self.limit = policy.batch_limit(fn.max_batch)
        self.meter = ConcurrencyMeter(0.0)
        self.batches = 0
        self.instances = 0
        self.cold_batches = 0
        self.cold_hits = 0
        self.inflight = 0
        self.ready = 0
        self.ready_created: list[float] = []
        self.starting: dict[int, float] = {}
        self.closed_s = 0.0
        self.desired = 0
        self.next_id = 0
        self.parked: list[tuple[list[SimRequest], float, bool]] = []
        self.wake_at: float | None = None
        self.version = 0
        self.peak = 0


class _App:
    __slots__ = ("estimates", "name", "slo_s", "stations", "trackers_version")

    def __init__(self, name: str, stations: list[_Station], slo_s: float) -> None:
        self.name = name
        self.stations = stations
        self.slo_s = slo_s
        self.estimates: list[float] = [1.0] * len(stations)
        self.trackers_version = -1


def _poisson_arrivals(rng: random.Random, rate: float, count: int) -> Iterator[float]:
    t = 0.0
    expo = rng.expovariate
    for _ in range(count):
        t += expo(rate)
        yield t


class Simulation:
    """One run of one stage policy over a config's workload (see the module docstring)."""

    def __init__(
        self,
        config: SimConfig,
        policy: StagePolicy,
        curves: Mapping[str, ServiceCurve],
        *,
        rate_rps: float | None = None,
        requests: int | None = None,
        seed: int | None = None,
        scaler: Scaler | None = None,
        arrivals: Sequence[float] | None = None,
    ) -> None:
        self.config = config
        self.policy = policy
        self.rate_rps = config.rate_rps if rate_rps is None else rate_rps
        self.requests = config.requests if requests is None else requests
        seed = config.seed if seed is None else seed
        self._arrival_rng = random.Random(seed)
        self._service_rng = random.Random(seed + 1_000_003)
        self._app_rng = random.Random(seed + 2_000_003)
        self.scaler = scaler or make_scaler(config)
        self._kpa = self.scaler.tick_s is not None
        self._max_wait_s = None if config.max_wait_ms is None else config.max_wait_ms / 1000.0
        self.stations: dict[str, _Station] = {
            name: _Station(fn, curves[name], policy, config)
            for name, fn in config.functions.items()
        }
        slos = app_slos_ms(config, curves)
        self.apps = [
            _App(name, [self.stations[s] for s in app.stages], slos[name] / 1000.0)
            for name, app in config.apps.items()
        ]
        weights = [app.weight for app in config.apps.values()]
        total = sum(weights)
        self._cumulative = list(itertools.accumulate(w / total for w in weights))
        self._arrivals = arrivals
        self._heap: list[tuple[float, int, int, Any, Any]] = []
        self._seq = itertools.count()
        self.now = 0.0
        self.events = 0
        self._outstanding = 0
        self._issued = 0
        self._warmup = int(self.requests * config.warmup_fraction)
        self._latencies = array("d")
        self._app_of = array("B")
        self._index_of = array("q")
        self._violations = 0
        count = len(self.apps)
        self._queue_s = [[0.0] * len(a.stations) for a in self.apps]
        self._compute_s = [[0.0] * len(a.stations) for a in self.apps]
        self._measured = [0] * count
        self._hooks = self.scaler if isinstance(self.scaler, ScalerHooks) else None

    # -- events ------------------------------------------------------------------------------

    def _push(self, t: float, kind: int, a: Any = None, b: Any = None) -> None:
        heapq.heappush(self._heap, (t, next(self._seq), kind, a, b))

    def run(self) -> SimResult:
        """Run to the last completion and summarise."""
        if self.requests < 1:
            raise ValueError(f"requests must be >= 1, got {self.requests}")
        times: Iterator[float]
        if self._arrivals is not None:
            times = iter(self._arrivals[: self.requests])
        else:
            times = _poisson_arrivals(self._arrival_rng, self.rate_rps, self.requests)
        hooks = self._hooks
        for st in self.stations.values():
            if hooks is not None:
                hooks.bind(st.name, st.model, self._limit_reader(st))
            n = self.scaler.initial(st.name)
            st.ready = st.desired = st.peak = n
            st.ready_created = [0.0] * n
        if self._kpa:
            for st in self.stations.values():
                self._tick(st, 0.0)
            self._push(1.0, _SAMPLE)
            tick_s = self.scaler.tick_s
            assert tick_s is not None
            self._push(tick_s, _TICK)
        first = next(times, None)
        if first is not None:
            self._push(first, _ARRIVAL)
        heap = self._heap
        pop = heapq.heappop
        schedule = self._schedule
        while heap:
            t, _, kind, a, b = pop(heap)
            self.now = t
            self.events += 1
            if kind == _DONE:
                self._done(t, a, b)
            elif kind == _ARRIVAL:
                self._arrive(t)
                nxt = next(times, None)
                if nxt is not None:
                    self._push(nxt, _ARRIVAL)
            elif kind == _WAKE:
                if a.wake_at == t:
                    a.wake_at = None
                    schedule(a, t)
            elif kind == _READY:
                self._ready(a, b, t)
            elif kind == _SAMPLE:
                self._sample(t)
            elif kind == _TICK:
                self._tick_all(t)
        return self._result()

    def _limit_reader(self, st: _Station) -> Callable[[], int]:
        """The batch limit in use at ``st`` (AIMD's, within the max batch), read when asked."""
        policy = self.policy

        def limit() -> int:
            if st.aimd is not None:
                return policy.batch_limit(max(1, min(st.aimd.limit, st.max_batch)))
            return st.limit

        return limit

    def latencies_by_arrival(self) -> tuple[np.ndarray, np.ndarray]:
        """After :meth:`run`: the measured requests' end-to-end latencies (ms) and app indices,
        in arrival order (what a sliding-window SLA metric reads)."""
        order = np.argsort(np.frombuffer(self._index_of, dtype=np.int64), kind="stable")
        lat = np.frombuffer(self._latencies, dtype=np.float64)[order] * 1000.0
        apps = np.frombuffer(self._app_of, dtype=np.uint8)[order]
        return lat, apps

    def _live(self) -> bool:
        return self._outstanding > 0 or self._issued < self.requests

    def _arrive(self, now: float) -> None:
        r = bisect.bisect_left(self._cumulative, self._app_rng.random())
        app_index = min(r, len(self.apps) - 1)
        app = self.apps[app_index]
        req = SimRequest(app_index, self._issued, now, now + app.slo_s)
        self._issued += 1
        self._outstanding += 1
        st = self._enter(req, app, now)
        self._schedule(st, now)

    def _enter(self, req: SimRequest, app: _App, now: float) -> _Station:
        k = req.stage
        stations = app.stations
        st = stations[k]
        req.entered = now
        req.hopeless = False
        if self.policy.division == "proportional" and k < len(stations) - 1:
            version = 0
            for s in stations:
                version += s.version
            if version != app.trackers_version:
                app.trackers_version = version
                app.estimates = stage_estimates(
                    [s.model for s in stations], [s.tracker.mean for s in stations]
                )
        if st.ready == 0 and req.index >= self._warmup:
            st.cold_hits += 1
        if self._hooks is not None:
            self._hooks.arrived(now, st.name, 1)
        req.deadline = self.policy.stage_deadline(
            stage=k, now=now, arrival=req.arrival, deadline=req.due, estimates_ms=app.estimates
        )
        st.queue.push(req)
        return st

    # -- one function's scheduling step ------------------------------------------------------

    def _schedule(self, st: _Station, now: float) -> None:
        queue = st.queue
        policy = self.policy
        while queue:
            slots = st.ready * st.concurrency if st.ready else 1
            free = slots - st.inflight
            if free <= 0:
                return
            if st.aimd is not None:
                st.aimd.update(now)
                limit = policy.batch_limit(max(1, min(st.aimd.limit, st.max_batch)))
            else:
                limit = st.limit
            decision = next_batch(
                now,
                queue,
                st.reader,
                batching=policy.batching,
                deadline_aware=policy.deadline_aware,
                limit=limit,
                late_limit=st.max_batch,
                free_slots=free,
                cold=st.ready == 0,
                inflight=st.inflight,
                max_wait_s=self._max_wait_s,
            )
            if decision.take == 0:
                wake = decision.wake_at
                if wake is not None and (st.wake_at is None or wake < st.wake_at):
                    st.wake_at = wake
                    self._push(wake, _WAKE, st)
                return
            self._send(st, queue.pop(decision.take), decision, now)

    def _send(self, st: _Station, batch: list[SimRequest], d: BatchDecision, now: float) -> None:
        n = len(batch)
        st.inflight += 1
        st.batches += 1
        st.instances += n
        st.tracker.observe(n)
        st.version += 1
        for req in batch:
            req.dispatched = now
        timeout = d.reason == "timeout"
        if self._kpa:
            st.meter.arrive(now)
        if st.ready == 0:
            st.parked.append((batch, now, timeout))
            if st.desired == 0:
                self.scaler.wake(now, st.name, st.inflight)
                self._tick(st, now)
            return
        self._start(st, batch, now, now, timeout, False)

    def _start(
        self, st: _Station, batch: list[SimRequest], sent: float, now: float, timeout: bool,
        cold: bool,
    ) -> None:  # fmt: skip
        n = len(batch)
        if n > st.max_batch:  # a late batch may be up to the max; never larger
            n = st.max_batch
        sigma = st.sigmas[n]
        ms = st.medians[n]
        if sigma > 0.0:
            ms *= math.exp(sigma * self._service_rng.gauss(0.0, 1.0))
        self._push(now + ms / 1000.0, _DONE, st, (batch, sent, timeout, cold))

    def _done(self, now: float, st: _Station, info: tuple[list[SimRequest], float, bool, bool]) -> (
        None
    ):  # fmt: skip
        batch, sent, timeout, cold = info
        st.inflight -= 1
        if self._kpa:
            st.meter.depart(now)
        n = len(batch)
        round_trip_ms = (now - sent) * 1000.0
        st.model.observe(now, n, round_trip_ms, round_trip_ms, cold=cold)
        st.version += 1
        if cold:
            st.cold_batches += 1
        aimd = st.aimd
        warmup = self._warmup
        touched = [st]
        for req in batch:
            if aimd is not None:
                aimd.record(
                    now,
                    latency_ms=round_trip_ms,
                    slo_ms=max(1e-3, (req.deadline - req.entered) * 1000.0),
                    missed=now > req.deadline and not req.hopeless,
                    timeout_dispatch=timeout,
                    cold=cold,
                )
            app_index = req.app
            k = req.stage
            if req.index >= warmup:
                self._queue_s[app_index][k] += req.dispatched - req.entered
                self._compute_s[app_index][k] += now - req.dispatched
            app = self.apps[app_index]
            k += 1
            if k < len(app.stations):
                req.stage = k
                nxt = self._enter(req, app, now)
                if nxt not in touched:
                    touched.append(nxt)
            else:
                self._outstanding -= 1
                if req.index >= warmup:
                    self._latencies.append(now - req.arrival)
                    self._app_of.append(app_index)
                    self._index_of.append(req.index)
                    if now > req.due:
                        self._violations += 1
        for s in touched:
            self._schedule(s, now)

    # -- replicas ----------------------------------------------------------------------------

    def _sample(self, now: float) -> None:
        for st in self.stations.values():
            sample = st.meter.sample(now)
            self.scaler.observe(now, st.name, sample.concurrency, sample.rps)
        if self._live():
            self._push(now + 1.0, _SAMPLE)

    def _tick_all(self, now: float) -> None:
        for st in self.stations.values():
            self._tick(st, now)
        tick_s = self.scaler.tick_s
        if self._live() and tick_s is not None:
            self._push(now + tick_s, _TICK)

    def _tick(self, st: _Station, now: float) -> None:
        state = FunctionState(
            ready=st.ready, starting=len(st.starting), inflight=st.inflight, queued=len(st.queue)
        )
        desired = self.scaler.decide(now, st.name, state)
        st.desired = desired
        active = st.ready + len(st.starting)
        if desired > active:
            for _ in range(desired - active):
                st.next_id += 1
                st.starting[st.next_id] = now
                self._push(now + st.cold_s, _READY, st, st.next_id)
            st.peak = max(st.peak, desired)
        elif desired < active:
            excess = active - desired
            for rid in sorted(st.starting, key=lambda i: -st.starting[i])[:excess]:
                st.closed_s += now - st.starting.pop(rid)
                excess -= 1
            while excess > 0 and st.ready_created:
                st.closed_s += now - st.ready_created.pop()
                st.ready -= 1
                excess -= 1

    def _ready(self, st: _Station, rid: int, now: float) -> None:
        created = st.starting.pop(rid, None)
        if created is None:
            return  # removed while it was starting
        st.ready_created.append(created)
        st.ready += 1
        parked, st.parked = st.parked, []
        hooks = self._hooks
        for batch, sent, timeout in parked:
            if hooks is not None:  # the platform held this batch for the cold start
                hooks.cold_start(now, st.name, now - sent)
            self._start(st, batch, sent, now, timeout, True)
        self._schedule(st, now)

    # -- results -----------------------------------------------------------------------------

    def _result(self) -> SimResult:
        end = self.now
        lat = np.frombuffer(self._latencies, dtype=np.float64) * 1000.0
        apps_of = np.frombuffer(self._app_of, dtype=np.uint8)
        measured = len(lat)

        def stats(values: np.ndarray) -> tuple[float, float, float]:
            if len(values) == 0:
                return 0.0, 0.0, 0.0
            p50, p99 = np.percentile(values, [50, 99])
            return float(p50), float(p99), float(values.mean())

        apps = []
        for i, app in enumerate(self.apps):
            own = lat[apps_of == i]
            count = len(own)
            p50, p99, mean = stats(own)
            slo_ms = app.slo_s * 1000.0
            missed = int(np.count_nonzero(own > slo_ms)) if count else 0
            stages = tuple(
                StageResult(
                    function=st.name,
                    queue_ms=1000.0 * self._queue_s[i][k] / count if count else 0.0,
                    compute_ms=1000.0 * self._compute_s[i][k] / count if count else 0.0,
                )
                for k, st in enumerate(app.stations)
            )
            apps.append(AppResult(
                name=app.name, slo_ms=slo_ms, requests=count,
                violation_pct=100.0 * missed / count if count else 0.0,
                p50_ms=p50, p99_ms=p99, mean_ms=mean, stages=stages,
            ))  # fmt: skip
        functions = []
        total_batches = total_instances = 0
        replica_s = 0.0
        for st in self.stations.values():
            open_s = sum(end - c for c in st.ready_created) + sum(
                end - c for c in st.starting.values()
            )
            fn_s = st.closed_s + open_s
            replica_s += fn_s
            total_batches += st.batches
            total_instances += st.instances
            functions.append(FunctionResult(
                name=st.name, batches=st.batches,
                mean_batch=st.instances / st.batches if st.batches else 0.0,
                cold_batches=st.cold_batches, replica_seconds=fn_s, peak_replicas=st.peak,
                cold_start_hits=st.cold_hits,
            ))  # fmt: skip
        p50, p99, mean = stats(lat)
        return SimResult(
            policy=self.policy.name,
            rate_rps=self.rate_rps,
            requests=measured,
            violation_pct=100.0 * self._violations / measured if measured else 0.0,
            p50_ms=p50,
            p99_ms=p99,
            mean_ms=mean,
            mean_batch=total_instances / total_batches if total_batches else 0.0,
            replica_seconds=replica_s,
            duration_s=end,
            events=self.events,
            apps=tuple(apps),
            functions=tuple(functions),
        )
