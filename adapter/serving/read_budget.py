"""Dispatch never waits behind the door: client reads get a bounded share of each loop turn.

One turn of the event loop reads every socket that became readable. Under a flood that is
thousands of client connections, each a request to parse, admit or refuse, and the replicas'
answers, which arrive on sockets of the same loop, wait until the turn is over: a batch that took
half a millisecond came back tens of milliseconds later, the latency model learnt the turn as
the batch's cost, the door refused what it could have served, and the next batch left a turn
late. The replicas then sat idle while the adapter refused (digits went from 40 % of its
capacity served at 1x to nothing at 5x).

:class:`ReadBudget` gives the client side at most ``budget_s`` of a turn. The first client read
of a turn starts its clock; a read after the budget is spent is not handled: its connection
keeps the bytes and waits in line, and the line is worked, oldest first, at the start of later
turns, again only while each turn's budget lasts. Everything else on the loop (the replicas'
answers, the answers they complete, timers, the dispatch they pump) runs in every turn as soon
as it is ready. Under light load no turn spends its budget and nothing ever waits. Holding a
read costs an append (the connection is not paused: a client waiting for its answer sends
nothing more; one that does keeps appending, and is paused past ``MAX_HELD_BYTES``). How long a
read waited in line is the connection's to use: it counts toward the request's SLO, and a
request that waited so long it can no longer be served in time is refused unparsed.

A line that drains slower than it fills is congested, and first in, first out would then serve
every request late: each waits behind all the others. So, as servers do under overload
(adaptive LIFO with a CoDel-like trigger), once the oldest read has waited ``max_wait_s``
(10 ms) longer than a turn of the loop takes now (CoDel's target sits above the time one
packet takes to leave; a read held for the next turn waits that turn whatever the line, and
under a flood of new connections a turn is 10-20 ms, so a fixed 10 ms refused nearly every read
held at all: digits at 3x its capacity, a connection per request, served 138 req/s; 384 with
the turn added; the turn is the larger of the loop's measured lateness and the one just ended,
timed from its first client read), and the line is no shorter than at the last turn's end
(CoDel waits out an interval before it drops, so that a burst is not taken for a
standing queue: here a burst behind one slow turn, say a 2,000-instance body parsed on a core
shared with other work, drains turn by turn, and its 15 small requests, each with nearly all
of its SLO left, were refused at first sight in CI; a flood's line does not shrink), every
read that old is refused at once (a canned 503 with ``Retry-After``, unparsed;
outside the budget: a refusal is owed either way, and it is the cheapest answer there is),
and the rest are worked newest first, so what is admitted is what still has its SLO ahead of
it. While the line stays congested (until a turn's own budget reads everything), a read the
newest-first pass does not reach is refused in that turn too: newer reads come ahead of it in
every turn to come, so waiting out ``max_wait_s`` would only delay the same refusal.

Those refusals are bounded too: at most ``refuse_s`` of them a turn (the server gives 2 % of the
tightest SLO: 2 ms for a 100 ms one), the rest in the turns after, oldest first. Refusing a flood
all at once made each turn as long as the flood (under a 10x flood, tens of milliseconds of
refusals a turn), and the replicas' answers, read in the next turn, waited behind it: the
admitted requests finished late, the door's margin grew to its cap, and it refused nearly all
(digits served 1-5 % of its capacity at 10x). With the refusals spread, a turn stays a few
milliseconds and what the door admits is served in time; the price is paid by the refused: under
a flood the adapter refuses more slowly than requests arrive, so a refusal waits longer (its P99
grows to a few hundred milliseconds at 10x) and a keep-alive client that waits for it sends less
(the rate on the wire falls: back-pressure, as a full accept queue gives). Measured before and
after in ``docs/reliability.md``.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable
from typing import Protocol

__all__ = ["MAX_HELD_BYTES", "Deferrable", "ReadBudget"]

#: bytes a waiting connection holds before the loop stops reading it
MAX_HELD_BYTES = 64 * 1024


class Deferrable(Protocol):
    """A client connection whose read can be handled a turn later."""

    def resume(self, waited_s: float) -> None:
        """Handle the bytes it holds, which waited ``waited_s`` in line."""

    def refuse(self, waited_s: float) -> None:
        """Refuse the request it holds, unparsed, if it can be (else handle it)."""


class ReadBudget:
    """Client reads within ``budget_s`` of each turn; the rest wait, paused (see the module)."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        budget_s: float = 0.002,
        max_wait_s: float = 0.01,
        refuse_s: float = 0.001,
        turn_s: Callable[[], float] = lambda: 0.0,
    ) -> None:
        self.loop = loop
        self.budget_s = budget_s
        self.max_wait_s = max_wait_s
        self.refuse_s = refuse_s
        #: how long a turn of the loop takes now (its measured lateness): a read held for the
        #: next turn waits that long whatever the line, so the line is congested only when its
        #: oldest read has waited ``max_wait_s`` *more* than that
        self.turn_s = turn_s
        self._started = 0.0
        self._armed = False
        self._waiting: deque[tuple[Deferrable, float]] = deque()
        #: the line has filled faster than it drains since its oldest read waited too long,
        #: and no turn since has ended with the line empty
        self._congested = False
        #: how many reads waited at the end of the last turn (0: it found none)
        self._last_len = 0
        #: reads handled a turn late, and those refused for waiting too long, in all
        self.deferred = 0
        self.refused = 0

    def over(self) -> bool:
        """Is this turn's budget for client reads spent? The first call of a turn starts it."""
        if not self._armed:
            self._arm()
            return False
        return time.perf_counter() - self._started > self.budget_s

    def _arm(self) -> None:
        self._armed = True
        self._started = time.perf_counter()
        self.loop.call_soon(self._turn_over)  # runs once this turn's I/O is handled

    def defer(self, conn: Deferrable) -> None:
        """``conn`` holds a read to handle in a later turn (it keeps the bytes)."""
        self._waiting.append((conn, time.perf_counter()))
        self.deferred += 1

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    def _turn_over(self) -> None:
        self._armed = False
        waiting = self._waiting
        if not waiting:
            self._congested = False  # a turn's own budget read everything: the flood is over
            self._last_len = 0
            return
        now = time.perf_counter()
        # the turn that just ended, from its first client read: a read held in it waited that
        # long whatever the line (one slow parse, a core taken away for a time slice), so only
        # a wait past it, or past the loop's measured lateness, says the line is not draining
        turn = now - self._started
        max_wait = self.max_wait_s + max(self.turn_s(), turn)
        if not self._congested and now - waiting[0][1] >= max_wait:
            # a line that waited too long is congested when it fills faster than it drains:
            # no shorter now than at the last turn's end (what came in since at least what
            # that turn served); a burst behind one stall drains turn by turn, a flood does not
            self._congested = len(waiting) >= self._last_len
        self._last_len = len(waiting)
        if not self._congested:
            while waiting and not self.over():  # a new turn's budget, spent on the oldest first
                conn, since = waiting.popleft()
                conn.resume(time.perf_counter() - since)
        else:
            self._congested = True
            spent = self._refuse_oldest(now, max_wait, 0.0)
            while waiting and now - waiting[-1][1] < max_wait and not self.over():
                conn, since = waiting.pop()
                conn.resume(time.perf_counter() - since)
            # what the newest-first pass did not reach has newer reads ahead of it in every
            # turn to come while the line fills faster than it drains: refused now, not after
            # waiting out ``max_wait`` for the same refusal
            self._refuse_oldest(now, 0.0, spent)
        if waiting and not self._armed:
            self._arm()

    def _refuse_oldest(self, now: float, older_than: float, spent: float) -> float:
        """Refuse reads that waited ``older_than`` or more, oldest first, while this turn's
        ``refuse_s`` lasts (``spent`` of it already; the rest in later turns): the time spent
        refusing this turn, in all."""
        waiting = self._waiting
        while waiting and now - waiting[0][1] >= older_than and spent <= self.refuse_s:
            started = time.perf_counter()
            conn, since = waiting.popleft()
            conn.refuse(started - since)
            self.refused += 1
            spent += time.perf_counter() - started
        return spent
