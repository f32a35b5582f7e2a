"""The overload benchmark's capacity search, apart from the load it drives: which rate to probe
next, and what the probes so far say the capacity is.

``benchmarks/overload_cells.py`` runs each probe (an open-loop load at a rate, passed when
>= 99 % of what it sent was answered within the SLO) and feeds the outcome here, so the rule is
a pure object that tests drive with any pass/fail sequence.

The rule: step from the closed loop's estimate (x1.5 up, x0.7 down) until a pass and a failure
bracket the capacity, then bisect geometrically; while no probe has failed, probe on up to
``max_probes``, doubling from the sixth, and on until ``min_bisections`` probes have bisected a
bracket. The latest evidence wins: a pass at or above a failure drops the failure (what a flood
before it left behind, faded), a failure at or below a pass drops the pass.

**A failure is run again once before it counts** (a pass is not): a probe fails on one stall
of a few hundred milliseconds (the host's steal, a replica's collection), which a shared
two-core machine has in any minute, while a pass needs 99 % of its requests in time over all
its seconds, which luck does not give. Counted at once, one stalled probe became the bracket's
top and the bisection closed on the last pass below it: the chain's search in a run of
c45fbbf probed 1+, 2+, 2.25-, then 2+ three times and called 2 req/s its capacity. Only the
first failure was run again before (a probe the closed loop's flood failed alone). The second
run's outcome is the one that counts; the pair is one step of the search, both in ``probes``.

**And the failure that tops the bracket is probed once more before the search ends**, after the
passes below it: run back to back, a failure and its confirmation share what came before them
(the door's margin from the closed loop's flood, a minute of the host's steal). At 09c5476 embed
failed its first rate, 16 req/s, twice in a row, passed 11-16 and stopped at 16, while its 10x
cell then served 124 req/s within the SLO. A pass there drops the failure and the search goes
on up.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

#: probes before the search may stop
PROBES = 6
#: more probes while none has failed, doubling the rate: a capacity that no probe bracketed is
#: only a lower bound (the chain's closed-loop estimate is a small part of it: the door refuses
#: most of a closed loop's flood); confirmations of failures do not count against it
MAX_PROBES = 12
#: probes that bisect a bracket at least (within MAX_PROBES), however late it was found
MIN_BISECTIONS = 2


@dataclass
class CapacitySearch:
    """Where the search stands: the next rate (:attr:`rate`), the highest pass and the lowest
    failure that bracket the capacity, and each probe's outcome as it was fed."""

    rate: float
    probes: int = PROBES
    max_probes: int = MAX_PROBES
    min_bisections: int = MIN_BISECTIONS
    passed: float | None = None
    failed: float | None = None
    #: (rate, passed, counted): every probe run; ``counted`` False for a failure that was run
    #: again before it counted
    outcomes: list[tuple[float, bool, bool]] = field(default_factory=list)
    bisections: int = 0
    #: the last probe failed and is being run again before it counts
    confirming: bool = False
    #: the bracket's top is being probed once more before the search ends
    rechecking: bool = False
    #: the failures probed once more at the end (each at most once)
    rechecked: set[float] = field(default_factory=set)

    def __post_init__(self) -> None:
        if not self.rate > 0.0:
            raise ValueError(f"the first rate must be > 0, got {self.rate!r}")

    @property
    def steps(self) -> int:
        """Probes that counted (a failure and its confirmation are one)."""
        return sum(counted for _, _, counted in self.outcomes)

    def more(self) -> bool:
        """Whether to probe again (at :attr:`rate`; at the end, pointed at the bracket's top
        once more)."""
        if self.confirming:
            return True
        steps = self.steps
        unsettled = self.failed is None or self.bisections < self.min_bisections
        if steps < self.probes or (steps < self.max_probes and unsettled):
            return True
        if self.failed is not None and self.failed not in self.rechecked:
            self.rate, self.rechecking = self.failed, True
            return True
        return False

    def record(self, ok: bool) -> None:
        """The probe at :attr:`rate` passed (``ok``) or failed; moves :attr:`rate` on."""
        rate = self.rate
        if self.rechecking:  # its outcome counts at once: it confirms or drops the failure
            self.rechecking = False
            self.rechecked.add(rate)
        elif not ok and not self.confirming:
            self.confirming = True  # run it again: one stall fails a probe
            self.outcomes.append((rate, ok, False))
            return
        self.confirming = False
        self.outcomes.append((rate, ok, True))
        self.bisections += self.passed is not None and self.failed is not None
        if ok:
            self.passed = rate if self.passed is None else max(self.passed, rate)
            if self.failed is not None and self.failed <= rate:
                self.failed = None
        else:
            self.failed = rate if self.failed is None else min(self.failed, rate)
            if self.passed is not None and self.passed >= rate:
                self.passed = None
        if self.passed is not None and self.failed is not None:
            self.rate = math.sqrt(self.passed * self.failed)
        elif self.failed is None:
            self.rate = rate * (1.5 if self.steps < self.probes - 1 else 2.0)
        else:
            self.rate = rate * 0.7
