"""Additive-increase, multiplicative-decrease of a function's max batch size (MLProxy Alg. 2).

MLProxy (SEAMS'22) §2.4 raises ``Max_BS`` by a constant every 30 s unless the window shows a
violation, then multiplies it by 0.8. A violation is a response-time P95 above a fraction of the
SLO (80 % in the paper) or a ratio of timeout dispatches above a user threshold. :class:`AIMD`
keeps that loop as a pure object: :meth:`AIMD.record` feeds it, :meth:`AIMD.update` (called as
often as the adapter likes, with ``now`` in monotonic seconds) makes one decision per period.

Rules chosen where the paper leaves room:

* **Samples are per request.** :meth:`AIMD.record` is called once for each request that left the
  function's stage, with its own latency and SLO (the stage budget or the end-to-end SLO), whether
  it missed, whether its batch was dispatched on timeout and whether its batch hit a cold start.
  The timeout ratio is then "requests being timed out" (§2.4's wording), request-weighted; with
  ``timeouts_per_batch`` (the MLProxy mode) it is Algorithm 2's input, "the ratio of batches
  being dispatched due to timeout", from :meth:`AIMD.dispatched`.
* **The window.** The paper's monitor keeps "the latest response time values" in a sliding
  window and gives it no length; judged at each 30 s decision over the last 30 s, a sliding
  window and a tumbling one hold the same samples, which is what this does.
* **P95 against varying SLOs.** Requests may carry different budgets, so the P95 test is on the
  ratio ``latency / SLO``: a violation when its P95 exceeds ``p95_fraction``. The reported
  ``p95_ms`` is the plain latency P95 of the judged samples.
* **Misses.** Besides MLProxy's two tests, a deadline-miss ratio above ``miss_threshold`` is a
  violation (``None`` turns it off, as in MLProxy).
* **Cold starts.** With ``cold_aware`` a window where more than ``cold_dominated`` of the samples
  came from cold starts holds the limit (``"hold-cold"``): it says nothing about batch size, and
  growing batches while replicas start would compound the delay. A window below that share is
  judged on its warm samples only. Without ``cold_aware`` (the MLProxy baseline) cold samples
  count like any other.
* **Empty window** holds (``"hold-idle"``).
* **A backlog the limit holds back** (``backlog_mult``; slackwise's mode, not MLProxy's): the
  adapter tells :meth:`AIMD.dispatched` whether each batch was *bound*, taken whole at the limit
  while requests stayed queued for a slot. Then the limit, not the arrivals, sets the batch size,
  and every period spent below the size the batches could have had costs throughput while the
  queue waits. So when at least half the dispatches of a window were bound, the window is judged
  already ``backlog_period_s`` after it opened (on that finer grid), and without a violation the
  limit grows multiplicatively (``"increase-backlog"``: times ``backlog_mult``, at least
  ``+add``), like TCP's slow start. Judged by what the batch size controls, the batches' P95
  against the SLO and the timeout ratio, not by misses: behind a backlog requests miss because
  they queued, and a batch too small to drain the queue is the cause, not the cure. The full
  tests still judge the whole window at the period's end. Evidence over the schedule: a quiet
  function keeps MLProxy's slow additive steps.
* **Limit arithmetic.** The limit is kept as a float so that a fractional ``add`` accumulates;
  :attr:`AIMD.limit` is its floor, always within ``[minimum, maximum]``.
* **Periods.** The first :meth:`record` or :meth:`update` starts the clock. A period ends at
  ``start + k·period_s``; an :meth:`update` after several periods makes one decision over
  everything recorded since the last one and realigns to the grid.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from slackwise_policies.settings_error import SettingsError, boolean, integer, number, within

__all__ = ["AIMD", "AIMDDecision", "AIMDSettings", "Action", "WindowStats"]

Action = Literal["increase", "increase-backlog", "decrease", "hold-cold", "hold-idle"]


@dataclass(frozen=True, slots=True, kw_only=True)
class WindowStats:
    """What one period saw. ``cold_ratio`` is over all ``samples``; the miss and timeout ratios
    and both P95s are over the ``judged`` samples (the warm ones when cold-aware, else all)."""

    samples: int
    judged: int
    miss_ratio: float
    p95_ms: float
    p95_slo_fraction: float
    timeout_ratio: float
    cold_ratio: float


@dataclass(frozen=True, slots=True, kw_only=True)
class AIMDDecision:
    """One period's decision, for the adapter's log: the limit before and after, and why."""

    at: float
    old_limit: int
    new_limit: int
    action: Action
    stats: WindowStats
    violations: tuple[str, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class AIMDSettings:
    """How one mode tunes its functions' max batch size (``adapter.aimd`` sets any field over
    the mode's own, :mod:`slackwise_policies.modes`). The defaults are MLProxy's Algorithm 2 as
    published: start at 1, +1 every 30 s, x0.8 on a P95 above 80 % of the SLO or on more than
    ``timeout_ratio_threshold`` of the batches leaving on their timeout (the paper leaves it to
    the user), cold starts judged like any sample, no miss test, no growth behind a backlog."""

    #: the starting and smallest limit (each within the function's maximum batch)
    initial: int = 1
    minimum: int = 1
    add: float = 1.0
    mult: float = 0.8
    period_s: float = 30.0
    #: a deadline-miss ratio above it is a violation (None: no such test)
    miss_threshold: float | None = None
    p95_fraction: float = 0.8
    timeout_ratio_threshold: float | None = 0.9
    cold_aware: bool = False
    cold_dominated: float = 0.5
    #: the growth of a limit that holds a backlog back, judged every ``backlog_period_s``
    backlog_mult: float | None = None
    backlog_period_s: float = 1.0
    #: the timeout ratio over batches (Algorithm 2) rather than requests
    timeouts_per_batch: bool = True

    def __post_init__(self) -> None:
        integer("initial", self.initial, 1)
        integer("minimum", self.minimum, 1)
        number("add", self.add)
        within("mult", self.mult, 0.0, 1.0)
        number("period_s", self.period_s)
        number("p95_fraction", self.p95_fraction)
        for key in ("miss_threshold", "timeout_ratio_threshold", "cold_dominated"):
            ratio = getattr(self, key)
            if ratio is not None:
                within(key, ratio, 0.0, 1.0, closed="[]")
        if self.backlog_mult is not None:
            number("backlog_mult", self.backlog_mult, low=1.0)
        number("backlog_period_s", self.backlog_period_s)
        boolean("cold_aware", self.cold_aware)
        boolean("timeouts_per_batch", self.timeouts_per_batch)


def _p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]


class AIMD:
    """The max batch size of one function, tuned once per period (MLProxy Algorithm 2)."""

    def __init__(
        self,
        settings: AIMDSettings,
        *,
        maximum: int,
        initial: float | None = None,
        minimum: int | None = None,
    ) -> None:
        """The limit of a function whose batches hold at most ``maximum``; it starts at
        ``initial`` and never falls below ``minimum`` (the settings' own, within ``maximum``,
        unless given)."""
        integer("maximum", maximum, 1)
        minimum = min(settings.minimum, maximum) if minimum is None else minimum
        initial = min(settings.initial, maximum) if initial is None else initial
        if minimum < 1:
            raise SettingsError("minimum", f"must be >= 1, got {minimum!r}")
        if maximum < minimum:
            raise SettingsError("maximum", f"must be >= minimum ({minimum}), got {maximum!r}")
        if not minimum <= initial <= maximum:
            raise SettingsError(
                "initial", f"must be within [{minimum}, {maximum}], got {initial!r}"
            )
        self.settings = settings
        self._value = float(initial)
        self._minimum = minimum
        self._maximum = maximum
        self._add = settings.add
        self._mult = settings.mult
        self._period_s = settings.period_s
        self._miss_threshold = settings.miss_threshold
        self._p95_fraction = settings.p95_fraction
        self._timeout_threshold = settings.timeout_ratio_threshold
        self._cold_aware = settings.cold_aware
        self._cold_dominated = settings.cold_dominated
        self._backlog_mult = settings.backlog_mult
        self._backlog_period_s = min(settings.backlog_period_s, settings.period_s)
        self._timeouts_per_batch = settings.timeouts_per_batch
        self._start: float | None = None
        #: the next point of the finer grid where a backlog-bound window is judged
        self._next_look = math.inf
        self._decided: AIMDDecision | None = None
        self._reset_window()

    def _reset_window(self) -> None:
        self._samples = 0
        self._cold = 0
        self._misses = 0
        self._timeouts = 0
        self._latencies: list[float] = []
        self._fractions: list[float] = []
        self._dispatches = 0
        self._bound = 0
        self._held_back = False
        self._timeout_batches = 0

    @property
    def limit(self) -> int:
        """The current max batch size, an int within ``[minimum, maximum]``."""
        return min(self._maximum, max(self._minimum, math.floor(self._value)))

    def record(
        self,
        now: float,
        *,
        latency_ms: float,
        slo_ms: float,
        missed: bool,
        timeout_dispatch: bool,
        cold: bool,
    ) -> None:
        """Count one finished request (see the module docstring for what each flag means)."""
        if not (math.isfinite(latency_ms) and latency_ms >= 0):
            raise ValueError(f"latency_ms must be a finite number >= 0, got {latency_ms!r}")
        if not (math.isfinite(slo_ms) and slo_ms > 0):
            raise ValueError(f"slo_ms must be > 0, got {slo_ms!r}")
        self._roll(now)
        self._samples += 1
        if cold:
            self._cold += 1
            if self._cold_aware:
                return
        self._misses += missed
        self._timeouts += timeout_dispatch
        self._latencies.append(latency_ms)
        self._fractions.append(latency_ms / slo_ms)

    def dispatched(self, now: float, *, bound: bool, timeout: bool = False) -> None:
        """A batch left at ``now``; ``bound``: taken whole at the limit while requests stayed
        queued for a slot (the limit, not the arrivals, set its size); ``timeout``: it left on
        its dispatch timeout (counted per batch with ``timeouts_per_batch``)."""
        self._roll(now)
        self._dispatches += 1
        self._bound += bound
        self._timeout_batches += timeout

    @property
    def listens_for_held_back(self) -> bool:
        """Would :meth:`held_back` change anything now? (Only with the backlog rule, below the
        maximum, and once a window: the door asks before it does the work of finding out.)"""
        return (
            self._backlog_mult is not None and not self._held_back and self._value < self._maximum
        )

    def held_back(self, now: float) -> None:
        """The door refused a request at ``now`` that batches at the maximum would have admitted:
        the limit, not the load, refused it, and the window counts as bound by the limit."""
        self._roll(now)
        self._held_back = True

    def update(self, now: float) -> AIMDDecision | None:
        """The decision taken at the end of the period ``now`` closed, if one did since the last
        call; otherwise ``None``.

        Periods end on fixed boundaries (multiples of ``period_s`` from the first call), and a
        window holds exactly the samples recorded before its boundary: :meth:`record` closes a
        finished period before counting. So the limit at any time depends only on what was
        recorded and when, never on how often the caller asks (the live loop asks on every step,
        the simulator only when it schedules; both see the same limits)."""
        self._roll(now)
        decision, self._decided = self._decided, None
        return decision

    def _roll(self, now: float) -> None:
        if self._start is None:
            self._start = now
            self._next_look = now + self._backlog_period_s
            return
        elapsed = now - self._start
        if elapsed < self._period_s:
            if now >= self._next_look:
                self._look(now)
            return
        self._start += self._period_s * math.floor(elapsed / self._period_s)
        self._next_look = self._start + self._backlog_period_s
        stats = self._stats()
        self._reset_window()
        old = self.limit
        violations: tuple[str, ...] = ()
        if stats.samples == 0:
            action: Action = "hold-idle"
        elif self._cold_aware and (stats.cold_ratio > self._cold_dominated or stats.judged == 0):
            action = "hold-cold"
        else:
            violations = self._violations(stats)
            action = "decrease" if violations else "increase"
        if action == "decrease":
            self._value = max(float(self._minimum), self._value * self._mult)
        elif action == "increase":
            self._value = min(float(self._maximum), self._value + self._add)
        self._decide(now, old, action, stats, violations)

    def _look(self, now: float) -> None:
        """On the finer grid inside a period: a window whose batches were mostly bound by the
        limit, with nothing wrong, grows the limit now (see the module docstring)."""
        grid = self._backlog_period_s
        assert self._start is not None
        # the grid point just passed: the window holds what was recorded before it (every
        # record and dispatch rolls first), however often the caller asks
        point = self._start + grid * math.floor((now - self._start) / grid)
        self._next_look = point + grid
        if self._backlog_mult is None or self._value >= self._maximum:
            return
        if self._dispatches == 0 or (2 * self._bound < self._dispatches and not self._held_back):
            return
        stats = self._stats()
        if stats.judged == 0 or (self._cold_aware and stats.cold_ratio > self._cold_dominated):
            return
        if self._violations(stats, misses=False):
            return  # judged again at the period's end, as any window
        old = self.limit
        grown = max(self._value + self._add, self._value * self._backlog_mult)
        self._value = min(float(self._maximum), grown)
        self._start = point  # a new window opens at the grid point, on its own grids
        self._reset_window()
        self._decide(now, old, "increase-backlog", stats, ())

    def _decide(
        self,
        now: float,
        old: int,
        action: Action,
        stats: WindowStats,
        violations: tuple[str, ...],
    ) -> None:
        self._decided = AIMDDecision(
            at=now,
            old_limit=old,
            new_limit=self.limit,
            action=action,
            stats=stats,
            violations=violations,
        )

    def _stats(self) -> WindowStats:
        judged = len(self._latencies)
        return WindowStats(
            samples=self._samples,
            judged=judged,
            miss_ratio=self._misses / judged if judged else 0.0,
            p95_ms=_p95(self._latencies) if judged else 0.0,
            p95_slo_fraction=_p95(self._fractions) if judged else 0.0,
            timeout_ratio=self._timeout_ratio(judged),
            cold_ratio=self._cold / self._samples if self._samples else 0.0,
        )

    def _timeout_ratio(self, judged: int) -> float:
        """Requests that left on a timeout over those judged, or (``timeouts_per_batch``:
        MLProxy's Algorithm 2, "the ratio of batches being dispatched due to timeout") batches
        over batches."""
        if self._timeouts_per_batch:
            return self._timeout_batches / self._dispatches if self._dispatches else 0.0
        return self._timeouts / judged if judged else 0.0

    def _violations(self, stats: WindowStats, *, misses: bool = True) -> tuple[str, ...]:
        found: list[str] = []
        if misses and self._miss_threshold is not None and stats.miss_ratio > self._miss_threshold:
            found.append(f"miss ratio {stats.miss_ratio:.3f} > {self._miss_threshold}")
        if stats.p95_slo_fraction > self._p95_fraction:
            found.append(f"P95/SLO {stats.p95_slo_fraction:.3f} > {self._p95_fraction}")
        if self._timeout_threshold is not None and stats.timeout_ratio > self._timeout_threshold:
            found.append(f"timeout ratio {stats.timeout_ratio:.3f} > {self._timeout_threshold}")
        return tuple(found)
