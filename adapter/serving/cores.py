"""ROMA's CPU half in the adapter: every CPU function's cores set each period by its CT
controller, under the node's supervisor (``adapter.cores``, :mod:`slackwise_config.cores`).

The adapter is where the response times are: each function's dispatcher reports every request it
answers (:meth:`CoreControl.answered`, the time from its arrival at that function to its answer,
queueing in the adapter included) and every arrival (:meth:`CoreControl.arrived`). Every
``period_s`` the loop reads, per function, :func:`slackwise_policies.roma.response_signal` of the
period (the mean of its answers, or the age of its oldest queued request when that is longer),
and :class:`slackwise_policies.roma.NodeCores` turns them into cores against ``alpha`` × the
function's SLO, scaled to ``node_cores``; the platform view sets them (a cgroup quota on the
local platform, ``PUT .../cores`` on a remote one, an in-place pod resize on Knative). With
``feed_forward`` the demand starts from the cores the period's arrivals call for, at one
request's work as the function's latency model estimates it.

How this and the batching share one objective: the dispatcher decides what leaves a queue and
when (slack, deadlines, AIMD on the batches' own service times), the controller decides how fast
the function computes. Both steer the same SLO; the controller sees the queueing the batching
causes in the response times, and the batching sees the cores in the service times it measures,
at a tenth or less of its rate (a second against batches of milliseconds), so neither chases the
other. On the loop's end the quotas are lifted.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Callable, Mapping

from adapter.serving.background import cancel_and_wait
from adapter.serving.platform_view import PinUnsupported, PlatformView
from slackwise_config import CoreSettings, FunctionConfig
from slackwise_core.clock import Clock
from slackwise_policies.roma import CoreController, NodeCores, load_floor, response_signal

__all__ = ["CoreControl", "controlled"]

logger = logging.getLogger(__name__)


def controlled(settings: CoreSettings, functions: Mapping[str, FunctionConfig]) -> list[str]:
    """The functions whose cores are set: those listed, else every one on the CPU that the
    platform runs (not a fixed endpoint)."""
    if settings.functions:
        return list(settings.functions)
    return [n for n, f in functions.items() if f.device == "cpu" and not f.upstream.url]


class CoreControl:
    """The CT controllers of one adapter's CPU functions, and the loop that applies them."""

    def __init__(
        self,
        *,
        settings: CoreSettings,
        functions: Mapping[str, FunctionConfig],
        slos_ms: Mapping[str, float],
        oldest: Mapping[str, Callable[[], float | None]],
        work_s: Mapping[str, Callable[[], float]],
        view: PlatformView,
        clock: Clock,
    ) -> None:
        self.settings, self.view, self.clock = settings, view, clock
        self.names = controlled(settings, functions)
        node = settings.node_cores or float(os.cpu_count() or 1)
        start = (node - settings.gpu_cores) / max(1, len(self.names))
        controllers = [
            CoreController(
                settings.gain,
                settings.zero,
                settings.u_min,
                min(node, float(functions[n].threads)),
                start,
            )
            for n in self.names
        ]
        self.node = NodeCores(controllers, node, gpu_cores=settings.gpu_cores)
        self._set_points = [settings.alpha * slos_ms[n] / 1000.0 for n in self.names]
        self._oldest = [oldest[n] for n in self.names]
        self._work_s = [work_s[n] for n in self.names]
        self._answers: dict[str, list[float]] = {n: [] for n in self.names}
        self._came: dict[str, int] = dict.fromkeys(self.names, 0)
        #: the cores each function has now (None until first set), and their sum over time
        self.cores: dict[str, float | None] = dict.fromkeys(self.names)
        self.core_seconds = 0.0
        self._task: asyncio.Task[None] | None = None

    def answered(self, function: str, response_s: float) -> None:
        if function in self._answers:
            self._answers[function].append(response_s)

    def arrived(self, function: str, count: int = 1) -> None:
        if function in self._came:
            self._came[function] += count

    def tick(self, now: float) -> dict[str, float]:
        """The cores for the next period, from what the period that ends at ``now`` saw."""
        responses = []
        for name, oldest in zip(self.names, self._oldest, strict=True):
            head = oldest()
            responses.append(
                response_signal(self._answers[name], None if head is None else now - head)
            )
            self._answers[name] = []
        floors = None
        if self.settings.feed_forward is not None:
            rates = [self._came[n] / self.settings.period_s for n in self.names]
            floors = [
                load_floor(r, w(), self.settings.feed_forward)
                for r, w in zip(rates, self._work_s, strict=True)
            ]
        self._came = dict.fromkeys(self.names, 0)
        granted = self.node.step(responses, self._set_points, floors)
        return dict(zip(self.names, granted, strict=True))

    async def apply(self, cores: Mapping[str, float | None]) -> None:
        for name, value in cores.items():
            await self.view.set_cores(name, value)
            self.cores[name] = value

    def start(self) -> None:
        if self.names and self._task is None:
            self._task = asyncio.create_task(self._run(), name="cores")

    async def stop(self) -> None:
        await cancel_and_wait(self._task)
        self._task = None
        with contextlib.suppress(Exception):  # lift the quotas; a platform gone is no quota
            await self.apply(dict.fromkeys(self.names))

    async def _run(self) -> None:
        try:
            await self.apply(
                {n: ct.u for n, ct in zip(self.names, self.node.controllers, strict=True)}
            )
        except PinUnsupported as exc:
            logger.warning("cores are not set: %s", exc)
            return
        while True:
            await self.clock.sleep(self.settings.period_s)
            self.core_seconds += sum(c or 0.0 for c in self.cores.values()) * (
                self.settings.period_s
            )
            try:
                await self.apply(self.tick(self.clock.now()))
            except PinUnsupported as exc:
                logger.warning("cores are no longer set: %s", exc)
                return
            except Exception:  # the loop must never take the request path down with it
                logger.exception("setting cores failed; trying again next period")
