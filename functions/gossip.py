"""How many adapters (frontends) a function has heard from lately: Swayam's gossip of n_F.

Several adapter replicas may front the same functions, each seeing only its share of the traffic.
Swayam (Middleware'17, §4) lets every frontend estimate the global arrival rate as ``n_F`` times its
own, where ``n_F`` is learnt without the frontends talking to each other: the backends count the
distinct frontends that sent them requests within the last ``t_setup`` and report that number
back on every response. Frontends that hear the same count compute the same replica floor.

Here a frontend names itself in the request header :data:`FRONTEND_ID` and says which window it
wants counted in :data:`FRONTEND_WINDOW_S`; the function answers with :data:`FRONTENDS`. The tally
is pure (the caller passes the time) and bounded: at most ``max_ids`` frontends are remembered,
the least recently seen are forgotten first, and nothing older than ``max_window_s`` is kept.
"""

from __future__ import annotations

import math
from collections import OrderedDict

__all__ = [
    "FrontendTally",
    "parse_window",
]

#: the window when a request names none (seconds)
DEFAULT_WINDOW_S = 60.0


def parse_window(
    raw: str | None, *, default: float = DEFAULT_WINDOW_S, cap: float = 3600.0
) -> float:
    """The window a request asked for, within ``(0, cap]``; ``default`` when absent or bad."""
    if raw is None:
        return default
    try:
        value = float(raw)
    except ValueError:
        return default
    if not math.isfinite(value) or value <= 0:
        return default
    return min(value, cap)


class FrontendTally:
    """Distinct frontends seen, each with the last time it was seen."""

    __slots__ = ("_last", "max_ids", "max_window_s")

    def __init__(self, *, max_ids: int = 1024, max_window_s: float = 3600.0) -> None:
        if max_ids < 1:
            raise ValueError(f"max_ids must be >= 1, got {max_ids!r}")
        self.max_ids = max_ids
        self.max_window_s = max_window_s
        self._last: OrderedDict[str, float] = OrderedDict()

    def seen(self, frontend: str, now: float) -> None:
        """Note a request from ``frontend`` at ``now``."""
        last = self._last
        last[frontend] = now
        last.move_to_end(frontend)
        while len(last) > self.max_ids:
            last.popitem(last=False)
        horizon = now - self.max_window_s
        while last:
            oldest = next(iter(last))
            if last[oldest] >= horizon:
                break
            del last[oldest]

    def count(self, now: float, window_s: float) -> int:
        """Frontends seen within the last ``window_s`` seconds (at least 1 once any was seen)."""
        horizon = now - window_s
        return sum(1 for t in self._last.values() if t >= horizon)
