"""One scheduling step of a function's queue: what to send now, given what the platform can take.

:func:`next_batch` is the step the adapter's dispatch loop and the simulator both take whenever
something changes (an arrival, a finished batch, a timer): it demotes the requests that can no
longer make their deadline, applies the stage policy's batching (dynamic, none or static) and the
platform's capacity, and returns a :class:`slackwise_policies.batching.BatchDecision`. It mutates
only the
queue's order (demotion), never pops: the caller pops ``decision.take`` entries and sends them.

Capacity: ``free_slots`` is how many more batches the platform can take now (ready replicas ×
containerConcurrency − in flight; callers count one slot while no replica is ready, for the batch
that wakes the function). With no ready replica and nothing in flight, a batch that would wait
goes anyway with just its head (``"activate"``): at scale zero the platform's activator holds it
and starts a replica, as it does for any request; the rest keep queueing and leave together once
a replica is ready.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TypeVar

from slackwise_policies.batching import MIN_RELIEF, BatchDecision, LatencyEstimator, decide
from slackwise_policies.batching_settings import DEFAULT_BATCHING, BatchingSettings
from slackwise_policies.paper_batching import algorithm_1
from slackwise_policies.queue import Queued, RequestQueue
from slackwise_policies.slack import Batching

__all__ = [
    "backlog_batch",
    "cheapest_batch",
    "draining_batch",
    "efficient_batch",
    "next_batch",
    "sustaining_batch",
    "time_left_ms",
]

T = TypeVar("T", bound=Queued)

_EMPTY = BatchDecision(take=0, instances=0, wake_at=None, reason="empty")
#: every slot is taken: look again when a batch finishes or a replica becomes ready
_BUSY = BatchDecision(take=0, instances=0, wake_at=None, reason="busy")


def next_batch(
    now: float,
    queue: RequestQueue[T],
    model: LatencyEstimator,
    *,
    batching: Batching,
    deadline_aware: bool,
    limit: int,
    late_limit: int,
    free_slots: int,
    cold: bool,
    inflight: int,
    settings: BatchingSettings = DEFAULT_BATCHING,
    arrival_rate: float | None = None,
    slots: int = 1,
    margin_s: float = 0.0,
    as_in_paper: bool = False,
    sustain_slots: int = 0,
    tail_membership: bool = False,
    sustain_rate: float | None = None,
) -> BatchDecision:
    """The batch to send from ``queue`` at ``now`` (see the module docstring).

    ``limit`` is the batch cap in instances for dynamic batching (AIMD's limit within the
    function's maximum), the fixed size for static batching (which waits to fill it, at most
    until the head's latest start), ignored without batching. ``late_limit`` caps a batch of
    late requests (dynamic, deadline-aware only).
    ``settings`` (taken whole), ``arrival_rate``, ``slots`` (ready replicas × containerConcurrency)
    and ``margin_s`` go to :func:`slackwise_policies.batching.decide` (whether waiting pays).
    ``as_in_paper``: GrandSLAM's baselines as the paper defines them: late requests stay where
    their deadline puts them, and dynamic batches are Algorithm 1 as written
    (:func:`slackwise_policies.paper_batching.algorithm_1`: no waiting, no timeout).
    ``sustain_slots`` (the fleet's slots; 0: off): batching for throughput (:func:`_demote`,
    :func:`_apart`), its floor keeping up with ``sustain_rate`` (``arrival_rate`` if None)."""
    if not queue:
        return _EMPTY
    if free_slots <= 0:
        return _BUSY
    if deadline_aware and not as_in_paper:
        rate = sustain_rate or arrival_rate  # the floor judged by the tail decide reads
        _demote(now, queue, model, rate, sustain_slots, limit, tail_membership)
    items = queue.items
    if batching == "dynamic" and as_in_paper:
        decision = algorithm_1(now, items, model, limit=limit)
    elif batching == "dynamic":
        decision = decide(
            now,
            items,
            model,
            limit=limit,
            deadline_aware=deadline_aware,
            late_limit=late_limit,
            settings=settings,
            arrival_rate=arrival_rate,
            slots=slots,
            margin_s=margin_s,
            tail_membership=tail_membership,
        )
    else:
        cap = 1 if batching == "none" else limit
        take, total = 1, items[0].size
        for i in range(1, len(items)):
            item = items[i]
            if total + item.size > cap:
                break
            take, total = take + 1, total + item.size
        full = total >= cap or take < len(items)
        # static batching waits to fill its fixed size (GrandSLAM's static baselines), but not
        # past the latest start at which a full batch still lets the head make its deadline
        latest = items[0].deadline - model.estimate_ms(cap) / 1000.0
        if batching == "static" and not full and now < latest:
            decision = BatchDecision(take=0, instances=0, wake_at=latest, reason="wait")
        else:
            decision = BatchDecision(take=take, instances=total, wake_at=None, reason="static")
    if sustain_slots > 0 and decision.take > 1 and free_slots > 1 and decision.reason != "late":
        decision = _apart(decision, items[0].size, model)
    if decision.take == 0 and inflight == 0 and cold:
        head = items[0]
        return BatchDecision(take=1, instances=head.size, wake_at=None, reason="activate")
    return decision


def _demote(
    now: float,
    queue: RequestQueue[T],
    model: LatencyEstimator,
    arrival_rate: float | None,
    sustain_slots: int,
    limit: int,
    tail: bool = False,
) -> None:
    """Move the requests that can no longer make their deadline behind the rest: alone, or
    (``sustain_slots``) in the batch with which the slots keep up with ``arrival_rate``
    (:func:`sustaining_batch`). Under overload, serving the requests closest to their
    deadlines one small batch at a time would make every later one late too. With ``tail``
    (the batcher judges a batch's members by its P99: ``tail_membership``) the floor's batch is
    judged the same way: judged by its mean, a head with time for the floor's mean but not its
    tail stayed at the front, and the batch its deadline allowed went below the floor."""
    estimate = model.estimate_ms
    floor = 1
    if sustain_slots > 0 and arrival_rate:
        floor = sustaining_batch(
            model,
            arrival_rate,
            sustain_slots,
            limit,
            backlog=queue.instances,
            within_ms=time_left_ms(queue, now),
        )
    if floor > 1:
        floor_s = (model.p99_ms(floor, now) if tail else estimate(floor)) / 1000.0
        queue.demote(lambda p: now > p.deadline - max(estimate(p.size) / 1000.0, floor_s))
    else:
        queue.demote(lambda p: now > p.deadline - estimate(p.size) / 1000.0)


def _apart(decision: BatchDecision, first: int, model: LatencyEstimator) -> BatchDecision:
    """A batch that saves less than MIN_RELIEF of what its members cost apart is not worth
    their wait for one another: with a slot free, the head (``first`` instances) goes alone
    and the next step sends the rest beside it."""
    apart = decision.instances / first * model.estimate_ms(first)
    if model.estimate_ms(decision.instances) >= (1.0 - MIN_RELIEF) * apart:
        return BatchDecision(take=1, instances=first, wake_at=None, reason=decision.reason)
    return decision


def efficient_batch(a_ms: float, b_ms_per_item: float, limit: int) -> int:
    """The largest batch worth its members' wait for one another by the fitted line ``a + b·n``
    (GrandSLAM Eq. 2), at most ``limit``: past ``n = a / (MIN_RELIEF · b)`` the fixed cost ``a``
    is under a tenth of what the members cost themselves, so a larger batch saves at most that
    much per instance and makes every member wait for the whole of it. With ``a <= 0`` (a batch
    costs at least its members apart: a CPU model that batches super-linearly) 1, with
    ``b <= 0`` ``limit``. The line is fitted to means, which throughput is made of; a curve of
    medians misprices small batches of mixed inputs (their median is the small inputs' cost)."""
    limit = max(1, limit)
    if a_ms <= 0.0:
        return 1
    if b_ms_per_item <= 0.0:
        return limit
    return max(1, min(limit, math.ceil(a_ms / (MIN_RELIEF * b_ms_per_item))))


def cheapest_batch(
    estimate_ms: Callable[[int], float], limit: int, *, within: float = MIN_RELIEF
) -> int:
    """The least batch within ``limit`` whose cost per instance by ``estimate_ms`` (a measured
    curve) is within ``within`` (a share; MIN_RELIEF by default, 0 for the cheapest itself) of
    the least any batch within ``limit`` reaches. A line cannot see a curve that bends: a GPU
    model whose cost per instance keeps falling to its largest batch, or a CPU model cheapest per
    instance at 8 and dearer past it."""
    costs = [estimate_ms(n) / n for n in range(1, max(1, limit) + 1)]
    least = min(costs)
    return next(n for n, c in enumerate(costs, start=1) if c <= (1.0 + within) * least)


def draining_batch(
    estimate_ms: Callable[[int], float],
    backlog: int,
    slots: int,
    limit: int,
    *,
    within_ms: float = math.inf,
) -> int:
    """The batch within ``limit`` with which ``slots`` serve a backlog of ``backlog`` instances
    soonest: the least ``ceil(backlog / (slots · n)) · E(n)``, the smaller batch on a tie, among
    those that take at most ``within_ms`` (the most time any request in the backlog has left: a
    longer batch serves none of them in time).

    Under a backlog the members of a batch do not wait for one another, but every one of them
    waits for the whole batch, and the last of the backlog for every round before its own: a
    batch that carries a few per cent more per instance is worth it only when the backlog is
    deep enough for those per cents to add up to more than the batch's own length. The cheapest
    batch per instance by a profile's medians can be one thirty times as long as a batch that
    carries within 3 % as much (imagenet over HTTP on this CPU: 14.8 ms an instance in a batch
    of 32, 15.3 alone): sent under a backlog, every member missed its SLO."""
    slots = max(1, slots)
    backlog = max(1, backlog)
    best, best_ms = 1, math.inf
    cheapest = math.inf
    for n in range(1, max(1, limit) + 1):
        cost = estimate_ms(n)
        if n > 1 and cost > within_ms:
            break  # the curve is monotone: every larger batch is as long
        if cost >= cheapest * n:  # no cheaper per instance than a smaller batch: never sooner
            continue
        cheapest = cost / n
        drain_ms = math.ceil(backlog / (slots * n)) * cost
        if drain_ms < best_ms:
            best, best_ms = n, drain_ms
    return best


def backlog_batch(
    model: LatencyEstimator, backlog: int, slots: int, limit: int, within_ms: float
) -> int:
    """The batch a ``backlog`` goes in on ``slots``: the one that drains it soonest
    (:func:`draining_batch`) among the sizes the model's curve knows and that take at most
    ``within_ms``. Without a curve, ``limit``: a line is cheapest per instance at its largest
    batch, and it is the deadline-aware batching that keeps such a batch within its head's
    time (the live adapter's default model; its door prices rounds at this cap)."""
    known = getattr(model, "largest_measured_batch", None)
    reach = min(limit, known()) if callable(known) else 0
    if reach <= 0:
        return max(1, limit)
    return draining_batch(model.estimate_ms, backlog, slots, reach, within_ms=within_ms)


def time_left_ms(queue: RequestQueue[T], now: float) -> float:
    """The most time (ms) any request in ``queue`` has left before its deadline."""
    return (max((p.deadline for p in queue.items), default=now) - now) * 1000.0


#: the share of the slots' time the sustaining batch may use: the rest drains what bursts bring
SUSTAIN_UTILISATION = 0.95


def sustaining_batch(
    model: LatencyEstimator,
    rate: float,
    slots: int,
    limit: int,
    *,
    backlog: int,
    within_ms: float = math.inf,
) -> int:
    """The smallest batch with which ``slots`` keep up with ``rate`` instances a second within
    :data:`SUSTAIN_UTILISATION` (``rate · E(n) ≤ u · 1000 · n · slots``).

    When none within ``limit`` does, the batch that drains the ``backlog`` queued now soonest
    (:func:`draining_batch`) among the sizes the model's curve knows
    (``largest_measured_batch``: measured, or its profile's) and that take at most
    ``within_ms``. A burst that lifts the recent rate past what the slots carry is when the
    backlog must go in batches that carry it; falling back to 1 there (as first built) let the
    requests nearest their deadlines go a few at a time, the backlog grow and every later
    request miss (WL1-mixed-late, docs/simulator.md). The cheapest per instance, which replaced
    it, was for imagenet a batch of 32 that no request had the time for (WL1 at 1000 nodes,
    docs/simulator.md). An estimator without a curve gets 1: a line keeps getting cheaper per
    instance past what was measured, and a floor there would give up requests for batches no
    measurement supports."""
    for n in range(1, max(1, limit) + 1):
        if rate * model.estimate_ms(n) <= SUSTAIN_UTILISATION * 1000.0 * n * max(1, slots):
            return n
    known = getattr(model, "largest_measured_batch", None)
    reach = min(limit, known()) if callable(known) else 1
    if reach <= 1:
        return 1
    return draining_batch(model.estimate_ms, backlog, slots, reach, within_ms=within_ms)
