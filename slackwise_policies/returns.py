"""What a scale-in costs when the need comes back: each replica's hold priced by the SLA.

:mod:`slackwise_policies.onsets` prices the last replica: a cold start after a lull delays the
requests of one setup time, and once those are more than one window of the SLA may miss, the
last replica stays through lulls. The replicas above it have the same price when the need
drops and comes back. After the count falls below ``k``, a return of the need to ``k`` starts
the ``k``-th replica cold, and for one setup time the ``k - 1`` kept replicas take what arrives
alone: the arrivals beyond what they carry wait out the setup, and when those are more than a
window's allowance, that window (and the ones that overlap it) fails. On Azure's LLM
code-completion hour (docs/simulator.md) the count fell from two to one after each burst and
the next burst came 280-340 s later, from about 30 requests a second to 140-200 within one:
the one burst the kept replica could not carry failed about 4 % of the hour's windows.

:class:`Returns` measures that price where it is paid. At each return of a level (the count
rises to ``k`` after it had fallen below it) it counts the arrivals of the next setup time
beyond what the ``k - 1`` kept replicas carry (the model's rate for ``needed`` replicas at the
rise, in proportion, which is what the model itself sizes them for), and when that excess is
more than the allowance, it keeps the time since the level was last needed: the hold that
would have covered the return. From then on level ``k`` stays for ``MARGIN`` times the longest
of the last ``SAMPLES`` such times after it was last needed (at most ``HOLD_S``). A need that
returns gently (the kept replicas carry what arrives while the next one starts, as on a trace
whose rate moves gradually) keeps nothing, and a level whose returns stop breaking windows is
let go once its hold has passed. Pure: the time is an argument.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from slackwise_policies.settings_error import integer, number

__all__ = ["BURST_HOLD_S", "HOLD_S", "MARGIN", "SAMPLES", "Returns"]

#: the costly returns per level whose longest gap sets the hold
SAMPLES = 5
#: the hold over the longest gap (a return a little later than the last one is still covered)
MARGIN = 1.1
#: the longest hold: twice Swayam's collection period (a level needed again only after ten
#: minutes costs a cold start; holding it that long costs more replica-seconds than the burst)
HOLD_S = 600.0
#: how long a bursty function keeps each level after it was last needed: Swayam's collection
#: period in Fig. 9 (a backend unused that long is collected)
BURST_HOLD_S = 300.0


@dataclass
class _Rise:
    """A return being measured: from ``start`` to ``end`` (one setup time), what the kept
    replicas carry a second, and each returning level's gap since it was last needed."""

    start: float
    end: float
    carried_per_s: float
    gaps: dict[int, float]
    seen: int = 0


@dataclass
class Returns:
    """Each level's returns after the count fell below it, and the holds they ask for."""

    allowance: int
    samples: int = SAMPLES
    margin: float = MARGIN
    hold_s: float = HOLD_S
    burst_hold_s: float = BURST_HOLD_S
    #: the last time the model needed at least each level (2 and up)
    _needed_at: dict[int, float] = field(default_factory=dict)
    #: the levels the count is below now, each since when
    _below: dict[int, float] = field(default_factory=dict)
    #: each level's last returns, newest last: the gap before one that broke a window, None
    #: for one the kept replicas carried
    _returns: dict[int, deque[float | None]] = field(default_factory=dict)
    _open: list[_Rise] = field(default_factory=list)
    _count: int = 0
    #: the last verdict in words (shown in the function's status)
    reason: str = "no return measured yet"

    def __post_init__(self) -> None:
        integer("allowance", self.allowance, 0)
        integer("samples", self.samples, 1)
        number("margin", self.margin)
        number("hold_s", self.hold_s, allow_low=True)
        number("burst_hold_s", self.burst_hold_s, allow_low=True)

    def arrived(self, now: float, count: int) -> None:
        """``count`` requests arrived at ``now``."""
        self._close(now)
        for rise in self._open:
            rise.seen += count

    def level(self, now: float, *, bursty: bool = False) -> int:
        """The highest level :meth:`hold` keeps at ``now`` (0: none)."""
        self._close(now)
        held = 0
        for level, at in self._needed_at.items():
            if level > held and now - at < self.hold(level, bursty=bursty):
                held = level
        return held

    def hold(self, level: int, *, bursty: bool = False) -> float:
        """How long ``level`` stays after it was last needed: ``margin`` times the longest gap
        before its recent costly returns (at most ``hold_s``); none when its recent returns
        were all carried. Before any return of the level was measured, a ``bursty`` function (its
        lulls end in more requests than a window may miss: its demand has jumped faster than a
        replica starts) keeps it ``burst_hold_s``."""
        returns = self._returns.get(level)
        if not returns:
            return self.burst_hold_s if bursty else 0.0
        costly = [gap for gap in returns if gap is not None]
        return min(self.hold_s, self.margin * max(costly)) if costly else 0.0

    def decided(
        self, now: float, *, needed: int, count: int, model_rate: float, setup_s: float
    ) -> None:
        """The count written at ``now`` for a model that ``needed`` that many replicas for
        ``model_rate`` (requests a second), with ``setup_s`` the cold start measured now."""
        self._close(now)
        if count > self._count:
            gaps = {
                level: now - self._needed_at[level]
                for level in range(max(2, self._count + 1), count + 1)
                if level in self._below and level in self._needed_at
            }
            if gaps:
                carried = model_rate * self._count / max(1, needed)
                self._open.append(_Rise(now, now + max(0.0, setup_s), carried, gaps))
        for level in range(2, count + 1):
            self._below.pop(level, None)
        for level in range(count + 1, max(self._count, count) + 1):
            self._below.setdefault(level, now)
        for level in range(2, needed + 1):
            self._needed_at[level] = now
        self._count = count

    def _close(self, now: float) -> None:
        still: list[_Rise] = []
        for rise in self._open:
            if now < rise.end:
                still.append(rise)
                continue
            excess = rise.seen - rise.carried_per_s * (rise.end - rise.start)
            top = max(rise.gaps)
            costly = excess > self.allowance
            for level, gap in rise.gaps.items():
                kept = self._returns.setdefault(level, deque(maxlen=self.samples))
                kept.append(gap if costly else None)
            if costly:
                self.reason = (
                    f"level {top} came back {rise.gaps[top]:.0f} s after it was last needed with "
                    f"{excess:.0f} requests beyond the kept replicas in one setup time, more than "
                    f"the {self.allowance} a window may miss: held {self.hold(top):.0f} s"
                )
            else:
                self.reason = (
                    f"level {top} came back with {max(0.0, excess):.0f} requests beyond the kept "
                    f"replicas in one setup time, within the {self.allowance} a window may miss"
                )
        self._open = still
