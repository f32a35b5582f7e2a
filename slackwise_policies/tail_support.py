"""A tail quantile read only as far as the samples support it.

A nearest-rank ``q`` quantile of ``N`` samples is one of the few largest when ``N·(1 - q)`` is
small: at 0.99 over the hundred batches of a flood's first ten seconds it is the second
largest, a single event. Live, embed at twice its capacity on the two-core VM (one core for the
load generator, the other for the adapter and both replicas): one stall of the host slowed the
two batches in flight together to 1.8x their usual time. That pair set the P99 of every batch
size for the latency window's 30 s: the door priced a full batch at 340 ms where it had at 215
(the SLO is 300), and with the margin the late pair raised, admitted 70 requests a second where
it had 170, while the replicas ran as fast as before.

So the tail is read at ``min(q, 1 - TAIL_SUPPORT / N)``: never beyond the
:data:`TAIL_SUPPORT` (3) largest samples. A slowdown has to recur to set the price, and one that
recurs still does (a stall every two seconds is fifteen in a 30 s window; ``benchmarks/
door_flood.py --stalls-per-s``). A batch size's own window is read only once it holds
``TAIL_SUPPORT / (1 - q)`` samples (300 at 0.99); before that the ratios pooled over every
size, which hold more. Once a window holds that many, the rule is the nearest rank as before.
Pure.
"""

from __future__ import annotations

__all__ = ["TAIL_SUPPORT", "supported", "supported_quantile"]

#: the fewest samples at or beyond the rank a tail estimate is read at, less one
TAIL_SUPPORT = 3


def supported_quantile(q: float, samples: int) -> float:
    """The quantile ``samples`` support of the ``q`` asked for: never beyond the
    :data:`TAIL_SUPPORT` largest of them (``q`` itself once there are enough)."""
    return min(q, 1.0 - TAIL_SUPPORT / samples) if samples > 0 else q


def supported(q: float, samples: int) -> bool:
    """Do ``samples`` support the ``q`` quantile by themselves (its rank leaves
    :data:`TAIL_SUPPORT` of them beyond it)?"""
    return samples * (1.0 - q) >= TAIL_SUPPORT
