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

from slackwise_config.model import Disturbance

__all__ = ["SIMULATED", "finish_s"]

#: the kinds the simulator applies
SIMULATED = ("slow", "pause")


def finish_s(d: Disturbance | None, start: float, work_s: float) -> float:
    """When a batch started at ``start`` with ``work_s`` seconds of full-speed work finishes
    (through as many of a repeated disturbance's windows as it runs into)."""
    if d is None:
        return start + work_s
    t, left = start, work_s
    rate = 0.0 if d.kind == "pause" else 1.0 / d.factor
    for begin, end in d.windows():
        if t >= end:
            continue
        if t + left <= begin:
            break
        if t < begin:  # full speed up to the window
            left -= begin - t
            t = begin
        inside = (end - t) * rate  # full-speed work the window leaves room for
        if rate > 0.0 and left <= inside:
            return t + left / rate
        left -= inside
        t = end
    return t + left
