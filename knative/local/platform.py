"""The local platform: Knative Serving's behaviour for functions on this one machine.

Each function gets real replica processes (``knative.local.replica``), an activator that buffers and
enforces ``containerConcurrency`` (``knative.local.activator``), a concurrency meter sampled every
second, and a KPA (``knative.kpa``) ticked every ``tick-interval`` that decides the replica count.
A gateway (``knative.local.gateway``) exposes the functions over HTTP on one loopback port, plus an
admin API with the same operations this class offers in process: replica counts, pinning the
minimum scale (like patching a Revision's ``min-scale``), events and the cost ledger.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from core.clock import Clock, MonotonicClock
from core.config import Config, FunctionConfig
from functions.headers import ARRIVED_COLD, FUNCTION_ANSWER, PASSED_ON, PLATFORM_WAIT_MS, REPLICA
from knative.http1 import Http1ConnectionError, Http1Timeout
from knative.kpa import KPA
from knative.local.activator import Activator, BufferFull, WaitTimeout
from knative.local.events import Ledger, PlatformEvent, ReplicaCounts
from knative.local.replica import Replica, ReplicaStartError, ReplicaState
from knative.meter import ConcurrencyMeter

logger = logging.getLogger(__name__)


class UnknownFunction(KeyError):
    """No function of that name on this platform."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name

    def __str__(self) -> str:
        return f"no function named {self.name!r}"


class PlatformStopping(Exception):
    """The platform is shutting down; buffered requests are answered with this."""


@dataclass(frozen=True)
class Forwarded:
    """A function's answer as the platform relays it."""

    status: int
    body: bytes
    headers: dict[str, str]


def _error(status: int, reason: str) -> Forwarded:
    body = json.dumps({"error": reason}).encode()
    return Forwarded(status, body, {"content-type": "application/json"})


class _Function:
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
        self.ledger = Ledger()
        self.next_index = 1
        self.path = f"/v1/models/{config.name}:predict"

    def count(self, *states: ReplicaState) -> int:
        return sum(1 for r in self.replicas.values() if r.state in states)


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
        self.config = config
        self.clock: Clock = clock or MonotonicClock()
        self._log_dir = log_dir
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self._serve_http = serve_http
        self._functions: dict[str, _Function] = {}
        self._events: list[PlatformEvent] = []
        self._event_signal = asyncio.Event()
        self._client: httpx.AsyncClient | None = None
        self._loop_task: asyncio.Task[None] | None = None
        self._server: Any = None
        self._server_task: asyncio.Task[None] | None = None
        self.port: int | None = None
        self._stopping = False
        self._event_hooks: list[Callable[[PlatformEvent], None]] = []

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
        self._client = httpx.AsyncClient(
            trust_env=False,
            limits=httpx.Limits(max_connections=1000, max_keepalive_connections=200),
        )
        now = self.clock.now()
        for name, fn_config in self.config.functions.items():
            fn = _Function(fn_config, self.config.platform.queue_depth, now)
            self._functions[name] = fn
            self._tick(fn, now)
        if self._serve_http:
            await self._start_gateway()
        self._loop_task = asyncio.create_task(self._autoscale_loop(), name="autoscale")

    async def _start_gateway(self) -> None:
        from knative.local.gateway import create_gateway, serve_in_loop

        app = create_gateway(self)
        platform = self.config.platform
        self._server, self._server_task, self.port = await serve_in_loop(
            app, platform.host, platform.port
        )

    async def stop(self) -> None:
        """Stop the autoscaler, answer buffered requests, terminate every replica."""
        if self._stopping:
            return
        self._stopping = True
        if self._loop_task is not None:
            self._loop_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._loop_task
        for fn in self._functions.values():
            fn.activator.fail_waiters(PlatformStopping("the platform is shutting down"))
        replicas = [r for fn in self._functions.values() for r in fn.replicas.values()]
        grace = self.config.platform.drain_timeout_s
        await asyncio.gather(*(r.terminate(min(grace, 5.0)) for r in replicas))
        tasks = [t for fn in self._functions.values() for t in fn.tasks]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        now = self.clock.now()
        for fn in self._functions.values():
            for replica in list(fn.replicas.values()):
                self._close(fn, replica, now)
        if self._server is not None:
            self._server.should_exit = True
            assert self._server_task is not None
            await self._server_task
        if self._client is not None:
            await self._client.aclose()
        self.close_logs()

    def close_logs(self) -> None:
        """Remove the replica logs of a platform that made its own log directory."""
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    # -- what users of the platform see ----------------------------------------------------

    @property
    def functions(self) -> list[str]:
        return list(self._functions)

    def _fn(self, name: str) -> _Function:
        try:
            return self._functions[name]
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

    def replica_pids(self, name: str) -> dict[str, int]:
        fn = self._fn(name)
        return {r.name: r.pid for r in fn.replicas.values() if r.pid is not None}

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
        self._tick(fn, self.clock.now())

    def events(self, since: int = 0, function: str | None = None) -> list[PlatformEvent]:
        """Events with ``seq`` greater than ``since``."""
        return [
            e
            for e in self._events
            if e.seq > since and (function is None or e.function == function)
        ]

    async def wait_event(
        self, kind: str, function: str | None = None, *, since: int = 0, timeout_s: float = 60.0
    ) -> PlatformEvent:
        """The first event of ``kind`` after ``since``; raises TimeoutError."""
        async with asyncio.timeout(timeout_s):
            while True:
                for event in self.events(since, function):
                    if event.kind == kind:
                        return event
                self._event_signal.clear()
                await self._event_signal.wait()

    def on_event(self, hook: Callable[[PlatformEvent], None]) -> None:
        self._event_hooks.append(hook)

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
        """Send one predict request to a replica of ``name``, buffering while none is free.

        ``headers`` are passed on to the replica as they are (the gateway passes the frontend
        gossip headers, :data:`functions.gossip.FRONTEND_ID` and its window)."""
        fn = self._functions.get(name)
        if fn is None:
            return _error(404, f"no function named {name!r}")
        if self._stopping:
            return _error(503, "the platform is shutting down")
        arrived = self.clock.now()
        cold = fn.count(ReplicaState.READY) == 0
        fn.meter.arrive(arrived)
        fn.ledger.requests += 1
        try:
            if fn.desired == 0:
                # the activator's poke: scale from zero without waiting for the next tick
                fn.kpa.record(arrived, float(fn.meter.in_flight))
                self._tick(fn, arrived)
            try:
                replica = await fn.activator.acquire(self.config.platform.request_timeout_s)
            except (BufferFull, WaitTimeout, PlatformStopping) as exc:
                fn.ledger.errors += 1
                return _error(503, str(exc))
            waited_ms = (self.clock.now() - arrived) * 1000.0
            try:
                answer = await self._send(fn, replica, body, content_type, waited_ms, headers)
            finally:
                fn.activator.release(replica)
            answer.headers[ARRIVED_COLD] = "1" if cold else "0"
            return answer
        finally:
            fn.meter.depart(self.clock.now())

    async def _send(
        self,
        fn: _Function,
        replica: Replica,
        body: bytes,
        content_type: str,
        waited_ms: float,
        extra: Mapping[str, str] | None = None,
    ) -> Forwarded:
        headers = {h: v for h, v in (extra or {}).items() if h.lower() in PASSED_ON}
        headers["content-type"] = content_type
        try:
            response = await replica.open_pool().post(
                fn.path, body, headers=headers, timeout_s=float(fn.config.timeout_s)
            )
        except Http1Timeout:
            fn.ledger.errors += 1
            return _error(504, f"{replica.name} did not answer within {fn.config.timeout_s} s")
        except Http1ConnectionError as exc:
            fn.ledger.errors += 1
            return _error(502, f"{replica.name} failed mid-request ({exc})")
        headers = {h: response.headers[h] for h in FUNCTION_ANSWER if h in response.headers}
        headers["content-type"] = response.headers.get("content-type", "application/json")
        headers[PLATFORM_WAIT_MS] = f"{waited_ms:.3f}"
        headers[REPLICA] = replica.name
        if response.status_code >= 500:
            fn.ledger.errors += 1
        return Forwarded(response.status_code, response.content, headers)

    # -- autoscaling -----------------------------------------------------------------------

    async def _autoscale_loop(self) -> None:
        tick_s = self.config.platform.autoscaler.tick_interval_s
        next_tick = self.clock.now() + tick_s
        while True:
            await self.clock.sleep(min(1.0, tick_s))
            now = self.clock.now()
            for fn in self._functions.values():
                sample = fn.meter.sample(now)
                value = sample.rps if fn.config.scaling.metric == "rps" else sample.concurrency
                fn.kpa.record(now, value)
            if now >= next_tick:
                next_tick = now + tick_s
                for fn in self._functions.values():
                    self._tick(fn, now)

    def _tick(self, fn: _Function, now: float) -> None:
        if self._stopping:
            return
        ready = fn.count(ReplicaState.READY)
        current = fn.count(ReplicaState.READY, ReplicaState.STARTING)
        decision = fn.kpa.decide(now, ready=ready, current=current, min_scale=fn.pinned_min)
        if decision.desired != fn.desired:
            self._emit(
                fn.config.name,
                "scale",
                value=decision.desired,
                detail=(
                    f"{fn.desired} -> {decision.desired} ({decision.reason}; "
                    f"stable {decision.stable_value:.2f}, panic {decision.panic_value:.2f})"
                ),
            )
            logger.info(
                "%s: scale %d -> %d (%s)", fn.config.name, fn.desired, decision.desired,
                decision.reason,
            )  # fmt: skip
        fn.desired = decision.desired
        self._reconcile(fn, now)

    def _reconcile(self, fn: _Function, now: float) -> None:
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

    def _track(self, fn: _Function, coro: Any) -> None:
        task: asyncio.Task[None] = asyncio.create_task(coro)
        fn.tasks.add(task)
        task.add_done_callback(fn.tasks.discard)

    def _spawn(self, fn: _Function, now: float) -> None:
        assert self._log_dir is not None
        replica = Replica(
            fn.config,
            fn.next_index,
            host=self.config.platform.host,
            log_dir=self._log_dir,
            created_at=now,
        )
        fn.next_index += 1
        fn.replicas[replica.name] = replica
        self._track(fn, self._run_replica(fn, replica))

    async def _run_replica(self, fn: _Function, replica: Replica) -> None:
        assert self._client is not None
        try:
            await replica.start(self._client, ready_timeout_s=self.config.platform.ready_timeout_s)
        except ReplicaStartError as exc:
            if not replica.stopping:
                fn.ledger.failed_starts += 1
                replica.state = ReplicaState.FAILED
                self._emit(fn.config.name, "start_failed", replica=replica.name, detail=str(exc))
                logger.warning("%s", exc)
            await replica.terminate(1.0)
            self._close(fn, replica, self.clock.now())
            if not self._stopping:
                self._tick(fn, self.clock.now())
            return
        now = self.clock.now()
        if replica.stopping:  # scaled down while it was starting
            await replica.terminate(1.0)
            self._close(fn, replica, now)
            return
        replica.state = ReplicaState.READY
        replica.ready_at = now
        cold_s = now - replica.created_at
        fn.ledger.cold_starts.append(cold_s)
        self._emit(fn.config.name, "cold_start", replica=replica.name, duration_s=cold_s)
        fn.activator.add(replica)
        assert replica.process is not None
        code = await replica.process.wait()
        if replica.stopping:
            return
        fn.activator.remove(replica)
        replica.state = ReplicaState.FAILED
        fn.ledger.deaths += 1
        self._emit(
            fn.config.name,
            "replica_died",
            replica=replica.name,
            detail=f"exit code {code}; {replica.log_tail(3)}",
        )
        await replica.terminate(1.0)
        self._close(fn, replica, self.clock.now())
        self._tick(fn, self.clock.now())

    async def _drain(self, fn: _Function, replica: Replica) -> None:
        was_starting = replica.state is ReplicaState.STARTING
        replica.state = ReplicaState.DRAINING
        fn.activator.remove(replica)
        if was_starting:
            replica.stopping = True  # start() notices and gives up; _run_replica closes it
            return
        deadline = self.clock.now() + self.config.platform.drain_timeout_s
        while replica.in_flight > 0 and self.clock.now() < deadline:
            await asyncio.sleep(0.02)
        await replica.terminate(5.0)
        self._close(fn, replica, self.clock.now())
        self._emit(fn.config.name, "stopped", replica=replica.name)

    def _close(self, fn: _Function, replica: Replica, now: float) -> None:
        if fn.replicas.pop(replica.name, None) is None:
            return
        replica.stopped_at = now
        if replica.state is not ReplicaState.FAILED:
            replica.state = ReplicaState.STOPPED
        fn.ledger.closed_replica_s += now - replica.created_at

    def _emit(
        self,
        function: str,
        kind: str,
        *,
        replica: str = "",
        value: float = 0.0,
        duration_s: float = 0.0,
        detail: str = "",
    ) -> None:
        event = PlatformEvent(
            seq=len(self._events) + 1,
            time=self.clock.now(),
            wall=time.time(),
            function=function,
            kind=kind,
            replica=replica,
            value=value,
            duration_s=duration_s,
            detail=detail,
        )
        self._events.append(event)
        self._event_signal.set()
        for hook in self._event_hooks:
            hook(event)
