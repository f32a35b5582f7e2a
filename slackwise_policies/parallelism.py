"""How many of a function's batches are worth running at once: as many slots as pay.

A function's slots are its ready replicas times their ``containerConcurrency``, and the
controller fills every free one. That assumes the slots are independent. Replicas that share a
core (two replicas on one CPU of a small node, or pods without CPU limits on a busy one) are
not: a batch sent beside another runs at part of the core's speed, both finish later than
either would alone, and the work is done little sooner. Behind a door that promised the
requests queued after it a batch's usual time, such a batch breaks every one of those promises
(embed's overload layout puts the adapter and both replicas on one CPU,
``benchmarks/overload.py``; a per-batch trace of its cells at capacity on a two-core VM, an
instrumentation not kept in the tree, found the batches that ran far over their estimate were
nearly all ones that ran beside the other replica's, with nothing stolen by the host).

:class:`Parallelism` measures it rather than assuming it. Every warm batch is a sample of its
round trip over the latency model's estimate (``ratio``) against the number of the function's
other batches in flight while it ran, on average (``others``, 0 alone, 1 beside one for its
whole run). A weighted least-squares line ``ratio = a·(1 + c·others)``, forgetting old samples
(a half-life of 50 batches), gives ``c``, the slowdown one more batch in flight brings: 0
for independent slots, 1 for batches that share one core. A batch more than :data:`STALLED`
(2) times slower than sharing explains (a stall of every replica, which slows the batches in
flight together, and would read as sharing) is no sample. With ``k`` batches at once the work
goes ``k / (1 + c·(k - 1))`` times as fast as one at a time, so the ``k``-th slot pays when it
adds at least ``min_gain`` (15 %) of one batch's pace alone to that; :meth:`Parallelism.slots`
is the most slots that each pay. It judges only once both kinds of batch have been seen
(``min_weight`` each, in batches, within the half-life): a function whose replicas never
overlapped uses all its slots, and so does one whose slots are all busy for long (a slowdown of
every replica under a backlog is not told from sharing without batches alone to compare). The
evidence fades, so once a cap has held for about a hundred batches, every slot is tried again,
and the cap comes back only if they still do not pay (a replica moved to a core of its own, a
new one on another node). Measured live (``benchmarks/overload_ab.py`` records the slowdown
the controller judged at the end of each cell, ``beside_slowdown``): on that VM in a fast hour
embed's batches beside another ran 0.17-0.52 slower, under the 0.74 at which a second slot
stops paying, so every slot stayed in use (docs/reliability.md, "Slots that pay"). Pure: the
times are arguments.

What the door promises follows the same evidence (:meth:`Parallelism.price`). Its price of a
batch is the latency window's tail, read over batches that ran with the company they had (on
average ``m`` others beside them over the window); the queue ahead will drain through ``k``
slots at once, each batch then beside ``k - 1`` others. So the price is scaled by ``(1 + c(k -
1)) / (1 + c·m)``, with the last ``c`` judged (kept while the cap fades: the fading is how a
slot is tried again, not evidence that sharing stopped). Without it, each time the cap faded
the door priced two slots by the window of batches that ran alone: on the overload
benchmark's shared core (a batch beside another took 1.6-2.1 times the alone line), 117 of
the 140 requests given up at their deadlines in three runs of embed's 1x-10x cells waited
while a batch ran beside another; with the price, 28 of 115 (``benchmarks/late_admitted.py``
on the adapter's request records; docs/reliability.md, "Why the admitted were late, read from
the records").
"""

from __future__ import annotations

from collections import deque

from slackwise_policies.latency import RunningFit

__all__ = ["STALLED", "Parallelism"]

#: a batch slower than this many times its estimate for each batch in flight with it (itself
#: included) stalled: sharing a core explains no more, and it says nothing of the slots
STALLED = 2.0


class Parallelism:
    """The slots worth filling, from how batches beside each other ran (module docstring)."""

    def __init__(
        self,
        *,
        half_life: float = 50.0,
        min_gain: float = 0.15,
        min_weight: float = 3.0,
    ) -> None:
        self.decay = 0.5 ** (1.0 / half_life)
        self.min_gain = min_gain
        self.min_weight = min_weight
        # the line ratio = a + b·others (plain least squares: no prior to speak of), and the
        # weight of each kind of batch
        self._fit = RunningFit(1.0, 0.0, self.decay, 1e-9)
        self._alone = self._beside = 0.0
        #: when each batch in flight was sent, and the last batches answered (sent, end)
        self._sent: list[float] = []
        self._ended: deque[tuple[float, float]] = deque(maxlen=16)
        self.slowdown: float | None = None  # c, once judged
        #: the last c judged, kept while the judgement fades (what the door prices by)
        self.known: float | None = None
        #: (answered at, others) of the batches in the latency window: the company its tail had
        self._company: deque[tuple[float, float]] = deque()
        self._company_sum = 0.0  # of its others: the door reads the mean for every request

    def dispatched(self, now: float) -> None:
        """A batch left at ``now``."""
        self._sent.append(now)

    def failed(self, inflight: int) -> None:
        """A batch ended unanswered, ``inflight`` still out: it is no longer in flight."""
        while len(self._sent) > inflight:
            self._sent.pop(0)

    def answered(self, now: float, round_trip_s: float, ratio: float | None) -> float:
        """A batch sent ``round_trip_s`` before ``now`` was answered; with ``ratio`` (its round
        trip over the model's estimate; None when it says nothing: cold, or a stall of the
        caller) it is a sample. Returns the batches in flight beside it, on average."""
        sent = now - round_trip_s
        if self._sent:  # it is the one in flight sent nearest to when it was
            self._sent.remove(min(self._sent, key=lambda t: abs(t - sent)))
        beside = sum(now - max(sent, t) for t in self._sent if t < now)
        beside += sum(max(0.0, end - max(sent, t)) for t, end in self._ended if end > sent)
        self._ended.append((sent, now))
        others = beside / round_trip_s if round_trip_s > 0.0 else 0.0
        if ratio is not None and ratio <= STALLED * (1.0 + others):
            self._learn(min(others, 8.0), ratio)
            self._company.append((now, min(others, 8.0)))
            self._company_sum += min(others, 8.0)
        return others

    def _learn(self, x: float, y: float) -> None:
        d = self.decay
        self._fit.add(x, y)
        self._alone = d * self._alone + max(0.0, 1.0 - x)
        self._beside = d * self._beside + min(1.0, x)
        self.slowdown = None
        if min(self._alone, self._beside) >= self.min_weight:
            a, b = self._fit.coefficients()
            if a > 0.0:
                self.slowdown = self.known = max(0.0, b / a)

    def slots(self, slots: int) -> int:
        """Of ``slots``, the most that each add ``min_gain`` of one slot's pace to the work's."""
        c = self.slowdown
        if c is None or slots <= 1:
            return slots
        for k in range(2, slots + 1):
            before, after = (k - 1) / (1.0 + c * (k - 2)), k / (1.0 + c * (k - 1))
            if after - before < self.min_gain:
                return k - 1
        return slots

    def price(self, slots: int, now: float, window_s: float = 30.0) -> float:
        """What a batch priced by the last ``window_s`` of batches (the latency model's window)
        costs when ``slots`` run at once: ``(1 + c(slots - 1)) / (1 + c·m)``, at least 1
        (module docstring); 1 before ``c`` is known."""
        company = self._company
        while company and company[0][0] < now - window_s:
            self._company_sum -= company.popleft()[1]
        if not company:
            self._company_sum = 0.0  # no drift carried past an empty window
        c = self.known
        if c is None or not company:
            return 1.0
        mean = max(0.0, self._company_sum) / len(company)
        # never below 1: the window's tail is its slowest batches, those with company, so a
        # window of mixed company prices fewer slots at its own tail, not at its mean's
        return max(1.0, (1.0 + c * max(0, slots - 1)) / (1.0 + c * mean))

    def status(self) -> dict[str, float | None]:
        """For the function's status: ``c``, None until judged."""
        return {"beside_slowdown": None if self.slowdown is None else round(self.slowdown, 3)}
