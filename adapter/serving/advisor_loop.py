"""The advisor at work: feeds the advisor's driver (:mod:`slackwise_policies.advisor_driver`, the
one the simulator's scalers run) from the request path and writes what it decides to the platform.

What the live adapter sees and hands over (the policies themselves are pure and clock-injected):

* **Arrivals**: every admitted request's instances (:meth:`Autoscaling.arrived`), for the rate
  regression, and the idle gaps between them for the hybrid keep-alive histogram
  (:class:`slackwise_policies.keepalive.KeepAlive`).
* **Setup time**: a batch sent while no replica was ready waited for a cold start; the time the
  platform held it (``x-platform-wait-ms`` from the local platform, otherwise the round trip
  minus the batch's estimated service time) is one sample of ``t_setup``
  (:meth:`Autoscaling.answered`).
* **Frontends**: the count the functions gossip in ``x-frontends`` (:meth:`Autoscaling.answered`).
* **The service model**: the function's latency model and batch limit at the tick.

Every ``tick_s`` each function gets a decision, with the platform's desired count as the count in
force; what the driver asks to hold is written when it asks (changed, or an owned count's lease
due): ``set_scale(fn, n)`` (this adapter's leased share) when the advisor owns capacity, else
``set_min_scale(fn, n)``, a floor (``None``: back to the configured min-scale when it falls to
zero) under the platform's KPA, which keeps deciding above it. A miss asks for one function's
decision at once when the driver says so.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping

from adapter.serving.background import cancel_and_wait
from adapter.serving.platform_view import PinUnsupported, PlatformView
from functions.headers import COLD_START, FRONTENDS, MODEL_LOAD_MS, PLATFORM_WAIT_MS
from slackwise_config import FunctionConfig
from slackwise_core.clock import Clock
from slackwise_policies.advisor_config import DEFAULT_PERCENTILE
from slackwise_policies.advisor_driver import AdvisorDriver
from slackwise_policies.advisor_settings import AdvisorSettings
from slackwise_policies.function_autoscaler import FunctionAutoscaler
from slackwise_policies.latency import LatencyModel

__all__ = ["Autoscaling"]

logger = logging.getLogger(__name__)


class Autoscaling:
    """The advisor of every function of one adapter (an
    :class:`slackwise_policies.advisor_driver.AdvisorDriver`, the one the simulator's scalers
    run), and the loop that writes what it decides to the platform."""

    def __init__(
        self,
        *,
        settings: AdvisorSettings,
        functions: Mapping[str, FunctionConfig],
        slos: Mapping[str, float],
        models: Mapping[str, LatencyModel],
        limits: Mapping[str, Callable[[], int]],
        view: PlatformView,
        clock: Clock,
        percentiles: Mapping[str, float] | None = None,
        owner: str = "",
        overdue: Callable[[str, float], int] | None = None,
    ) -> None:
        self.settings = settings
        #: how many of a function's queued requests are past their deadline at a time
        self.overdue = overdue
        #: this adapter's name as an owner of the counts it writes (its frontend id)
        self.owner = owner
        self.view = view
        self.clock = clock
        owns = settings.capacity == "own"
        self.driver = AdvisorDriver(settings, owns=owns, lease_s=settings.lease_s if owns else None)
        now = clock.now()
        for name, fn in functions.items():
            self.driver.add(
                now,
                name,
                slo_ms=slos[name],
                percentile=(percentiles or {}).get(name, DEFAULT_PERCENTILE),
                model=models[name],
                limit=limits[name],
                container_concurrency=fn.container_concurrency,
                max_scale=fn.scaling.max_scale,
            )
        self._task: asyncio.Task[None] | None = None
        self._unsupported = False
        self._extra: set[asyncio.Task[None]] = set()

    @property
    def functions(self) -> dict[str, FunctionAutoscaler]:
        return self.driver.functions

    # -- what the request path reports ---------------------------------------------------------

    def arrived(self, function: str, now: float, instances: int) -> None:
        self.driver.arrived(now, function, instances)

    def window_s(self, function: str) -> float:
        """The window the functions should count frontends over: the current ``t_setup``."""
        return self.functions[function].advisor.setup_s

    # -- the loop ------------------------------------------------------------------------------

    @property
    def owns(self) -> bool:
        """Whether the advisor owns the replica count (``capacity: own``) or pins a floor."""
        return self.driver.owns

    async def tick(self, only: str | None = None) -> None:
        """One decision per function (or for ``only``), written to the platform when the
        driver asks: the count itself, as this adapter's leased share, when the advisor owns
        capacity; else the floor."""
        now = self.clock.now()
        for name, auto in self.functions.items():
            if only is not None and name != only:
                continue
            prepared = auto.prepare(now)
            if prepared is not None:  # the replay search, off the request path
                await asyncio.to_thread(prepared)
            late = self.overdue(name, now) if self.overdue is not None else 0
            current = self.view.replicas(name).desired
            step = self.driver.step(now, name, current=current, overdue=late)
            if step is None or not step.write:
                continue
            try:
                await self._write(name, step.target)
            except PinUnsupported as exc:
                if not self._unsupported:
                    logger.warning("advisor off: %s", exc)
                self._unsupported = True
                return
            except (RuntimeError, ValueError, OSError) as exc:
                logger.warning("advisor: setting %s to %s failed: %s", name, step.target, exc)
                continue
            if step.target != auto.pinned:
                self._log(auto, step.count, step.target)
            self.driver.written(now, name, step.target)

    async def _write(self, name: str, target: int | None) -> None:
        if self.owns:
            await self.view.set_scale(name, target, owner=self.owner, lease_s=self.settings.lease_s)
        else:
            await self.view.set_min_scale(name, target)

    def _log(self, auto: FunctionAutoscaler, count: int, target: int | None) -> None:
        decision = auto.last
        assert decision is not None
        logger.info(
            "%s: %s %s -> %s (%s; needed %d, kpa %d, rate %.2f/s x U, n_F %d, setup %.2f s%s)",
            auto.name,
            "scale" if self.owns else "min-scale",
            auto.pinned,
            target,
            decision.reason,
            decision.needed,
            decision.kpa_wants,
            decision.model_rate,
            decision.frontends,
            decision.setup_s,
            ", keep-alive" if auto.keep_warm and count > decision.min_scale else "",
        )

    def outcome(self, function: str, now: float) -> None:
        """A request to ``function`` was answered in time at ``now`` (the evidence's count)."""
        self.driver.outcome(now, function, False)

    def missed(self, function: str, now: float, *, cold: bool = False, served: bool = True) -> None:
        """A request to ``function`` missed its SLO or was refused as late: counted as evidence
        (unless it arrived ``cold``, waiting for a replica to start: a cold start is not the
        model misjudging service times, and the advisor counts it already), and decided again
        at once when the driver asks (:meth:`AdvisorDriver.urgent`); ``served``: a replica
        answered it (a refusal at the door was not: a stall's evidence)."""
        if not cold:
            self.driver.outcome(now, function, True, served=served)
        if self._task is None or not self.driver.urgent(now, function):
            return
        task = asyncio.create_task(self.tick(only=function), name=f"advisor-{function}")
        self._extra.add(task)
        task.add_done_callback(self._extra.discard)

    async def _run(self) -> None:
        while not self._unsupported:
            await self.clock.sleep(self.settings.tick_s)
            try:
                await self.tick()
            except Exception:  # the advisor must never take the request path down with it
                logger.exception("advisor tick failed")

    def answered(
        self,
        name: str,
        headers: Mapping[str, str],
        done: float,
        *,
        waited_cold: bool,
        round_trip_ms: float,
        batch_ms: float,
    ) -> None:
        """What a function's answer at ``done`` says about its setup time and its frontends.

        A replica's setup takes at least its model's load time (which the function reports on
        its first answer); a batch that waited for the start saw the rest of it as well: the
        platform's wait, or the round trip less the batch's own ``batch_ms``."""
        first = headers.get(COLD_START) == "1"
        if waited_cold or first:
            wait_ms = 0.0
            if waited_cold:
                try:
                    wait_ms = float(headers[PLATFORM_WAIT_MS])
                except (KeyError, ValueError):
                    wait_ms = round_trip_ms - batch_ms
            load_ms = 0.0
            if first:
                with contextlib.suppress(KeyError, ValueError):
                    load_ms = float(headers[MODEL_LOAD_MS])
            self.driver.cold_start(done, name, max(wait_ms, load_ms) / 1000.0)
        raw = headers.get(FRONTENDS)
        if raw is not None and raw.isdigit():
            self.driver.frontends(done, name, int(raw))

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="advisor")

    async def settle(self) -> None:
        """Wait for the decisions that misses asked for (:meth:`missed`) to be written."""
        await asyncio.gather(*self._extra, return_exceptions=True)

    async def stop(self) -> None:
        await cancel_and_wait(self._task)
        for task in list(self._extra):
            task.cancel()
        await asyncio.gather(*self._extra, return_exceptions=True)
        for name, auto in self.functions.items():
            if auto.pinned is not None and not self._unsupported:
                with contextlib.suppress(Exception):
                    if self.owns:
                        await self.view.set_scale(name, None, owner=self.owner)
                    else:
                        await self.view.set_min_scale(name, None)
                self.driver.released(name)
