"""A function's queue of admitted requests, ordered by deadline or by arrival.

An entry is anything :class:`Queued` (the live :class:`adapter.serving.pending.Pending`, or the
simulator's request). The queue keeps only requests still waiting; cancelled ones (the client
went away) are dropped lazily when the dispatcher looks, and only after
:meth:`RequestQueue.note_cancelled` said some were: a scheduling step costs nothing per queued
request while nobody leaves.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Literal, Protocol, TypeVar


class Queued(Protocol):
    """What the queue reads and writes on an entry: the live :class:`Pending`, or the
    simulator's request, which goes through the very same queue."""

    @property
    def deadline(self) -> float: ...

    @property
    def arrival(self) -> float: ...

    @property
    def seq(self) -> int: ...

    @property
    def size(self) -> int: ...

    @property
    def input_bytes(self) -> float:
        """Bytes per instance of the request as it arrived (0: unknown; the simulator's)."""
        ...

    @property
    def cancelled(self) -> bool: ...

    @property
    def due(self) -> float:
        """When the request as a whole must be answered (a chain's end-to-end deadline; a
        plain request's own deadline)."""
        ...

    hopeless: bool


@dataclass(eq=False, slots=True)
class QueuedRequest:
    """A plain :class:`Queued` entry: ``size`` instances due at ``deadline`` (tests, tools)."""

    deadline: float
    arrival: float
    size: int = 1
    seq: int = 0
    hopeless: bool = False
    cancelled: bool = False

    @property
    def due(self) -> float:
        return self.deadline


T = TypeVar("T", bound=Queued)


def _key(p: Queued) -> tuple[float, int]:
    return (p.deadline, p.seq)


class _Joined(Sequence[T]):
    """Two lists read as one, without copying them."""

    __slots__ = ("_first", "_second")

    def __init__(self, first: list[T], second: list[T]) -> None:
        self._first = first
        self._second = second

    def __len__(self) -> int:
        return len(self._first) + len(self._second)

    def __iter__(self) -> Iterator[T]:
        return itertools.chain(self._first, self._second)

    def __getitem__(self, index: int | slice) -> Any:
        if isinstance(index, slice):
            return list(self)[index]
        first = self._first
        if index < 0:
            index += len(self)
        if 0 <= index < len(first):
            return first[index]
        if index < 0:
            raise IndexError("queue index out of range")
        return self._second[index - len(first)]


class RequestQueue(Generic[T]):
    """Requests waiting for dispatch, in deadline order (ties by arrival) or FIFO.

    In deadline order, requests that can no longer make their deadline are moved behind every
    request that still can (:meth:`demote`). Plain earliest-deadline-first serves the most
    overdue request first, so under overload every request ends up a little late (the domino
    effect); keeping the hopeless ones behind lets the others keep their deadlines, and the
    hopeless ones still leave as soon as nothing that can be saved is waiting, or ride along in a
    batch that has room for them.
    """

    def __init__(self, order: Literal["deadline", "arrival"]) -> None:
        self.order = order
        self._items: list[T] = []
        self._hopeless: list[T] = []
        self._cancelled = 0
        self._instances = 0

    def __len__(self) -> int:
        return len(self._items) + len(self._hopeless)

    @property
    def instances(self) -> int:
        """Instances queued (kept as requests come and go: admission reads it per request)."""
        return self._instances

    @property
    def items(self) -> Sequence[T]:
        """Head first: the savable requests, then the hopeless ones (read-only use; a view, not
        a copy, so a scheduling step that looks at the head costs nothing per queued request)."""
        return _Joined(self._items, self._hopeless) if self._hopeless else self._items

    def push(self, item: T) -> None:
        self._instances += item.size
        if self.order == "deadline":
            bisect.insort(self._items, item, key=_key)
        else:
            self._items.append(item)

    def push_front(self, items: list[T]) -> None:
        """Put requests back (their batch was retried without a failing member)."""
        if self.order == "deadline":
            for item in items:
                self.push(item)
        else:
            self._instances += sum(p.size for p in items)
            self._items[:0] = sorted(items, key=lambda p: p.seq)

    def demote(self, hopeless: Callable[[T], bool]) -> int:
        """Move the run of requests at the head that ``hopeless`` selects behind the rest
        (deadline order only). A hopeless request further back is moved once it reaches the
        head; until then :func:`slackwise_policies.batching.decide` lets it ride along without
        holding a
        batch back, so only the head run matters, and the step stays proportional to it."""
        items = self._items
        if self.order != "deadline" or not items or not hopeless(items[0]):
            return 0
        count = 1
        while count < len(items) and hopeless(items[count]):
            count += 1
        moved = items[:count]
        del items[:count]
        for item in moved:
            item.hopeless = True
            bisect.insort(self._hopeless, item, key=_key)
        return count

    def pop(self, count: int) -> list[T]:
        taken = self._items[:count]
        del self._items[:count]
        if len(taken) < count and self._hopeless:
            rest = count - len(taken)
            taken.extend(self._hopeless[:rest])
            del self._hopeless[:rest]
        self._instances -= sum(p.size for p in taken)
        return taken

    def note_cancelled(self) -> None:
        """A queued request was cancelled: the next :meth:`drop_cancelled` looks for it."""
        self._cancelled += 1

    def drop_cancelled(self) -> int:
        """Remove the cancelled requests, if :meth:`note_cancelled` said there are any."""
        if not self._cancelled:
            return 0
        self._cancelled = 0
        before = len(self)
        if any(p.cancelled for p in self._items):
            self._items = [p for p in self._items if not p.cancelled]
        if any(p.cancelled for p in self._hopeless):
            self._hopeless = [p for p in self._hopeless if not p.cancelled]
        self._instances = sum(p.size for p in self.items)
        return before - len(self)

    def take_late(self, now: float, due: Callable[[T], float] | None = None) -> list[T]:
        """Remove and return the requests due at or before ``now`` (``due`` defaults to the
        deadline; the adapter passes a chain's end-to-end deadline for its stages)."""
        key = due or (lambda p: p.deadline)
        late = [p for p in self.items if key(p) <= now]
        if late:
            self._items = [p for p in self._items if key(p) > now]
            self._hopeless = [p for p in self._hopeless if key(p) > now]
            self._instances -= sum(p.size for p in late)
        return late
