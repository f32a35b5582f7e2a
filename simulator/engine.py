"""The discrete-event engine: app requests walk their chains through shared function queues.

Virtual time, one heap of events (arrival, batch done, re-decide, replica ready, metric sample,
scaler tick). Every decision is made by the object the live adapter's dispatcher drives: each
function's :class:`slackwise_policies.controller.Controller` (queue in the policy's order, latency
model seeded from the profile's linear fit as ``adapter.serving.wiring.latency_prior`` seeds the
live one, optionally the ``slackwise`` preset's AIMD, the batch sizes in use). Whenever something
changes at a function (an arrival, a finished batch, the timer its last step asked for, a replica
becoming ready) the engine takes :meth:`Controller.step` steps until it sends nothing more, and
feeds each finished batch back with :meth:`Controller.completed`. A request entering stage ``k``
of its app gets the deadline :meth:`slackwise_policies.slack.StagePolicy.stage_deadline` gives it,
from the stages' latency estimates at their batch sizes in use
(:func:`slackwise_policies.estimates.stage_estimates`), as :mod:`adapter.serving.chains` does.

What the engine adds is only the world: Poisson (or trace-driven) arrivals, batch service times
drawn from the measured profile (:class:`simulator.service.ServiceCurve`, slowed in a disturbance's
window: :mod:`simulator.disturbance`), replicas started and stopped by a
:class:`simulator.scalers.Scaler` with the profile's cold start, and accounting. A batch sent while
no replica is ready waits for one (the activator) and counts as cold. Replica-seconds run from a
replica's creation (cold start included) to its removal or the run's last completion.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import math
import random
from array import array
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from simulator.config import SimConfig
from simulator.disturbance import finish_s
from simulator.inputs import InputSizes
from simulator.request import SimRequest
from simulator.results import AppResult, FunctionResult, SimResult, StageResult, summarize
from simulator.run_setup import app_slos_ms, make_scaler, poisson_arrivals
from simulator.scalers import FunctionState, Scaler, ScalerHooks
from simulator.service import ServiceCurve
from simulator.stations import AppRoute, SharedSplit, Station
from slackwise_policies.batching import BatchDecision
from slackwise_policies.slack import StagePolicy

__all__ = [
    "AppResult",
    "FunctionResult",
    "SimRequest",
    "SimResult",
    "Simulation",
    "StageResult",
]

_ARRIVAL, _DONE, _WAKE, _READY, _SAMPLE, _TICK = range(6)


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
        self._max_wait_s = config.batching.max_wait_s
        self._inputs = InputSizes(config, seed)
        self.stations: dict[str, Station] = {
            name: Station(fn, curves[name], policy, config) for name, fn in config.functions.items()
        }
        slos = app_slos_ms(config, curves)
        self.apps = [
            AppRoute(name, [self.stations[s] for s in app.stages], slos[name] / 1000.0)
            for name, app in config.apps.items()
        ]
        self._split = SharedSplit(self.apps) if policy.throughput_aware else None
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
        #: entries into any queue, in order: a stage's place among equal deadlines
        self._entries = itertools.count()
        #: every batch sent: (function, dispatch time, the members' (index, stage))
        self.sent: list[tuple[str, float, tuple[tuple[int, int], ...]]] | None = None
        #: every scaling decision, when a list is given: (time, function, desired, ready)
        self.decisions: list[tuple[float, str, int, int]] | None = None
        self._disturbance = config.disturbance

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
            times = poisson_arrivals(self._arrival_rng, self.rate_rps, self.requests)
        hooks = self._hooks
        for st in self.stations.values():
            if hooks is not None:
                hooks.bind(st.name, st.model, st.controller.limit)
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
        req.input_class = self._inputs.pick(app_index)
        if self._split is not None:
            self._split.plan.observe(app.name, now)
        self._issued += 1
        self._outstanding += 1
        st = self._enter(req, app, now)
        self._schedule(st, now)

    def _enter(self, req: SimRequest, app: AppRoute, now: float) -> Station:
        k = req.stage
        stations = app.stations
        st = stations[k]
        req.arrival = now
        req.seq = next(self._entries)
        req.hopeless = False
        if self.policy.division in ("proportional", "marginal") and k < len(stations) - 1:
            app.refresh(self.policy, now)
        if st.ready == 0 and req.index >= self._warmup:
            st.cold_hits += 1
        if self._hooks is not None:
            self._hooks.arrived(now, st.name, 1)
        req.deadline = self.policy.stage_deadline(
            stage=k,
            now=now,
            arrival=req.started,
            deadline=req.due,
            estimates_ms=app.estimates_for(req, self._inputs),
            gains=app.gains,
        )
        req.cold = req.cold or st.ready == 0
        if st.controller.admit(req, now, st.ready) is not None:
            self._drop(req, now)  # refused: it would finish late
        return st

    def _drop(self, req: SimRequest, now: float) -> None:
        """A request refused or pruned as late: answered at ``now``, a violation."""
        self._finished(self.apps[req.app].stations[req.stage], req, now, missed=True, served=False)
        self._outstanding -= 1
        if req.index >= self._warmup:
            self._latencies.append(now - req.started)
            self._app_of.append(req.app)
            self._index_of.append(req.index)
            self._violations += 1

    def _finished(
        self, st: Station, req: SimRequest, now: float, *, missed: bool, served: bool = True
    ) -> None:
        """Evidence for the scaler (unless it missed waiting for a cold start); a miss may ask
        for a decision at once."""
        hooks = self._hooks
        if hooks is None:
            return
        if not (missed and req.cold):
            hooks.outcome(now, st.name, missed, served=served)
        if missed and hooks.missed(now, st.name):
            self._tick(st, now)

    # -- one function's scheduling step ------------------------------------------------------

    def _schedule(self, st: Station, now: float) -> None:
        controller = st.controller
        while True:
            step = controller.step(now, st.ready)
            for req in step.late:
                self._drop(req, now)
            if step.batch:
                assert step.decision is not None
                self._send(st, step.batch, step.decision, now)
                continue
            if step.late:
                continue
            # the loop waits for the time its latest step asked for, as the live one does
            wake = step.wake_at
            if wake != st.wake_at:
                st.wake_at = wake
                if wake is not None:
                    self._push(wake, _WAKE, st)
            return

    def _send(self, st: Station, batch: Sequence[SimRequest], d: BatchDecision, now: float) -> None:
        n = len(batch)
        st.batches += 1
        st.instances += n
        st.version += 1
        for req in batch:
            req.dispatched = now
        if self.sent is not None:
            self.sent.append((st.name, now, tuple((r.index, r.stage) for r in batch)))
        timeout = d.timeout_dispatch
        if self._kpa:
            st.meter.arrive(now)
        if st.ready == 0:
            st.parked.append((batch, now, timeout))
            if st.desired == 0:
                self.scaler.wake(now, st.name, st.controller.inflight)
                self._tick(st, now)
            return
        self._start(st, batch, now, now, timeout, False)

    def _start(
        self,
        st: Station,
        batch: Sequence[SimRequest],
        sent: float,
        now: float,
        timeout: bool,
        cold: bool,
    ) -> None:
        n = len(batch)
        if n > st.max_batch:  # a late batch may be up to the max; never larger
            n = st.max_batch
        sigma = st.sigmas[n]
        ms = st.medians[n] * self._inputs.batch_cost(st.name, batch, n)
        if sigma > 0.0:
            ms *= math.exp(sigma * self._service_rng.gauss(0.0, 1.0))
        done = finish_s(self._disturbance, now, ms / 1000.0)
        self._push(done, _DONE, st, (batch, sent, timeout, cold))

    def _done(
        self, now: float, st: Station, info: tuple[Sequence[SimRequest], float, bool, bool]
    ) -> None:
        batch, sent, timeout, cold = info
        controller = st.controller
        controller.released()
        if self._kpa:
            st.meter.depart(now)
        n = len(batch)
        round_trip_ms = (now - sent) * 1000.0
        controller.completed(
            batch,
            now=now,
            instances=n,
            round_trip_ms=round_trip_ms,
            compute_ms=round_trip_ms,
            cold=cold,
            timeout_dispatch=timeout,
        )
        st.version += 1
        if cold:
            st.cold_batches += 1
        warmup = self._warmup
        touched = [st]
        for req in batch:
            app_index = req.app
            k = req.stage
            if req.index >= warmup:
                self._queue_s[app_index][k] += req.dispatched - req.arrival
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
                    self._latencies.append(now - req.started)
                    self._app_of.append(app_index)
                    self._index_of.append(req.index)
                    if now > req.due:
                        self._violations += 1
                self._finished(st, req, now, missed=now > req.due)
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

    def _tick(self, st: Station, now: float) -> None:
        queue = st.controller.queue
        overdue = sum(1 for r in queue.items if not r.cold and r.deadline < now)
        state = FunctionState(
            st.ready, len(st.starting), st.controller.inflight, len(queue), overdue
        )
        desired = self.scaler.decide(now, st.name, state)
        st.desired = desired
        if self.decisions is not None:
            self.decisions.append((now, st.name, desired, st.ready))
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

    def _ready(self, st: Station, rid: int, now: float) -> None:
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

    # -- results ----------------------------------------------------------------------------

    def _result(self) -> SimResult:
        return summarize(
            policy=self.policy.name,
            rate_rps=self.rate_rps,
            end=self.now,
            events=self.events,
            latencies_s=np.frombuffer(self._latencies, dtype=np.float64),
            app_of=np.frombuffer(self._app_of, dtype=np.uint8),
            violations=self._violations,
            apps=self.apps,
            stations=list(self.stations.values()),
            queue_s=self._queue_s,
            compute_s=self._compute_s,
        )
