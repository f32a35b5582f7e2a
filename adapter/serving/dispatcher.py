"""One function's dispatch loop: drive its controller, send each batch upstream, answer each
member.

Every decision is the :class:`adapter.policies.controller.Controller`'s (the simulator drives the
same one): what to admit, which batch to send and when, the batch limit, and what an answer teaches.
This loop adds what is live: HTTP, the futures the handlers wait on, metrics, records and the
advisor's reports. It waits on its clock (:meth:`slackwise_core.clock.Clock.wait`), so on a virtual
clock it runs in virtual time. In-flight batches are bounded by the platform's ready replicas ×
``containerConcurrency``; while no replica is ready one batch goes to the platform (its activator
buffers it and starts a replica, as a request at scale zero does) and the rest keep queueing.

Every member of every batch is answered exactly once: with its share of the predictions, or with
an :class:`adapter.serving.errors.AdapterError` that says what failed; a refused or failed batch
is handled as :mod:`adapter.serving.rejections` says (isolate, split, retry).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from adapter.policies.aimd import AIMD, AIMDDecision
from adapter.policies.batching import BatchDecision
from adapter.policies.batching_settings import DEFAULT_BATCHING, BatchingSettings
from adapter.policies.controller import Controller, Late
from adapter.policies.estimates import BatchSizeTracker
from adapter.policies.latency import LatencyModel
from adapter.policies.modes import ModePreset
from adapter.policies.queue import RequestQueue
from adapter.policies.slack import StagePolicy
from adapter.policies.waiting import PathMargin
from adapter.serving.advisor_loop import Autoscaling
from adapter.serving.background import cancel_and_wait
from adapter.serving.door import Door
from adapter.serving.errors import (
    AdapterError,
    DeadlinePruned,
    ShuttingDown,
    UpstreamFailed,
    UpstreamRejected,  # fmt: skip
    UpstreamTimeout,
)
from adapter.serving.loop_lag import LoopLagReader
from adapter.serving.metrics import AdapterMetrics
from adapter.serving.observers import ELSEWHERE, Observer, Offload, log_tuned
from adapter.serving.pending import Answer, Pending
from adapter.serving.platform_view import PlatformView
from adapter.serving.protocols import codec_for
from adapter.serving.records import RecordWriter, request_record
from adapter.serving.rejections import Rejection, halves, read_rejection, send_with_retries
from adapter.serving.upstream import SendFailed, SendTimeout, Upstream
from functions.headers import COLD_START, COMPUTE_MS, FRONTEND_ID, FRONTEND_WINDOW_S
from knative.http1 import Http1Response
from slackwise_core.clock import Clock
from slackwise_core.config import FunctionConfig

logger = logging.getLogger(__name__)

#: the shortest window the functions count adapters over (t_setup may be measured tiny)
_MIN_GOSSIP_WINDOW_S = 2.0
#: how often to look again at the replica count while every slot is busy
_CAPACITY_POLL_S = 0.02


class Dispatcher:
    """The queue and the batching loop of one function."""

    def __init__(
        self,
        *,
        function: FunctionConfig,
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
        settings: BatchingSettings = DEFAULT_BATCHING,
        stage_policy: StagePolicy | None = None,
        autoscaling: Autoscaling | None = None,
        frontend_id: str | None = None,
        lag: LoopLagReader | None = None,
    ) -> None:
        self.function = function
        up = function.upstream
        self.codec = codec_for(up.protocol, function.model_name, input_name=up.input,
                                output_name=up.output, binary=up.binary_data)  # fmt: skip
        self.name = function.name
        self.view = view
        self.upstream = upstream
        self.clock = clock
        self.records = records
        self.epoch = epoch
        chosen = function.late or preset.late
        late: Late = "predict" if chosen == "predict" else "prune" if chosen == "prune" else "serve"
        #: every decision: admission, batches, the limit, what answers teach
        self.controller: Controller[Pending] = Controller(
            name=self.name,
            preset=preset,
            model=model,
            aimd=aimd,
            max_batch=function.max_batch,
            container_concurrency=function.container_concurrency,
            now=clock.now(),
            stage_policy=stage_policy,
            late=late,
            settings=settings,
        )
        #: what is refused before it joins the queue (stopping, full, predicted late)
        refused = metrics.refused.labels(function=self.name)
        self.door = Door(self.name, self.controller, self._ready, max_queue=max_queue,
                         refused_metric=refused, lag=lag)  # fmt: skip
        #: the autoscaling advisor this dispatcher reports arrivals, cold starts and gossip to
        self.autoscaling = autoscaling
        self.frontend_id = frontend_id
        #: told of every arrival and answer (ROMA's core controllers and GPU route)
        self.observers: list[Observer] = []
        self.gpu: Offload | None = None  # offered every arrival before the replicas (ROMA's GPU)
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._sends: set[asyncio.Task[None]] = set()
        m, fn = metrics, {"function": self.name}
        self._m_queue, self._m_limit = m.queue_length.labels(**fn), m.aimd_limit.labels(**fn)
        self._m_inflight, self._m_batch = m.inflight_batches.labels(**fn), m.batch_size.labels(**fn)
        self._m_latency, self._m_misses = m.latency.labels(**fn), m.deadline_misses.labels(**fn)
        self._m_cold, self._m_requests = m.cold_batches.labels(**fn), m.requests
        self._m_timeouts = m.timeout_dispatches.labels(**fn)
        self._m_queue_delay = m.queue_delay.labels(**fn)
        self._m_limit.set(aimd.limit)
        self._headers = view.request_headers(self.name)

    # -- what the routes and the advisor read ------------------------------------------------

    @property
    def queue(self) -> RequestQueue[Pending]:
        return self.controller.queue

    @property
    def model(self) -> LatencyModel:
        return self.controller.model

    @property
    def aimd(self) -> AIMD:
        assert self.controller.aimd is not None
        return self.controller.aimd

    @property
    def inflight(self) -> int:
        return self.controller.inflight

    @property
    def batch_sizes(self) -> BatchSizeTracker:
        return self.controller.batch_sizes

    @property
    def path_margin(self) -> PathMargin:
        return self.controller.path_margin

    def current_limit(self) -> int:  # the batch cap in instances now
        return self.controller.limit()

    def _ready(self) -> int:
        return self.view.replicas(self.name).ready

    # -- admission ---------------------------------------------------------------------------

    def submit(self, item: Pending) -> None:
        """Queue an admitted request; raises its refusal (:mod:`adapter.serving.door`)."""
        self.door.check_open()
        ready = self._ready()
        item.arrived_cold = ready == 0
        if self.autoscaling is not None:
            self.autoscaling.arrived(self.name, item.arrival, item.size)
        for observer in self.observers:
            observer.arrived(self.name, item.size)
        try:
            self.door.admit(item, ready)
        except AdapterError:
            if self.autoscaling is not None:
                self.autoscaling.missed(self.name, item.arrival, cold=item.arrived_cold)
            raise
        if self.gpu is not None:
            self.gpu.offer()
        self._wake.set()

    def withdraw(self, item: Pending) -> None:
        """The request's client went away: cancel it; the queue drops it at the next step."""
        if not item.future.done():
            item.future.cancel()
            self.controller.withdraw()
            self._wake.set()

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name=f"dispatch-{self.name}")

    async def stop(self, grace_s: float = 10.0) -> None:
        """Stop taking requests, answer the queued ones, let in-flight batches finish."""
        self.door.closing = True
        await cancel_and_wait(self._task)
        for item in self.queue.pop(len(self.queue)):
            self._fail(
                item,
                ShuttingDown(
                    f"{self.name}: the adapter is shutting down",
                    retry_after_s=self.door.retry_after_closing_s,
                ),
            )
        if self._sends:
            _, pending = await asyncio.wait(set(self._sends), timeout=grace_s)
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)

    # -- the loop ------------------------------------------------------------------------------

    async def _run(self) -> None:
        while True:
            self._wake.clear()
            await self.clock.wait(self._wake, self._pump())

    def _pump(self) -> float | None:
        """Step the controller until it sends nothing more; when to look again (None: on a
        wake). A finished batch runs it too, so a freed slot's next batch leaves in the same
        callback, not turns of a loop later (a flood makes each turn long)."""
        controller = self.controller
        while True:
            now = self.clock.now()
            step = controller.step(now, self._ready())
            for item in step.late:
                self._fail(item, DeadlinePruned(
                    f"{self.name}: deadline passed {1000 * (now - item.due):.1f} ms "
                    "before dispatch; this function prunes late requests", retry_after_s=1.0,
                ))  # fmt: skip
            if step.tuned is not None:
                self._log_tuned(step.tuned)
            self._m_queue.set(len(controller.queue))
            if step.decision is not None and step.batch:
                self._m_inflight.set(controller.inflight)
                task = asyncio.create_task(self._send(list(step.batch), step.decision))
                self._sends.add(task)
                task.add_done_callback(self._sends.discard)
                continue
            if not step.late:  # all slots busy: a finished batch wakes it, and a replica
                # becoming ready does not say so: look again shortly
                return now + _CAPACITY_POLL_S if step.busy else step.wake_at

    def _log_tuned(self, update: AIMDDecision) -> None:
        self._m_limit.set(update.new_limit)
        log_tuned(self.name, update)

    # -- batches another route takes (ROMA's GPU executable) -------------------------------------

    def take(self, count: int) -> list[Pending]:
        """Up to ``count`` requests off the head of the queue for :meth:`send_via`."""
        return self.controller.take(count)

    async def send_via(self, batch: list[Pending], upstream: Upstream) -> None:
        """Send ``batch`` through ``upstream``, outside the replicas' slots; answered as any
        batch, but its times (another device's) teach neither the latency model nor AIMD."""
        await self._send(batch, ELSEWHERE, upstream)

    # -- one batch -----------------------------------------------------------------------------

    async def _send(
        self, batch: list[Pending], decision: BatchDecision, via: Upstream | None = None
    ) -> None:
        """One batch; with ``via`` (another route's) it held no slot of the replicas."""
        try:
            await self._send_once(batch, decision, via)
        except asyncio.CancelledError:
            self._fail_all(batch, ShuttingDown(f"{self.name}: the adapter stopped mid-batch"))
            raise
        except Exception as exc:  # every member must hear back, whatever went wrong here
            logger.exception("%s: batch of %d failed in the adapter", self.name, len(batch))
            self._fail_all(batch, UpstreamFailed(f"{self.name}: {type(exc).__name__}: {exc}"))
        finally:
            if via is None:
                self.controller.released()
                self._m_inflight.set(self.controller.inflight)
            self._wake.set()  # the loop looks again whatever the step below does
            if via is None and self._task is not None and not self.door.closing:
                self._pump()  # the freed slot's next batch leaves now

    async def _send_once(
        self, batch: list[Pending], decision: BatchDecision, via: Upstream | None = None
    ) -> None:
        sent = self.clock.now()
        upstream = via or self.upstream
        cold_hint = self._ready() == 0
        instances: list[Any] = []
        for item in batch:
            item.dispatched = sent
            self._m_queue_delay.observe(sent - item.arrival)
            instances.extend(item.instances)
        total = len(instances)
        self._m_batch.observe(total)
        if decision.timeout_dispatch:
            self._m_timeouts.inc()
        body, framing = self.codec.encode(instances, batch[0].id)  # the head's id names it
        headers, timeout_s = self._send_headers(batch) | framing, float(self.function.timeout_s)
        try:
            response = await send_with_retries(
                lambda: upstream.post(self.name, body, headers, timeout_s),
                clock=self.clock,
                earliest_deadline=min(p.deadline for p in batch),
                expected_s=self.controller.model.estimate_ms(total) / 1000.0,
                label=self.name,
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
        if response.status_code == 200:
            self._answer(batch, response, sent, self.clock.now(), total, cold_hint, decision,
                         teach=via is None)  # fmt: skip
        else:
            await self._rejected(batch, read_rejection(response.status_code, response.content),
                                 decision, via)  # fmt: skip

    def _send_headers(self, batch: list[Pending]) -> dict[str, str]:
        """Ours, and the first member's W3C ``traceparent`` (a batch is one upstream call)."""
        headers = {"content-type": "application/json", **self._headers}
        if trace := next((p.traceparent for p in batch if p.traceparent), None):
            headers["traceparent"] = trace
        if self.autoscaling is not None and self.frontend_id is not None:
            headers[FRONTEND_ID] = self.frontend_id
            window = max(_MIN_GOSSIP_WINDOW_S, self.autoscaling.window_s(self.name))
            headers[FRONTEND_WINDOW_S] = f"{window:.3f}"
        return headers

    def _answer(
        self,
        batch: list[Pending],
        response: Http1Response,
        sent: float,
        done: float,
        total: int,
        cold_hint: bool,
        decision: BatchDecision,
        *,
        teach: bool = True,
    ) -> None:
        try:
            predictions = self.codec.decode(response.content, total, response.headers)
        except (ValueError, KeyError, TypeError, IndexError) as exc:
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
        if self.autoscaling is not None and teach:
            self.autoscaling.answered(self.name, response.headers, done, waited_cold=cold_hint,
                                      round_trip_ms=round_trip_ms,
                                      batch_ms=self.model.estimate_ms(total))  # fmt: skip
        if teach:
            self.controller.completed(batch, now=done, instances=total, cold=cold,
                                      round_trip_ms=round_trip_ms, compute_ms=compute_ms,
                                      timeout_dispatch=decision.timeout_dispatch)  # fmt: skip
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
            if not item.future.done():
                item.future.set_result(answer)
            self._account(item, done, 200, total, cold, missed)

    async def _rejected(
        self, batch: list[Pending], rejection: Rejection, decision: BatchDecision,
        via: Upstream | None = None,
    ) -> None:  # fmt: skip
        """A 4xx: fail the member it names and requeue the rest; without a name, split the
        batch and send each half again, until the bad member is alone (see rejections)."""
        live = [p for p in batch if not p.cancelled]
        if rejection.index is not None and len(batch) > 1:
            offset = 0
            for item in batch:
                if offset <= rejection.index < offset + item.size:
                    own = rejection.index - offset
                    reason = f"{self.name}: instances[{own}]: {rejection.detail}"
                    self._fail(item, UpstreamRejected(reason, 400))
                    self.controller.requeue([p for p in live if p is not item])
                    return
                offset += item.size
        if len(live) > 1 and (400 <= rejection.status < 500 or rejection.status == 500):
            cut, _ = halves([p.size for p in live])
            for half in (live[:cut], live[cut:]):
                await self._send_once(half, decision, via)
            return
        if 400 <= rejection.status < 500:
            self._fail_all(batch, UpstreamRejected(f"{self.name}: {rejection.reason}",
                                                   rejection.status))  # fmt: skip
        else:
            reason = f"{self.name} answered {rejection.status}: {rejection.reason}"
            self._fail_all(batch, UpstreamFailed(reason))

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
            if self.autoscaling is not None:
                self.autoscaling.missed(self.name, done, cold=item.arrived_cold)
        elif self.autoscaling is not None:
            self.autoscaling.outcome(self.name, done)
        for observer in self.observers if status == 200 else ():
            observer.answered(self.name, done - item.arrival)
        self.records.add(request_record(item, self.epoch, done, status, batch_size, cold, missed))
