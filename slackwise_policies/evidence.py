"""Evidence over the model: the count steps up when measured outcomes disagree with the estimate.

The advisor sizes a function from a model: the arrival rate it forecasts and the service times
it has observed, replayed. When the world changes under it (a neighbour takes a core, a node is
slower, inputs grow, a new model version is slower), the model keeps saying the count suffices
and every decision re-confirms it from the same inputs, while requests miss their SLO. A scaler
that trusts its estimate over what it measures fails exactly then.

:class:`Evidence` keeps what the function's requests actually did, in one-second buckets over the
last ``window_s``: answered in time, missed (answered late, pruned late, or refused at the door
because they would be late). Requests still queued past their deadline (``overdue``) count as misses
too, at the moment of the decision: a stalled replica answers nothing, so outcomes alone would say
nothing until the stall ends. The model and the evidence *disagree* when more than ``miss_fraction``
of at least ``min_samples`` outcomes missed. Then :meth:`Evidence.floor` raises a floor under the
model's count at once (unless the model's own count rose within the last setup time and window: then
it saw the change too, and its replicas are judged once they are up, or the floor doubles a count
already raised for the same misses), multiplicatively (``factor``, as the KPA's panic mode doubles),
and again while the disagreement lasts once a setup time and a whole window have passed since the
last raise (new replicas need the setup before they can help, and until a window later it still
holds answers from before they were up: raising sooner only overshoots), but only when the last
raise helped (the share missing fell by a tenth) or requests wait in the queue past their deadline:
requests late in service itself (a service time over the SLO) are not helped by more replicas, and
doubling on would run to max-scale. A **stall** (requests queued past their deadline and no replica
answering any of the requests that arrived since its last answer, for ``STALL_S`` or more: every
replica stopped, a node paused; refusals at the door are not answers) sizes the first raise for the
backlog, not by the factor: a replica started now is up after ``setup_s``, and by then the queue
holds the stall's seconds so far plus the setup's of arrivals, none answered; the raise is what
carries the rate and drains that backlog within one evidence window, ``ceil(count × (1 + (stalled +
setup_s) / window_s))`` (the count in force carries the rate, so a backlog of ``s`` seconds of
arrivals drained in ``window_s`` asks ``s / window_s`` times it more). Doubling there left the
backlog to the replicas of a count sized for the rate alone, and every request arriving while they
drained it missed too. When the evidence agrees again for ``clear_s``, the floor steps down by half
its excess over the model's count (one replica at least) per ``clear_s`` (passive scale-in) until
the model's own count is above it, and it is gone: it came up by doubling, and it goes down as fast
(one replica a period took half an hour from a floor of 188). While the floor stands, the model's
inputs (the service times the advisor replays) come from the seconds since it was raised, at most
the last two evidence windows (:meth:`Evidence.recent_s`), not its long window, so the model itself
catches up with the change (and a stall's long batches leave it as soon as the stall is over). It
never stands under another autoscaler: it is part of the advisor's own count. Pure: the time is an
argument."""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

__all__ = ["STALL_S", "Evidence", "EvidenceConfig"]

#: how long requests wait with nothing answered before it is a stall: half a second, because
#: the first decision after a stall begins comes within a second of it (the advisor's tick), and
#: a whole second would then hang on whether a request arrived just before or just after the
#: last answer (in the simulated 10 s stall, seed 3 of three doubled where 1 and 2 sized for
#: the backlog); a replica that is not stopped answers within a batch's time, tens of ms here
STALL_S = 0.5


@dataclass(frozen=True, kw_only=True)
class EvidenceConfig:
    """How much disagreement raises the floor, how fast, and how it is released."""

    window_s: float = 3.0
    miss_fraction: float = 0.05
    min_samples: int = 5
    factor: float = 2.0
    clear_s: float = 10.0

    def __post_init__(self) -> None:
        if not (self.window_s > 0 and self.clear_s > 0):
            raise ValueError("window_s and clear_s must be positive")
        if not 0.0 <= self.miss_fraction < 1.0:
            raise ValueError(f"miss_fraction must be in [0, 1), got {self.miss_fraction!r}")
        if self.factor <= 1.0:
            raise ValueError(f"factor must be above 1, got {self.factor!r}")
        if self.min_samples < 1:
            raise ValueError(f"min_samples must be at least 1, got {self.min_samples!r}")


class Evidence:
    """One function's measured outcomes and the floor they demand (see the module docstring)."""

    def __init__(self, config: EvidenceConfig | None = None) -> None:
        self.config = config or EvidenceConfig()
        #: [second, outcomes, misses], oldest first
        self._buckets: deque[list[int]] = deque()
        self.level: int | None = None
        self._raised_at = -math.inf
        self._agree_since: float | None = None
        self._stepped_at = -math.inf
        #: when the standing floor was first raised (the disagreement's start, as seen)
        self._episode: float | None = None
        self.reason: str | None = None
        #: the share missing when the floor was last raised (did the raise help?)
        self._fraction = 1.0
        #: when the model's own count last rose above the count in force
        self._model_raised_at = -math.inf
        #: since when requests have waited with no replica answering (None: the last arrival
        #: was answered): a stall's length
        self._waiting_since: float | None = None

    def arrived(self, now: float) -> None:
        """A request arrived at ``now`` (the start of a wait, if nothing was waiting)."""
        if self._waiting_since is None:
            self._waiting_since = now

    def outcome(self, now: float, missed: bool, *, served: bool = True) -> None:
        """A request finished at ``now``: answered in time, or ``missed`` (late or refused);
        ``served``: a replica answered it (a refusal at the door or a pruned request was not)."""
        if served:
            self._waiting_since = None
        second = int(now)
        buckets = self._buckets
        if not buckets or buckets[-1][0] != second:
            buckets.append([second, 0, 0])
            self._trim(now)
        last = buckets[-1]
        last[1] += 1
        last[2] += int(missed)

    def _trim(self, now: float) -> None:
        oldest = now - self.config.window_s
        while self._buckets and self._buckets[0][0] + 1 <= oldest:
            self._buckets.popleft()

    def recent_s(self, now: float) -> float | None:
        """While the floor stands (the model was found wrong), how far back the model's inputs
        should look at ``now``: back to when the floor was first raised (at least a second, at
        most twice the evidence window), what the service times are since the change, not the
        long window that still holds the times before it, nor a stall that has ended; ``None``
        otherwise."""
        if self.level is None or self._episode is None:
            return None
        return min(max(1.0, now - self._episode), 2.0 * self.config.window_s)

    def stalled_s(self, now: float) -> float:
        """How long requests have waited at ``now`` with no replica answering (0 when the last
        arrival was answered; a lull's silence is not a stall: nothing waited through it)."""
        if self._waiting_since is None:
            return 0.0
        return max(0.0, now - self._waiting_since)

    def counts(self, now: float) -> tuple[int, int]:
        """Outcomes and misses over the last ``window_s``."""
        self._trim(now)
        return sum(b[1] for b in self._buckets), sum(b[2] for b in self._buckets)

    def disagrees(self, now: float, overdue: int = 0) -> bool:
        """Whether the outcomes of the window, and ``overdue`` requests still queued past their
        deadline, miss more than the model allows."""
        total, misses = self.counts(now)
        total, misses = total + overdue, misses + overdue
        cfg = self.config
        return total >= cfg.min_samples and misses > cfg.miss_fraction * total

    def floor(
        self, now: float, *, model: int, current: int, setup_s: float, most: int, overdue: int = 0
    ) -> int:
        """The count to ask for at ``now``: the model's, or the evidence's floor above it.

        ``current`` is the count in force, ``setup_s`` how long a new replica takes, ``most``
        the function's max-scale (0: unbounded), ``overdue`` how many requests wait in the
        queue past their deadline (not those waiting for a cold start)."""
        cfg = self.config
        cap = most if most > 0 else 10**6
        if model > current:  # the model saw it too and asks for more: judge that once it is up
            self._model_raised_at = now
        if self.disagrees(now, overdue):
            self._agree_since = None
            total, misses = self.counts(now)
            fraction = (misses + overdue) / (total + overdue)
            said = f"evidence: {misses} of {total} missed in {cfg.window_s:g} s" + (
                f", {overdue} queued past their deadline" if overdue else ""
            )
            last = max(self._raised_at, self._model_raised_at)
            if now - last < max(setup_s, 1.0) + cfg.window_s:
                pass  # the raised replicas' answers are not all the window holds yet
            elif self.level is not None and not overdue and fraction > 0.9 * self._fraction:
                # the last raise has had its setup time and the share missing did not fall, with
                # nothing waiting in the queue: the requests are late in service, not for want of
                # replicas, so more would not help (until they do, or something queues)
                self.reason = f"{said}; holding {self.level}: the last raise did not help"
            else:
                base = max(current, self.level or 0, 1)
                raised = min(cap, max(math.ceil(base * cfg.factor), base + 1))
                stalled = self.stalled_s(now) if overdue and self.level is None else 0.0
                if stalled >= STALL_S:  # a stall: sized for the backlog a new replica will meet
                    backlog_s = stalled + setup_s
                    raised = min(cap, max(raised, math.ceil(base * (1 + backlog_s / cfg.window_s))))
                    said += f", nothing answered for {stalled:.1f} s: sized for the backlog"
                if raised > (self.level or 0):
                    if self.level is None:
                        self._episode = now
                    self.level, self._raised_at, self._fraction = raised, now, fraction
                    self.reason = said
        elif self.level is not None:
            if self._agree_since is None:
                self._agree_since = self._stepped_at = now
            elif now - self._stepped_at >= cfg.clear_s:
                self._stepped_at = now
                # half the excess over the model's count (one replica at least): a floor doubled
                # in a swing comes down as it went up, not one replica per period for minutes
                self.level -= max(1, (self.level - model) // 2)
                if self.level <= model:
                    self.level, self.reason, self._episode = None, None, None
        if self.level is None:
            return model
        return max(model, min(self.level, cap))
