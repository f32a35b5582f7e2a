"""The local platform's replicas: each function's KPA ticks, replicas started and drained to
its decisions, and the ledger of what they cost (Knative's autoscaler and revision controller,
on this machine)."""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
from pathlib import Path
from typing import Any

import httpx

from knative.kpa import KPA
from knative.local.activator import Activator
from knative.local.cpu_quota import CpuQuota
from knative.local.events import EventLog, Ledger
from knative.local.priority import auto_step, niceness, restore, starting
from knative.local.replica import Replica, ReplicaStartError, ReplicaState
from knative.meter import ConcurrencyMeter
from slackwise_config import FunctionConfig, PlatformConfig
from slackwise_core.clock import Clock

__all__ = ["Fleet", "FunctionRuntime"]

logger = logging.getLogger(__name__)


class FunctionRuntime:
    """One function's KPA, activator, meter, replicas and ledger."""

    def __init__(self, config: FunctionConfig, queue_depth: int, now: float) -> None:
        self.config = config
        self.kpa = KPA(config.scaling)
        self.activator: Activator[Replica] = Activator(
            config.name,
            container_concurrency=config.container_concurrency,
            queue_depth=queue_depth,
        )
        self.meter = ConcurrencyMeter(now)
        self.replicas: dict[str, Replica] = {}
        self.tasks: set[asyncio.Task[None]] = set()
        self.desired = 0
        self.pinned_min: int | None = None
        #: the counts owners (the adapters' controllers) set, each with when its lease ends:
        #: the function runs the largest live one, and the KPA then only measures
        self.owners: dict[str, tuple[int, float]] = {}
        self.ledger = Ledger()
        #: the cores the function's replicas share (ROMA's CPU allocation), once set
        self.quota: CpuQuota | None = None
        self.next_index = 1
        self.path = f"/v1/models/{config.name}:predict"

    def owned(self, now: float) -> int | None:
        """The largest count a live lease asks for (expired leases dropped), or None."""
        for owner in [o for o, (_, until) in self.owners.items() if until <= now]:
            del self.owners[owner]
        return max((count for count, _ in self.owners.values()), default=None)

    def count(self, *states: ReplicaState) -> int:
        return sum(1 for r in self.replicas.values() if r.state in states)


class Fleet:
    """Every function's replicas, scaled by its KPA."""

    def __init__(self, settings: PlatformConfig, clock: Clock, events: EventLog) -> None:
        self.settings = settings
        #: what the replicas want in ``Authorization: Bearer`` (functions.limits); the router
        #: sends it, nobody else has it
        self.function_token = secrets.token_urlsafe(32)
        self.clock = clock
        self.events = events
        self.functions: dict[str, FunctionRuntime] = {}
        self.log_dir: Path | None = None
        self.client: httpx.AsyncClient | None = None
        self.stopping = False
        #: the platform's own niceness (a replica starts above it: :meth:`starting_nice`)
        self.nice = niceness()
        #: the turns replicas take to load (``platform.max_starting``; None: no turns): the
        #: others wait theirs, counted as starting
        self.start_slots = (
            None if settings.max_starting is None else asyncio.Semaphore(settings.max_starting)
        )

    def add(self, config: FunctionConfig, now: float) -> FunctionRuntime:
        fn = FunctionRuntime(config, self.settings.queue_depth, now)
        self.functions[config.name] = fn
        self.tick(fn, now)
        return fn

    async def autoscale_loop(self) -> None:
        tick_s = self.settings.autoscaler.tick_interval_s
        next_tick = self.clock.now() + tick_s
        while True:
            await self.clock.sleep(min(1.0, tick_s))
            now = self.clock.now()
            for fn in self.functions.values():
                sample = fn.meter.sample(now)
                value = sample.rps if fn.config.scaling.metric == "rps" else sample.concurrency
                fn.kpa.record(now, value)
            if now >= next_tick:
                next_tick = now + tick_s
                for fn in self.functions.values():
                    self.tick(fn, now)

    def tick(self, fn: FunctionRuntime, now: float) -> None:
        if self.stopping:
            return
        ready = fn.count(ReplicaState.READY)
        current = fn.count(ReplicaState.READY, ReplicaState.STARTING)
        decision = fn.kpa.decide(now, ready=ready, current=current, min_scale=fn.pinned_min)
        desired, reason = decision.desired, decision.reason
        detail = f"stable {decision.stable_value:.2f}, panic {decision.panic_value:.2f}"
        owned = fn.owned(now)
        if owned is not None:
            # the owners' count; a request waiting at zero still wakes one replica, as the
            # activator does for any request
            waiting = fn.meter.in_flight > 0
            desired = max(owned, 1 if waiting else 0)
            reason = "owned"
            detail = f"set to {owned} by {len(fn.owners)}" + (
                ", a request waits" if waiting else ""
            )
        if desired != fn.desired:
            self.events.emit(
                fn.config.name,
                "scale",
                value=desired,
                detail=f"{fn.desired} -> {desired} ({reason}; {detail})",
            )
            logger.info("%s: scale %d -> %d (%s)", fn.config.name, fn.desired, desired, reason)
        fn.desired = desired
        self._reconcile(fn, now)

    def _reconcile(self, fn: FunctionRuntime, now: float) -> None:
        active = [
            r
            for r in fn.replicas.values()
            if r.state in (ReplicaState.STARTING, ReplicaState.READY)
        ]
        if fn.desired > len(active):
            for _ in range(fn.desired - len(active)):
                self._spawn(fn, now)
        elif fn.desired < len(active):
            starting = [r for r in active if r.state is ReplicaState.STARTING]
            ready = sorted(
                (r for r in active if r.state is ReplicaState.READY), key=lambda r: r.in_flight
            )
            victims = (sorted(starting, key=lambda r: -r.created_at) + ready)[
                : len(active) - fn.desired
            ]
            for replica in victims:
                self._track(fn, self._drain(fn, replica))

    def _track(self, fn: FunctionRuntime, coro: Any) -> None:
        task: asyncio.Task[None] = asyncio.create_task(coro)
        fn.tasks.add(task)
        task.add_done_callback(fn.tasks.discard)

    def starting_nice(self) -> int:
        """The niceness a replica starts at now (``platform.starting_nice``; ``auto``: yielding
        only when the ready replicas of every function hold the CPUs the platform may use,
        :func:`knative.local.priority.auto_step`)."""
        step = self.settings.starting_nice
        if step == "auto":
            held = sum(
                max(1, fn.config.threads) * fn.count(ReplicaState.READY)
                for fn in self.functions.values()
            )
            step = auto_step(len(os.sched_getaffinity(0)), held)
        return starting(step)

    def _spawn(self, fn: FunctionRuntime, now: float) -> None:
        assert self.log_dir is not None
        replica = Replica(
            fn.config,
            fn.next_index,
            host=self.settings.host,
            log_dir=self.log_dir,
            created_at=now,
            token=self.function_token,
        )
        fn.next_index += 1
        fn.replicas[replica.name] = replica
        self._track(fn, self._run_replica(fn, replica))

    async def _run_replica(self, fn: FunctionRuntime, replica: Replica) -> None:
        assert self.client is not None
        try:
            await replica.start(
                self.client,
                ready_timeout_s=self.settings.ready_timeout_s,
                nice=self.starting_nice,  # decided when its turn to load comes
                slot=self.start_slots,
            )
            if replica.pid is not None and replica.started_nice != self.nice:
                restore(replica.pid, self.nice)  # ready: it serves as an equal
            if fn.quota is not None and replica.pid is not None:
                fn.quota.add(replica.pid)  # loaded unthrottled, served within the quota
        except ReplicaStartError as exc:
            if not replica.stopping:
                fn.ledger.failed_starts += 1
                replica.state = ReplicaState.FAILED
                self.events.emit(
                    fn.config.name, "start_failed", replica=replica.name, detail=str(exc)
                )
                logger.warning("%s", exc)
            await replica.terminate(1.0)
            self.close(fn, replica, self.clock.now())
            if not self.stopping:
                self.tick(fn, self.clock.now())
            return
        except Exception:
            if not self.stopping:
                raise
            # the platform is going away: a readiness probe whose client or socket was torn
            # down under it (httpx and anyio raise what they raise then) is not a failed start
            await replica.terminate(1.0)
            self.close(fn, replica, self.clock.now())
            return
        now = self.clock.now()
        if replica.stopping:  # scaled down while it was starting
            await replica.terminate(1.0)
            self.close(fn, replica, now)
            return
        replica.state = ReplicaState.READY
        replica.ready_at = now
        cold_s = now - replica.created_at
        fn.ledger.cold_starts.append(cold_s)
        self.events.emit(fn.config.name, "cold_start", replica=replica.name, duration_s=cold_s)
        fn.activator.add(replica)
        assert replica.process is not None
        code = await replica.process.wait()
        if replica.stopping:
            return
        fn.activator.remove(replica)
        replica.state = ReplicaState.FAILED
        fn.ledger.deaths += 1
        self.events.emit(
            fn.config.name,
            "replica_died",
            replica=replica.name,
            detail=f"exit code {code}; {replica.log_tail(3)}",
        )
        await replica.terminate(1.0)
        self.close(fn, replica, self.clock.now())
        self.tick(fn, self.clock.now())

    async def _drain(self, fn: FunctionRuntime, replica: Replica) -> None:
        was_starting = replica.state is ReplicaState.STARTING
        replica.state = ReplicaState.DRAINING
        fn.activator.remove(replica)
        if was_starting:
            replica.stopping = True  # start() notices and gives up; _run_replica closes it
            return
        deadline = self.clock.now() + self.settings.drain_timeout_s
        while replica.in_flight > 0 and self.clock.now() < deadline:
            await asyncio.sleep(0.02)
        await replica.terminate(5.0)
        self.close(fn, replica, self.clock.now())
        self.events.emit(fn.config.name, "stopped", replica=replica.name)

    def close(self, fn: FunctionRuntime, replica: Replica, now: float) -> None:
        if fn.replicas.pop(replica.name, None) is None:
            return
        replica.stopped_at = now
        if replica.state is not ReplicaState.FAILED:
            replica.state = ReplicaState.STOPPED
        fn.ledger.closed_replica_s += now - replica.created_at
