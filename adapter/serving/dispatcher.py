"""One function's dispatch loop: drive its controller, send each batch upstream, answer each
member.

Every decision is the :class:`slackwise_policies.controller.Controller`'s (the simulator drives the
same one): what to admit, which batch to send and when, the batch limit, and what an answer teaches.
This loop adds what is live: the futures the handlers wait on, the batches' tasks, and three
helpers: the door (:mod:`adapter.serving.door`: what is refused before it queues), the sender
(:mod:`adapter.serving.batch_sender`: HTTP, answers shared among members) and the accounts
(:mod:`adapter.serving.accounting`: metrics, records and the advisor's reports). It waits on
its clock (:meth:`slackwise_core.clock.Clock.wait`), so on a virtual clock it runs in virtual
time. In-flight batches are bounded by the platform's ready replicas × ``containerConcurrency``;
while no replica is ready one batch goes to the platform (its activator buffers it and starts a
replica, as a request at scale zero does) and the rest keep queueing.

Every member of every batch is answered exactly once: with its share of the predictions, or with
an :class:`adapter.serving.errors.AdapterError` that says what failed; a refused or failed batch
is handled as :mod:`adapter.serving.rejections` says (isolate, split, retry).
"""

from __future__ import annotations

import asyncio
import logging

from adapter.serving.accounting import Accounting
from adapter.serving.advisor_loop import Autoscaling
from adapter.serving.background import cancel_and_wait
from adapter.serving.batch_sender import BatchSender
from adapter.serving.door import Door
from adapter.serving.errors import (
    AdapterError,
    DeadlinePruned,
    ShuttingDown,
    UpstreamFailed,
)
from adapter.serving.loop_lag import NO_LAG, LoopLagReader
from adapter.serving.metrics import AdapterMetrics
from adapter.serving.observers import ELSEWHERE, Observer, Offload, log_tuned
from adapter.serving.pending import Pending
from adapter.serving.platform_view import PlatformView
from adapter.serving.records import RecordWriter
from adapter.serving.upstream import Upstream
from slackwise_config import FunctionConfig
from slackwise_core.clock import Clock
from slackwise_policies.aimd import AIMD, AIMDDecision
from slackwise_policies.batching import BatchDecision
from slackwise_policies.batching_settings import DEFAULT_BATCHING, BatchingSettings
from slackwise_policies.controller import Controller
from slackwise_policies.estimates import BatchSizeTracker
from slackwise_policies.latency import LatencyModel
from slackwise_policies.modes import ModePreset
from slackwise_policies.queue import RequestQueue
from slackwise_policies.slack import StagePolicy
from slackwise_policies.waiting import PathMargin

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
        self.name = function.name
        self.view = view
        self.upstream = upstream
        self.clock = clock
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
            late=function.late or preset.late,
            settings=settings,
        )
        #: what is refused before it joins the queue (stopping, full, predicted late)
        refused = metrics.refused.labels(function=self.name)
        self.door = Door(
            self.name,
            self.controller,
            self._ready,
            max_queue=max_queue,
            refused_metric=refused,
            lag=lag,
        )
        #: the autoscaling advisor this dispatcher reports arrivals, cold starts and gossip to
        self.autoscaling = autoscaling
        #: told of every arrival and answer (ROMA's core controllers and GPU route)
        self.observers: list[Observer] = []
        self.gpu: Offload | None = None  # offered every arrival before the replicas (ROMA's GPU)
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._sends: set[asyncio.Task[None]] = set()
        #: its metric series, and what every finished request reports
        self.accounts = Accounting(
            self.name,
            metrics=metrics,
            records=records,
            epoch=epoch,
            clock=clock,
            autoscaling=autoscaling,
            observers=self.observers,
        )
        self.accounts.limit.set(aimd.limit)
        #: each batch on the wire, and its answer shared among its members
        self.sender = BatchSender(
            function,
            controller=self.controller,
            replicas=upstream,
            ready=self._ready,
            clock=clock,
            accounts=self.accounts,
            own_headers=view.request_headers(self.name),
            autoscaling=autoscaling,
            frontend_id=frontend_id,
            lag=lag or NO_LAG,
        )

    def advised_by(self, autoscaling: Autoscaling, frontend_id: str | None) -> None:
        """Report to ``autoscaling`` from now on (arrivals, answers, outcomes), and name this
        adapter ``frontend_id`` to the replicas (their count of frontends)."""
        self.autoscaling = self.accounts.autoscaling = self.sender.autoscaling = autoscaling
        self.sender.frontend_id = frontend_id

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
            self.accounts.fail(
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
                self.accounts.fail(
                    item,
                    DeadlinePruned(
                        f"{self.name}: deadline passed {1000 * (now - item.due):.1f} ms "
                        "before dispatch; this function prunes late requests",
                        retry_after_s=1.0,
                    ),
                )
            if step.tuned is not None:
                self._log_tuned(step.tuned)
            self.accounts.queue_length.set(len(controller.queue))
            if step.decision is not None and step.batch:
                self.accounts.inflight.set(controller.inflight)
                task = asyncio.create_task(self._send(list(step.batch), step.decision))
                self._sends.add(task)
                task.add_done_callback(self._sends.discard)
                continue
            if not step.late:  # all slots busy: a finished batch wakes it, and a replica
                # becoming ready does not say so: look again shortly
                return now + _CAPACITY_POLL_S if step.busy else step.wake_at

    def _log_tuned(self, update: AIMDDecision) -> None:
        self.accounts.limit.set(update.new_limit)
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
            await self.sender.send(batch, decision, via)
        except asyncio.CancelledError:
            self.accounts.fail_all(
                batch, ShuttingDown(f"{self.name}: the adapter stopped mid-batch")
            )
            raise
        except Exception as exc:  # every member must hear back, whatever went wrong here
            logger.exception("%s: batch of %d failed in the adapter", self.name, len(batch))
            self.accounts.fail_all(
                batch, UpstreamFailed(f"{self.name}: {type(exc).__name__}: {exc}")
            )
        finally:
            if via is None:
                self.controller.released()
                self.accounts.inflight.set(self.controller.inflight)
            self._wake.set()  # the loop looks again whatever the step below does
            if via is None and self._task is not None and not self.door.closing:
                self._pump()  # the freed slot's next batch leaves now
