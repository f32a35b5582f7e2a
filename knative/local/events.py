"""What the platform tells its users: replica counts, events (and their log), and the cost
ledger."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from slackwise_core.clock import Clock


@dataclass(frozen=True)
class ReplicaCounts:
    """A function's replicas right now."""

    ready: int
    starting: int
    draining: int
    desired: int
    min_scale: int


@dataclass(frozen=True)
class PlatformEvent:
    """Something that happened to a function's replicas.

    ``kind`` is one of ``cold_start`` (a replica became ready; ``duration_s`` is the cold start),
    ``start_failed``, ``replica_died``, ``scale`` (desired count changed; ``value`` is the new
    count) and ``stopped``. ``time`` is the platform clock, ``wall`` epoch seconds.
    """

    seq: int
    time: float
    wall: float
    function: str
    kind: str
    replica: str = ""
    value: float = 0.0
    duration_s: float = 0.0
    detail: str = ""


@dataclass
class Ledger:
    """Cost and cold-start accounting for one function (MLProxy's cost: containers × time)."""

    closed_replica_s: float = 0.0
    cold_starts: list[float] = field(default_factory=list)
    failed_starts: int = 0
    deaths: int = 0
    requests: int = 0
    errors: int = 0

    def summary(self, open_replica_s: float) -> dict[str, float | int]:
        starts = sorted(self.cold_starts)
        return {
            "replica_seconds": round(self.closed_replica_s + open_replica_s, 3),
            "cold_starts": len(starts),
            "cold_start_mean_s": round(sum(starts) / len(starts), 3) if starts else 0.0,
            "cold_start_max_s": round(starts[-1], 3) if starts else 0.0,
            "failed_starts": self.failed_starts,
            "replica_deaths": self.deaths,
            "requests": self.requests,
            "errors": self.errors,
        }


class EventLog:
    """The platform's events in order, with hooks and a way to wait for one."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.events: list[PlatformEvent] = []
        self._signal = asyncio.Event()
        self._hooks: list[Callable[[PlatformEvent], None]] = []

    def on_event(self, hook: Callable[[PlatformEvent], None]) -> None:
        self._hooks.append(hook)

    def since(self, since: int = 0, function: str | None = None) -> list[PlatformEvent]:
        """Events with ``seq`` greater than ``since``."""
        return [
            e for e in self.events if e.seq > since and (function is None or e.function == function)
        ]

    async def wait(
        self, kind: str, function: str | None = None, *, since: int = 0, timeout_s: float = 60.0
    ) -> PlatformEvent:
        """The first event of ``kind`` after ``since``; raises TimeoutError."""
        async with asyncio.timeout(timeout_s):
            while True:
                for event in self.since(since, function):
                    if event.kind == kind:
                        return event
                self._signal.clear()
                await self._signal.wait()

    def emit(
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
            seq=len(self.events) + 1,
            time=self.clock.now(),
            wall=time.time(),
            function=function,
            kind=kind,
            replica=replica,
            value=value,
            duration_s=duration_s,
            detail=detail,
        )
        self.events.append(event)
        self._signal.set()
        for hook in self._hooks:
            hook(event)
