"""How many of a port's new connections to refuse at the socket: what the doors cannot admit.

Under a flood of clients that open a connection per request, each connection the event loop
takes in costs it the most a refusal can cost before the door's answer is known
(:mod:`adapter.serving.steer`). :class:`SteerShare` keeps the recent rates of predicts admitted
(``A``) and of predicts in all (``λ``: admitted, refused by a door or before parsing, and refused
at the socket), exponential averages over ``tau_s``, and steers ``1 - seen · A / λ`` of new
connections to the socket's refusal (at most ``most``): the doors then still see ``seen`` times
what they admit, so their batches fill and their own rules choose what is served, and the rest is
refused for the price of the system calls. Under load the doors admit all of, the share is 0
(``A = λ``); after a flood it falls as soon as the doors admit what they see (at twice the
capacity with ``seen`` 2, nothing is steered; at ten times, 80 %).
Pure: the time and the counts are arguments.
"""

from __future__ import annotations

import math

__all__ = ["SteerShare"]


class SteerShare:
    """The share of new connections to refuse at the socket (see the module)."""

    def __init__(self, *, tau_s: float = 0.5, seen: float = 2.0, most: float = 0.95) -> None:
        if not (tau_s > 0.0 and math.isfinite(tau_s)):
            raise ValueError(f"tau_s must be positive, got {tau_s!r}")
        if not (seen >= 1.0 and math.isfinite(seen)):
            raise ValueError(f"seen must be at least 1, got {seen!r}")
        if not 0.0 <= most <= 1.0:
            raise ValueError(f"most must be within 0..1, got {most!r}")
        self.tau_s = tau_s
        self.seen = seen
        self.most = most
        #: the recent rates (per second) of predicts admitted and of predicts in all
        self.admitted = 0.0
        self.total = 0.0
        self._at: float | None = None

    def observe(self, now: float, admitted: int, refused: int) -> float:
        """``admitted`` and ``refused`` predicts since the last call (refused: by a door, before
        parsing, or at the socket), at ``now``; the share of new connections to steer."""
        if admitted < 0 or refused < 0:
            raise ValueError(f"counts must be >= 0, got {admitted!r}, {refused!r}")
        last = self._at
        self._at = now
        if last is not None and now > last:
            dt = now - last
            weight = 1.0 - math.exp(-dt / self.tau_s)
            self.admitted += weight * (admitted / dt - self.admitted)
            self.total += weight * ((admitted + refused) / dt - self.total)
        return self.share

    @property
    def share(self) -> float:
        if self.total <= 0.0:
            return 0.0
        return min(self.most, max(0.0, 1.0 - self.seen * self.admitted / self.total))
