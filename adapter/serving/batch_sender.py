"""One function's batches on the wire: each sent upstream in the function's protocol, its
answer shared among the members (or its refusal narrowed to the member it names), and what it
teaches handed to the controller and the advisor (:mod:`adapter.serving.dispatcher` decides
which batch leaves when).

A batch whose answer waited out a stall of the adapter's own loop (a wake-up of the loop-lag
timer at least ``STALL_S`` late, and later than half the round trip) teaches the controller
nothing about the function's latency or its batch size; its members' lateness still counts at
the door, which sees the loop's lateness itself (:mod:`adapter.serving.loop_lag`). Under a
sudden flood of keep-alive clients the loop was away 120-600 ms at the start, and one batch of
four answered in 125 ms (0.3 ms of it computing) taught the line that a batch costs its
members apart (slope 31 ms an instance, intercept -21): the batch cap fell to 1, the AIMD limit
never grew from batches that never reached it, and digits served 210-350 req/s of 27,000
offered for the rest of the run where runs without that sample served 840-1,370."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from adapter.serving.accounting import Accounting
from adapter.serving.advisor_loop import Autoscaling
from adapter.serving.errors import AdapterError, UpstreamFailed, UpstreamRejected, UpstreamTimeout
from adapter.serving.loop_lag import NO_LAG, LoopLagReader
from adapter.serving.pending import Pending
from adapter.serving.protocols import codec_for
from adapter.serving.rejections import Rejection, halves, read_rejection, send_with_retries
from adapter.serving.upstream import SendFailed, SendTimeout, Upstream
from functions.headers import COLD_START, COMPUTE_MS, FRONTEND_ID, FRONTEND_WINDOW_S
from slackwise_config import FunctionConfig
from slackwise_core.clock import Clock, MonotonicClock
from slackwise_core.http1 import Http1Response
from slackwise_policies.batching import BatchDecision
from slackwise_policies.controller import Controller

__all__ = ["STALL_S", "BatchSender"]

#: a loop-lag wake-up this late is a stall of the adapter (a turn under a flood takes 5-15 ms;
#: a flood's start held the loop 120-600 ms). With 50 ms, 2 of 15 fresh adapters still fell to
#: batches of 5-7 under a flood (docs/reliability.md)
STALL_S = 0.02

#: the shortest window the functions count adapters over (t_setup may be measured tiny)
_MIN_GOSSIP_WINDOW_S = 2.0


class BatchSender:
    """Sends one function's batches and answers their members."""

    def __init__(
        self,
        function: FunctionConfig,
        *,
        controller: Controller[Pending],
        replicas: Upstream,
        ready: Callable[[], int],
        clock: Clock,
        accounts: Accounting,
        own_headers: dict[str, str],
        autoscaling: Autoscaling | None = None,
        frontend_id: str | None = None,
        lag: LoopLagReader = NO_LAG,
    ) -> None:
        self.function = function
        #: the adapter's loop, watched for stalls a round trip measured instead of the function
        #: (timed on the loop's own monotonic scale: a virtual clock's round trips are not on it)
        self.lag = lag if isinstance(clock, MonotonicClock) else NO_LAG
        self.name = function.name
        up = function.upstream
        self.codec = codec_for(
            up.protocol,
            function.model_name,
            input_name=up.input,
            output_name=up.output,
            binary=up.binary_data,
        )
        self.controller = controller
        #: the function's replicas (a batch may be sent another way: ``via``)
        self.replicas = replicas
        #: how many replicas are ready now
        self.ready = ready
        self.clock = clock
        self.accounts = accounts
        #: what the platform asks every request to carry (routing headers)
        self.own_headers = own_headers
        self.autoscaling = autoscaling
        self.frontend_id = frontend_id

    async def send(
        self, batch: list[Pending], decision: BatchDecision, via: Upstream | None = None
    ) -> None:
        sent = self.clock.now()
        upstream = via or self.replicas
        cold_hint = self.ready() == 0
        instances: list[Any] = []
        for item in batch:
            item.dispatched = sent
            self.accounts.queue_delay.observe(sent - item.arrival)
            instances.extend(item.instances)
        total = len(instances)
        self.accounts.batch_size.observe(total)
        if decision.timeout_dispatch:
            self.accounts.timeouts.inc()
        body, framing = self.codec.encode(instances, batch[0].id)  # the head's id names it
        headers, timeout_s = self.headers(batch) | framing, float(self.function.timeout_s)
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
            self.accounts.fail_all(batch, error)
            return
        except SendFailed as exc:
            self.accounts.fail_all(
                batch, UpstreamFailed(f"{self.name}: batch of {total} failed: {exc}")
            )
            return
        if response.status_code == 200:
            self.answer(
                batch,
                response,
                sent,
                self.clock.now(),
                total,
                cold_hint,
                decision,
                teach=via is None,
            )
        else:
            await self.rejected(
                batch, read_rejection(response.status_code, response.content), decision, via
            )

    def headers(self, batch: list[Pending]) -> dict[str, str]:
        """Ours, and the first member's W3C ``traceparent`` (a batch is one upstream call)."""
        headers = {"content-type": "application/json", **self.own_headers}
        if trace := next((p.traceparent for p in batch if p.traceparent), None):
            headers["traceparent"] = trace
        if self.autoscaling is not None and self.frontend_id is not None:
            headers[FRONTEND_ID] = self.frontend_id
            window = max(_MIN_GOSSIP_WINDOW_S, self.autoscaling.window_s(self.name))
            headers[FRONTEND_WINDOW_S] = f"{window:.3f}"
        return headers

    def answer(
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
            self.accounts.fail_all(batch, UpstreamFailed(f"{self.name}: malformed answer: {exc}"))
            return
        round_trip_ms = (done - sent) * 1000.0
        try:
            compute_ms = float(response.headers.get(COMPUTE_MS, round_trip_ms))
        except ValueError:
            compute_ms = round_trip_ms
        cold = cold_hint or response.headers.get(COLD_START) == "1"
        if cold:
            self.accounts.cold_batches.inc()
        if self.autoscaling is not None and teach:
            self.autoscaling.answered(
                self.name,
                response.headers,
                done,
                waited_cold=cold_hint,
                round_trip_ms=round_trip_ms,
                batch_ms=self.controller.model.estimate_ms(total),
            )
        if teach:
            stall_s = self.lag.stalled_s(sent)
            stalled = stall_s >= STALL_S and stall_s * 1000.0 > round_trip_ms / 2.0
            self.controller.completed(
                batch,
                now=done,
                instances=total,
                cold=cold,
                stalled=stalled,
                round_trip_ms=round_trip_ms,
                compute_ms=compute_ms,
                timeout_dispatch=decision.timeout_dispatch,
            )
        self.accounts.served(
            batch,
            predictions,
            done,
            instances=total,
            compute_ms=compute_ms,
            round_trip_ms=round_trip_ms,
            cold=cold,
        )

    async def rejected(
        self,
        batch: list[Pending],
        rejection: Rejection,
        decision: BatchDecision,
        via: Upstream | None = None,
    ) -> None:
        """A 4xx: fail the member it names and requeue the rest; without a name, split the
        batch and send each half again, until the bad member is alone (see rejections)."""
        live = [p for p in batch if not p.cancelled]
        if rejection.index is not None and len(batch) > 1:
            offset = 0
            for item in batch:
                if offset <= rejection.index < offset + item.size:
                    own = rejection.index - offset
                    reason = f"{self.name}: instances[{own}]: {rejection.detail}"
                    self.accounts.fail(item, UpstreamRejected(reason, 400))
                    self.controller.requeue([p for p in live if p is not item])
                    return
                offset += item.size
        if len(live) > 1 and (400 <= rejection.status < 500 or rejection.status == 500):
            cut, _ = halves([p.size for p in live])
            for half in (live[:cut], live[cut:]):
                await self.send(half, decision, via)
            return
        if 400 <= rejection.status < 500:
            self.accounts.fail_all(
                batch, UpstreamRejected(f"{self.name}: {rejection.reason}", rejection.status)
            )
        else:
            reason = f"{self.name} answered {rejection.status}: {rejection.reason}"
            self.accounts.fail_all(batch, UpstreamFailed(reason))
