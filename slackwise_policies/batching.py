"""The batching decision: which queue prefix to dispatch now, or when to look again.

:func:`decide` is pure: the queue, the latency model, the limit and ``now`` (monotonic seconds)
in, a :class:`BatchDecision` out. The adapter's loop, the simulator and the tests all call it.
Deadlines and arrivals are in seconds, latencies in milliseconds. Two estimates of a batch of
``n`` instances are used: the expected time ``E(n)`` (GrandSLAM's ETC, the model's linear fit,
:meth:`slackwise_policies.latency.LatencyModel.estimate_ms`) decides which requests can share a
batch, and
the tail ``P95(n)`` (MLProxy's monitor, :meth:`slackwise_policies.latency.LatencyModel.p95_ms`)
decides how
long the batch may wait for more. Judging membership by the tail would close batches early on
every noisy sample; on a busy machine that means more, smaller batches, more work per request
and a longer queue, which is what breaks deadlines.

Rules, in order:

1. **Empty queue:** nothing to do (``reason="empty"``, no wake-up).
2. **Oversized head:** a request with more instances than ``limit`` goes alone at once
   (``"oversized"``); it is the only batch that exceeds the limit.
3. **Late head** (deadline-aware only): when the head cannot meet its deadline even alone
   (``now + E(head) > head.deadline``, which includes a deadline already past), it leaves at
   once (``"late"``) together with the requests right behind it that are late too, up to
   ``late_limit``: holding them only makes them later, and sending them one by one would waste the
   function's throughput exactly when the queue is behind (after a cold start, under overload).
   Whether to serve or prune them is the adapter's call. A request that can still make its
   deadline is never put in a late batch.
4. **Largest feasible prefix** (GrandSLAM Algorithm 1, §4.3): walk the queue in its order and add
   requests while the total stays within ``limit`` and, deadline-aware, while
   ``now + E(total) ≤`` every member's deadline (except the deadlines of members that could not
   make it even alone: those ride along while there is room, and hold nothing back). The walk
   stops at the first request that does not fit, so the batch is always a prefix. Without
   deadline awareness (the MLProxy baseline) only the limit stops the walk.
5. **Dispatch now** when the batch is closed: the limit is reached, the next queued request would
   exceed it (``"full"``), or, deadline-aware, the next queued request would break a deadline
   (``"closed"``: waiting cannot grow this prefix, and the request left out needs the next batch
   soon).
6. **Otherwise wait, but not past the dispatch timeout** (MLProxy Eqs. 1–2): with ``n`` instances
   in the batch, ``DTO = SLO − P95(n+1)`` and ``TO = DTO − FRT`` where ``FRT`` is the time since
   the first request arrived. With ``deadline = arrival + SLO`` this is the absolute time
   ``latest = head.deadline − P95(n+1)``. We take the earliest member deadline rather than the
   head's (equal under a fixed SLO and FIFO order) and also never wait past
   ``earliest deadline − P95(n)``. If ``latest ≤ now`` the batch leaves at once (``"timeout"``:
   MLProxy's negative DTO, the case its AIMD counts); else ``take=0`` and ``wake_at=latest``.
   A new arrival should trigger a fresh call, as in MLProxy's Algorithm 1.
   **Waiting must pay for itself** (with ``arrival_rate``, the function's observed arrival
   rate in instances per second): a bigger batch is only worth waiting for when the slots could
   not keep up with batches of the size at hand. The adapter passes one replica's slots
   (``containerConcurrency``), not the fleet's: the cost of small batches is the replicas the
   autoscaler adds for them. With ``slots`` slots and batches of ``n``, the
   slots are busy ``ρ(n) = rate · E(n) / (1000 · n · slots)`` of the time. The batch leaves at
   once (``"alone"``) when fewer than one more instance is expected before ``latest``, or when
   ``ρ(total) ≤ settings.wait_utilization`` (waiting would only add latency), or when no size
   within the limit gets there while ``ρ(total) ≤ 1`` (the slots keep up; only replicas reach
   the target) or no size cuts ``ρ`` by a tenth (batching does not speed the model up).
   Otherwise it waits for
   the smallest size ``n*`` with ``ρ(n*) ≤ settings.wait_utilization`` (``"enough"`` once reached),
   and no longer than the arrivals expected to bring it take: ``wake_at = min(latest, now +
   (n* − total) / rate)``. ``margin_s`` is taken off ``latest``: the path's own latency outside
   what the latency model sees (the adapter's answer path and the client's legs), so a batch
   held to its dispatch timeout still answers the client within its SLO.
7. **Optional cap on waiting** (``settings.max_wait_s``, like Triton's ``max_queue_delay``):
   the oldest member never waits longer than this for company (``"max_wait"``). Without it a
   lone request at low load waits until its dispatch timeout, which is MLProxy's design (cost
   first, within the SLO); with 0 the batch leaves as soon as a slot is free.

Every test is written as "start no later than ``deadline − E/1000``" (never as
``now + E/1000 ≤ deadline``): float subtraction is monotone, so a decision taken again at
``wake_at`` with the same queue and a P95 non-decreasing in ``n`` dispatches the same prefix.

``take`` counts queue entries, ``instances`` their total size. ``take`` is never more than
``len(queue)``, and a dispatched batch is never empty.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from slackwise_policies.batching_settings import DEFAULT_BATCHING, BatchingSettings
from slackwise_policies.queue import Queued

__all__ = ["BatchDecision", "LatencyEstimator", "Reason", "decide"]

#: ``"activate"``, ``"static"`` and ``"busy"`` are never returned by :func:`decide`; they come
#: from :func:`slackwise_policies.scheduling.next_batch`: a request sent to wake a function that has
#: no ready
#: replica (scale from zero), a batch of a fixed-size or no-batching policy, no free slot
Reason = Literal[
    "empty",
    "wait",
    "oversized",
    "late",
    "full",
    "closed",
    "timeout",
    "max_wait",
    "alone",
    "no_gain",
    "activate",
    "static",
    "busy",
]


class LatencyEstimator(Protocol):
    """The part of :class:`slackwise_policies.latency.LatencyModel` that :func:`decide` uses."""

    def p95_ms(self, n: int, now: float) -> float: ...

    def p99_ms(self, n: int, now: float) -> float: ...

    def estimate_ms(self, n: int) -> float: ...


@dataclass(frozen=True, slots=True)
class BatchDecision:
    """Dispatch ``queue[:take]`` (``instances`` in all) now, or, with ``take == 0``, call
    :func:`decide` again at ``wake_at`` (or on the next arrival, whichever comes first)."""

    take: int
    instances: int
    wake_at: float | None
    reason: Reason

    @property
    def timeout_dispatch(self) -> bool:
        """Whether the batch leaves because waiting longer would break a deadline (MLProxy TO)."""
        return self.reason == "timeout"


_EMPTY = BatchDecision(take=0, instances=0, wake_at=None, reason="empty")


def _fits(now: float, due: float, n: int, model: LatencyEstimator, tail: bool) -> bool:
    """Does a batch of ``n`` sent at ``now`` end by ``due``: by ``E(n)``, or with ``tail`` by
    ``P99(n)``. Under a backlog the largest prefix grows until the earliest deadline stops it,
    so its head is due about when the batch is expected to end: judged by the mean, that is a
    coin toss, and behind a door that refused others to keep its promise (``late: predict``),
    the admitted head is late about half the time its batch is cut by its deadline. Judged by
    the P99, the door's promise (99 % in time): by the P95, one batch in twenty still overran
    its head, and the door's margin could not make that up without refusing capacity away.
    On the door's virtual-clock flood (``benchmarks/door_flood.py``: two replicas sharing a
    core, batch costs with 15 % noise) the tail took the share of admitted requests that finish
    late from 2.2-3.2 % to 0.2-0.5 % (docs/reliability.md)."""
    cost_ms = model.p99_ms(n, now) if tail else model.estimate_ms(n)
    return now <= due - cost_ms / 1000.0


def decide(
    now: float,
    queue: Sequence[Queued],
    model: LatencyEstimator,
    *,
    limit: int,
    deadline_aware: bool = True,
    late_limit: int | None = None,
    settings: BatchingSettings = DEFAULT_BATCHING,
    arrival_rate: float | None = None,
    slots: int = 1,
    margin_s: float = 0.0,
    tail_membership: bool = False,
) -> BatchDecision:
    """Decide for an ordered queue at ``now``; ``limit`` caps the batch in instances.

    ``queue`` is ordered by deadline (slack order) or by arrival (FIFO baseline); see the module
    docstring for the rules. ``late_limit`` (default ``limit``) caps a batch of late requests:
    the adapter passes the function's own maximum, because AIMD's limit keeps batches within the
    slack of requests that still have some, and late ones have none left to keep.
    ``settings`` (taken whole): ``max_wait_s`` caps the oldest member's wait for company (rule
    7), and with ``arrival_rate`` (instances a second), ``slots`` and ``margin_s``,
    ``wait_utilization`` decides whether waiting pays (rule 6; without ``arrival_rate`` an open
    batch waits until its dispatch timeout, as in MLProxy). ``tail_membership``: rule 4 by
    ``P95(total)`` (:func:`_fits`)."""
    if limit < 1:
        raise ValueError(f"limit must be >= 1, got {limit!r}")
    if not queue:
        return _EMPTY
    head = queue[0]
    if head.size < 1:
        raise ValueError(f"request size must be >= 1, got {head.size!r}")
    if head.size > limit:
        return BatchDecision(take=1, instances=head.size, wake_at=None, reason="oversized")
    if deadline_aware and now > head.deadline - model.estimate_ms(head.size) / 1000.0:
        return _late_batch(now, queue, model, limit if late_limit is None else late_limit, limit)

    take, total, earliest = 1, head.size, head.deadline
    closed: Reason | None = None
    for i in range(1, len(queue)):
        item = queue[i]
        if item.size < 1:
            raise ValueError(f"request size must be >= 1, got {item.size!r}")
        grown = total + item.size
        if grown > limit:
            closed = "full"
            break
        # a request that cannot make its deadline even alone rides along if there is room, but
        # its lost deadline does not hold the batch back
        hopeless = deadline_aware and now > item.deadline - model.estimate_ms(item.size) / 1000.0
        due = earliest if hopeless else min(earliest, item.deadline)
        if deadline_aware and not _fits(now, due, grown, model, tail_membership):
            closed = "closed"
            break
        take, total, earliest = take + 1, grown, due
    if closed is None and total >= limit:
        closed = "full"
    if closed is not None:
        return BatchDecision(take=take, instances=total, wake_at=None, reason=closed)

    latest = earliest - max(model.p95_ms(total + 1, now), model.p95_ms(total, now)) / 1000.0
    latest -= margin_s
    if latest <= now:
        return BatchDecision(take=take, instances=total, wake_at=None, reason="timeout")
    if arrival_rate is not None:
        target = _worth_waiting_for(
            model, total, limit, arrival_rate, slots, settings.wait_utilization
        )
        if target is None:
            return BatchDecision(take=take, instances=total, wake_at=None, reason="no_gain")
        if arrival_rate * (latest - now) < 1.0:
            return BatchDecision(take=take, instances=total, wake_at=None, reason="alone")
        latest = min(latest, now + (target - total) / arrival_rate)
    if settings.max_wait_s is not None:
        capped = min(queue[i].arrival for i in range(take)) + settings.max_wait_s
        if capped <= now:
            return BatchDecision(take=take, instances=total, wake_at=None, reason="max_wait")
        if capped < latest:
            return BatchDecision(take=0, instances=0, wake_at=capped, reason="wait")
    return BatchDecision(take=0, instances=0, wake_at=latest, reason="wait")


def _late_batch(
    now: float, queue: Sequence[Queued], model: LatencyEstimator, late_limit: int, limit: int
) -> BatchDecision:
    """Rule 3: the late head and the late requests right behind it, up to ``late_limit``."""
    cap = max(limit, late_limit)
    take, total = 1, queue[0].size
    for i in range(1, len(queue)):
        item = queue[i]
        if total + item.size > cap:
            break
        if now <= item.deadline - model.estimate_ms(item.size) / 1000.0:
            break  # this one can still make it: it is not dragged into a late batch
        take, total = take + 1, total + item.size
    return BatchDecision(take=take, instances=total, wake_at=None, reason="late")


#: the least share of the slots' busy time a bigger batch must save for an overloaded function
#: to wait for it (rule 6)
MIN_RELIEF = 0.1


def _worth_waiting_for(
    model: LatencyEstimator,
    total: int,
    limit: int,
    rate: float,
    slots: int,
    utilization: float,
) -> int | None:
    """The smallest batch size the slots can sustain at ``rate`` within ``utilization``; None
    when ``total`` already can (no wait pays). When no size up to ``limit`` can, waiting pays
    only if the slots cannot keep up with batches of ``total`` at all (busy more than all the
    time) and a bigger batch relieves them by at least :data:`MIN_RELIEF`: then the size that
    relieves them most (wait for the most the deadlines allow). Otherwise None: the slots keep
    up as they are and only more replicas reach ``utilization``, or batching does not speed the
    model up (a batch costs what its members cost alone) and waiting would add latency and
    save nothing."""

    def busy(n: int) -> float:
        return rate * model.estimate_ms(n) / (1000.0 * n * max(1, slots))

    now_busy = busy(total)
    if now_busy <= utilization:
        return None
    best, best_busy = total, now_busy
    for n in range(total + 1, limit + 1):
        b = busy(n)
        if b <= utilization:
            return n
        if b < best_busy:
            best, best_busy = n, b
    if now_busy <= 1.0:
        return None
    return best if best_busy <= (1.0 - MIN_RELIEF) * now_busy else None
