"""How late the server's event loop runs: the adapter's own overload, as evidence.

A request that waits in the kernel's accept queue, or in the loop's backlog of callbacks, has
not reached any queue the adapter can see, so the latency model and the queue length miss it;
under a flood of connections it is most of a request's wait. A timer that asks to wake every
``period_s`` and measures how late it actually woke sees exactly that delay. :meth:`lag_s` is the
smallest lateness of the last few wake-ups: it is high only while the loop is late at every one
of them (sustained overload, not one slow callback or a collection pause), and it clears as
soon as one wake-up is on time.

:meth:`LoopLag.stalled_s` answers the other question, the longest the loop was away since a
given moment (the wake-ups since then, and the one overdue now): a batch whose answer waited out
such a stall measured the adapter, not the function (see
:mod:`adapter.serving.batch_sender`).
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import deque
from typing import Protocol

from adapter.serving.background import cancel_and_wait

__all__ = ["NO_LAG", "LoopLag", "LoopLagReader"]


class LoopLagReader(Protocol):
    def lag_s(self) -> float: ...

    def recent_s(self) -> float: ...

    def stalled_s(self, since: float) -> float: ...


class _NoLag:
    def lag_s(self) -> float:
        return 0.0

    def recent_s(self) -> float:
        return 0.0

    def stalled_s(self, since: float) -> float:
        return 0.0


#: for dispatchers run without a server loop to watch (tests, the simulator's parity runs)
NO_LAG: LoopLagReader = _NoLag()


class LoopLag:
    """Samples the running loop's lateness every ``period_s``; keeps the last ``window``."""

    def __init__(self, *, period_s: float = 0.02, window: int = 5) -> None:
        self.period_s = period_s
        self._late: deque[float] = deque([0.0], maxlen=window)
        #: (woke at, how late) of the wake-ups of about the last second, for :meth:`stalled_s`
        self._wakes: deque[tuple[float, float]] = deque(maxlen=max(window, round(1.0 / period_s)))
        #: when the pending wake-up is due (inf while none is pending)
        self._due = math.inf
        self._task: asyncio.Task[None] | None = None

    def lag_s(self) -> float:
        return min(self._late)

    def recent_s(self) -> float:
        """The mean lateness of the last wake-ups: about how long a request that is read now
        sat unread (in the kernel's buffers, behind the loop's turn or a core it shares)."""
        return sum(self._late) / len(self._late)

    def stalled_s(self, since: float) -> float:
        """The longest the loop was late at one wake-up since ``since`` (``time.monotonic``
        seconds), the wake-up overdue now included: how long the loop was away from its sockets
        at a stretch."""
        worst = max(0.0, time.monotonic() - self._due)
        for woke, late in reversed(self._wakes):
            if woke < since:
                break
            worst = max(worst, late)
        return worst

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="loop-lag")

    async def stop(self) -> None:
        await cancel_and_wait(self._task)

    async def _run(self) -> None:
        try:
            while True:
                self._due = time.monotonic() + self.period_s
                await asyncio.sleep(self.period_s)
                woke = time.monotonic()
                late = max(0.0, woke - self._due)
                self._late.append(late)
                self._wakes.append((woke, late))
        finally:
            self._due = math.inf
