"""How many of a port's new connections to refuse at the socket: what the doors refuse anyway.

A door that holds a refusal (:meth:`adapter.serving.door.Door.held`) answers every request that
reaches it with that refusal until the hold ends, so while every door holds, a new connection
the event loop takes in is refused whatever it carries, after costing the loop the most a
refusal can cost (:mod:`adapter.serving.steer`). :class:`SteerShare` reads, at each sample,
whether every door holds, keeps the share of recent time they did (an exponential average over
``tau_s``), and returns ``fraction`` of it: the share of new connections placed where they are
refused for the price of the system calls. The rest still reach the doors, which decide as
before: a share steered at ``fraction`` of the time held leaves the loop more requests than the
doors admit, so the batches still fill and the doors' own holds keep telling the share.
Pure: the time is an argument.
"""

from __future__ import annotations

import math

__all__ = ["SteerShare"]


class SteerShare:
    """The share of new connections to refuse at the socket (see the module)."""

    def __init__(self, *, tau_s: float = 0.5, fraction: float = 0.9) -> None:
        if not (tau_s > 0.0 and math.isfinite(tau_s)):
            raise ValueError(f"tau_s must be positive, got {tau_s!r}")
        if not 0.0 <= fraction <= 1.0:
            raise ValueError(f"fraction must be within 0..1, got {fraction!r}")
        self.tau_s = tau_s
        self.fraction = fraction
        #: the recent share of time every door held a refusal
        self.held = 0.0
        self._at: float | None = None

    def observe(self, now: float, holding: bool) -> float:
        """Every door holds a refusal at ``now`` (``holding``), or not; the share to steer."""
        last = self._at
        self._at = now
        if last is not None and now > last:
            weight = 1.0 - math.exp(-(now - last) / self.tau_s)
            self.held += weight * ((1.0 if holding else 0.0) - self.held)
        return self.share

    @property
    def share(self) -> float:
        return self.fraction * self.held
