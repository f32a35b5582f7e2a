"""A function's door: what the adapter refuses before a request joins the queue, and how.

Stopping (503), a full queue (503), and, under ``late: predict`` (slackwise mode's default),
a request the queue ahead or the adapter's own delay would make late
(:mod:`slackwise_policies.admission`: 429, or 503 while no replica is ready). Every refusal
carries ``Retry-After``; every refusal is counted (``slackwise_refused``). The check runs before
a predict's body is parsed, so a refusal under overload costs next to nothing.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

from adapter.serving.errors import AdapterError, Overloaded, ShuttingDown, refusal_error
from adapter.serving.loop_lag import NO_LAG, LoopLagReader
from slackwise_policies.admission import DoorRefusal, holds_until

if TYPE_CHECKING:
    from prometheus_client import Counter

    from adapter.serving.pending import Pending
    from slackwise_policies.controller import Controller

__all__ = ["Door"]


class Door:
    """The door of function ``name`` (see the module docstring)."""

    def __init__(
        self,
        name: str,
        controller: Controller[Pending],
        ready: Callable[[], int],
        *,
        max_queue: int,
        refused_metric: Counter,
        lag: LoopLagReader | None = None,
    ) -> None:
        self.name = name
        self.controller = controller
        self.ready = ready
        self.max_queue = max_queue
        self.lag: LoopLagReader = lag or NO_LAG
        self.closing = False
        #: Retry-After of the refusals while the adapter drains on its way out
        self.retry_after_closing_s = 5.0
        #: requests admitted (a chain's at its first stage) and refused, in all
        self.admitted = 0
        self.refused = 0
        self._metric = refused_metric
        #: the last refusal, while it still answers the requests after it (:meth:`held`)
        self._held: AdapterError | None = None
        self._held_until = -math.inf

    def check(self, now: float, due: float, size: int = 1, *, hold: bool = False) -> None:
        """Raise what a request of ``size`` instances due at ``due`` would be refused with now
        (nothing is queued or recorded). ``hold``: the request asked for the function's own
        SLO, so its refusal may answer the next requests too (:meth:`held`)."""
        self.check_open()
        refusal = self.controller.door(now, due, size, self.ready(), self.lag.lag_s())
        if refusal is not None:
            error = self._refuse(refusal)
            if hold and size == 1:
                self._held, self._held_until = error, holds_until(now, refusal)
            raise error

    def holding(self, now: float) -> bool:
        """Does a refusal hold at ``now`` (nothing counted)?"""
        return now < self._held_until and not self.closing

    def held(self, now: float) -> AdapterError | None:
        """The refusal that still answers a request arriving at ``now``
        (:func:`slackwise_policies.admission.holds_until`), counted as one more; None when the
        rule must be asked. The adapter's server answers it before parsing anything, so under
        overload a refusal costs a read and a write."""
        if now >= self._held_until or self.closing:
            return None
        self.refused += 1
        self._metric.inc()
        return self._held

    def check_open(self) -> None:
        """Raise ShuttingDown or Overloaded (full queue) if the door is closed to anyone."""
        if self.closing:
            raise ShuttingDown(
                f"{self.name}: the adapter is shutting down",
                retry_after_s=self.retry_after_closing_s,
            )
        if len(self.controller.queue) >= self.max_queue:
            raise Overloaded(
                f"{self.name}: queue full ({self.max_queue} requests waiting)", retry_after_s=1.0
            )

    def admit(self, item: Pending, ready: int) -> None:
        """Queue ``item`` through the controller, or raise its refusal. A later stage of a
        chain is never refused: the work of the stages before it would be lost."""
        lag = self.lag.lag_s() if item.stage == 0 else None
        refusal = self.controller.admit(item, item.arrival, ready, lag, item.after_s)
        if refusal is not None:
            raise self._refuse(refusal)
        if item.stage == 0:
            self.admitted += 1

    def counted(self, error: AdapterError) -> AdapterError:
        """``error``, a refusal decided outside this door on its behalf (a chain's crowd at its
        first stage), counted like the door's own."""
        self.refused += 1
        self._metric.inc()
        return error

    def _refuse(self, refusal: DoorRefusal) -> AdapterError:
        return self.counted(refusal_error(self.name, refusal))
