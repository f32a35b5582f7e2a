"""The local platform: Knative Serving's behaviour for functions on this one machine.

Each function gets real replica processes (``knative.local.replica``), an activator that buffers and
enforces ``containerConcurrency`` (``knative.local.activator``), a concurrency meter sampled every
second, and a KPA (``knative.kpa``) ticked every ``tick-interval`` that decides the replica count.
A gateway (``knative.local.gateway``) exposes the functions over HTTP on one loopback port, plus an
admin API with the same operations this class offers in process: replica counts, pinning the
minimum scale (like patching a Revision's ``min-scale``), events and the cost ledger.

This class is the facade: the request path is :class:`knative.local.router.Router`, the replicas
and their KPAs :class:`knative.local.fleet.Fleet`, the events
:class:`knative.local.events.EventLog`.
"""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import httpx

from knative.errors import PlatformError
from knative.local.events import EventLog, PlatformEvent, ReplicaCounts
from knative.local.fleet import Fleet, FunctionRuntime
from knative.local.guard import new_token
from knative.local.replica import ReplicaState
from knative.local.router import Forwarded, PlatformStopping, Router
from slackwise_config import Config
from slackwise_core.clock import Clock, MonotonicClock
from slackwise_core.knative_scaling import require_kpa

__all__ = ["Forwarded", "LocalPlatform", "PlatformStopping", "UnknownFunction"]


class UnknownFunction(PlatformError, KeyError):
    """No function of that name on this platform."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name

    def __str__(self) -> str:
        return f"no function named {self.name!r}"


class LocalPlatform:
    """Runs the configured functions; use ``async with LocalPlatform(config) as platform``."""

    def __init__(
        self,
        config: Config,
        *,
        clock: Clock | None = None,
        log_dir: Path | None = None,
        serve_http: bool = True,
    ) -> None:
        for fn in config.functions.values():  # it emulates the KPA, not what needs a cluster
            require_kpa(fn.scaling, f"functions.{fn.name}.annotations")
        self.config = config
        self.clock: Clock = clock or MonotonicClock()
        self._log_dir = log_dir
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self._serve_http = serve_http
        self._events = EventLog(self.clock)
        self._fleet = Fleet(config.platform, self.clock, self._events)
        self._router = Router(self._fleet, self.clock, config.platform.request_timeout_s)
        self._loop_task: asyncio.Task[None] | None = None
        self._server: Any = None
        self._server_task: asyncio.Task[None] | None = None
        self.port: int | None = None
        #: the gateway's bearer token (knative.local.guard): SLACKWISE_PLATFORM_TOKEN or fresh
        self.token = new_token()

    def auth_headers(self) -> dict[str, str]:
        """What a client of the gateway sends to be let in."""
        return {"authorization": f"Bearer {self.token}"}

    # -- lifecycle -------------------------------------------------------------------------

    async def __aenter__(self) -> LocalPlatform:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    async def start(self) -> None:
        if self._log_dir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="slackwise-platform-")
            self._log_dir = Path(self._tmp.name)
        self._log_dir.mkdir(parents=True, exist_ok=True)
        fleet = self._fleet
        fleet.log_dir = self._log_dir
        fleet.client = httpx.AsyncClient(
            trust_env=False,
            limits=httpx.Limits(max_connections=1000, max_keepalive_connections=200),
        )
        # the gateway's port first: the replicas that adding a function starts listen on ports
        # the kernel picks, and one of them could take a configured port in that range
        if self._serve_http:
            await self._start_gateway()
        now = self.clock.now()
        for fn_config in self.config.functions.values():
            if fn_config.upstream.url is None:  # a fixed endpoint is served elsewhere
                fleet.add(fn_config, now)
        self._loop_task = asyncio.create_task(fleet.autoscale_loop(), name="autoscale")

    async def _start_gateway(self) -> None:
        from functions.limits import RequestLimits
        from functions.runtime import MAX_BODY_BYTES
        from knative.local.gateway import create_gateway, serve_in_loop
        from knative.local.guard import Guard

        limited = RequestLimits(create_gateway(self), max_body_bytes=MAX_BODY_BYTES)
        app = Guard(limited, self.token, hosts=[self.config.platform.host])
        platform = self.config.platform
        self._server, self._server_task, self.port = await serve_in_loop(
            app, platform.host, platform.port
        )

    async def stop(self) -> None:
        """Stop the autoscaler, answer buffered requests, terminate every replica."""
        fleet = self._fleet
        if fleet.stopping:
            return
        fleet.stopping = True
        if self._loop_task is not None:
            self._loop_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._loop_task
        functions = fleet.functions.values()
        for fn in functions:
            fn.activator.fail_waiters(PlatformStopping("the platform is shutting down"))
        replicas = [r for fn in functions for r in fn.replicas.values()]
        grace = self.config.platform.drain_timeout_s
        await asyncio.gather(*(r.terminate(min(grace, 5.0)) for r in replicas))
        tasks = [t for fn in functions for t in fn.tasks]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        now = self.clock.now()
        for fn in functions:
            for replica in list(fn.replicas.values()):
                fleet.close(fn, replica, now)
        if self._server is not None:
            self._server.should_exit = True
            assert self._server_task is not None
            await self._server_task
        if fleet.client is not None:
            await fleet.client.aclose()
        for fn in functions:
            if fn.quota is not None:
                fn.quota.remove()
        self.close_logs()

    def close_logs(self) -> None:
        """Remove the replica logs of a platform that made its own log directory."""
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    # -- what users of the platform see ----------------------------------------------------

    @property
    def functions(self) -> list[str]:
        return list(self._fleet.functions)

    def _fn(self, name: str) -> FunctionRuntime:
        try:
            return self._fleet.functions[name]
        except KeyError:
            raise UnknownFunction(name) from None

    def url(self, name: str) -> str:
        """The base URL that serves ``name`` (append ``/v1/models/{name}:predict``)."""
        self._fn(name)
        if self.port is None:
            raise RuntimeError("the gateway is not serving (serve_http=False)")
        return f"http://{self.config.platform.host}:{self.port}"

    def replicas(self, name: str) -> ReplicaCounts:
        fn = self._fn(name)
        ready = starting = draining = 0
        for replica in fn.replicas.values():  # one pass: the adapter asks on every step
            state = replica.state
            if state is ReplicaState.READY:
                ready += 1
            elif state is ReplicaState.STARTING:
                starting += 1
            elif state is ReplicaState.DRAINING:
                draining += 1
        return ReplicaCounts(
            ready=ready,
            starting=starting,
            draining=draining,
            desired=fn.desired,
            min_scale=fn.config.scaling.min_scale if fn.pinned_min is None else fn.pinned_min,
        )

    def replica_pids(self, name: str, *, ready: bool = False) -> dict[str, int]:
        """The processes of ``name``'s replicas by replica name (``ready``: only those serving,
        not those still starting)."""
        fn = self._fn(name)
        return {
            r.name: r.pid
            for r in fn.replicas.values()
            if r.pid is not None and (not ready or r.state is ReplicaState.READY)
        }

    async def set_min_scale(self, name: str, replicas: int | None) -> None:
        """Pin the minimum replicas (None returns to the configured min-scale)."""
        fn = self._fn(name)
        if replicas is not None:
            if replicas < 0:
                raise ValueError(f"min-scale must be non-negative, got {replicas}")
            max_scale = fn.config.scaling.max_scale
            if max_scale > 0 and replicas > max_scale:
                raise ValueError(f"min-scale {replicas} exceeds {name}'s max-scale {max_scale}")
        fn.pinned_min = replicas
        self._fleet.tick(fn, self.clock.now())

    async def set_scale(
        self,
        name: str,
        replicas: int | None,
        *,
        owner: str = "",
        lease_s: float | None = None,
    ) -> None:
        """Own ``name``'s replica count: ``replicas`` from now on, the KPA only measuring (a
        request arriving at zero still wakes one replica). Several owners (adapters, by their
        frontend id) may each hold a share: the function runs the largest, and a share whose
        ``lease_s`` runs out without being renewed is dropped, so an owner that dies stops
        counting. None withdraws ``owner``'s share; with none left the KPA decides again."""
        fn = self._fn(name)
        now = self.clock.now()
        if replicas is None:
            fn.owners.pop(owner, None)
        else:
            if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 0:
                raise ValueError(f"scale must be a non-negative integer, got {replicas!r}")
            max_scale = fn.config.scaling.max_scale
            if max_scale > 0 and replicas > max_scale:
                raise ValueError(f"scale {replicas} exceeds {name}'s max-scale {max_scale}")
            if lease_s is not None and not lease_s > 0:
                raise ValueError(f"lease_s must be positive, got {lease_s!r}")
            until = float("inf") if lease_s is None else now + lease_s
            fn.owners[owner] = (replicas, until)
        self._fleet.tick(fn, now)

    def set_cores(self, name: str, cores: float | None) -> None:
        """The CPU cores ``name``'s replicas share from now on, enforced by a cgroup quota
        (``knative.local.cpu_quota``; CPU affinity where no cgroup can be made); None lifts it."""
        if cores is not None and not (isinstance(cores, int | float) and 0 < cores < 1e6):
            raise ValueError(f"cores must be a positive number or null, got {cores!r}")
        fn = self._fn(name)
        if fn.quota is None:
            if cores is None:
                return
            import os

            from knative.local.cpu_quota import quota_for

            period_us = round(self.config.platform.cpu_period_ms * 1000)
            fn.quota = quota_for(f"{name}-{os.getpid()}", period_us=period_us)
            for replica in fn.replicas.values():
                if replica.pid is not None and replica.state == ReplicaState.READY:
                    fn.quota.add(replica.pid)
        fn.quota.set_cores(None if cores is None else float(cores))

    def cores(self, name: str) -> float | None:
        """The cores set for ``name`` (None: no quota)."""
        quota = self._fn(name).quota
        return None if quota is None else quota.cores

    def owners(self, name: str) -> dict[str, int]:
        """The live shares of ``name``'s count, by owner (empty: the KPA decides)."""
        fn = self._fn(name)
        fn.owned(self.clock.now())  # drops the lapsed ones
        return {owner: count for owner, (count, _) in fn.owners.items()}

    def events(self, since: int = 0, function: str | None = None) -> list[PlatformEvent]:
        """Events with ``seq`` greater than ``since``."""
        return self._events.since(since, function)

    async def wait_event(
        self, kind: str, function: str | None = None, *, since: int = 0, timeout_s: float = 60.0
    ) -> PlatformEvent:
        """The first event of ``kind`` after ``since``; raises TimeoutError."""
        return await self._events.wait(kind, function, since=since, timeout_s=timeout_s)

    def on_event(self, hook: Callable[[PlatformEvent], None]) -> None:
        self._events.on_event(hook)

    def usage(self, name: str) -> dict[str, float | int]:
        """Replica-seconds, cold starts (count, mean, max), failures, requests, errors."""
        fn = self._fn(name)
        now = self.clock.now()
        open_s = sum(now - r.created_at for r in fn.replicas.values())
        return fn.ledger.summary(open_s)

    # -- the request path ------------------------------------------------------------------

    async def forward(
        self,
        name: str,
        body: bytes,
        content_type: str,
        headers: Mapping[str, str] | None = None,
    ) -> Forwarded:
        """One predict request to a replica of ``name`` (:meth:`Router.forward`)."""
        return await self._router.forward(name, body, content_type, headers)
