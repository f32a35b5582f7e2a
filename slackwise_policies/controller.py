"""One function's scheduling loop without the I/O: the controller that the live loop
(:mod:`adapter.serving.dispatcher`: HTTP, futures, metrics) and the simulator
(:mod:`simulator.engine`: virtual replicas, service times from a profile) both drive, through
exactly these methods, so a parity test holds them to the same batches. A :class:`Controller`
holds a function's queue, its batch-limit tuner (AIMD), the latency model its decisions read,
and the counters they need. Each entry point takes the time as an argument:

* :meth:`Controller.admit` queues a request, or (``late: predict``, the default) says it would
  finish late and should be refused at the door now (:mod:`slackwise_policies.admission`).
* :meth:`Controller.step` answers the requests whose deadline passed (``late: prune`` or
  ``predict``), tunes the limit when a period ended, and picks the batch to send now or the
  time to look again (:class:`Step`); the caller sends it and steps again until told to wait.
* :meth:`Controller.completed` feeds a batch's answer back to the latency model, AIMD and the
  slots that pay (:mod:`slackwise_policies.parallelism`); :meth:`Controller.released` frees
  its slot, whatever the outcome.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, Generic, TypeVar

from slackwise_policies.admission import DoorRefusal, Drain, Late, Lateness, Refusals, at_the_door
from slackwise_policies.aimd import AIMD, AIMDDecision
from slackwise_policies.batching import BatchDecision, LatencyEstimator
from slackwise_policies.batching_settings import DEFAULT_BATCHING, BatchingSettings
from slackwise_policies.estimates import BatchSizeTracker
from slackwise_policies.input_cost import InputCost, batch_input_bytes
from slackwise_policies.lagged_p95 import LaggedP95
from slackwise_policies.latency import LatencyModel
from slackwise_policies.modes import ModePreset
from slackwise_policies.parallelism import Parallelism
from slackwise_policies.queue import Queued, RequestQueue
from slackwise_policies.scheduling import (
    backlog_batch,
    cheapest_batch,
    efficient_batch,
    next_batch,
    time_left_ms,
)
from slackwise_policies.slack import Batching, StagePolicy
from slackwise_policies.throughput_split import StageFleet
from slackwise_policies.waiting import PathMargin, RecentRate

__all__ = ["Controller", "DoorRefusal", "Late", "Step"]

T = TypeVar("T", bound=Queued)
#: how often, at most, the batching for throughput re-reads its efficient batch (seconds)
CAP_PERIOD_S = 1.0


@dataclass(frozen=True, slots=True)
class Step(Generic[T]):
    """What one scheduling step decided.

    ``batch`` (with ``decision``) is to be sent now; otherwise look again at ``wake_at`` (None:
    when something changes), or, ``busy``, when a slot frees. ``late`` are requests whose
    deadline passed before dispatch, to be answered as pruned; ``tuned`` is AIMD's decision when
    a period ended at this step (for the log).
    """

    decision: BatchDecision | None = None
    batch: Sequence[T] = ()
    wake_at: float | None = None
    busy: bool = False
    late: Sequence[T] = ()
    tuned: AIMDDecision | None = None


class Controller(Generic[T]):
    """The queue and the decisions of one function (see the module docstring)."""

    def __init__(
        self,
        *,
        name: str,
        preset: ModePreset,
        model: LatencyModel,
        max_batch: int,
        container_concurrency: int,
        now: float,
        aimd: AIMD | None = None,
        stage_policy: StagePolicy | None = None,
        late: Late = "serve",
        settings: BatchingSettings = DEFAULT_BATCHING,
    ) -> None:
        self.name = name
        self.preset = preset
        self.model = model
        #: what the decisions read of the model: its own P95, or one a few batches old
        self.reader: LatencyEstimator = (
            LaggedP95(model, every=settings.p95_every, max_age_s=settings.p95_max_age_s)
            if settings.p95_every > 0
            else model
        )
        self.max_batch = max_batch
        self.container_concurrency = container_concurrency
        self.aimd = aimd
        #: what an input's size costs the function, learnt from its warm batches (None: not
        #: learnt; every request is priced as the mix): ``adapter.etc_by_input``
        self.input_cost: InputCost | None = None
        self.stage_policy = stage_policy
        #: give up requests that only a batch too small to keep up could still serve (GS-T's
        #: stages, and a single function behind its door: a backlog the door admitted drains in
        #: batches that carry it, not one nearly late head at a time, docs/reliability.md)
        self._sustains = stage_policy.sustain if stage_policy is not None else late == "predict"
        self._cap = max_batch  # batch_cap(), set by every step while batching for throughput
        #: the curve's efficient batch, re-read at most once a CAP_PERIOD_S
        self._efficient = 1
        self._cap_at = -math.inf
        self.late = late
        self.settings = settings
        if stage_policy is None:
            self.batching: Batching = "dynamic"
            self.deadline_aware = preset.deadline_aware
            order = preset.order
        else:
            self.batching = stage_policy.batching
            self.deadline_aware = preset.deadline_aware and stage_policy.deadline_aware
            order = stage_policy.order
        self.queue: RequestQueue[T] = RequestQueue(order)
        #: the recent arrival rate and the path's own latency: whether waiting for company pays
        self.arrivals = RecentRate()
        self.path_margin = PathMargin(floor_ms=settings.path_margin_ms)
        #: the batch sizes in use, for the stage budgets of the chains through this function
        self.batch_sizes = BatchSizeTracker(alpha=settings.estimate_alpha)
        self.inflight = 0
        self.parallel = Parallelism()  # how many of the slots pay (replicas sharing a core)
        #: when each batch in flight is expected to end (a heap): the door's queue starts then
        self._inflight_ends: list[float] = []
        #: the queue's measured pace while backlogged (admission's evidence)
        self.drain = Drain()
        #: how late the door's admitted requests finish: the margin its evidence asks for
        self.lateness = Lateness()
        self.refusals = Refusals()  # the door's, and those made with a slot free (status)
        #: the earliest due time in the queue (late requests are looked for from then on)
        self._next_due = -math.inf
        if aimd is not None:
            aimd.update(now)  # its periods start now, whoever asks next

    # -- admission ---------------------------------------------------------------------------

    def admit(
        self, item: T, now: float, ready: int, lag_s: float | None = 0.0, after_s: float = 0.0
    ) -> DoorRefusal | None:
        """Queue ``item`` (arrived at ``now`` while ``ready`` replicas were ready), or refuse it
        at the door (``late: predict``, the default) when the evidence says it would finish
        late: the queue ahead, or the adapter's own loop running ``lag_s`` late (None: not
        judged, a later stage of a chain). ``after_s``: what the stages after this one are
        expected to take (a chain is judged whole at its first stage). An admitted request
        is held to account when it finishes (:class:`slackwise_policies.admission.Lateness`)."""
        due = _due(item)
        if self.late == "predict" and lag_s is not None:
            refusal = self._judge(now, due, item.size, ready, lag_s, after_s)
            if refusal is not None:
                return refusal
        # the company a batch may wait for: what is admitted (a flood the door refuses would
        # otherwise make every lone admitted request wait for batch-mates that never come)
        self.arrivals.record(now, item.size)
        self.queue.push(item)
        self._next_due = min(self._next_due, due)
        return None

    def door(
        self, now: float, due: float, size: int, ready: int, lag_s: float = 0.0
    ) -> DoorRefusal | None:
        """Would a request of ``size`` instances due at ``due`` be refused now? (Nothing is queued:
        the adapter asks this before it parses a body; AIMD hears of a refusal the limit made.)"""
        if self.late != "predict":
            return None
        return self._judge(now, due, size, ready, lag_s)

    def door_status(self, now: float) -> dict[str, float | None]:
        """What the door judges by now (for the function's status)."""
        pace = self.drain.s_per_instance(now)
        return {
            "margin_ms": round(1000.0 * self.lateness.margin_s(now), 2),
            **self.lateness.counts(),
            **self.refusals.status(),
            **self.parallel.status(),
            "drain_ms_per_instance": None if pace is None else round(1000.0 * pace, 3),
            "path_margin_ms": round(self.path_margin.margin_ms(), 2),
            "batch_1_ms": round(self.reader.estimate_ms(1), 2),
            "batch_limit_ms": round(
                self.reader.estimate_ms(min(self.limit(), self.batch_cap())), 2
            ),
        }

    def _judge(
        self, now: float, due: float, size: int, ready: int, lag_s: float, after_s: float = 0.0
    ) -> DoorRefusal | None:
        """The door's rule (:func:`at_the_door`), its batches priced by the P99 that the
        batcher judges a batch's head by behind a door (``tail_membership``; by the mean, the
        batcher cut batches short at their heads' deadlines: 3-4 in a flood where about 10
        carry the load), for the slots that will run at once (:meth:`Parallelism.price`)."""
        limit, cap = min(self.limit(), self.batch_cap()), self.batch_cap()
        price = self.parallel.price(self.slots(ready), now, self.model.window_s)
        judge = partial(
            at_the_door,
            now,
            due,
            size=size,
            queued=self.queue.instances,
            queued_requests=len(self.queue),
            slots=max(1, self.slots(ready)),
            ready=ready,
            estimate_ms=lambda n: price * self.reader.p99_ms(n, now),
            slo_s=max(due - now, 0.0),
            lag_s=lag_s,
            margin_s=self.path_margin.margin_ms() / 1000.0,
            allowance_s=self.lateness.margin_s(now),
            free_at=self._free_at(ready),
            after_s=after_s,
            company_per_s=self.arrivals.rate(now),
            free_slots=max(0, self.slots(ready) - self.inflight),
        )
        refusal = judge(batch_limit=limit, drain_s_per_instance=self.drain.s_per_instance(now))
        self.refusals.record(refusal, free_slot=self.inflight < self.slots(ready))
        # batches at the cap would have taken it (the queue's pace was measured at the limit's
        # batches, so it says nothing of theirs): the limit held it back, which is the backlog
        # AIMD grows the limit on, kept from forming by the door itself
        aimd = self.aimd if refusal is not None and refusal.lag_s == 0.0 and limit < cap else None
        if aimd is not None and aimd.listens_for_held_back and judge(batch_limit=cap) is None:
            aimd.held_back(now)
        return refusal

    def _free_at(self, ready: int) -> float:
        """When the first slot frees, by the batches in flight, if they hold every slot."""
        ends = self._inflight_ends
        return ends[0] if ends and len(ends) >= self.slots(ready) else -math.inf

    def take(self, count: int) -> list[T]:
        """Up to ``count`` requests off the head for another route (a GPU), outside the slots."""
        self.queue.drop_cancelled()
        taken = self.queue.pop(count)
        self.drain.elsewhere(sum(item.size for item in taken))
        return taken

    def requeue(self, items: list[T]) -> None:
        """Put requests back at the head (their batch is retried without a failing member)."""
        self.queue.push_front(items)
        self._next_due = min([self._next_due, *(_due(p) for p in items)])

    def withdraw(self) -> None:
        """A queued request was cancelled (its client went away); the next step drops it."""
        self.queue.note_cancelled()

    # -- scheduling --------------------------------------------------------------------------

    def slots(self, ready: int) -> int:
        """Batches to hold at once: of ready replicas × containerConcurrency, as many as pay
        (:class:`Parallelism`); one while none is ready (it rides the activator, the rest wait)."""
        if ready == 0:
            return 1
        return self.parallel.slots(ready * max(1, self.container_concurrency))

    def limit(self) -> int:
        """The batch cap in instances now: AIMD's limit within the function's maximum (the
        maximum without AIMD), or the stage policy's fixed size."""
        aimd = self.aimd
        dynamic = self.max_batch if aimd is None else max(1, min(aimd.limit, self.max_batch))
        return dynamic if self.stage_policy is None else self.stage_policy.batch_limit(dynamic)

    def batch_cap(self) -> int:
        """The largest batch this function sends, late batches included, as the latest step
        set it: its maximum, or with the batching for throughput (GS-T and the ``-TB``
        policies) the largest worth its members' wait (:meth:`_set_cap`)."""
        return self._cap

    def _set_cap(self, now: float, free: int, slots: int) -> None:
        """The largest batch worth its members' wait: by the model's line as it is now or by its
        curve as it was at most a second ago, whichever is larger
        (:func:`slackwise_policies.scheduling.efficient_batch`, :func:`cheapest_batch`, a tenth
        of the least cost per instance allowed); while a backlog waits (more queued than the
        ``free`` slots take at that size), the batch that drains it soonest on all ``slots``
        (:func:`slackwise_policies.scheduling.backlog_batch`): then throughput is what the
        members wait for. 1 when the line says a batch costs at least its members apart."""
        if not self._sustains:
            return
        model = self.model
        if now - self._cap_at >= CAP_PERIOD_S:
            self._efficient = cheapest_batch(model.estimate_ms, self.max_batch)
            self._cap_at = now
        if model.a_ms <= 0.0:
            self._cap = 1
            return
        cap = max(efficient_batch(model.a_ms, model.b_ms_per_item, self.max_batch), self._efficient)
        backlog = self.queue.instances
        if backlog > cap * max(1, free):
            left_ms = time_left_ms(self.queue, now)
            cap = max(cap, backlog_batch(model, backlog, slots, self.max_batch, left_ms))
        self._cap = cap

    def stage_fleet(self, ready: int, now: float) -> StageFleet:
        """This function as the throughput split sees it at ``now``: the P95 of its batches
        (a stage's budget must hold its slow inputs, not its median: with the median, the
        binding stage's floor took the time the other stages' large inputs need), the slots of
        its ``ready`` replicas, the largest batch it sends, and its batches' mean (what its
        throughput is made of: judged by the P95, a mix of small and large inputs looked as if
        it needed batches larger than it does, whose budget the other stages needed)."""
        return StageFleet(
            partial(self.reader.p95_ms, now=now),
            self.slots(ready),
            self.batch_cap(),
            partial(self.model.mean_ms, now=now),
        )

    def step(self, now: float, ready: int) -> Step[T]:
        """One scheduling step at ``now`` with ``ready`` ready replicas (see :class:`Step`)."""
        queue = self.queue
        queue.drop_cancelled()
        if not queue:
            return _IDLE  # frozen and empty: shared, so an idle step allocates nothing
        late: Sequence[T] = ()
        if self.late != "serve" and now >= self._next_due:
            # scanned only once the earliest due request can be late, not at every step
            late = queue.take_late(now, due=_due)
            if self.late == "predict":  # given up: late by at least its own batch's time
                for item in late:
                    due = _due(item)
                    self.lateness.finished(
                        now, due, due - item.arrival, given_up=True, weight=1.0 / len(late)
                    )
            self._next_due = min((_due(p) for p in queue.items), default=math.inf)
            if not queue:
                return Step(late=late)
        free = self.slots(ready) - self.inflight
        if free <= 0:
            return Step(busy=True, late=late) if late else _BUSY
        tuned = None if self.aimd is None else self.aimd.update(now)
        self._set_cap(now, free, self.slots(ready))
        cap = self._cap
        # behind a door, the floor holds only while a backlog waits that the free slots cannot
        # take in one round at the batch limit: a short queue's nearly late head is served,
        # not given up (a chain's stage policy keeps its rule)
        sustain = self._sustains and (
            self.stage_policy is not None or queue.instances > min(self.limit(), cap) * free
        )
        decision = next_batch(
            now,
            queue,
            self.reader,
            batching=self.batching,
            deadline_aware=self.deadline_aware,
            limit=min(self.limit(), cap),
            late_limit=cap,
            free_slots=free,
            cold=ready == 0,
            inflight=self.inflight,
            settings=self.settings,
            arrival_rate=self.arrivals.rate(now) if self.preset.wait_pays else None,
            # the floor keeps up with a flood from its first arrivals (RecentRate.rate)
            sustain_rate=self.arrivals.rate(now, since_first=True)
            if self.preset.wait_pays
            else None,
            # one replica's slots: waiting pays when one replica could not keep up with batches
            # this small. Judged against every ready replica, small batches would keep the
            # fleet busy, the autoscaler would add replicas, and more replicas would make small
            # batches look affordable: cost spirals up
            slots=max(1, self.container_concurrency),
            margin_s=self.path_margin.margin_ms() / 1000.0,
            as_in_paper=self.stage_policy is not None and self.stage_policy.paper,
            sustain_slots=self.slots(ready) if sustain else 0,
            # a door that refuses to keep its promise sends no batch that only a coin toss
            # brings in by its head's deadline
            tail_membership=self.late == "predict",
        )
        if decision.take == 0:
            return Step(decision=decision, wake_at=decision.wake_at, late=late, tuned=tuned)
        batch = queue.pop(decision.take)
        self.inflight += 1
        self.parallel.dispatched(now)
        instances = sum(item.size for item in batch)
        heapq.heappush(self._inflight_ends, now + self.reader.estimate_ms(instances) / 1000.0)
        self.batch_sizes.observe(instances)
        backlog = bool(queue) and free <= 1  # the rest wait for a slot, not for company
        self.drain.dispatched(now, instances, backlog=backlog)
        if self.aimd is not None:
            self.aimd.dispatched(
                now, bound=backlog and instances >= self.limit(), timeout=decision.timeout_dispatch
            )
        return Step(decision=decision, batch=batch, late=late, tuned=tuned)

    # -- feedback ----------------------------------------------------------------------------

    def completed(
        self,
        batch: Sequence[T],
        *,
        now: float,
        instances: int,
        round_trip_ms: float,
        compute_ms: float,
        cold: bool,
        timeout_dispatch: bool,
        stalled: bool = False,
    ) -> None:
        """A batch of ``instances`` sent by :meth:`step` was answered at ``now``: teach the
        latency model, and judge each member for AIMD by the mode's signal (the batch's service
        time, or under MLProxy the request's response time; a member whose stage had no budget
        says nothing). ``stalled``: its answer waited out a stall of the caller's own loop, so
        its round trip measured the caller: it teaches neither the model nor AIMD, but its
        members' lateness is still the door's evidence (the door answers for those stalls)."""
        ratio = None if cold or stalled else round_trip_ms / self.model.estimate_ms(instances)
        if self.input_cost is not None and ratio is not None:
            size = batch_input_bytes((item.input_bytes, item.size) for item in batch)
            self.input_cost.observe(size, ratio)
        self.parallel.answered(now, round_trip_ms / 1000.0, ratio)
        if not stalled:
            self.model.observe(now, instances, compute_ms, round_trip_ms, cold=cold)
        if self.late == "predict" and not cold:  # the door's evidence (a cold start is waited)
            whole = [(i.arrival, i.due) for i in batch if i.deadline == i.due]  # not a stage
            took_s, weight = round_trip_ms / 1000.0, 1.0 / len(batch)
            self.lateness.batch_finished(now, whole, took_s, weight=weight, stalled=stalled)
        aimd = self.aimd
        if aimd is None or stalled:
            return
        service = self.preset.aimd_signal == "service"
        for item in batch:
            slo_ms = (item.deadline - item.arrival) * 1000.0
            if slo_ms <= 0.0:
                continue
            missed = now > item.deadline
            aimd.record(
                now,
                latency_ms=round_trip_ms if service else (now - item.arrival) * 1000.0,
                slo_ms=slo_ms,
                missed=missed and not item.hopeless if service else missed,
                timeout_dispatch=timeout_dispatch,
                cold=cold,
            )

    def released(self) -> None:
        """A batch sent by :meth:`step` is over (answered or failed): its slot is free."""
        self.inflight -= 1
        self.parallel.failed(self.inflight)  # one never answered is in flight no more
        if self._inflight_ends:  # the one expected to end first (batches end in any order)
            heapq.heappop(self._inflight_ends)


_IDLE: Step[Any] = Step()
_BUSY: Step[Any] = Step(busy=True)


def _due(item: Queued) -> float:
    return item.due
