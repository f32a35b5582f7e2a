"""One function's dispatch loop: queue, decide, send one batch upstream, answer each member.

The loop only executes decisions made by pure policies: :func:`adapter.policies.batching.decide`
(which
prefix, now or when), :class:`adapter.policies.aimd.AIMD` (the batch limit) and
:class:`adapter.policies.latency.LatencyModel` (what a batch costs). In-flight batches are bounded
by the
platform's ready replicas × ``containerConcurrency``. While no replica is ready one batch goes to
the platform (its activator buffers it and starts a replica, as a request at scale zero does) and
the rest keep queueing, to leave as one batch when a replica is ready.

Every member of every batch is answered exactly once: with its share of the predictions, or with
an :class:`adapter.serving.errors.AdapterError` that says what failed. When the function rejects one
member's input (400 naming ``instances[i]``), only that member fails and the rest are sent again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from typing import Any

import orjson

from adapter.policies.aimd import AIMD
from adapter.policies.batching import BatchDecision
from adapter.policies.estimates import BatchSizeTracker
from adapter.policies.latency import LatencyModel
from adapter.policies.modes import ModePreset
from adapter.policies.pruning import PruningConfig
from adapter.policies.pruning import decide as prune
from adapter.policies.queue import RequestQueue
from adapter.policies.scheduling import next_batch
from adapter.policies.slack import Batching, StagePolicy
from adapter.policies.waiting import PathMargin, RecentRate
from adapter.serving.autoscaling import Autoscaling
from adapter.serving.errors import (
    AdapterError,
    DeadlinePruned,
    Overloaded,
    ShuttingDown,
    UpstreamFailed,
    UpstreamRejected,
    UpstreamTimeout,
)
from adapter.serving.metrics import AdapterMetrics
from adapter.serving.pending import Answer, Pending
from adapter.serving.platform_view import PlatformView
from adapter.serving.records import RecordWriter
from adapter.serving.upstream import SendFailed, SendTimeout, Upstream
from core.clock import Clock
from core.config import FunctionConfig
from functions.gossip import FRONTEND_ID, FRONTEND_WINDOW_S, FRONTENDS
from functions.runtime import COLD_START, COMPUTE_MS, MODEL_LOAD_MS
from knative.http1 import Http1Response

logger = logging.getLogger(__name__)
decisions_log = logging.getLogger("slackwise.aimd")

#: the shortest window the functions count adapters over (t_setup may be measured tiny)
_MIN_GOSSIP_WINDOW_S = 2.0
#: how long the local platform's activator held a request (a cold start, or a busy replica)
PLATFORM_WAIT_MS = "x-platform-wait-ms"
_BAD_INSTANCE = re.compile(r"^instances\[(\d+)\]: (.*)$", re.DOTALL)
#: how often to look again at the replica count while every slot is busy
_CAPACITY_POLL_S = 0.02


def _due(item: Pending) -> float:
    return item.due


_PREDICTED = PruningConfig(enabled=True, mode="predicted")


class Dispatcher:
    """The queue and the batching loop of one function."""

    def __init__(
        self,
        *,
        function: FunctionConfig,
        slo_ms: float,
        preset: ModePreset,
        aimd: AIMD,
        model: LatencyModel,
        view: PlatformView,
        upstream: Upstream,
        clock: Clock,
        metrics: AdapterMetrics,
        records: RecordWriter,
        max_queue: int,
        epoch: float,
        max_wait_s: float | None = None,
        stage_policy: StagePolicy | None = None,
        autoscaling: Autoscaling | None = None,
        frontend_id: str | None = None,
        wait_utilization: float = 0.7,
        path_margin_ms: float = 1.0,
    ) -> None:
        self.function = function
        self.name = function.name
        self.slo_ms = slo_ms
        self.preset = preset
        self.aimd = aimd
        self.model = model
        self.view = view
        self.upstream = upstream
        self.clock = clock
        self.records = records
        self.max_queue = max_queue
        self.max_wait_s = max_wait_s
        self.epoch = epoch
        #: how this function's queue batches when it serves chains; a plain function follows the
        #: mode (slackwise: dynamic, deadline-aware; mlproxy: dynamic, FIFO, limit-driven)
        self.stage_policy = stage_policy
        if stage_policy is None:
            self.batching: Batching = "dynamic"
            self.deadline_aware = preset.deadline_aware
            order = preset.order
        else:
            self.batching = stage_policy.batching
            self.deadline_aware = preset.deadline_aware and stage_policy.deadline_aware
            order = stage_policy.order
        self.queue: RequestQueue[Pending] = RequestQueue(order)
        #: the autoscaling advisor this dispatcher reports arrivals, cold starts and gossip to
        self.autoscaling = autoscaling
        self.frontend_id = frontend_id
        #: the recent arrival rate and the path's own latency: whether waiting for company pays
        self.arrivals = RecentRate()
        self.path_margin = PathMargin(floor_ms=path_margin_ms)
        self.wait_utilization = wait_utilization
        self.inflight = 0
        self.batches = 0
        self.instances_sent = 0
        #: the batch sizes in use, for the stage budgets of the chains through this function
        self.batch_sizes = BatchSizeTracker()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._sends: set[asyncio.Task[None]] = set()
        self._closing = False
        self._m_queue = metrics.queue_length.labels(function=self.name)
        self._m_inflight = metrics.inflight_batches.labels(function=self.name)
        self._m_limit = metrics.aimd_limit.labels(function=self.name)
        self._m_batch = metrics.batch_size.labels(function=self.name)
        self._m_latency = metrics.latency.labels(function=self.name)
        self._m_misses = metrics.deadline_misses.labels(function=self.name)
        self._m_cold = metrics.cold_batches.labels(function=self.name)
        self._m_timeouts = metrics.timeout_dispatches.labels(function=self.name)
        self._m_requests = metrics.requests
        self._m_limit.set(aimd.limit)
        self._headers = view.request_headers(self.name)

    # -- admission ---------------------------------------------------------------------------

    def submit(self, item: Pending) -> None:
        """Queue an admitted request; raises Overloaded or ShuttingDown."""
        if self._closing:
            raise ShuttingDown(f"{self.name}: the adapter is shutting down")
        if len(self.queue) >= self.max_queue:
            raise Overloaded(f"{self.name}: queue full ({self.max_queue} requests waiting)")
        item.arrived_cold = self._cold()
        self.arrivals.record(item.arrival, item.size)
        if self.autoscaling is not None:
            self.autoscaling.arrived(self.name, item.arrival, item.size)
        if self.function.late == "predict":
            self._prune_at_admission(item)
        self.queue.push(item)
        self._wake.set()

    def withdraw(self, item: Pending) -> None:
        """The request's client went away: cancel it; the queue drops it at the next step."""
        if not item.future.done():
            item.future.cancel()
            self.queue.note_cancelled()
            self._wake.set()

    def _prune_at_admission(self, item: Pending) -> None:
        """Swayam §3.3: refuse at once a request the queue ahead says will finish late."""
        limit = self._limit()
        decision = prune(
            item.arrival,
            item.due,
            _PREDICTED,
            position=sum(p.size for p in self.queue.items),
            batch_limit=limit,
            slots=max(1, self._slots()),
            batch_ms=self.model.estimate_ms(limit),
        )
        if decision.prune:
            late_ms = 1000.0 * ((decision.expected_finish or item.due) - item.due)
            raise DeadlinePruned(
                f"{self.name}: would finish about {late_ms:.0f} ms after its deadline behind "
                f"{len(self.queue)} queued requests; this function prunes predicted-late requests"
            )

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name=f"dispatch-{self.name}")

    async def stop(self, grace_s: float = 10.0) -> None:
        """Stop taking requests, answer the queued ones, let in-flight batches finish."""
        self._closing = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        for item in self.queue.pop(len(self.queue)):
            self._fail(item, ShuttingDown(f"{self.name}: the adapter is shutting down"))
        if self._sends:
            _, pending = await asyncio.wait(set(self._sends), timeout=grace_s)
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)

    # -- the loop ------------------------------------------------------------------------------

    def _slots(self) -> int:
        counts = self.view.replicas(self.name)
        if counts.ready == 0:
            return 1  # one batch rides the activator and wakes the function; the rest wait
        return counts.ready * max(1, self.function.container_concurrency)

    def _cold(self) -> bool:
        return self.view.replicas(self.name).ready == 0

    def current_limit(self) -> int:
        """The batch cap in instances now: AIMD's limit within the function's maximum, or the
        stage policy's fixed size."""
        return self._limit()

    def _limit(self) -> int:
        dynamic = max(1, min(self.aimd.limit, self.function.max_batch))
        return dynamic if self.stage_policy is None else self.stage_policy.batch_limit(dynamic)

    async def _wait(self, until: float | None) -> None:
        if until is None:
            await self._wake.wait()
            return
        delay = until - self.clock.now()
        if delay <= 0:
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), delay)

    async def _run(self) -> None:
        while True:
            self._wake.clear()
            now = self.clock.now()
            self._tune(now)
            self.queue.drop_cancelled()
            self._m_queue.set(len(self.queue))
            if not self.queue:
                await self._wait(None)
                continue
            if self.function.late in ("prune", "predict"):
                for item in self.queue.take_late(now, due=_due):
                    self._fail(item, DeadlinePruned(
                        f"{self.name}: deadline passed {1000 * (now - item.due):.1f} ms "
                        "before dispatch; this function prunes late requests"
                    ))  # fmt: skip
                if not self.queue:
                    continue
            slots = self._slots()
            decision = next_batch(
                now,
                self.queue,
                self.model,
                batching=self.batching,
                deadline_aware=self.deadline_aware,
                limit=self._limit(),
                late_limit=self.function.max_batch,
                free_slots=slots - self.inflight,
                cold=self._cold(),
                inflight=self.inflight,
                max_wait_s=self.max_wait_s,
                arrival_rate=self.arrivals.rate(now) if self.preset.wait_pays else None,
                # one replica's slots: waiting pays when one replica could not keep up with
                # batches this small. Judged against every ready replica, small batches would
                # keep the fleet busy, the autoscaler would add replicas, and more replicas would
                # make small batches look affordable: cost spirals up
                slots=max(1, self.function.container_concurrency),
                target_utilization=self.wait_utilization,
                margin_s=self.path_margin.margin_ms() / 1000.0,
            )
            if decision.reason == "busy":
                await self._wait(now + _CAPACITY_POLL_S)
                continue
            if decision.take == 0:
                await self._wait(decision.wake_at)
                continue
            batch = self.queue.pop(decision.take)
            self.inflight += 1
            self._m_inflight.set(self.inflight)
            task = asyncio.create_task(self._send(batch, decision))
            self._sends.add(task)
            task.add_done_callback(self._sends.discard)

    def _tune(self, now: float) -> None:
        update = self.aimd.update(now)
        if update is None:
            return
        self._m_limit.set(update.new_limit)
        s = update.stats
        decisions_log.info(
            "%s: AIMD %s %d -> %d (samples %d, judged %d, miss %.3f, p95 %.1f ms, "
            "timeout %.2f, cold %.2f%s)",
            self.name, update.action, update.old_limit, update.new_limit, s.samples, s.judged,
            s.miss_ratio, s.p95_ms, s.timeout_ratio, s.cold_ratio,
            f"; {', '.join(update.violations)}" if update.violations else "",
        )  # fmt: skip

    # -- one batch -----------------------------------------------------------------------------

    async def _send(self, batch: list[Pending], decision: BatchDecision) -> None:
        try:
            await self._send_once(batch, decision)
        except asyncio.CancelledError:
            for item in batch:
                self._fail(item, ShuttingDown(f"{self.name}: the adapter stopped mid-batch"))
            raise
        except Exception as exc:  # every member must hear back, whatever went wrong here
            logger.exception("%s: batch of %d failed in the adapter", self.name, len(batch))
            for item in batch:
                self._fail(item, UpstreamFailed(f"{self.name}: {type(exc).__name__}: {exc}"))
        finally:
            self.inflight -= 1
            self._m_inflight.set(self.inflight)
            self._wake.set()

    async def _send_once(self, batch: list[Pending], decision: BatchDecision) -> None:
        sent = self.clock.now()
        cold_hint = self.view.replicas(self.name).ready == 0
        instances: list[Any] = []
        for item in batch:
            item.dispatched = sent
            instances.extend(item.instances)
        total = len(instances)
        self.batches += 1
        self.instances_sent += total
        self.batch_sizes.observe(total)
        self._m_batch.observe(total)
        if decision.timeout_dispatch:
            self._m_timeouts.inc()
        body = orjson.dumps({"instances": instances})
        try:
            response = await self.upstream.post(
                self.name, body, self._send_headers(), float(self.function.timeout_s)
            )
        except SendTimeout:
            error: AdapterError = UpstreamTimeout(
                f"{self.name}: no answer to a batch of {total} within {self.function.timeout_s} s"
            )
            self._fail_all(batch, error)
            return
        except SendFailed as exc:
            self._fail_all(batch, UpstreamFailed(f"{self.name}: batch of {total} failed: {exc}"))
            return
        done = self.clock.now()
        if response.status_code == 200:
            self._answer(batch, response, sent, done, total, cold_hint, decision)
        else:
            self._reject(batch, response, total)

    def _send_headers(self) -> dict[str, str]:
        headers = {"content-type": "application/json", **self._headers}
        if self.autoscaling is not None and self.frontend_id is not None:
            headers[FRONTEND_ID] = self.frontend_id
            window = max(_MIN_GOSSIP_WINDOW_S, self.autoscaling.window_s(self.name))
            headers[FRONTEND_WINDOW_S] = f"{window:.3f}"
        return headers

    def _report(
        self,
        response: Http1Response,
        done: float,
        waited_cold: bool,
        round_trip_ms: float,
        total: int,
    ) -> None:
        """Tell the advisor what this answer says about setup time and frontends."""
        assert self.autoscaling is not None
        first = response.headers.get(COLD_START) == "1"
        if waited_cold or first:
            # a replica's setup: at least its model's load time (which the function reports on
            # its first answer); a batch that waited for it saw the rest of the start as well
            wait_ms = 0.0
            if waited_cold:
                try:
                    wait_ms = float(response.headers[PLATFORM_WAIT_MS])
                except (KeyError, ValueError):
                    wait_ms = round_trip_ms - self.model.estimate_ms(total)
            load_ms = 0.0
            if first:
                with contextlib.suppress(KeyError, ValueError):
                    load_ms = float(response.headers[MODEL_LOAD_MS])
            self.autoscaling.cold_start(self.name, done, max(wait_ms, load_ms) / 1000.0)
        raw = response.headers.get(FRONTENDS)
        if raw is not None and raw.isdigit():
            self.autoscaling.frontends(self.name, done, int(raw))

    def _answer(
        self,
        batch: list[Pending],
        response: Http1Response,
        sent: float,
        done: float,
        total: int,
        cold_hint: bool,
        decision: BatchDecision,
    ) -> None:
        try:
            predictions = orjson.loads(response.content)["predictions"]
            if not isinstance(predictions, list) or len(predictions) != total:
                raise ValueError(f"{len(predictions)} predictions for {total} instances")
        except (ValueError, KeyError, TypeError) as exc:
            self._fail_all(batch, UpstreamFailed(f"{self.name}: malformed answer: {exc}"))
            return
        round_trip_ms = (done - sent) * 1000.0
        try:
            compute_ms = float(response.headers.get(COMPUTE_MS, round_trip_ms))
        except ValueError:
            compute_ms = round_trip_ms
        cold = cold_hint or response.headers.get(COLD_START) == "1"
        if cold:
            self._m_cold.inc()
        if self.autoscaling is not None:
            self._report(response, done, cold_hint, round_trip_ms, total)
        self.model.observe(done, total, compute_ms, round_trip_ms, cold=cold)
        offset = 0
        for item in batch:
            share = predictions[offset : offset + item.size]
            offset += item.size
            answer = Answer(
                predictions=share,
                queue_ms=(item.dispatched - item.arrival) * 1000.0,
                compute_ms=compute_ms,
                round_trip_ms=round_trip_ms,
                batch_size=total,
                cold=cold,
            )
            missed = done > item.deadline
            slo_ms = (item.deadline - item.arrival) * 1000.0
            if slo_ms <= 0.0:
                # a chain's stage entered after the chain's deadline had passed: it had no budget
                # here, so it says nothing about this function's batch size
                pass
            elif self.preset.aimd_signal == "service":
                # judge the batch, not the queue: its service time, and misses of requests that
                # still had their slack when it left
                self.aimd.record(
                    done,
                    latency_ms=round_trip_ms,
                    slo_ms=slo_ms,
                    missed=missed and not item.hopeless,
                    timeout_dispatch=decision.timeout_dispatch,
                    cold=cold,
                )
            else:
                self.aimd.record(
                    done,
                    latency_ms=(done - item.arrival) * 1000.0,
                    slo_ms=slo_ms,
                    missed=missed,
                    timeout_dispatch=decision.timeout_dispatch,
                    cold=cold,
                )
            if not item.future.done():
                item.future.set_result(answer)
            self._account(item, done, 200, total, cold, missed)

    def _reject(self, batch: list[Pending], response: Http1Response, total: int) -> None:
        try:
            reason = str(orjson.loads(response.content).get("error", response.text))
        except (ValueError, AttributeError):
            reason = response.text[:500]
        status = response.status_code
        if 400 <= status < 500:
            match = _BAD_INSTANCE.match(reason)
            if status == 400 and match is not None and len(batch) > 1:
                self._isolate(batch, int(match.group(1)), match.group(2))
                return
            self._fail_all(batch, UpstreamRejected(f"{self.name}: {reason}", status))
            return
        self._fail_all(batch, UpstreamFailed(f"{self.name} answered {status}: {reason}"))

    def _isolate(self, batch: list[Pending], index: int, reason: str) -> None:
        """Fail the member whose instance the function refused; send the others again."""
        offset = 0
        keep: list[Pending] = []
        for item in batch:
            if offset <= index < offset + item.size:
                own = index - offset
                self._fail(item, UpstreamRejected(f"{self.name}: instances[{own}]: {reason}", 400))
            else:
                keep.append(item)
            offset += item.size
        if len(keep) == len(batch):  # the index fits no member: refuse them all
            self._fail_all(batch, UpstreamRejected(f"{self.name}: {reason}", 400))
            return
        self.queue.push_front([p for p in keep if not p.cancelled])

    # -- answers -------------------------------------------------------------------------------

    def _fail_all(self, batch: list[Pending], error: AdapterError) -> None:
        for item in batch:
            self._fail(item, error)

    def _fail(self, item: Pending, error: AdapterError) -> None:
        if not item.future.done():
            item.future.set_exception(error)
        self._account(item, self.clock.now(), error.status, 0, False, True)

    def _account(
        self, item: Pending, done: float, status: int, batch_size: int, cold: bool, missed: bool
    ) -> None:
        self._m_requests.labels(function=self.name, status=str(status)).inc()
        self._m_latency.observe(done - item.arrival)
        if missed:
            self._m_misses.inc()
        epoch = self.epoch
        self.records.add(
            {
                "id": item.id,
                "function": self.name,
                "app": item.app,
                "stage": item.stage,
                "arrival": round(item.arrival - epoch, 6),
                "dispatch": round(item.dispatched - epoch, 6) if item.dispatched else None,
                "done": round(done - epoch, 6),
                "deadline": round(item.deadline - epoch, 6),
                "size": item.size,
                "batch_size": batch_size,
                "status": status,
                "cold": cold,
                "missed": missed,
            }
        )
