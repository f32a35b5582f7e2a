"""What a simulated run takes from its config before its first event: app SLOs, scaler, arrivals.

Each app's SLO (``slo_ms``, or ``slo_factor`` × its stages' batch-1 medians in the profile set),
the scaler the config's platform names (fixed nodes or Knative's KPA), and Poisson arrival times
for a run with no trace (:class:`simulator.engine.Simulation` reads all three).
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Mapping

from simulator.config import SimConfig
from simulator.scalers import FixedScaler, KpaScaler, Scaler
from simulator.service import ServiceCurve

__all__ = ["app_slos_ms", "make_scaler", "poisson_arrivals"]


def app_slos_ms(config: SimConfig, curves: Mapping[str, ServiceCurve]) -> dict[str, float]:
    """Each app's SLO: ``slo_ms``, or ``slo_factor`` × the sum of its stages' batch-1 medians."""
    return {
        name: app.slo_ms
        if app.slo_ms is not None
        else app.slo_factor * sum(curves[s].median_ms(1) for s in app.stages)
        for name, app in config.apps.items()
    }


def make_scaler(config: SimConfig) -> Scaler:
    """The config's scaler: fixed nodes per function, or Knative's KPA."""
    if config.scaling == "fixed":
        return FixedScaler({n: f.nodes for n, f in config.functions.items()})
    return KpaScaler(
        {n: f.scaling for n, f in config.functions.items()},
        tick_s=config.autoscaler.tick_interval_s,
    )


def poisson_arrivals(rng: random.Random, rate: float, count: int) -> Iterator[float]:
    """``count`` arrival times of a Poisson process at ``rate`` per second, drawn from ``rng``."""
    t = 0.0
    expo = rng.expovariate
    for _ in range(count):
        t += expo(rate)
        yield t
