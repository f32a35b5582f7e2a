"""How many of a port's new connections to refuse at the socket: what the doors cannot admit.

Under a flood of clients that open a connection per request, each connection the event loop
takes in costs it the most a refusal can cost before the door's answer is known
(:mod:`adapter.serving.steer`). :class:`SteerShare` keeps the recent rates of predicts admitted
(``A``) and of predicts in all (``λ``: admitted, refused by a door, and refused at the socket in
the doors' stead), exponential averages over ``tau_s``, and steers ``1 - seen · A / λ`` of new
connections to the socket's refusal (at most ``most``): the doors then still see ``seen`` times
what they admit, so their batches fill and their own rules choose what is served, and the rest is
refused for the price of the system calls. Under load the doors admit all of, the share is 0
(``A = λ``); after a flood it falls as soon as the doors admit what they see (at twice the
capacity with ``seen`` 2, nothing is steered; at ten times, 80 %).

A connection is steered before anything says which function it asks for, so the share is 0 while
any function's door admits most of what reaches it (more than ``spare`` of it, with requests in
the last few ``tau_s``): a flood on one function does not refuse, at random, the requests of
another that has room for them.
Pure: the time and the counts are arguments.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

__all__ = ["SteerShare"]

#: requests a second at a door below which it is not asked whether it has room (none lately)
_ASKED = 0.5


class SteerShare:
    """The share of new connections to refuse at the socket (see the module)."""

    def __init__(
        self, *, tau_s: float = 0.5, seen: float = 2.0, most: float = 0.95, spare: float = 0.75
    ) -> None:
        if not (tau_s > 0.0 and math.isfinite(tau_s)):
            raise ValueError(f"tau_s must be positive, got {tau_s!r}")
        if not (seen >= 1.0 and math.isfinite(seen)):
            raise ValueError(f"seen must be at least 1, got {seen!r}")
        if not 0.0 <= most <= 1.0:
            raise ValueError(f"most must be within 0..1, got {most!r}")
        self.tau_s = tau_s
        self.seen = seen
        self.most = most
        self.spare = spare
        #: the recent rates (per second) of predicts admitted and of predicts in all
        self.admitted = 0.0
        self.total = 0.0
        #: each function's recent rates at its door: (admitted, admitted and refused)
        self.doors: dict[str, tuple[float, float]] = {}
        self._at: float | None = None

    def observe(
        self, now: float, doors: Mapping[str, tuple[int, int]], refused_elsewhere: int = 0
    ) -> float:
        """At ``now``, each function's predicts admitted and refused at its door since the last
        call (``doors``: name -> (admitted, refused)) and those refused at the socket in the
        doors' stead (steered); the share of new connections to steer. Refusals of the adapter's
        own saturation (the loop's lag, a standing accept queue) are not the doors' and are left
        out: the drop-head refuses those cheaply already, and steering for them took the loop's
        choice and served less (digits at three times its capacity)."""
        if refused_elsewhere < 0 or any(a < 0 or r < 0 for a, r in doors.values()):
            raise ValueError(f"counts must be >= 0, got {dict(doors)!r}, {refused_elsewhere!r}")
        last = self._at
        self._at = now
        if last is None or now <= last:
            return self.share
        dt = now - last
        weight = 1.0 - math.exp(-dt / self.tau_s)
        admitted = sum(a for a, _ in doors.values())
        total = admitted + sum(r for _, r in doors.values()) + refused_elsewhere
        self.admitted += weight * (admitted / dt - self.admitted)
        self.total += weight * (total / dt - self.total)
        for name in self.doors.keys() | doors.keys():
            a, r = doors.get(name, (0, 0))
            was_a, was_t = self.doors.get(name, (0.0, 0.0))
            self.doors[name] = (
                was_a + weight * (a / dt - was_a),
                was_t + weight * ((a + r) / dt - was_t),
            )
        return self.share

    @property
    def share(self) -> float:
        if self.total <= 0.0:
            return 0.0
        for admitted, total in self.doors.values():
            if total > _ASKED and admitted > self.spare * total:
                return 0.0  # a function with room: its requests are not refused at random
        return min(self.most, max(0.0, 1.0 - self.seen * self.admitted / self.total))
