"""Turning a recorded trace into the load of an experiment (pure functions on ``Trace``).

MLProxy replayed the AutoScale traces scaled so that their peak equals the highest rate the
cluster should see, each trace step held for a fixed time. The usual chain is::

    trace = window(trace, start_s, duration_s)   # or load only the window
    trace = downsample(trace, k)                 # optional: mean over k source seconds per step
    trace = scale_to_peak(trace, max_rps)        # peak becomes max_rps, proportions kept
    trace = hold(trace, step_s)                  # each step lasts step_s seconds of experiment
"""

from __future__ import annotations

import math
from dataclasses import replace

from traces.errors import TraceError
from traces.trace import Trace


def scale_to_peak(trace: Trace, max_rps: float) -> Trace:
    """``trace`` multiplied so that its highest step equals ``max_rps``."""
    if not (math.isfinite(max_rps) and max_rps >= 0):
        raise TraceError(f"max_rps must be a non-negative number, got {max_rps!r}")
    peak = trace.peak_rps
    if peak == 0:
        raise TraceError(f"cannot scale {trace.source or 'trace'} to a peak: every step is 0")
    factor = max_rps / peak
    rates = tuple(r * factor for r in trace.rates_rps)
    return replace(trace, rates_rps=rates, source=f"{trace.source}, scaled to peak {max_rps:g}")


def hold(trace: Trace, step_s: float) -> Trace:
    """``trace`` with each step lasting ``step_s`` seconds (the rates themselves unchanged)."""
    if not (math.isfinite(step_s) and step_s > 0):
        raise TraceError(f"step_s must be a positive number, got {step_s!r}")
    return replace(trace, step_s=step_s, source=f"{trace.source}, each step held {step_s:g} s")


def window(trace: Trace, start_s: float, duration_s: float | None = None) -> Trace:
    """The steps of ``trace`` that begin within ``[start_s, start_s + duration_s)``."""
    if not (math.isfinite(start_s) and start_s >= 0):
        raise TraceError(f"start_s must be a non-negative number, got {start_s!r}")
    if duration_s is not None and not (math.isfinite(duration_s) and duration_s > 0):
        raise TraceError(f"duration_s must be a positive number, got {duration_s!r}")
    first = math.ceil(start_s / trace.step_s - 1e-9)
    end = None if duration_s is None else math.ceil((start_s + duration_s) / trace.step_s - 1e-9)
    rates = trace.rates_rps[first:end]
    if not rates:
        raise TraceError(f"window from {start_s:g} s is past the end of {trace.source or 'trace'}")
    span = "end" if duration_s is None else f"{start_s + duration_s:g} s"
    return replace(trace, rates_rps=rates, source=f"{trace.source}, window {start_s:g} s..{span}")


def downsample(trace: Trace, factor: int) -> Trace:
    """``factor`` consecutive steps averaged into one step ``factor`` times as long.

    A last group shorter than ``factor`` is averaged over the steps it has.
    """
    if factor < 1:
        raise TraceError(f"downsample factor must be a positive integer, got {factor!r}")
    if factor == 1:
        return trace
    rates = trace.rates_rps
    groups = (rates[i : i + factor] for i in range(0, len(rates), factor))
    return replace(
        trace,
        rates_rps=tuple(sum(g) / len(g) for g in groups),
        step_s=trace.step_s * factor,
        source=f"{trace.source}, mean of every {factor} steps",
    )
