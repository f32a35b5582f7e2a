"""The local platform's request path: a predict request waits in its function's activator for
a free replica slot (waking the function from zero at once), goes to that replica over a pooled
keep-alive connection, and comes back with the platform's own headers (how long it waited,
whether it arrived cold, which replica answered)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from functions.headers import ARRIVED_COLD, FUNCTION_ANSWER, PASSED_ON, PLATFORM_WAIT_MS, REPLICA
from knative.errors import PlatformError
from knative.local.activator import BufferFull, WaitTimeout
from knative.local.fleet import Fleet, FunctionRuntime
from knative.local.replica import Replica, ReplicaState
from slackwise_core.clock import Clock
from slackwise_core.http1 import Http1ConnectionError, Http1Timeout

__all__ = ["Forwarded", "PlatformStopping", "Router"]


class PlatformStopping(PlatformError):
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


class Router:
    """Forwards predict requests to the fleet's replicas."""

    def __init__(self, fleet: Fleet, clock: Clock, request_timeout_s: float) -> None:
        self.fleet = fleet
        self.clock = clock
        self.request_timeout_s = request_timeout_s

    async def forward(
        self,
        name: str,
        body: bytes,
        content_type: str,
        headers: Mapping[str, str] | None = None,
    ) -> Forwarded:
        """Send one predict request to a replica of ``name``, buffering while none is free.

        ``headers`` are passed on to the replica as they are (the gateway passes the frontend
        gossip headers, :data:`functions.headers.FRONTEND_ID` and its window)."""
        fn = self.fleet.functions.get(name)
        if fn is None:
            return _error(404, f"no function named {name!r}")
        if self.fleet.stopping:
            return _error(503, "the platform is shutting down")
        arrived = self.clock.now()
        cold = fn.count(ReplicaState.READY) == 0
        fn.meter.arrive(arrived)
        fn.ledger.requests += 1
        try:
            if fn.desired == 0:
                # the activator's poke: scale from zero without waiting for the next tick
                fn.kpa.record(arrived, float(fn.meter.in_flight))
                self.fleet.tick(fn, arrived)
            try:
                replica = await fn.activator.acquire(self.request_timeout_s)
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
        fn: FunctionRuntime,
        replica: Replica,
        body: bytes,
        content_type: str,
        waited_ms: float,
        extra: Mapping[str, str] | None = None,
    ) -> Forwarded:
        headers = {h: v for h, v in (extra or {}).items() if h.lower() in PASSED_ON}
        headers["content-type"] = content_type
        if replica.token:
            headers["authorization"] = f"Bearer {replica.token}"
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
