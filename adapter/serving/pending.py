"""One admitted request as the serving side holds it: what it carries, when it is due, and the
future its HTTP handler waits on (answered with an :class:`Answer` or an adapter error)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from functions.v2 import V2Request

__all__ = ["Answer", "Pending"]


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
    #: it could no longer make its deadline when the dispatcher last looked
    hopeless: bool = False
    #: a stage of a chain: the app, the stage's index and the chain's end-to-end deadline
    #: (``deadline`` is then the stage's own, from the stage policy)
    app: str | None = None
    stage: int = 0
    final_deadline: float | None = None
    #: a chain's first stage: what the stages after it are expected to take (the first stage's
    #: door judges the whole chain; a later stage is never refused)
    after_s: float = 0.0
    #: its function had no ready replica when it arrived: it waits for a cold start
    arrived_cold: bool = False
    #: it came in by the Open Inference Protocol (V2), asking this of its answer (its ``id``,
    #: the outputs it wants, JSON or binary): it is answered the same way
    v2: V2Request | None = None
    #: the W3C ``traceparent`` it came with (valid ones only): forwarded to its function
    traceparent: str | None = None
    #: bytes per instance of the request's body as it arrived, at every stage of a chain (0:
    #: unknown): what its input's size costs is priced from it (slackwise_policies.input_cost)
    input_bytes: float = 0.0

    @property
    def due(self) -> float:
        """When the request as a whole must be answered (its chain's deadline, if any)."""
        return self.deadline if self.final_deadline is None else self.final_deadline

    @property
    def size(self) -> int:
        return len(self.instances)

    @property
    def cancelled(self) -> bool:
        return self.future.done()
