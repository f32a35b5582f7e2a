"""Runs of a config: one per policy, the SLA-throughput search, and the sweep over policies.

``max_rps_at_sla`` is the highest offered load at which the SLA holds, where the SLA holds when
at most ``sla.max_violation_pct`` (1 % by default) of the measured requests of all apps together
miss their app's SLO. It is found with a fixed seed and a fixed number of requests: the rate is
doubled or halved from the config's until the outcome flips, then bisected (geometrically) until
the bracket is narrower than ``search.tolerance`` (relative); the result is the bracket's lower,
passing end. A policy that misses the SLA even at ``search.low_rps`` scores 0.

``instances_at_load`` is GrandSLAM's Fig. 14 question turned around: at the config's own rate,
the fewest instances (nodes summed over functions) at which the SLA holds, every function's
node count scaled by one factor (rounded up, at least one each), found the same way (the factor
doubled or halved until the outcome flips, then bisected until the bracket's instance counts
differ by at most ``search.tolerance`` or one instance). ``None`` when even 16 × the config's
fleet does not hold it.

The sweep runs policies in up to ``jobs`` processes (spawned: each imports the package afresh,
so nothing but the frozen config crosses the boundary).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from simulator.config import SimConfig
from simulator.engine import SimResult, Simulation
from simulator.fleet_search import fewest_per_function
from simulator.pool import map_jobs
from simulator.profiles import resolve_curves
from simulator.run_setup import app_slos_ms
from simulator.service import ServiceCurve
from slackwise_policies.slack import PAPER_SUFFIX, VARIANTS, stage_policy

__all__ = [
    "arrivals_for",
    "curves_for",
    "instances_at_load",
    "max_rps_at_sla",
    "run_one",
    "scaled_fleet",
    "summarise",
    "sweep",
]


def curves_for(config: SimConfig) -> dict[str, ServiceCurve]:
    return resolve_curves(
        config.profile, {n: f.profile for n, f in config.functions.items()}, config.base_dir
    )


def arrivals_for(config: SimConfig, rate_rps: float, seed: int) -> list[float] | None:
    """Trace-driven arrival times (the trace's peak scaled to ``rate_rps``), or None: Poisson."""
    if config.trace is None:
        return None
    from traces import (
        downsample,
        hold,
        load_trace,
        poisson_schedule,
        resolve_trace,
        scale_to_peak,
        window,
    )

    t = config.trace
    name = t.name
    beside = config.base_dir / name
    if not Path(name).is_absolute() and not Path(name).exists() and beside.is_file():
        name = str(beside)  # a file named relative to the config
    trace = load_trace(resolve_trace(name))
    trace = window(trace, t.start_s, t.duration_s)
    trace = downsample(trace, t.downsample)
    if t.step_s is not None and t.step_s != trace.step_s:
        trace = hold(trace, t.step_s)
    return poisson_schedule(scale_to_peak(trace, rate_rps), seed=seed)


def run_one(
    config: SimConfig,
    policy: str,
    curves: dict[str, ServiceCurve],
    *,
    rate_rps: float,
    requests: int,
    seed: int,
) -> SimResult:
    return Simulation(
        config,
        stage_policy(policy),
        curves,
        rate_rps=rate_rps,
        requests=requests,
        seed=seed,
        arrivals=arrivals_for(config, rate_rps, seed),
    ).run()


def max_rps_at_sla(
    config: SimConfig, policy: str, curves: dict[str, ServiceCurve], *, seed: int
) -> float:
    """The highest rate at which the SLA holds (see the module docstring)."""
    s = config.search

    def holds(rate: float) -> bool:
        result = run_one(config, policy, curves, rate_rps=rate, requests=s.requests, seed=seed)
        return result.violation_pct <= config.max_violation_pct

    rate = min(max(config.rate_rps, s.low_rps), s.high_rps)
    if holds(rate):
        lo, hi = rate, rate * 2.0
        while hi < s.high_rps and holds(hi):
            lo, hi = hi, hi * 2.0
        if hi >= s.high_rps:
            if holds(s.high_rps):
                return s.high_rps
            hi = s.high_rps
    else:
        lo, hi = rate / 2.0, rate
        while not holds(lo):
            if lo <= s.low_rps:
                return 0.0
            lo, hi = max(lo / 2.0, s.low_rps), lo
    while hi / lo > 1.0 + s.tolerance:
        mid = math.sqrt(lo * hi)
        if holds(mid):
            lo = mid
        else:
            hi = mid
    return lo


def scaled_fleet(config: SimConfig, factor: float) -> SimConfig:
    """``config`` with every function's nodes × ``factor``, rounded up, at least one."""
    functions = {
        name: replace(fn, nodes=max(1, math.ceil(fn.nodes * factor - 1e-9)))
        for name, fn in config.functions.items()
    }
    return replace(config, functions=functions)


def _instances(config: SimConfig) -> int:
    return sum(fn.nodes for fn in config.functions.values())


#: the largest fleet ``instances_at_load`` tries, as a multiple of the config's
MAX_FLEET_FACTOR = 16.0


def holds_at_load(
    fleet: SimConfig, policy: str, curves: dict[str, ServiceCurve], *, seed: int
) -> bool:
    """Whether ``fleet`` holds the SLA at its rate (a search-sized run of ``policy``)."""
    result = run_one(
        fleet, policy, curves, rate_rps=fleet.rate_rps, requests=fleet.search.requests, seed=seed
    )
    return result.violation_pct <= fleet.max_violation_pct


def fleet_at_load(
    config: SimConfig, policy: str, curves: dict[str, ServiceCurve], *, seed: int
) -> SimConfig | None:
    """The smallest one-factor fleet that holds the SLA at the config's rate (see the module
    docstring); None past ``MAX_FLEET_FACTOR``."""
    s = config.search

    def holds(factor: float) -> bool:
        return holds_at_load(scaled_fleet(config, factor), policy, curves, seed=seed)

    least = 1.0 / max(fn.nodes for fn in config.functions.values())  # one node each
    if holds(1.0):
        lo, hi = 1.0, 1.0  # lo fails (once found), hi holds
        while True:
            lo = lo / 2.0
            if lo < least:
                lo = least
                if holds(lo):
                    return scaled_fleet(config, lo)
                break
            if not holds(lo):
                break
            hi = lo
    else:
        lo, hi = 1.0, 2.0
        while not holds(hi):
            if hi >= MAX_FLEET_FACTOR:
                return None
            lo, hi = hi, min(hi * 2.0, MAX_FLEET_FACTOR)
    while True:
        small, large = _instances(scaled_fleet(config, lo)), _instances(scaled_fleet(config, hi))
        if large - small <= max(1, round(s.tolerance * large)) or hi / lo < 1.001:
            return scaled_fleet(config, hi)  # (rounding up can leave a step no bisection closes)
        mid = math.sqrt(lo * hi)
        if holds(mid):
            hi = mid
        else:
            lo = mid


def instances_at_load(
    config: SimConfig, policy: str, curves: dict[str, ServiceCurve], *, seed: int
) -> int | None:
    """The fewest instances that hold the SLA at the config's rate (see the module docstring)."""
    fleet = fleet_at_load(config, policy, curves, seed=seed)
    return None if fleet is None else _instances(fleet)


def per_function_at_load(
    fleet: SimConfig, policy: str, curves: dict[str, ServiceCurve], *, seed: int
) -> dict[str, int]:
    """From a fleet that holds the SLA at its rate, the fewest nodes of each function that still
    hold it (:func:`simulator.fleet_search.fewest_per_function`)."""

    def holds(counts: Mapping[str, int]) -> bool:
        functions = {n: replace(fn, nodes=counts[n]) for n, fn in fleet.functions.items()}
        return holds_at_load(replace(fleet, functions=functions), policy, curves, seed=seed)

    return fewest_per_function({n: fn.nodes for n, fn in fleet.functions.items()}, holds)


def _policy_job(
    config: SimConfig,
    policy: str,
    rate_rps: float,
    requests: int,
    seed: int,
    search: bool,
    per_type: bool = False,
) -> dict[str, Any]:
    curves = curves_for(config)
    result = run_one(config, policy, curves, rate_rps=rate_rps, requests=requests, seed=seed)
    out = result.to_json()
    out["max_rps_at_sla"] = (
        round(max_rps_at_sla(config, policy, curves, seed=seed), 3) if search else None
    )
    out["instances"] = _instances(config)
    fleet = fleet_at_load(config, policy, curves, seed=seed) if search else None
    out["instances_at_load"] = None if fleet is None else _instances(fleet)
    if per_type and fleet is not None:
        counts = per_function_at_load(fleet, policy, curves, seed=seed)
        out["nodes_per_function_at_load"] = counts
        out["instances_at_load_per_type"] = sum(counts.values())
    return out


def sweep(
    config: SimConfig,
    *,
    policies: Sequence[str] | None = None,
    rate_rps: float | None = None,
    requests: int | None = None,
    seed: int | None = None,
    search: bool = True,
    per_type: bool = False,
    jobs: int = 1,
) -> dict[str, Any]:
    """Every policy on the config's workload; the OUT.json document. ``per_type`` adds Fig. 14
    per function type (the fewest nodes of each function at the config's rate) to the search."""
    names = [stage_policy(p).name for p in (policies or config.policies)]
    rate = config.rate_rps if rate_rps is None else rate_rps
    count = config.requests if requests is None else requests
    seed = config.seed if seed is None else seed
    curves = curves_for(config)  # fail early, in this process, on a bad profile set
    args = [(config, p, rate, count, seed, search, per_type) for p in names]
    results = map_jobs(_policy_job, args, jobs)
    by_name = dict(zip(names, results, strict=True))
    doc: dict[str, Any] = {
        "workload": config.workload,
        "profile": config.profile,
        "config": config.source,
        "scaling": config.scaling,
        "seed": seed,
        "rate_rps": rate,
        "requests": count,
        "trace": None if config.trace is None else config.trace.name,
        "sla": {
            "max_violation_pct": config.max_violation_pct,
            "slo_ms": {k: round(v, 3) for k, v in app_slos_ms(config, curves).items()},
            "search_requests": config.search.requests,
            "search_tolerance": config.search.tolerance,
        },
        "policies": by_name,
    }
    summarise(doc, per_type=per_type)
    return doc


def summarise(doc: dict[str, Any], *, per_type: bool) -> None:
    """Set the document's comparisons from its ``policies``: each policy's max rate and
    instances against GS's, and GS against the best baseline of each family (in place, so a
    document whose policies were re-run in part is summarised the same way)."""
    by_name: dict[str, Any] = doc["policies"]
    gs = by_name.get("GS", {}).get("max_rps_at_sla")
    for out in by_name.values():
        mine = out.get("max_rps_at_sla")
        out["max_rps_vs_gs"] = round(mine / gs, 4) if gs and mine is not None else None

    # prior: the baselines (strengthened, or as in the paper), not GS nor its variants
    def baselines(paper: bool) -> list[str]:
        return [
            n
            for n in by_name
            if n != "GS" and n not in VARIANTS and n.endswith(PAPER_SUFFIX) == paper
        ]

    def ratio(values: list[float], best: Any, gs_value: float | None) -> float | None:
        return round(gs_value / best(values), 4) if gs_value and values and best(values) else None

    def tops(names: list[str], key: str) -> list[float]:
        return [by_name[n][key] for n in names if by_name[n].get(key)]

    doc["gs_over_best_prior"] = ratio(tops(baselines(False), "max_rps_at_sla"), max, gs)
    doc["gs_over_best_paper"] = ratio(tops(baselines(True), "max_rps_at_sla"), max, gs)
    # Fig. 14: the instances each policy needs at the config's rate, against GS's
    need = by_name.get("GS", {}).get("instances_at_load")
    for out in by_name.values():
        mine = out.get("instances_at_load")
        out["instances_vs_gs"] = round(mine / need, 4) if need and mine else None
    for key, paper in (
        ("best_prior_instances_over_gs", False),
        ("best_paper_instances_over_gs", True),
    ):
        fewest = tops(baselines(paper), "instances_at_load")
        doc[key] = round(min(fewest) / need, 4) if need and fewest else None
    if per_type:  # the same per function type
        need = by_name.get("GS", {}).get("instances_at_load_per_type")
        for key, paper in (
            ("best_prior_per_type_over_gs", False),
            ("best_paper_per_type_over_gs", True),
        ):
            fewest = tops(baselines(paper), "instances_at_load_per_type")
            doc[key] = round(min(fewest) / need, 4) if need and fewest else None


def with_overrides(config: SimConfig, **changes: Any) -> SimConfig:
    """A copy of ``config`` with some fields replaced (``profile``, ``trace``, ...)."""
    return replace(config, **changes)
