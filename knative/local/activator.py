"""Routing requests to replicas with ``containerConcurrency`` as a hard limit, and buffering.

One :class:`Activator` per function plays both Knative parts that hold requests: the activator
(buffering while no replica is ready, scale-from-zero) and the queue-proxy (at most
``containerConcurrency`` requests in a replica at once; 0 means unlimited). Waiters are served
first come, first served; the buffer is bounded and a wait has a timeout, each answered with a
clear error the gateway maps to 503.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Generic, Protocol, TypeVar

from knative.errors import PlatformError


class BufferFull(PlatformError):
    """The activator's buffer for this function is full."""

    def __init__(self, function: str, depth: int) -> None:
        super().__init__(f"{function}: activator buffer full ({depth} requests waiting)")
        self.function = function
        self.depth = depth


class WaitTimeout(PlatformError):
    """No replica slot came free within the request timeout."""

    def __init__(self, function: str, timeout_s: float) -> None:
        super().__init__(f"{function}: no replica could take the request within {timeout_s:g} s")
        self.function = function
        self.timeout_s = timeout_s


class Slot(Protocol):
    """What the activator needs of a replica."""

    in_flight: int

    @property
    def name(self) -> str: ...


R = TypeVar("R", bound=Slot)


class Activator(Generic[R]):
    """Hands out replica slots; buffers the rest in FIFO order."""

    def __init__(self, function: str, *, container_concurrency: int, queue_depth: int) -> None:
        self.function = function
        self.container_concurrency = container_concurrency
        self.queue_depth = queue_depth
        self._replicas: list[R] = []
        self._waiters: deque[asyncio.Future[R]] = deque()

    @property
    def waiting(self) -> int:
        return sum(1 for w in self._waiters if not w.done())

    @property
    def replicas(self) -> list[R]:
        return list(self._replicas)

    def _has_room(self, replica: R) -> bool:
        cc = self.container_concurrency
        return cc == 0 or replica.in_flight < cc

    def _pick(self) -> R | None:
        """Pack, don't spread: the oldest replica with a free slot. The work lands on as few
        replicas as it needs, so the spare ones stay idle, visibly, and are the ones a smaller
        count lets go (the fleet drains the least busy first)."""
        for replica in self._replicas:
            if self._has_room(replica):
                return replica
        return None

    def add(self, replica: R) -> None:
        """A replica became ready: it takes traffic from now on."""
        if replica not in self._replicas:
            self._replicas.append(replica)
        self._dispatch()

    def remove(self, replica: R) -> None:
        """A replica stops taking new requests (draining, dead)."""
        if replica in self._replicas:
            self._replicas.remove(replica)

    def _dispatch(self) -> None:
        while self._waiters:
            head = self._waiters[0]
            if head.done():
                self._waiters.popleft()
                continue
            replica = self._pick()
            if replica is None:
                return
            self._waiters.popleft()
            replica.in_flight += 1
            head.set_result(replica)

    async def acquire(self, timeout_s: float) -> R:
        """A replica with a free slot (its ``in_flight`` already counted)."""
        if not any(not w.done() for w in self._waiters):
            replica = self._pick()
            if replica is not None:
                replica.in_flight += 1
                return replica
        if self.waiting >= self.queue_depth:
            raise BufferFull(self.function, self.queue_depth)
        waiter: asyncio.Future[R] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            return await asyncio.wait_for(asyncio.shield(waiter), timeout_s)
        except TimeoutError:
            if waiter.done() and not waiter.cancelled():
                self.release(waiter.result())
            waiter.cancel()
            raise WaitTimeout(self.function, timeout_s) from None
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self.release(waiter.result())
            waiter.cancel()
            raise

    def release(self, replica: R) -> None:
        """The request on ``replica`` finished; its slot goes to the next waiter."""
        replica.in_flight -= 1
        self._dispatch()

    def fail_waiters(self, exc: Exception) -> None:
        """Answer every buffered request with ``exc`` (shutdown)."""
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_exception(exc)
