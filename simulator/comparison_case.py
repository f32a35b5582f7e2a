"""What every scaler's run in the resource comparison shares (a :class:`Case`), and its row.

A :class:`Case` is the config's single-function workload at one rate and seed: the same
arrivals (the config's trace scaled to the rate, or Poisson), stage policy, service curves, SLA
and limits for every scaler of :mod:`simulator.comparison`; :func:`scaler_row` is what one run
reports (replica-seconds, compliance frequency, violations, cold-start hits, latencies).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from simulator.compliance import compliance_pct
from simulator.config import AutoscalingConfig, SimConfig
from simulator.results import SimResult
from simulator.run_setup import app_slos_ms
from simulator.runner import arrivals_for, curves_for
from simulator.service import ServiceCurve
from simulator.swayam_scalers import Clairvoyant, window_needs
from slackwise_policies.slack import StagePolicy, stage_policy

__all__ = ["Case", "bootstrap_count", "case_for", "run_arrivals", "scaler_row", "scaler_settings"]


def run_arrivals(config: SimConfig, rate_rps: float, seed: int) -> list[float]:
    traced = arrivals_for(config, rate_rps, seed)
    if traced is not None:
        return traced
    rng = random.Random(seed)
    t, out = 0.0, []
    for _ in range(config.requests):
        t += rng.expovariate(rate_rps)
        out.append(t)
    return out


def scaler_settings(config: SimConfig) -> AutoscalingConfig:
    if config.autoscaling is None:
        raise ValueError(f"{config.source}: no autoscaling section to compare scalers with")
    return config.autoscaling


class Case(NamedTuple):
    """What every scaler's run of a config shares: the function, policy, curves, load, SLA and
    limits."""

    fn_name: str
    policy: StagePolicy
    curves: dict[str, ServiceCurve]
    rate_rps: float
    seed: int
    arrivals: list[float]
    auto: AutoscalingConfig
    slo_ms: float
    level: float
    setup_s: float
    cap: int


def case_for(config: SimConfig, rate_rps: float, seed: int) -> Case:
    """The config's single-function workload at ``rate_rps`` (the same seeded arrivals for every
    scaler)."""
    auto = scaler_settings(config)
    curves = curves_for(config)
    app_name, app = next(iter(config.apps.items()))
    fn_name = app.stages[0]
    fn = config.functions[fn_name]
    curve = curves[fn_name]
    return Case(
        fn_name=fn_name,
        policy=stage_policy(auto.policy),
        curves=curves,
        rate_rps=rate_rps,
        seed=seed,
        arrivals=run_arrivals(config, rate_rps, seed),
        auto=auto,
        slo_ms=app_slos_ms(config, curves)[app_name],
        level=100.0 - config.max_violation_pct,
        setup_s=curve.cold_start_s if fn.cold_start_s is None else fn.cold_start_s,
        cap=fn.scaling.max_scale or 1000,
    )


def bootstrap_count(case: Case, model_need: Callable[[float], int]) -> int:
    """The ready replicas the learning scalers start with: ``autoscaling.bootstrap``, or the
    analytic ClairA2's initial count (Swayam pre-provisioned; no run starts cold)."""
    if case.auto.bootstrap is not None:
        return case.auto.bootstrap
    needs = window_needs(case.arrivals, tick_s=case.auto.tick_s, need=model_need)
    return Clairvoyant(
        {case.fn_name: needs}, tick_s=case.auto.tick_s, lookahead_s={case.fn_name: case.setup_s}
    ).initial(case.fn_name)


def scaler_row(
    name: str,
    result: SimResult,
    latencies: np.ndarray,
    slo_ms: float,
    level: float,
    auto: AutoscalingConfig,
    setup_s: float,
    bootstrap: int | None,
    rounds: int | None,
) -> dict[str, Any]:
    f = result.functions[0]
    row = {
        "replica_seconds": round(result.replica_seconds, 3),
        "compliance_pct": round(
            compliance_pct(
                latencies,
                rt_max_ms=slo_ms,
                service_level_pct=level,
                window=auto.window,
                step=auto.step,
            ),
            3,
        ),
        "violation_pct": round(result.violation_pct, 4),
        "cold_start_hits": f.cold_start_hits,
        "requests": result.requests,
        "p50_ms": round(result.p50_ms, 3),
        "p99_ms": round(result.p99_ms, 3),
        "mean_batch": round(result.mean_batch, 3),
        "mean_replicas": round(result.replica_seconds / result.duration_s, 3)
        if result.duration_s
        else 0.0,
        "peak_replicas": f.peak_replicas,
        "cold_batches": f.cold_batches,
        "duration_s": round(result.duration_s, 3),
        "bootstrap": bootstrap
        if name in ("kpa", "advisor", "slackwise", "swayam", "hindsight")
        else None,
        "setup_s": 0.0 if name == "minimal_a1" else round(setup_s, 3),
    }
    if rounds is not None:
        row["clair_rounds"] = rounds
    return row
