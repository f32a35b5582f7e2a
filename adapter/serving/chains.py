"""A chain of functions (an app) walked for one request: GrandSLAM's stage slack, live.

:class:`Chain` holds what one app needs to run a request through its stages: the stage policy
(:mod:`slackwise_policies.slack`), the edge adapter between each pair of stages
(:mod:`functions.edges`) and the dispatchers of its functions (shared with every other app that uses
them). At each stage the request gets the deadline the policy gives it from the stages' latency
estimates at the batch sizes in use (:func:`slackwise_policies.estimates.stage_estimates`), joins
that function's queue as a :class:`adapter.serving.pending.Pending` carrying the chain's end-to-end
deadline too, and waits for its share of a batch; its predictions then become the next stage's
instances through the edge.

Every request leaves one record with its per-stage queue, round trip and compute, whatever
happened to it; :meth:`ChainResult.headers` turns the same timings into ``Server-Timing``.
"""

from __future__ import annotations

import asyncio
import itertools
import math
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from adapter.serving.dispatcher import Dispatcher
from adapter.serving.errors import AdapterError, Refused, StageOutputUnusable
from adapter.serving.metrics import AdapterMetrics
from adapter.serving.pending import Answer, Pending
from adapter.serving.records import RecordWriter
from functions.edges import Edge, EdgeError, edge_for
from functions.headers import ARRIVED_COLD
from slackwise_config import AppConfig, FunctionConfig
from slackwise_core.clock import Clock, deadline_for
from slackwise_policies.admission import MIN_RETRY_S, expected_finish
from slackwise_policies.crowding import Crowding
from slackwise_policies.estimates import stage_estimates, stage_gains
from slackwise_policies.slack import StagePolicy
from slackwise_policies.throughput_split import AppPath, StageFleet, ThroughputSplit

__all__ = ["Chain", "ChainResult", "share_split"]

#: how a chain waits for a stage's answer: None when the client went away meanwhile
AwaitAnswer = Callable[[Pending], Awaitable[Answer | None]]


@dataclass(frozen=True)
class ChainResult:
    """A request that went through every stage: the last stage's predictions and the timings."""

    predictions: list[Any]
    timings: list[tuple[str, Answer]]
    arrival: float
    arrived_cold: bool

    def headers(self, total_ms: float) -> dict[str, str]:
        """``Server-Timing`` (queue, round trip and compute per stage), batch sizes, cold flags."""
        parts = [
            f"{fn}-queue;dur={a.queue_ms:.2f}, {fn}-upstream;dur={a.round_trip_ms:.2f}, "
            f"{fn}-compute;dur={a.compute_ms:.2f}"
            for fn, a in self.timings
        ]
        return {
            "server-timing": ", ".join([*parts, f"total;dur={total_ms:.2f}"]),
            "x-batch-size": ",".join(str(a.batch_size) for _, a in self.timings),
            "x-cold-start": "1" if any(a.cold for _, a in self.timings) else "0",
            ARRIVED_COLD: "1" if self.arrived_cold else "0",
        }


class Chain:
    """One app's stages, their edges and the policy that gives each stage its deadline."""

    def __init__(
        self,
        app: AppConfig,
        functions: Mapping[str, FunctionConfig],
        policy: StagePolicy,
    ) -> None:
        self.app = app
        self.policy = policy
        self.edges: list[Edge] = [
            edge_for(functions[a].model, functions[b].model)
            for a, b in itertools.pairwise(app.stages)
        ]
        #: the split every chain shares, for a throughput-aware policy (:func:`share_split`)
        self.split: ThroughputSplit | None = None
        #: how long requests take by how many were in flight ahead of them, measured
        self.crowding = Crowding()
        #: requests past the first stage's door and not yet finished
        self.in_flight = 0

    def estimates(
        self,
        dispatchers: Mapping[str, Dispatcher],
        input_bytes: float = 0.0,
        now: float | None = None,
    ) -> list[float]:
        """Each stage's estimated batch latency (ms) at the batch sizes its function uses now,
        for a request of ``input_bytes`` per instance where its functions learn what an input's
        size costs them (``adapter.etc_by_input``; 0: priced as the mix). With a throughput-aware
        policy, the budgets its split gives the stages (recomputed at ``now`` when due), split
        from the request's own costs so that every stage keeps its floor."""
        stages = [dispatchers[fn] for fn in self.app.stages]
        models, sizes = [d.model for d in stages], [d.batch_sizes.mean for d in stages]
        if self.policy.queue_aware:  # ETC with the queueing term, as the simulator prices it
            queued = [len(d.controller.queue) for d in stages]
            slots = [d.controller.slots(d.view.replicas(d.name).ready) for d in stages]
            estimates = stage_estimates(models, sizes, queued, slots)
        else:
            estimates = stage_estimates(models, sizes)
        costs = [d.controller.input_cost for d in stages]
        estimates = [
            e if c is None else e * c.cost(input_bytes)
            for e, c in zip(estimates, costs, strict=True)
        ]
        split = self.split
        if split is not None:
            if now is not None and split.due(now):
                split.recompute(now, _fleets(split, dispatchers, now))
            estimates = split.budgets_ms(self.app.name, estimates)
        return estimates

    def bare_ms(self, dispatchers: Mapping[str, Dispatcher]) -> float:
        """What one instance alone takes through every stage, with nothing queued (ms)."""
        return sum(dispatchers[fn].controller.reader.estimate_ms(1) for fn in self.app.stages)

    def after_first_s(self, dispatchers: Mapping[str, Dispatcher]) -> float:
        """What the stages after the first are expected to take for a request admitted now:
        at each, the queue ahead of it at the batches that function sends, and its own batch
        (the door's arithmetic, :func:`slackwise_policies.admission.expected_finish`)."""
        total = 0.0
        for fn in self.app.stages[1:]:
            d = dispatchers[fn]
            c = d.controller
            ready = d.view.replicas(fn).ready
            total += expected_finish(
                0.0,
                size=1,
                queued=c.queue.instances,
                batch_limit=c.limit(),
                slots=max(1, c.slots(ready)),
                estimate_ms=c.reader.estimate_ms,
            )
        return total

    def check_crowd(
        self, dispatchers: Mapping[str, Dispatcher], now: float, deadline: float
    ) -> None:
        """Refuse (429, counted at the first stage's door) a request arriving at ``now``, due at
        ``deadline``, that the requests in flight ahead of it would make late, by what such
        crowds were measured to take (:class:`slackwise_policies.crowding.Crowding`)."""
        if not self.judged(dispatchers):
            return
        refusal = self.crowding.judge(now, self.in_flight, deadline - now)
        if refusal is None:
            return
        door = dispatchers[self.app.stages[0]].door
        raise door.counted(
            Refused(
                f"{self.app.name}: would take about {1000 * refusal.expected_s:.0f} ms behind the "
                f"{refusal.ahead} requests in flight in the chain (measured), "
                f"{1000 * refusal.late_s:.0f} ms more than its deadline allows; refused at the "
                "door (late: predict)",
                retry_after_s=float(max(MIN_RETRY_S, math.ceil(refusal.late_s))),
            )
        )

    def judged(self, dispatchers: Mapping[str, Dispatcher]) -> bool:
        """Does the first stage judge requests at its door (``late: predict``)?"""
        return dispatchers[self.app.stages[0]].controller.late == "predict"

    def gains(self, dispatchers: Mapping[str, Dispatcher]) -> list[float] | None:
        """Each stage's gain from batching, for the marginal division (None otherwise)."""
        if self.policy.division != "marginal":
            return None
        stages = [dispatchers[fn] for fn in self.app.stages]
        return stage_gains([d.model for d in stages], [d.batch_sizes.mean for d in stages])

    def budgets_ms(self, dispatchers: Mapping[str, Dispatcher], now: float) -> list[float]:
        """The plan for a request arriving at ``now`` whose every stage takes all its budget."""
        estimates, gains = self.estimates(dispatchers, now=now), self.gains(dispatchers)
        deadline = deadline_for(now, self.app.slo_ms)
        arrival, budgets = now, []
        for k in range(len(self.app.stages)):
            due = self.policy.stage_deadline(
                stage=k,
                now=now,
                arrival=arrival,
                deadline=deadline,
                estimates_ms=estimates,
                gains=gains,
            )
            budgets.append(round((due - now) * 1000.0, 2))
            now = due
        return budgets

    async def run(
        self,
        instances: list[Any],
        slo_ms: float,
        *,
        dispatchers: Mapping[str, Dispatcher],
        await_answer: AwaitAnswer,
        clock: Clock,
        ids: Iterator[int],
        records: RecordWriter,
        epoch: float,
        trace: str | None = None,
        metrics: AdapterMetrics | None = None,
        input_bytes: float = 0.0,
    ) -> ChainResult | None:
        """Walk the stages; None if the client went away. Raises AdapterError on a failure.
        ``trace``: the request's W3C ``traceparent``, forwarded with every stage;
        ``input_bytes``: its body's bytes per instance (what its stages are priced for)."""
        app = self.app
        arrival = clock.now()
        deadline = deadline_for(arrival, slo_ms)
        if self.split is not None:
            self.split.observe(app.name, arrival)
        seq = next(ids)
        timings: list[tuple[str, Answer]] = []
        current = instances
        arrived_cold = False
        admitted = False  # past the first stage's door
        ahead = self.in_flight
        status, failure = 200, ""
        try:
            for k, fn in enumerate(app.stages):
                now = clock.now()
                if k == 0:
                    self.check_crowd(dispatchers, now, deadline)
                item = self._stage_item(
                    k,
                    f"r{seq}.{k}",
                    current,
                    now,
                    arrival,
                    deadline,
                    dispatchers,
                    next(ids),
                    trace=trace,
                    input_bytes=input_bytes,
                )
                dispatchers[fn].submit(item)
                if not admitted:
                    admitted = True
                    self.in_flight += 1
                arrived_cold = arrived_cold or item.arrived_cold
                answer = await await_answer(item)
                if answer is None:
                    status, failure = 499, f"the client went away during stage {fn}"
                    return None
                timings.append((fn, answer))
                if k + 1 < len(app.stages):
                    current = self._next_instances(k, answer.predictions, current, instances)
            return ChainResult(timings[-1][1].predictions, timings, arrival, arrived_cold)
        except AdapterError as exc:
            status, failure = exc.status, exc.reason
            raise
        finally:
            done = clock.now()
            if admitted:
                cold = arrived_cold or any(a.cold for _, a in timings)
                self._finished(dispatchers, status, ahead, arrival, deadline, done, cold=cold)
            records.add(
                _record(app.name, seq, arrival, deadline, done, epoch, timings, status, failure)
            )
            if metrics is not None:
                late = status not in (200, 499) or (status == 200 and done > deadline)
                metrics.app_answered(
                    app.name, status, done - arrival, missed=late, cold=arrived_cold
                )

    def _stage_item(
        self,
        k: int,
        name: str,
        instances: list[Any],
        now: float,
        arrival: float,
        deadline: float,
        dispatchers: Mapping[str, Dispatcher],
        seq: int,
        *,
        trace: str | None,
        input_bytes: float,
    ) -> Pending:
        """Stage ``k``'s request, due when the stage policy says at ``now``."""
        fn = self.app.stages[k]
        return Pending(
            id=name,
            function=fn,
            instances=instances,
            arrival=now,
            deadline=self.policy.stage_deadline(
                stage=k,
                now=now,
                arrival=arrival,
                deadline=deadline,
                estimates_ms=self.estimates(dispatchers, input_bytes, now),
                gains=self.gains(dispatchers),
            ),
            seq=seq,
            future=asyncio.get_running_loop().create_future(),
            app=self.app.name,
            stage=k,
            final_deadline=deadline,
            traceparent=trace,
            input_bytes=input_bytes,
            after_s=self.after_first_s(dispatchers) if k == 0 else 0.0,
        )

    def _finished(
        self,
        dispatchers: Mapping[str, Dispatcher],
        status: int,
        ahead: int,
        arrival: float,
        deadline: float,
        done: float,
        *,
        cold: bool = False,
    ) -> None:
        """A request admitted with ``ahead`` in flight before it ended with ``status`` at
        ``done``: the evidence the first stage's door judges the chain by. One that rode a
        cold batch at any stage (a replica's first, or one that waited for a replica) is waited,
        as a function's door waits its own cold batches: it says nothing of the crowd (live,
        at a flood's onset on img-query, requests with nothing ahead took 3.8-6.0 s, and read
        as the crowd's quantile they refused every request with one ahead for the 10 s window:
        docs/reliability.md, "A cold start is not the crowd")."""
        self.in_flight -= 1
        if status == 499 or cold:  # the client went away, or a cold start: not the pace
            return
        if status == 200 or done > deadline:
            self.crowding.observe(done, ahead, done - arrival)
        first = dispatchers[self.app.stages[0]].controller
        if len(self.app.stages) > 1 and first.late == "predict":
            # the first stage's door judged the whole chain: how late it finished (or failed)
            # is its evidence (a one-stage app is counted by its function already)
            first.lateness.finished(done, deadline, deadline - arrival)

    def _next_instances(
        self, k: int, predictions: list[Any], inputs: list[Any], originals: list[Any]
    ) -> list[Any]:
        """Stage ``k``'s predictions through its edge, 1:1, as stage ``k + 1``'s instances."""
        pair = f"{self.app.stages[k]} -> {self.app.stages[k + 1]}"
        edge = self.edges[k]
        try:
            return [edge(p, x, o) for p, x, o in zip(predictions, inputs, originals, strict=True)]
        except EdgeError as exc:
            raise StageOutputUnusable(f"{pair}: {exc}") from None
        except ValueError as exc:  # strict zip: the upstream answered the wrong number of items
            raise StageOutputUnusable(f"{pair}: {exc}") from None


def _record(
    app: str,
    seq: int,
    arrival: float,
    deadline: float,
    done: float,
    epoch: float,
    timings: list[tuple[str, Answer]],
    status: int,
    failure: str,
) -> dict[str, Any]:
    return {
        "id": f"r{seq}",
        "app": app,
        "arrival": round(arrival - epoch, 6),
        "done": round(done - epoch, 6),
        "deadline": round(deadline - epoch, 6),
        "status": status,
        "missed": status != 200 or done > deadline,
        "error": failure or None,
        "stages": [
            {
                "function": fn,
                "queue_ms": round(a.queue_ms, 3),
                "compute_ms": round(a.compute_ms, 3),
                "round_trip_ms": round(a.round_trip_ms, 3),
                "batch_size": a.batch_size,
                "cold": a.cold,
            }
            for fn, a in timings
        ],
    }


def share_split(chains: Mapping[str, Chain]) -> ThroughputSplit | None:
    """One :class:`slackwise_policies.throughput_split.ThroughputSplit` over every app, given to
    each chain, when their policy is throughput-aware (GS-T); None otherwise."""
    if not chains or not next(iter(chains.values())).policy.throughput_aware:
        return None
    split = ThroughputSplit(
        {name: AppPath(tuple(c.app.stages), c.app.slo_ms) for name, c in chains.items()}
    )
    for chain in chains.values():
        chain.split = split
    return split


def _fleets(
    split: ThroughputSplit, dispatchers: Mapping[str, Dispatcher], now: float
) -> dict[str, StageFleet]:
    """Every function the split's apps visit, as it sees them ``now``
    (:meth:`slackwise_policies.controller.Controller.stage_fleet`)."""
    out = {}
    for path in split.apps.values():
        for fn in path.stages:
            c = dispatchers[fn].controller
            ready = dispatchers[fn].view.replicas(fn).ready
            out[fn] = c.stage_fleet(ready, now)
    return out
