"""A function's queue of admitted requests, ordered by deadline or by arrival.

A :class:`Pending` is the record of one admitted request: its instances, its times, and the
future its HTTP handler waits on. The queue keeps only requests still waiting; cancelled ones (the
client went away) are dropped lazily when the dispatcher looks.
"""

from __future__ import annotations

import asyncio
import bisect
from dataclasses import dataclass, field
from typing import Any, Literal


@dataclass(frozen=True, slots=True)
class Answer:
    """A member's share of a batch's result, with the timings it rode with."""

    predictions: list[Any]
    queue_ms: float
    compute_ms: float
    round_trip_ms: float
    batch_size: int
    cold: bool


@dataclass(eq=False, slots=True)
class Pending:
    """One admitted request waiting for, or riding in, a batch."""

    id: str
    function: str
    instances: list[Any]
    arrival: float
    deadline: float
    seq: int
    future: asyncio.Future[Answer]
    dispatched: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def size(self) -> int:
        return len(self.instances)

    @property
    def cancelled(self) -> bool:
        return self.future.done()


class RequestQueue:
    """Requests waiting for dispatch, in deadline order (ties by arrival) or FIFO."""

    def __init__(self, order: Literal["deadline", "arrival"]) -> None:
        self.order = order
        self._items: list[Pending] = []

    def __len__(self) -> int:
        return len(self._items)

    @property
    def items(self) -> list[Pending]:
        """The live list, head first (read-only use: the batching decision)."""
        return self._items

    def push(self, item: Pending) -> None:
        if self.order == "deadline":
            bisect.insort(self._items, item, key=lambda p: (p.deadline, p.seq))
        else:
            self._items.append(item)

    def push_front(self, items: list[Pending]) -> None:
        """Put requests back (their batch was retried without a failing member)."""
        for item in items:
            if self.order == "deadline":
                self.push(item)
        if self.order == "arrival":
            self._items[:0] = sorted(items, key=lambda p: p.seq)

    def pop(self, count: int) -> list[Pending]:
        taken = self._items[:count]
        del self._items[:count]
        return taken

    def drop_cancelled(self) -> int:
        before = len(self._items)
        if any(p.cancelled for p in self._items):
            self._items = [p for p in self._items if not p.cancelled]
        return before - len(self._items)

    def take_late(self, now: float) -> list[Pending]:
        """Remove and return the requests whose deadline is at or before ``now``."""
        late = [p for p in self._items if p.deadline <= now]
        if late:
            self._items = [p for p in self._items if p.deadline > now]
        return late
