"""Traces the project makes up (for tests and demos); each one is labelled ``synthetic``."""

from __future__ import annotations

import math
from collections.abc import Sequence

from traces.errors import TraceError
from traces.trace import Trace


def _check(name: str, value: float, *, positive: bool = False) -> None:
    if not math.isfinite(value) or value < 0 or (positive and value == 0):
        kind = "positive" if positive else "non-negative"
        raise TraceError(f"{name} must be a {kind} number, got {value!r}")


def step_trace(levels_rps: Sequence[float], *, step_s: float = 1.0) -> Trace:
    """One step per level, each ``step_s`` seconds long."""
    for level in levels_rps:
        _check("level", level)
    levels = ", ".join(f"{r:g}" for r in levels_rps)
    return Trace(tuple(levels_rps), step_s, f"synthetic steps [{levels}] rps", True)


def ramp_trace(
    start_rps: float, end_rps: float, *, duration_s: float, step_s: float = 1.0
) -> Trace:
    """A linear ramp from ``start_rps`` to ``end_rps`` over ``duration_s``."""
    _check("start_rps", start_rps)
    _check("end_rps", end_rps)
    _check("duration_s", duration_s, positive=True)
    _check("step_s", step_s, positive=True)
    n = max(1, round(duration_s / step_s))
    rates = tuple(
        start_rps + (end_rps - start_rps) * (i / (n - 1) if n > 1 else 1.0) for i in range(n)
    )
    source = f"synthetic ramp {start_rps:g}->{end_rps:g} rps over {duration_s:g} s"
    return Trace(rates, step_s, source, True)


def spike_trace(
    base_rps: float,
    peak_rps: float,
    *,
    duration_s: float,
    spike_at_s: float,
    spike_s: float,
    step_s: float = 1.0,
) -> Trace:
    """``base_rps`` throughout, except ``peak_rps`` from ``spike_at_s`` for ``spike_s``."""
    for name, value in (("base_rps", base_rps), ("peak_rps", peak_rps), ("spike_at_s", spike_at_s)):
        _check(name, value)
    for name, value in (("duration_s", duration_s), ("spike_s", spike_s), ("step_s", step_s)):
        _check(name, value, positive=True)
    n = max(1, round(duration_s / step_s))
    rates = tuple(
        peak_rps if spike_at_s <= i * step_s < spike_at_s + spike_s else base_rps for i in range(n)
    )
    source = (
        f"synthetic spike {base_rps:g} rps with {peak_rps:g} rps at {spike_at_s:g} s "
        f"for {spike_s:g} s, {duration_s:g} s in all"
    )
    return Trace(rates, step_s, source, True)
