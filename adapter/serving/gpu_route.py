"""ROMA's GPU side in the adapter (``adapter.gpu``, :mod:`slackwise_config.gpu`): one GPU
executable shared by several functions, given to the most deficient of them whenever it is free.

The GPU executable is a process holding those functions' models (``python -m functions.serve
--model imagenet --model embed --device cuda:0``), each at ``/v1/models/{kind}:predict``. The
route is offered every arrival before the function's own slots are (ROMA's order: a free GPU
takes first), and takes again whenever its batch is answered. Each turn:

* the functions with a queue are scored by Algorithm 1
  (:func:`slackwise_policies.roma.gpu_choice`: the estimated response times of their queued
  requests and the mean of their answers over the last second, against ``alpha`` × their SLO);
  ``round_robin`` takes them in turn;
* the batch is one request (``roma``) or, with ``roma_batched``, the most of that function's
  queue the GPU can serve while its head still meets its deadline
  (:func:`slackwise_policies.roma.gpu_batch`);
* it leaves the head of the function's queue (:meth:`Dispatcher.take`, the queue's own order,
  deadlines first) and is sent and answered by that function's dispatcher
  (:meth:`Dispatcher.send_via`), outside its replicas' slots and without teaching their latency
  model; the GPU's batch times teach the route's own model per function.

What is not taken waits for the function's CPU replicas as before: the adapter's batching and
slack still decide what leaves for them. When the GPU executable cannot be reached (it died, it
is restarting), the batch in hand goes to the function's replicas instead of failing, and the
route stops taking work for ``_DOWN_S`` before it tries the GPU again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from adapter.serving.upstream import SendFailed, Upstream
from slackwise_config import GpuSettings
from slackwise_core.clock import Clock
from slackwise_core.http1 import Http1Response
from slackwise_policies.latency import LatencyModel
from slackwise_policies.roma import GpuCandidate, gpu_batch, gpu_choice, round_robin

if TYPE_CHECKING:
    from adapter.serving.dispatcher import Dispatcher
    from adapter.serving.pending import Pending

__all__ = ["GpuRoute"]

#: Algorithm 1's R: the answers of this last stretch of time
_RECENT_S = 1.0
#: the GPU's time for a batch until one has been measured: 5 ms + 0.1 ms a request
_PRIOR = (5.0, 0.1)
#: how long the route leaves the GPU alone after it could not be reached
_DOWN_S = 5.0

logger = logging.getLogger(__name__)


class _OrReplicas:
    """The GPU executable, or, when it cannot be reached, the function's own replicas."""

    def __init__(self, route: GpuRoute, replicas: Upstream) -> None:
        self.route, self.replicas = route, replicas

    async def post(
        self, function: str, body: bytes, headers: Mapping[str, str], timeout_s: float
    ) -> Http1Response:
        try:
            return await self.route.upstream.post(function, body, headers, timeout_s)
        except SendFailed as exc:
            self.route.down(exc)
            return await self.replicas.post(function, body, headers, timeout_s)

    async def aclose(self) -> None:
        return None


class GpuRoute:
    """One GPU executable and the dispatchers of the functions it serves."""

    def __init__(
        self,
        *,
        settings: GpuSettings,
        upstream: Upstream,
        dispatchers: Mapping[str, Dispatcher],
        slos_ms: Mapping[str, float],
        clock: Clock,
    ) -> None:
        self.settings, self.upstream, self.clock = settings, upstream, clock
        self.names = list(settings.functions)
        self._dispatchers = {n: dispatchers[n] for n in self.names}
        self._sla_s = [slos_ms[n] / 1000.0 for n in self.names]
        #: the GPU's batch time per function, learnt from its answers
        self.models = {n: LatencyModel.from_prior(*_PRIOR, curve=True) for n in self.names}
        self._answers: dict[str, list[tuple[float, float]]] = {n: [] for n in self.names}
        self._next = 0
        self._down_until = -math.inf
        self._busy: asyncio.Task[None] | None = None
        self._closed = False
        #: requests each function had served on the GPU
        self.served: dict[str, int] = dict.fromkeys(self.names, 0)

    # -- what the dispatchers report (adapter.serving.observers) ---------------------------------

    def arrived(self, function: str, count: int) -> None:
        return None  # offer() follows each admitted arrival

    def answered(self, function: str, response_s: float) -> None:
        if function in self._answers:
            self._answers[function].append((self.clock.now(), response_s))

    def offer(self) -> None:
        """Give the GPU a batch if it is free and some function has a queue."""
        if self._closed or (self._busy is not None and not self._busy.done()):
            return
        now = self.clock.now()
        if now < self._down_until:
            return
        pick = self._pick(now)
        if pick is None:
            return
        name, count = pick
        dispatcher = self._dispatchers[name]
        batch = dispatcher.take(count)
        if not batch:
            return
        self.served[name] += len(batch)
        self._busy = asyncio.create_task(
            self._serve(name, dispatcher, batch, now), name=f"gpu-{name}"
        )

    async def _serve(
        self, name: str, dispatcher: Dispatcher, batch: list[Pending], sent: float
    ) -> None:
        try:
            await dispatcher.send_via(batch, _OrReplicas(self, dispatcher.upstream))
            done = self.clock.now()
            if done < self._down_until:  # the replicas served it, not the GPU
                self.served[name] -= len(batch)
            elif all(
                p.future.done() and not p.future.cancelled() and p.future.exception() is None
                for p in batch
            ):
                ms = (done - sent) * 1000.0
                self.models[name].observe(done, sum(p.size for p in batch), ms, ms, cold=False)
        finally:
            self._busy = None
            self.offer()

    def down(self, exc: Exception) -> None:
        """The GPU executable could not be reached: its batch goes to the replicas, and the
        route takes nothing for ``_DOWN_S``."""
        if self.clock.now() >= self._down_until:
            logger.warning(
                "GPU executable unreachable (%s): its batches go to the replicas for %g s",
                exc,
                _DOWN_S,
            )
        self._down_until = self.clock.now() + _DOWN_S

    def _recent(self, name: str, now: float) -> float | None:
        fresh = [(t, r) for t, r in self._answers[name] if t > now - _RECENT_S]
        self._answers[name] = fresh
        return sum(r for _, r in fresh) / len(fresh) if fresh else None

    def _pick(self, now: float) -> tuple[str, int] | None:
        queues = []
        for name in self.names:
            queue = self._dispatchers[name].queue
            queue.drop_cancelled()
            queues.append([p.arrival for p in queue.items])
        if not any(queues):
            return None
        if self.settings.policy == "round_robin":
            turn = round_robin([bool(q) for q in queues], self._next)
            assert turn is not None  # some queue is non-empty
            self._next = (turn + 1) % len(self.names)
            return self.names[turn], 1
        candidates = [
            GpuCandidate(q, self._recent(n, now), sla, self._gpu_s(n))
            for n, q, sla in zip(self.names, queues, self._sla_s, strict=True)
        ]
        i = gpu_choice(candidates, now, alpha=self.settings.alpha, beta=self.settings.beta)
        if i is None:
            return None
        if self.settings.policy == "roma_batched":
            return self.names[i], gpu_batch(candidates[i], now, self.settings.max_batch)
        return self.names[i], 1

    def _gpu_s(self, name: str) -> Callable[[int], float]:
        model = self.models[name]
        return lambda n: model.estimate_ms(n) / 1000.0

    async def stop(self) -> None:
        """No more turns; the batch on the GPU now is cancelled (its members told so), and the
        connections to the GPU executable are closed."""
        self._closed = True
        if self._busy is not None:
            self._busy.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._busy
        await self.upstream.aclose()
