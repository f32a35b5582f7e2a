"""Clocks: loops hold one of these and wait on it; policies take plain ``now`` floats (seconds).

* :class:`MonotonicClock`: the real one (``time.monotonic``; waits are asyncio timers).
* :class:`VirtualClock`: time that jumps. It comes with an event loop whose timers run on it: when
  nothing is ready to run, the loop moves the clock straight to its next timer instead of
  sleeping. Every ``asyncio.sleep``, ``wait_for`` and :meth:`Clock.wait` then costs no wall time,
  so behaviour that takes minutes (AIMD periods, dispatch timeouts, an advisor's ticks) is tested
  in milliseconds, with the very loops that run live. Sockets still work (the loop polls them
  without blocking before it jumps); threads are waited for in real time.
"""

from __future__ import annotations

import asyncio
import contextlib
import selectors
import time
from collections.abc import Callable, Coroutine
from concurrent.futures import Executor
from typing import Any, Protocol, TypeVar

__all__ = ["Clock", "MonotonicClock", "VirtualClock", "deadline_for", "wait_until"]

R = TypeVar("R")


def deadline_for(start_s: float, slo_ms: float) -> float:
    """When a request that started at ``start_s`` (seconds, on a clock) is due under an SLO of
    ``slo_ms`` milliseconds: the one place the project turns an SLO into a deadline."""
    return start_s + slo_ms / 1000.0


class Clock(Protocol):
    """Seconds on one monotonic scale, and ways to wait on that scale."""

    def now(self) -> float: ...

    async def sleep(self, seconds: float) -> None: ...

    async def wait(self, event: asyncio.Event, until: float | None) -> bool:
        """Until ``event`` is set (True) or the clock reads ``until`` (False; None: no limit)."""
        ...


async def wait_until(clock: Clock, event: asyncio.Event, until: float | None) -> bool:
    """:meth:`Clock.wait` for clocks whose ``now`` is the running loop's timer scale."""
    if event.is_set():
        return True
    if until is None:
        await event.wait()
        return True
    delay = until - clock.now()
    if delay <= 0:
        return False
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(event.wait(), delay)
        return True
    return False


class MonotonicClock:
    """The real clock: ``time.monotonic`` (the scale asyncio's own timers use)."""

    def now(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)

    async def wait(self, event: asyncio.Event, until: float | None) -> bool:
        return await wait_until(self, event, until)


class VirtualClock:
    """Time that only moves when every task is waiting (see the module docstring).

    ``now`` starts at ``start``. Run coroutines with :meth:`run` (or build loops with
    :meth:`new_loop`); ``asyncio.sleep(s)`` inside them returns after ``s`` virtual seconds.
    """

    def __init__(self, start: float = 0.0) -> None:
        self._now = start

    def now(self) -> float:
        return self._now

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)

    async def wait(self, event: asyncio.Event, until: float | None) -> bool:
        return await wait_until(self, event, until)

    def advance_to(self, when: float) -> None:
        """Move the clock forward to ``when`` (never back)."""
        self._now = max(self._now, when)

    def new_loop(self) -> asyncio.AbstractEventLoop:
        """An event loop whose timers run on this clock."""
        return _VirtualLoop(self)

    def run(self, main: Coroutine[Any, Any, R]) -> R:
        """Run ``main`` to completion on a fresh virtual-time loop."""
        with asyncio.Runner(loop_factory=self.new_loop) as runner:
            return runner.run(main)


class _VirtualSelector(selectors.DefaultSelector):
    """Polls the real descriptors without blocking; when nothing is ready and the loop would
    sleep until its next timer, moves the virtual clock there instead."""

    def __init__(self, clock: VirtualClock) -> None:
        super().__init__()
        self._clock = clock
        self.loop: asyncio.AbstractEventLoop | None = None

    def select(self, timeout: float | None = None) -> list[tuple[Any, int]]:
        ready: list[tuple[Any, int]] = super().select(0)
        if ready or timeout == 0:
            return ready
        busy = isinstance(self.loop, _VirtualLoop) and self.loop.in_threads > 0
        if timeout is None or busy:
            # no timer at all, or work in a thread: virtual time stands still while the thread
            # runs (in real time); its result, or a socket, wakes the loop
            woken: list[tuple[Any, int]] = super().select(None)
            return woken
        target = self._clock.now() + timeout
        # land on the timer exactly, not a rounding error either side of it
        timers = getattr(self.loop, "_scheduled", None)
        if timers and abs(timers[0].when() - target) < 1e-6:
            target = timers[0].when()
        self._clock.advance_to(target)
        return []


class _VirtualLoop(asyncio.SelectorEventLoop):
    def __init__(self, clock: VirtualClock) -> None:
        self._virtual = clock
        #: calls running in the executor (``asyncio.to_thread``): the clock waits for them
        self.in_threads = 0
        selector = _VirtualSelector(clock)
        super().__init__(selector)
        selector.loop = self

    def run_in_executor(  # type: ignore[override]
        self, executor: Executor | None, func: Callable[..., R], *args: Any
    ) -> asyncio.Future[R]:
        future = super().run_in_executor(executor, func, *args)
        self.in_threads += 1
        future.add_done_callback(self._thread_done)
        return future

    def _thread_done(self, _: asyncio.Future[Any]) -> None:
        self.in_threads -= 1

    def time(self) -> float:
        return self._virtual.now()
