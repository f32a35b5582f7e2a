"""Admission at the door: refuse at once a request that cannot meet its deadline, with a hint of
when to come back, instead of queueing it to die.

Under overload a queue that admits everything makes every request late: the queue grows until
the oldest requests wait far past their SLO, clients time out, and the work spent on them is
lost (Google SRE, "Handling Overload"; Triton's queue policy; Ray Serve's
``max_queued_requests``; Knative's activator answers 503 once its buffer is full). A request is
refused when either of two pieces of evidence says it would finish late:

* **the queue ahead** (only when there is one: a request with nothing ahead goes at once, so a
  stale latency model is corrected by its answer instead of refusing for ever): with
  ``queued`` instances ahead of it, batches of ``batch_limit``,
  ``slots`` batches at a time and the latency model's estimate per batch size, its expected
  finish is ``now + rounds·est(limit) + est(own batch)`` (:func:`expected_finish`, the same
  arithmetic as :mod:`slackwise_policies.pruning`, with the request's own batch sized as it
  will leave: what is queued before it in that round and the company admitted until a slot
  frees, rather than full), or, when it is later, from the pace the queue was *measured* to
  drain at while backlogged (:class:`Drain`: the adapter's own work included, which the model
  of the replicas' round trip does not see), plus the path's measured margin. A function with
  no replica ready (scaling from zero) is not judged by the queue: the activator's rule, a cold
  start is waited through.
* **the adapter's own delay** (``lag_s``): how late the server's event loop runs its timers.
  Time a request spends in the kernel's accept queue and the loop's backlog is invisible to the
  queue, and under a flood of connections it is the larger part; when the loop runs later
  than ``lag_fraction`` (half) of the SLO, the request is refused before its body is parsed.

A refusal carries ``retry_after_s``, when the queue ahead should have drained by the part the
request would be late by (at least one second: ``Retry-After`` counts whole seconds), and
``warming``: no replica was ready (the caller answers 503 then, 429 otherwise). Pure: the time and
every input are arguments.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Literal, get_args

__all__ = [
    "LATE",
    "DoorRefusal",
    "Drain",
    "Late",
    "Lateness",
    "Refusals",
    "at_the_door",
    "expected_finish",
    "holds_until",
]

#: what happens to a request that cannot make its deadline (``functions.X.late``): served
#: anyway, answered 503 once its deadline passed before dispatch, or (Swayam §3.3) refused at
#: the door when the evidence says it would finish late
Late = Literal["serve", "prune", "predict"]
LATE: tuple[Late, ...] = get_args(Late)

#: the shortest Retry-After a refusal suggests (the header's unit)
MIN_RETRY_S = 1.0
#: the longest a refusal answers the requests after it without the rule being asked again
HOLD_MAX_S = 0.02


class Drain:
    """How fast the queue really drains while it is backlogged: seconds per instance, measured.

    Between two dispatches that both left requests waiting for a slot (every slot busy: not
    waiting for company), the queue was never idle, so the interval is the whole cost of moving
    the queue on: the replicas' round trip *and* the
    adapter's own work around it (parsing, answering, its loop), which the latency model does not
    see and which is the larger part for small models at high rates. Exponentially weighted
    interval over weighted instances per dispatch; None until a backlog has been seen, and
    again once ``stale_s`` has passed without one: the pace of a backlog long gone is no
    evidence about the queue now, and a pace measured while the loop was slow would otherwise
    refuse every short queue for ever (with the queue kept short, no backlog forms to measure
    it again). Pure.
    """

    def __init__(self, alpha: float = 0.1, *, stale_s: float = 1.0) -> None:
        self.alpha = alpha
        self.stale_s = stale_s
        self._seen = -math.inf  # when the pace was last measured
        self._last: float | None = None
        self._interval_s: float | None = None
        self._instances: float | None = None
        self._extra = 0

    def elsewhere(self, instances: int) -> None:
        """Instances another route took off the queue (a GPU): they count in the next interval."""
        self._extra += instances

    def dispatched(self, now: float, instances: int, backlog: bool) -> None:
        """A batch of ``instances`` left at ``now``; ``backlog``: requests are still queued and
        every slot is busy (they wait for capacity, not for company)."""
        instances += self._extra
        self._extra = 0
        if self._last is not None and instances > 0:
            a = self.alpha
            gap = max(0.0, now - self._last)
            self._interval_s = (
                gap if self._interval_s is None else (1 - a) * self._interval_s + a * gap
            )
            self._instances = (
                instances if self._instances is None else (1 - a) * self._instances + a * instances
            )
            self._seen = now
        self._last = now if backlog else None

    def s_per_instance(self, now: float | None = None) -> float | None:
        """The measured pace; None without one, or (given ``now``) when it has gone stale."""
        if self._interval_s is None or not self._instances:
            return None
        if now is not None and now - self._seen > self.stale_s:
            return None
        return self._interval_s / self._instances


class Lateness:
    """The door's margin, set by how late its admitted requests really finish: evidence over
    the model, for the door's own promise.

    Every admitted request that is answered, or given up for its deadline, is one sample. A
    late one (finished after its deadline, or given up) raises the margin by a step times
    ``share``; one in time lowers it by a step times ``1 - share`` (never below 0, nor above
    ``cap``, a quarter, of the SLO: a door that kept more would admit only into a nearly empty
    queue, whose small batches carry too little to earn the margin back; with half, the door's
    virtual flood at 10x, ``benchmarks/door_flood.py``, served 0.67 of its capacity in its first
    10 s where a quarter serves 0.85, the late share no higher); a step is ``step`` (2 %)
    of the request's SLO, so the margin moves at a pace its SLO sets. It settles where
    ``1 - share`` (0.2 %) of the admitted requests finish late: the stochastic approximation of
    a quantile (Robbins-Monro), one sample at a time, with no window to keep or sort (and it
    fades by itself once calm, :meth:`margin_s`). The door
    adds it to its expected finish, so what it admits shrinks until that share is late,
    whatever the estimates missed: replicas slowed by the adapter's own work on a shared core,
    a batcher that waited for company or cut batches short as their deadlines neared
    (GrandSLAM's rule drains a queue in smaller batches than the door's arithmetic assumes), a
    queue that drained slower than its pace said. It rises fast (a late finish moves it 499
    times as far as one in time) and falls slowly, so the promise holds through a change and
    comes back to the model's when the evidence stops. The aim is 0.2 % rather than the 1 %
    users are promised: the adapter sees a request from when it reads it, a client from when
    it sent it. On a simulated flood (tests/test_admission.py) with an exact latency model, the
    door without the margin lets about 3 % of what it admits be given up late (19 % when it
    priced a request's batch as the queue stood, without the company that joins it); with it,
    under 1 %. Pure."""

    def __init__(
        self,
        *,
        step: float = 0.02,
        share: float = 0.998,
        cap: float = 0.25,
        half_life_s: float = 10.0,
        calm_s: float = 5.0,
    ) -> None:
        if not 0.0 < share < 1.0:
            raise ValueError(f"share must be in (0, 1), got {share!r}")
        self.step = step
        self.share = share
        self.cap = cap
        self.half_life_s = half_life_s
        self.calm_s = calm_s
        self._last_late = -math.inf
        self._margin = 0.0
        self._at = -math.inf
        #: admitted requests seen finish, how many of them late, and how many of those late
        #: by their batch's own service alone (for the status)
        self.finished_count = 0
        self.late_count = 0
        self.overran_count = 0

    def finished(
        self,
        now: float,
        due: float,
        slo_s: float,
        *,
        given_up: bool = False,
        weight: float = 1.0,
        overran: bool = False,
    ) -> None:
        """An admitted request with an SLO of ``slo_s``, due at ``due``, finished at ``now``
        (or was ``given_up``). One with no SLO left when it came (a chain's stage entered past
        its deadline) says nothing of the door, and is not counted. ``weight``: its share of
        one sample, ``1 / n`` for each of the ``n`` members of one batch (or of the requests
        given up at one step): a batch that overran its head makes its members late together,
        one event and not ``n``, and counted ``n`` times it threw the margin to its cap at the
        start of every flood (live, 40 late in one second from one or two batches).
        ``overran``: it would have been late had it not waited at all (its batch's round trip
        alone outlasted its SLO): counted, but no evidence about the queue ahead, so the margin
        does not move: refusing more does not shorten a batch a stall of the host stretched.
        The requests that waited behind that batch were late because they waited: they still
        raise it. (Suspected of holding embed's margin at its cap on a two-core VM whose host
        stole CPU; on a quiet run of the same benchmark none of 280 late finishes overran, so
        there the margin rose for waits alone.)"""
        if not slo_s > 0.0:
            return
        self.finished_count += 1
        if overran and (given_up or now > due):
            self.late_count += 1
            self.overran_count += 1
            return
        step = self.step * slo_s * weight
        margin = self.margin_s(now)
        if given_up or now > due:
            self.late_count += 1
            self._last_late = now
            self._margin = min(self.cap * slo_s, margin + step * self.share)
        else:
            self._margin = max(0.0, margin - step * (1.0 - self.share))

    def counts(self) -> dict[str, int]:
        """The admitted requests seen finish, late, and late by their batch alone (status)."""
        return {
            "admitted_finished": self.finished_count,
            "admitted_late": self.late_count,
            "admitted_overran": self.overran_count,
        }

    def batch_finished(
        self,
        now: float,
        members: Iterable[tuple[float, float]],
        took_s: float,
        *,
        weight: float,
        stalled: bool = False,
    ) -> None:
        """A batch that took ``took_s`` ended at ``now``: one sample for each of its ``members``
        (``(arrival, due)``), ``weight`` each. A member late even had it not waited (its
        arrival plus the batch's round trip past its due) overran; a stall of the caller's own
        loop (``stalled``) is the door's to answer for, so then none counts as overran."""
        for arrival, due in members:
            overran = not stalled and arrival + took_s > due
            self.finished(now, due, due - arrival, weight=weight, overran=overran)

    def margin_s(self, now: float) -> float:
        """The margin at ``now``. It also halves every ``half_life_s`` (10 s) by itself once no
        admitted request has finished late for ``calm_s`` (5 s), so a burst of late finishes (a
        flood's first seconds, a replica starting on a shared core) is forgotten in seconds at
        any rate, where the per-sample steps alone would take thousands of admitted requests,
        hours for a function that sees a few a second (and a door that refused everything would
        never see another). Only when calm: a fade that ran all the time was a pull towards zero
        the late finishes had to make up, so it moved where the margin settles (with a 10 s
        half-life, on the door's virtual flood, ``benchmarks/door_flood.py``, where 1.2-1.8 % of
        the admitted finished late as it then counted, about 0.6 points high, not the 0.2 % its
        steps aim at), and with a one-minute one
        a flood's first seconds held the margin at its cap, and the door's goodput at half,
        for the minute after (live, embed at 10x its capacity)."""
        if now > self._at:
            calm_from = max(self._at, self._last_late + self.calm_s)
            if self._margin > 0.0 and self._at > -math.inf and now > calm_from:
                self._margin *= 0.5 ** ((now - calm_from) / self.half_life_s)
            self._at = now
        return self._margin


@dataclass(slots=True)
class Refusals:
    """The door's refusals for the queue ahead (a refusal for the loop's lag is not one), and
    those made while a slot was free: a replica idle, the queue waiting for company rather than
    capacity, the refusal resting on the price of the batch it would ride (for the status)."""

    count: int = 0
    with_free_slot: int = 0

    def record(self, refusal: DoorRefusal | None, *, free_slot: bool) -> None:
        if refusal is not None and refusal.lag_s == 0.0:
            self.count += 1
            self.with_free_slot += free_slot

    def status(self) -> dict[str, int]:
        return {"refused": self.count, "refused_with_free_slot": self.with_free_slot}


@dataclass(frozen=True, slots=True)
class DoorRefusal:
    """The request would finish ``late_s`` after its deadline behind ``queued`` requests (or the
    adapter itself runs ``lag_s`` late); come back after ``retry_after_s``."""

    late_s: float
    queued: int
    retry_after_s: float
    warming: bool
    lag_s: float = 0.0

    @property
    def reason(self) -> str:
        if self.lag_s > 0.0:
            return f"the adapter is overloaded (its loop runs {1000 * self.lag_s:.0f} ms late)"
        return (
            f"would finish about {1000 * self.late_s:.0f} ms after its deadline behind "
            f"{self.queued} queued requests"
        )


def expected_finish(
    now: float,
    *,
    size: int,
    queued: int,
    batch_limit: int,
    slots: int,
    estimate_ms: Callable[[int], float],
    drain_s_per_instance: float | None = None,
    free_at: float = -math.inf,
    company_per_s: float = 0.0,
    free_slots: int = 0,
) -> float:
    """When a request of ``size`` instances with ``queued`` instances ahead should finish;
    ``free_at``: when the first slot frees, when every slot holds a batch in flight. Its own
    batch leaves then and after the full rounds ahead of it, with the ``company_per_s``
    (instances a second admitted) that arrive until it does: priced as the batch it rides,
    not as the queue is now, so that its promise leaves the batch's head the time a batch of
    that size takes (priced by the queue as it was, a flood's batches were cut short by their
    heads' deadlines, to 3-4 where 10 carried the load, and a fifth of what the door admitted
    finished late without the margin; tests/test_door_flood.py). With
    ``drain_s_per_instance`` (the queue's measured pace, :class:`Drain`), the later of the
    model's finish and the pace's: evidence over the model. The pace is of a queue that waits
    for capacity, so it prices only what the ``free_slots`` (slots with no batch in flight) do
    not take at once: a queue that waits for company behind an idle replica leaves with the
    next batch, and priced at the backlog's pace from its first instance, embed's door made
    16-30 % of its refusals with a replica idle at 1x-10x its capacity on a two-core VM
    (``door_refused_free_slot`` in the overload benchmark's JSON)."""
    limit = max(1, batch_limit)
    full, rest = divmod(queued, limit)
    rounds = full // max(1, slots)
    # its own batch leaves once a slot frees and the rounds ahead have gone, with the company
    # admitted until then
    leaves = max(now, free_at) + rounds * estimate_ms(limit) / 1000.0
    company = math.ceil(company_per_s * (leaves - now)) if leaves > now else 0
    own = min(limit, rest + size + company)
    finish = leaves + estimate_ms(own) / 1000.0
    waiting = queued - max(0, free_slots) * limit  # what the free slots do not take at once
    if waiting > 0 and drain_s_per_instance is not None:
        measured = now + waiting * drain_s_per_instance + estimate_ms(min(batch_limit, size)) / 1e3
        finish = max(finish, measured)
    return finish


def at_the_door(
    now: float,
    due: float,
    *,
    size: int,
    queued: int,
    queued_requests: int,
    batch_limit: int,
    slots: int,
    ready: int,
    estimate_ms: Callable[[int], float],
    slo_s: float,
    lag_s: float = 0.0,
    lag_fraction: float = 0.5,
    drain_s_per_instance: float | None = None,
    margin_s: float = 0.0,
    allowance_s: float = 0.0,
    finish: float | None = None,
    free_at: float = -math.inf,
    after_s: float = 0.0,
    company_per_s: float = 0.0,
    free_slots: int = 0,
) -> DoorRefusal | None:
    """Admit (None) or refuse a request due at ``due`` (see the module docstring);
    ``allowance_s``: the margin the evidence of late finishes asks for (:class:`Lateness`);
    ``finish``: the door's :func:`expected_finish` when the caller has it already; ``free_at``:
    when the first slot frees, if every slot is busy (the batches in flight hold the queue back);
    ``after_s``: what the stages after this one are expected to take (a chain's first stage
    judges the whole chain, even with nothing queued ahead of it here); ``free_slots``: slots
    with no batch in flight (:func:`expected_finish`)."""
    if lag_s > lag_fraction * slo_s:
        retry = max(MIN_RETRY_S, math.ceil(lag_s))
        return DoorRefusal(0.0, queued_requests, retry, warming=ready == 0, lag_s=lag_s)
    if ready == 0:
        return None  # scaling from zero: the cold start is waited through, as the activator does
    if queued == 0 and after_s <= 0.0:
        # nothing ahead: only its own service time could make it late, and refusing would stop
        # the batches that correct a latency model gone stale (it would refuse for ever)
        return None
    if finish is None:
        finish = expected_finish(
            now,
            size=size,
            queued=queued,
            batch_limit=batch_limit,
            slots=slots,
            estimate_ms=estimate_ms,
            drain_s_per_instance=drain_s_per_instance,
            free_at=free_at,
            company_per_s=company_per_s,
            free_slots=free_slots,
        )
    late_s = finish + after_s + margin_s + allowance_s - due
    if late_s <= 0.0:
        return None
    # the queue ahead drains at about the rate the estimate assumed: the request would fit
    # again once the part it would be late by has drained
    return DoorRefusal(
        late_s, queued_requests, float(max(MIN_RETRY_S, math.ceil(late_s))), warming=False
    )


def holds_until(now: float, refusal: DoorRefusal) -> float:
    """Until when a refusal at ``now`` (of one instance with the function's own SLO, the
    loosest a request can ask for) answers the next requests as well.

    Refused because the queue ahead would finish ``late_s`` after its deadline: a request that
    comes ``dt`` later has a deadline ``dt`` later, and while everything is refused the queue
    ahead only drains, so by the rule's own arithmetic it fits again no sooner than ``late_s``
    after. Held at most :data:`HOLD_MAX_S`, so a replica that became ready or an estimate that
    moved is looked at again within it. A refusal for the loop's lag, or while no replica is
    ready, is not held (``now``): those are judged afresh for each request."""
    if refusal.warming or refusal.lag_s > 0.0:
        return now
    return now + min(refusal.late_s, HOLD_MAX_S)
