"""A disturbance in the simulator's world: every replica's service slowed or stopped for a window.

The live experiment's ``slow`` (every replica throttled to ``1 / factor`` of its CPU time) and
``pause`` (replicas stopped) as the engine sees them: a batch does ``work_s`` of work at full speed
outside the window, at ``1 / factor`` of it inside (none while paused), so a batch that starts
before the window and runs into it is slowed only for the part inside. Every replica of every
function is affected, also one started during the window (each container has the same limit).
``cpu`` (busy processes beside everything) has no counterpart here: the simulator has no cores
to share, and is refused when the config is read. Pure: the times are arguments.
"""

from __future__ import annotations

from slackwise_core.config.model import Disturbance

__all__ = ["SIMULATED", "finish_s"]

#: the kinds the simulator applies
SIMULATED = ("slow", "pause")


def finish_s(d: Disturbance | None, start: float, work_s: float) -> float:
    """When a batch started at ``start`` with ``work_s`` seconds of full-speed work finishes."""
    if d is None or start >= d.end_s or start + work_s <= d.start_s:
        return start + work_s
    t, left = start, work_s
    if t < d.start_s:  # full speed up to the window
        left -= d.start_s - t
        t = d.start_s
    rate = 0.0 if d.kind == "pause" else 1.0 / d.factor
    inside = (d.end_s - t) * rate  # full-speed work the window leaves room for
    if rate > 0.0 and left <= inside:
        return t + left / rate
    return d.end_s + (left - inside)
