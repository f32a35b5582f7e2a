"""Synthetic traces shaped after AutoScale's (Gandhi et al., TOCS 2012), which are not available
offline: an hour of per-second rates, peak 1000, each labelled ``synthetic``.

The shapes follow the names and outlines of AutoScale's traces as MLProxy replayed them, not
their data: ``big_spike`` (a steady base with one five-minute spike to 3.3×), ``dual_phase``
(a low phase, then a steep step to a high one), ``steep_tri_phase`` (low, a steep rise to the
peak, then a middle level), ``large_variations`` (swings between 10 % and 100 % every 15
minutes). A seeded ±5 % per-second jitter keeps them from being perfectly flat.

    .venv/bin/python -m simulator.shapes experiments/sim/traces

writes ``synthetic-autoscale-<shape>.rps.txt`` (per-second counts, a ``#`` header naming the
shape) for ``traces.load_trace``.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

from traces.trace import Trace

__all__ = ["SHAPES", "shaped_trace", "write_shapes"]

DURATION_S = 3600
PEAK = 1000.0


def _ramp(t: float, at: float, width: float) -> float:
    """0 before ``at``, 1 after ``at + width``, linear between."""
    return min(1.0, max(0.0, (t - at) / width))


def _big_spike(t: float) -> float:
    up = _ramp(t, 1800.0, 60.0) - _ramp(t, 2100.0, 60.0)
    return 0.3 + 0.7 * up


def _dual_phase(t: float) -> float:
    return 0.25 + 0.75 * _ramp(t, 1800.0, 30.0)


def _steep_tri_phase(t: float) -> float:
    return 0.2 + 0.8 * _ramp(t, 1200.0, 30.0) - 0.5 * _ramp(t, 2400.0, 30.0)


def _large_variations(t: float) -> float:
    return 0.55 + 0.45 * math.sin(2.0 * math.pi * t / 900.0)


#: shape name -> rate as a fraction of the peak at second ``t``
SHAPES: dict[str, Callable[[float], float]] = {
    "big_spike": _big_spike,
    "dual_phase": _dual_phase,
    "steep_tri_phase": _steep_tri_phase,
    "large_variations": _large_variations,
}


def shaped_trace(shape: str, *, seed: int = 1, peak: float = PEAK) -> Trace:
    """One hour of ``shape`` at one-second steps, its highest step ``peak`` (before jitter)."""
    if shape not in SHAPES:
        raise ValueError(f"shape must be one of {', '.join(SHAPES)}, got {shape!r}")
    f = SHAPES[shape]
    rng = np.random.default_rng(seed)
    jitter = rng.uniform(0.95, 1.05, size=DURATION_S)
    rates = tuple(round(peak * f(float(t)) * float(jitter[t])) for t in range(DURATION_S))
    return Trace(tuple(float(r) for r in rates), 1.0, f"synthetic AutoScale-shaped {shape}", True)


def write_shapes(directory: Path, *, seed: int = 1) -> list[Path]:
    """Every shape as a per-second count file in ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for shape in SHAPES:
        trace = shaped_trace(shape, seed=seed)
        path = directory / f"synthetic-autoscale-{shape.replace('_', '-')}.rps.txt"
        lines = [f"# {trace.source}, seed {seed}: requests per second, {DURATION_S} s"]
        lines += [str(int(r)) for r in trace.rates_rps]
        path.write_text("\n".join(lines) + "\n")
        paths.append(path)
    return paths


if __name__ == "__main__":
    for written in write_shapes(Path(sys.argv[1] if len(sys.argv) > 1 else ".")):
        print(written)
