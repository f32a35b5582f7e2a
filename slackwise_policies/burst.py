"""The burst threshold ``U`` from evidence: raised while requests miss more than the SLO allows,
lowered slowly while they do not.

Swayam multiplies the forecast rate by a fixed burst threshold ``U`` (2 in its evaluation). What
``U`` a function needs depends on how its seconds swing about the forecast and on how far the
advisor's model is from the service it sizes: on the Fig. 9 traces the cheapest fixed ``U``
that keeps the SLA ranges from 1.3 (Twitter) to 2 (NASA), and on the steep trace the replay model
sizes 8 replicas for 1,100 req/s where 750 need 9-10 (docs/simulator.md). A fixed ``U`` pays the
worst trace's price on every trace. With ``advisor.burst_u: auto`` the advisor lets the measured
outcomes set it, as an integral controller on the share of requests that miss:

* **The allowance** is what the SLO lets miss: ``1 - percentile/100`` (1 % for a P99 SLO).
* **Raised** by ``up`` (x 1.15) when more than half the allowance of the last ``window_s`` of
  outcomes missed (at least ``min_samples`` of them; a window of 1,000 requests fails at the
  allowance, so the trigger sits under it), or when the last ``sla_window`` outcomes since the
  last raise missed more than the allowance (Swayam's compliance metric: a window of 1,000
  requests in which more than 10 miss a P99 SLO fails the SLA; misses come in clusters, a busy
  spell making a dozen late together, so the share over 10 s stays well under the allowance
  while window after window fails), at most once per setup time and window: the
  replicas the last raise asked for need a setup time to start and a window to be judged.
* **Held** ``hold_s`` (300 s) after a raise, then **lowered** by ``down`` (0.2 %) a second while
  at most a quarter of the allowance missed; between the two it holds.
* It starts at ``start`` (Swayam's 2) and stays within ``[least, most]``.

The advisor's other evidence (:mod:`slackwise_policies.evidence`) answers a gross disagreement (5 %
missing) at once with a floor that doubles; this answers the chronic one under it, which a P99
SLO cannot afford and that floor does not see. Requests that waited for a cold start are not
reported to it (the function's autoscaler leaves them out, as for the evidence's floor). Pure:
the time is an argument.
"""

from __future__ import annotations

import math
from collections import deque

__all__ = ["BurstThreshold"]

#: the factor of a raise
UP = 1.15
#: the share of U given back per calm second
DOWN = 0.002
#: how long a raised U is held before it may be lowered (Swayam's collection period in Fig. 9)
HOLD_S = 300.0
#: Swayam's SLA window: the requests over which the SLO percentile is judged (§5.1)
SLA_WINDOW = 1000
#: the largest U (a threshold that high is a fleet the model cannot size: the evidence's floor
#: and the knee take over)
MOST = 3.0


class BurstThreshold:
    """One function's measured misses over the last ``window_s`` and the ``U`` they ask for."""

    def __init__(
        self,
        *,
        percentile: float,
        start: float,
        least: float = 1.0,
        most: float = MOST,
        up: float = UP,
        down: float = DOWN,
        window_s: float = 10.0,
        min_samples: int = 100,
        hold_s: float = HOLD_S,
        sla_window: int = SLA_WINDOW,
    ) -> None:
        if not 0.0 < percentile < 100.0:
            raise ValueError(f"percentile must be within (0, 100), got {percentile!r}")
        if not 1.0 <= least <= start <= most:
            raise ValueError(f"need 1 <= least <= start <= most, got {least}, {start}, {most}")
        if not (up > 1.0 and 0.0 < down < 1.0):
            raise ValueError(f"need up > 1 and 0 < down < 1, got {up!r}, {down!r}")
        if not (math.isfinite(window_s) and window_s > 0.0) or min_samples < 1:
            raise ValueError("window_s must be > 0 and min_samples >= 1")
        if sla_window < 1:
            raise ValueError(f"sla_window must be >= 1, got {sla_window!r}")
        self.allowance = 1.0 - percentile / 100.0
        self.least, self.most, self.up, self.down = least, most, up, down
        self.window_s = window_s
        self.hold_s = hold_s
        self.min_samples = min_samples
        #: [second, answered, missed], oldest first
        self._seconds: deque[list[int]] = deque()
        #: the last ``sla_window`` outcomes since the last raise (True: missed) and their misses
        self._recent: deque[bool] = deque(maxlen=sla_window)
        self._recent_missed = 0
        #: the most a window of ``sla_window`` may miss and still meet the SLA
        self._window_allows = math.floor(self.allowance * sla_window + 1e-9)
        self._u = start
        self._updated: float | None = None
        self._raised = -math.inf
        #: why U is what it is (shown in the function's status)
        self.reason = f"start: {start:g}"

    @property
    def u(self) -> float:
        """The threshold as last updated."""
        return self._u

    def outcome(self, now: float, missed: bool) -> None:
        """A request finished at ``now``, in time or ``missed``."""
        second = math.floor(now)
        seconds = self._seconds
        if not seconds or seconds[-1][0] < second:
            seconds.append([second, 0, 0])
        bucket = seconds[-1]  # a finish reported late counts in the newest second
        bucket[1] += 1
        bucket[2] += int(missed)
        recent = self._recent
        if len(recent) == recent.maxlen:
            self._recent_missed -= recent[0]
        recent.append(missed)
        self._recent_missed += missed

    def update(self, now: float, setup_s: float) -> float:
        """``U`` at ``now`` after the outcomes of the last ``window_s``; idempotent per ``now``."""
        seconds = self._seconds
        while seconds and seconds[0][0] < now - self.window_s:
            seconds.popleft()
        last, self._updated = self._updated, now
        if last is None or now <= last:
            return self._u
        answered = sum(s[1] for s in seconds)
        missed = sum(s[2] for s in seconds)
        if answered < self.min_samples:
            return self._u
        share = missed / answered
        failing = self._recent_missed > self._window_allows
        if share > self.allowance / 2.0 or failing:
            if now - self._raised >= setup_s + self.window_s and self._u < self.most:
                self._u = min(self.most, self._u * self.up)
                self._raised = now
                self.reason = (
                    f"raised: {self._recent_missed} of the last {self._recent.maxlen} missed, "
                    f"{self._window_allows} allowed"
                    if failing
                    else f"raised: {100 * share:.1f} % missed, {100 * self.allowance:g} % allowed"
                )
                self._recent.clear()  # the next raise needs misses of its own
                self._recent_missed = 0
        elif share <= self.allowance / 4.0 and now - self._raised >= self.hold_s:
            self._u = max(self.least, self._u * (1.0 - self.down) ** (now - last))
            if self._u == self.least:
                self.reason = f"at the forecast: {100 * share:.2f} % missed"
                return self._u
            self.reason = f"lowered: {100 * share:.2f} % missed"
        return self._u
