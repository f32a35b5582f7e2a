"""What the simulator keeps per function (a :class:`Station`: the live adapter's controller, a
virtual fleet of replicas and the counters of what happened) and per app (an :class:`AppRoute`:
its stations in order, its SLO and the stage estimates its budgets are split by)."""

from __future__ import annotations

from collections.abc import Sequence

from knative.meter import ConcurrencyMeter
from simulator.config import SimConfig
from simulator.config_workload import SimFunction
from simulator.inputs import InputSizes
from simulator.request import SimRequest
from simulator.service import ServiceCurve
from slackwise_policies.controller import Controller
from slackwise_policies.estimates import stage_estimates, stage_gains
from slackwise_policies.latency import LatencyModel
from slackwise_policies.modes import SLACKWISE
from slackwise_policies.slack import StagePolicy
from slackwise_policies.throughput_split import AppPath, ThroughputSplit

__all__ = ["AppRoute", "SharedSplit", "Station"]


class Station:
    """One function: the controller the live dispatcher drives (its queue, latency model, AIMD
    and batch sizes), and its virtual replicas."""

    def __init__(
        self,
        fn: SimFunction,
        curve: ServiceCurve,
        policy: StagePolicy,
        config: SimConfig,
    ) -> None:
        self.name = fn.name
        self.max_batch = fn.max_batch
        self.concurrency = fn.container_concurrency
        self.cold_s = curve.cold_start_s if fn.cold_start_s is None else fn.cold_start_s
        self.medians, self.sigmas = curve.tables(
            fn.max_batch, deterministic=config.service == "deterministic"
        )
        # seeded as adapter.serving.wiring.latency_prior seeds the live one
        self.model = LatencyModel.from_prior(
            max(curve.prior_a_ms, 0.1),
            max(curve.prior_b_ms, 0.0),
            curve=config.latency_model == "curve",
            prior_curve=dict(zip(curve.sizes, curve.medians_ms, strict=True)),
        )
        self.controller: Controller[SimRequest] = Controller(
            name=fn.name,
            preset=SLACKWISE,
            model=self.model,
            aimd=SLACKWISE.aimd_for(fn.max_batch) if config.aimd else None,
            stage_policy=policy,
            max_batch=fn.max_batch,
            container_concurrency=fn.container_concurrency,
            now=0.0,
            settings=config.batching,
        )
        self.meter = ConcurrencyMeter(0.0)
        self.batches = 0
        self.instances = 0
        self.cold_batches = 0
        self.cold_hits = 0
        self.ready = 0
        self.ready_created: list[float] = []
        self.starting: dict[int, float] = {}
        self.closed_s = 0.0
        self.desired = 0
        self.next_id = 0
        self.parked: list[tuple[Sequence[SimRequest], float, bool]] = []
        #: when the latest scheduling step asked to look again (earlier asks are void)
        self.wake_at: float | None = None
        #: bumped whenever the batch sizes or the model change (the stage estimates then do)
        self.version = 0
        self.peak = 0

    def replica_seconds(self, end: float) -> float:
        """Replica-seconds from each replica's creation to its removal or ``end``."""
        open_s = sum(end - c for c in self.ready_created) + sum(
            end - c for c in self.starting.values()
        )
        return self.closed_s + open_s


class AppRoute:
    """One app's stations in order, its SLO, and its stage estimates (cached by version)."""

    __slots__ = (
        "eq4",
        "estimates",
        "gains",
        "name",
        "slo_s",
        "split",
        "split_at",
        "stations",
        "trackers_version",
    )

    def __init__(self, name: str, stations: list[Station], slo_s: float) -> None:
        self.name = name
        self.stations = stations
        self.slo_s = slo_s
        self.estimates: list[float] = [1.0] * len(stations)
        #: the stages' estimates before GS-T's split (the same list as ``estimates`` without it)
        self.eq4: list[float] = self.estimates
        #: each stage's gain from batching (the marginal division only)
        self.gains: list[float] = [1.0] * len(stations)
        self.trackers_version = -1
        #: the throughput-aware split shared by every app (GS-T only) and when it last changed
        self.split: SharedSplit | None = None
        self.split_at = -1.0

    def estimates_for(self, req: SimRequest, inputs: InputSizes) -> list[float]:
        """What ``req``'s stage deadlines are split by: its class's estimates with ETC per input
        size; under GS-T the split's budgets, from those estimates when they are its own (so
        every stage keeps its floor, as :mod:`adapter.serving.chains` splits them live)."""
        if self.split is None:
            return inputs.estimates(req, self.estimates)
        own = inputs.estimates(req, self.eq4)
        return self.estimates if own is self.eq4 else self.split.plan.budgets_ms(self.name, own)

    def refresh(self, policy: StagePolicy, now: float = 0.0) -> None:
        """Bring the stage estimates (and gains) up to date for ``policy``: from the batch sizes
        in use, re-read when a station's sizes or model changed; with the queues too, every
        time, for a queue-aware policy (as :mod:`adapter.serving.chains` prices them live)."""
        stations = self.stations
        models = [s.model for s in stations]
        sizes = [s.controller.batch_sizes.mean for s in stations]
        if policy.queue_aware:  # the queues change with every event: no cache
            queued = [len(s.controller.queue) for s in stations]
            slots = [s.controller.slots(s.ready) for s in stations]
            self.estimates = stage_estimates(models, sizes, queued, slots)
            return
        version = 0
        for s in stations:
            version += s.version
        split = self.split
        if split is not None:
            split.refresh(now)
            if split.at != self.split_at:
                self.split_at, self.trackers_version = split.at, -1
        if version == self.trackers_version:
            return
        self.trackers_version = version
        self.estimates = self.eq4 = stage_estimates(models, sizes)
        if split is not None:
            self.estimates = split.plan.budgets_ms(self.name, self.eq4)
        if policy.division == "marginal":
            self.gains = stage_gains(models, sizes)


class SharedSplit:
    """GS-T's split over the whole fleet, shared by every app's route: it counts each app's
    arrivals and, once a period, recomputes from every station's latency model, ready replicas
    and largest batch (as :mod:`adapter.serving.chains` does live)."""

    __slots__ = ("at", "plan", "stations")

    def __init__(self, apps: Sequence[AppRoute]) -> None:
        self.stations = {st.name: st for app in apps for st in app.stations}
        self.plan = ThroughputSplit(
            {a.name: AppPath(tuple(st.name for st in a.stations), a.slo_s * 1000.0) for a in apps}
        )
        #: when the plan was last recomputed (-1: never)
        self.at = -1.0
        for app in apps:
            app.split = self

    def refresh(self, now: float) -> None:
        if not self.plan.due(now):
            return
        fleets = {
            name: st.controller.stage_fleet(st.ready, now) for name, st in self.stations.items()
        }
        self.plan.recompute(now, fleets)
        self.at = now
