"""Swayam's resource comparison (Fig. 9) in the simulator: ClairA1, ClairA2, KPA and the advisor.

Every scaler runs the same arrivals (the config's trace scaled to its peak, or Poisson), the same
stage policy and the same service curve, one run each (in ``jobs`` processes). Reported per
scaler (:func:`compare`):

* ``replica_seconds``: warm-replica-seconds, each replica from its creation (its setup included)
  to its removal or the end of the run (the last completion), as ``knative.local.platform`` counts
  them;
* ``compliance_pct``: Swayam's SLA compliance frequency (:mod:`simulator.compliance`): windows of
  ``window`` consecutive requests sliding by ``step``, the share in which at least ``SL`` % met
  ``RT_max``; ``SL`` is ``100 − sla.max_violation_pct`` (the SLA: at most 1 % late → 99 %) and
  ``RT_max`` the app's SLO;
* ``violation_pct``: requests over the SLO; ``cold_start_hits``: requests that arrived while the
  function had no ready replica (the live experiment's definition);
* ``vs_clair_a1``, ``vs_clair_a2``, ``vs_minimal_a2``: replica-seconds over ClairA1's and
  ClairA2's as the paper defines them (:mod:`simulator.paper_clair`: deadline-driven, processing
  times known, backends provisioned in the past) and over the minimal per-window count found
  against the simulator (``minimal_a1``/``minimal_a2``: :mod:`simulator.clairvoyance`, trimmed by
  :mod:`simulator.clair_trim`; a reference no scaler without foresight approaches), and
  ``normalised``: over the largest of the run (Fig. 9 normalises to the maximum).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import asdict, replace
from typing import Any, NamedTuple

import numpy as np

from adapter.policies.percentile import ServiceModel, min_replicas
from adapter.policies.slack import StagePolicy, stage_policy
from simulator.clair_trim import Spans, trim
from simulator.clairvoyance import late_ticks, simulated_need
from simulator.compliance import compliance_pct
from simulator.config import AutoscalingConfig, SimConfig
from simulator.engine import Simulation, app_slos_ms
from simulator.paper_clair import paper_row
from simulator.pool import map_jobs
from simulator.results import SimResult
from simulator.runner import arrivals_for, curves_for
from simulator.scalers import KpaScaler, Scaler
from simulator.service import ServiceCurve
from simulator.swayam_scalers import AdvisorScaler, Clairvoyant, OwnedScaler, window_needs
from slackwise_core.config import AdvisorSettings

__all__ = [
    "Case", "bootstrap_count", "case_for", "clairvoyant_service", "compare", "format_fig9",
    "learning_scaler", "run_arrivals", "scaler_row", "scaler_run", "scaler_settings", "trim_note",
]  # fmt: skip


#: the references every row is priced against (``vs_<name>``): Swayam's ClairA1 and ClairA2 as
#: the paper defines them, and the minimal per-window count found against the simulator
REFERENCES = ("clair_a1", "clair_a2", "minimal_a2")

#: how long after the last tick whose provisioning a trim lowers (beyond a setup time) a late
#: request is put down to that trim
_BLAME_AFTER_S = 30.0


def clairvoyant_service(curve: ServiceCurve, *, batch_limit: int, slots: int) -> ServiceModel:
    """The service the clairvoyant scalers know: the profile's linear fit as the mean, with the
    spread the largest measured P95 over that mean at any batch size up to ``batch_limit``."""
    a = max(curve.prior_a_ms, 0.1)
    b = max(curve.prior_b_ms, 0.0)
    spread = max([1.0] + [curve.p95_ms(n) / max(0.1, a + b * n) for n in range(1, batch_limit + 1)])
    return ServiceModel(
        a_ms=a, b_ms_per_item=b, spread=spread, batch_limit=batch_limit, slots_per_replica=slots
    )


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
        fn_name=fn_name, policy=stage_policy(auto.policy), curves=curves, rate_rps=rate_rps,
        seed=seed, arrivals=run_arrivals(config, rate_rps, seed), auto=auto,
        slo_ms=app_slos_ms(config, curves)[app_name], level=100.0 - config.max_violation_pct,
        setup_s=curve.cold_start_s if fn.cold_start_s is None else fn.cold_start_s,
        cap=fn.scaling.max_scale or 1000,
    )  # fmt: skip


def bootstrap_count(case: Case, model_need: Callable[[float], int]) -> int:
    """The ready replicas the learning scalers start with: ``autoscaling.bootstrap``, or the
    analytic ClairA2's initial count (Swayam pre-provisioned; no run starts cold)."""
    if case.auto.bootstrap is not None:
        return case.auto.bootstrap
    needs = window_needs(case.arrivals, tick_s=case.auto.tick_s, need=model_need)
    return Clairvoyant(
        {case.fn_name: needs}, tick_s=case.auto.tick_s, lookahead_s={case.fn_name: case.setup_s}
    ).initial(case.fn_name)


def scaler_run(config: SimConfig, name: str, rate_rps: float, seed: int) -> dict[str, Any]:
    """One scaler over the config's single-function workload; its row of the comparison."""
    case = case_for(config, rate_rps, seed)
    if name in ("clair_a1", "clair_a2"):  # as the paper defines them: deadline-driven
        fn = config.functions[case.fn_name]
        medians, sigmas = case.curves[case.fn_name].tables(
            fn.max_batch, deterministic=config.service == "deterministic"
        )
        return paper_row(
            name, case.arrivals, slo_ms=case.slo_ms, level_pct=case.level, medians_ms=medians,
            sigmas=sigmas, seed=seed, max_batch=fn.max_batch,
            slots=fn.container_concurrency, setup_s=case.setup_s, collect_s=case.auto.collect_s,
            window=case.auto.window, step=case.auto.step,
        )  # fmt: skip
    if name in ("minimal_a1", "minimal_a2"):
        return _clair_row(config, name, case, _clair_needs(config, case))
    scaler, bootstrap = learning_scaler(config, name, case)
    sim = Simulation(
        config, case.policy, case.curves, rate_rps=rate_rps, requests=len(case.arrivals),
        seed=seed, scaler=scaler, arrivals=case.arrivals,
    )  # fmt: skip
    result = sim.run()
    latencies, _ = sim.latencies_by_arrival()
    return scaler_row(name, result, latencies, case.slo_ms, case.level, case.auto, case.setup_s,
                      bootstrap, None)  # fmt: skip


def _model_need(config: SimConfig, case: Case) -> Callable[[float], int]:
    fn = config.functions[case.fn_name]
    service = clairvoyant_service(
        case.curves[case.fn_name], batch_limit=case.policy.batch_limit(fn.max_batch),
        slots=fn.container_concurrency,
    )  # fmt: skip
    return lambda rate: min_replicas(rate, case.slo_ms, case.level, service, max_replicas=case.cap)


def _clair_needs(config: SimConfig, case: Case) -> dict[str, list[int]]:
    need = _model_need(config, case)
    if case.auto.clair_needs == "simulated":
        need = simulated_need(
            config, case.fn_name, case.curves[case.fn_name], case.policy, slo_ms=case.slo_ms,
            level_pct=case.level, window=case.auto.window, step=case.auto.step,
            max_replicas=case.cap, seed=case.seed,
        )  # fmt: skip
    return {case.fn_name: window_needs(case.arrivals, tick_s=case.auto.tick_s, need=need)}


def swayam_settings(auto: AutoscalingConfig) -> AdvisorSettings:
    """Swayam as published (§4-5): its own resource model (Eq. 1 / Theorem 2), the predicted
    rate over 500 s times the burst threshold ``U`` = 2 (its default SLA), 10 s setup assumed
    until one is measured, backends collected once unused for the collection period (five
    minutes in Fig. 9), and none of this project's additions (no floor at the current rate, no
    keep-alive, no evidence rule, no headroom)."""
    return replace(
        auto.advisor, model="swayam", burst_u=2.0, history_s=500.0, default_setup_s=10.0,
        min_scale_in_gap_s=auto.collect_s, floor_at_current=False, keep_alive=False,
        evidence=False, headroom=0.0,
    )  # fmt: skip


def learning_scaler(config: SimConfig, name: str, case: Case) -> tuple[Scaler, int]:
    """``kpa``, ``advisor`` (the KPA with the advisor's floor), ``slackwise`` (the owned count)
    or ``swayam`` (the owned count with Swayam's published rules) for ``case``, and the ready
    replicas it starts with."""
    fn_name, auto, fn = case.fn_name, case.auto, config.functions[case.fn_name]
    bootstrap = bootstrap_count(case, _model_need(config, case))
    if name in ("slackwise", "swayam"):
        settings = auto.advisor if name == "slackwise" else swayam_settings(auto)
        owned = OwnedScaler(
            settings, slos_ms={fn_name: case.slo_ms}, percentiles={fn_name: case.level},
            container_concurrency={fn_name: fn.container_concurrency},
            max_scale={fn_name: fn.scaling.max_scale}, initial={fn_name: bootstrap},
        )  # fmt: skip
        return owned, bootstrap
    kpa = KpaScaler({fn_name: fn.scaling}, tick_s=config.autoscaler.tick_interval_s,
                    initial={fn_name: bootstrap})  # fmt: skip
    if name != "advisor":
        return kpa, bootstrap
    advisor = AdvisorScaler(
        kpa, auto.advisor, slos_ms={fn_name: case.slo_ms}, percentiles={fn_name: case.level},
        container_concurrency={fn_name: fn.container_concurrency},
        max_scale={fn_name: fn.scaling.max_scale},
    )  # fmt: skip
    return advisor, bootstrap


def _clair_row(
    config: SimConfig, name: str, case: Case, counts: dict[str, list[int]]
) -> dict[str, Any]:
    """ClairA1 or ClairA2 over the same seeded run: repaired where windows fail, then (ClairA2,
    with ``clair_trim``) trimmed to the minimal count (:mod:`simulator.clair_trim`); its row of
    the comparison."""
    fn_name, policy, curves, rate_rps, seed, arrivals, auto, slo_ms, level, setup_s, cap = case
    fn = config.functions[fn_name]
    run_config = config
    if name == "minimal_a1":
        run_config = replace(config, functions={fn_name: replace(fn, cold_start_s=0.0)})
    ahead = {} if name == "minimal_a1" else {fn_name: setup_s}
    collect = 0.0 if name == "minimal_a1" else auto.collect_s

    def run(
        counts: dict[str, list[int]],
    ) -> tuple[SimResult, np.ndarray, set[int] | None]:
        """The same seeded run (arrivals and service times) under ``counts``: its result,
        latencies, and the ticks of late requests in failing windows (None: some never
        finished)."""
        scaler = Clairvoyant(counts, tick_s=auto.tick_s, lookahead_s=ahead, collect_s=collect)
        sim = Simulation(
            run_config, policy, curves, rate_rps=rate_rps, requests=len(arrivals), seed=seed,
            scaler=scaler, arrivals=arrivals,
        )  # fmt: skip
        result = sim.run()
        latencies, _ = sim.latencies_by_arrival()
        if len(latencies) != len(arrivals):
            return result, latencies, None
        return result, latencies, late_ticks(
            latencies, arrivals, slo_ms=slo_ms, level_pct=level, window=auto.window,
            step=auto.step, tick_s=auto.tick_s,
        )  # fmt: skip

    rounds = 0
    result, latencies, ticks = run(counts)
    row = counts[fn_name]
    while rounds < auto.clair_rounds and ticks:
        raised = [t for t in ticks if 0 <= t < len(row) and row[t] < cap]
        if not raised:
            break
        for t in raised:
            row[t] += 1
        rounds += 1
        result, latencies, ticks = run(counts)
    trim_out: dict[str, Any] = {}
    if auto.clair_trim and name == "minimal_a2" and ticks == set():
        spans = Spans.of(len(row), tick_s=auto.tick_s, ahead_s=ahead.get(fn_name, 0.0),
                         collect_s=collect)  # fmt: skip

        def trial() -> tuple[tuple[SimResult, np.ndarray], set[int] | None]:
            res, lat, late = run(counts)
            return (res, lat), late

        untrimmed = round(result.replica_seconds, 3)
        done = trim(row, trial, spans=spans, budget=auto.clair_trim, best=(result, latencies),
                    after_s=ahead.get(fn_name, 0.0) + _BLAME_AFTER_S)  # fmt: skip
        result, latencies = done.best
        trim_out = {
            "clair_trimmed": done.removed, "clair_trimmed_free": done.free,
            "clair_trim_runs": done.runs, "clair_trim_finished": done.finished,
            "clair_untrimmed_replica_seconds": untrimmed, "clair_counts": list(row),
        }  # fmt: skip
    out = scaler_row(name, result, latencies, slo_ms, level, auto, setup_s, None, rounds)
    return out | trim_out


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
            compliance_pct(latencies, rt_max_ms=slo_ms, service_level_pct=level,
                           window=auto.window, step=auto.step), 3),
        "violation_pct": round(result.violation_pct, 4),
        "cold_start_hits": f.cold_start_hits,
        "requests": result.requests,
        "p50_ms": round(result.p50_ms, 3),
        "p99_ms": round(result.p99_ms, 3),
        "mean_batch": round(result.mean_batch, 3),
        "mean_replicas": round(result.replica_seconds / result.duration_s, 3)
        if result.duration_s else 0.0,
        "peak_replicas": f.peak_replicas,
        "cold_batches": f.cold_batches,
        "duration_s": round(result.duration_s, 3),
        "bootstrap": bootstrap
        if name in ("kpa", "advisor", "slackwise", "swayam", "hindsight") else None,
        "setup_s": 0.0 if name == "minimal_a1" else round(setup_s, 3),
    }  # fmt: skip
    if rounds is not None:
        row["clair_rounds"] = rounds
    return row


def _job(config: SimConfig, name: str, rate_rps: float, seed: int) -> dict[str, Any]:
    return scaler_run(config, name, rate_rps, seed)


def compare(
    config: SimConfig,
    *,
    rate_rps: float | None = None,
    seed: int | None = None,
    scalers: Sequence[str] | None = None,
    jobs: int = 1,
) -> dict[str, Any]:
    """Every scaler of the config's ``autoscaling.compare`` (or ``scalers``): the
    ``autoscalers`` and ``autoscaling`` entries of OUT.json."""
    auto = scaler_settings(config)
    names = list(scalers or auto.compare)
    rate = config.rate_rps if rate_rps is None else rate_rps
    seed = config.seed if seed is None else seed
    curves = curves_for(config)  # fail early, in this process, on a bad profile set
    app_name, app = next(iter(config.apps.items()))
    fn = config.functions[app.stages[0]]
    curve = curves[fn.name]
    args = [(config, n, rate, seed) for n in names]
    rows = map_jobs(_job, args, jobs)
    by_name = dict(zip(names, rows, strict=True))
    top = max((r["replica_seconds"] for r in rows), default=0.0)
    for row in rows:
        for ref in REFERENCES:
            base = by_name.get(ref, {}).get("replica_seconds")
            row[f"vs_{ref}"] = round(row["replica_seconds"] / base, 4) if base else None
        row["normalised"] = round(row["replica_seconds"] / top, 4) if top else None
    settings = asdict(auto.advisor)
    settings.pop("enabled", None)
    return {
        "autoscaling": {
            "app": app_name,
            "function": fn.name,
            "slo_ms": round(app_slos_ms(config, curves)[app_name], 3),
            "service_level_pct": 100.0 - config.max_violation_pct,
            "setup_s": round(curve.cold_start_s if fn.cold_start_s is None else fn.cold_start_s,
                             3),
            "policy": auto.policy,
            "tick_s": auto.tick_s,
            "collect_s": auto.collect_s,
            "window": auto.window,
            "step": auto.step,
            "stable_window_s": config.autoscaler.stable_window_s,
            "scale_to_zero_grace_s": config.autoscaler.scale_to_zero_grace_period_s,
            "advisor": settings,
        },
        "autoscalers": by_name,
    }  # fmt: skip


def format_fig9(doc: dict[str, Any]) -> str:
    """Swayam Fig. 9 for one trace: resources (normalised) and compliance frequency per scaler."""
    a = doc["autoscaling"]
    trace = doc.get("trace") or "Poisson"
    lines = [
        f"{doc['workload']}: trace {trace} (peak {doc['rate_rps']:g} rps), function "
        f"{a['function']}, SLA {a['service_level_pct']:g} % within {a['slo_ms']:g} ms, "
        f"setup {a['setup_s']:g} s, ClairA2 collection {a['collect_s']:g} s",
        f"{'scaler':<10} {'replica-s':>10} {'norm':>6} {'/A1':>6} {'/A2':>6} {'/minA2':>6} "
        f"{'compl%':>7} "
        f"{'viol%':>7} {'cold hits':>9} {'p99 ms':>8} {'mean rep':>8} {'peak':>5}",
    ]

    def ratio(value: float | None) -> str:
        return "-" if value is None else f"{value:.2f}"

    for name, r in doc["autoscalers"].items():
        lines.append(
            f"{name:<10} {r['replica_seconds']:>10.0f} {ratio(r['normalised']):>6} "
            f"{ratio(r['vs_clair_a1']):>6} {ratio(r['vs_clair_a2']):>6} "
            f"{ratio(r.get('vs_minimal_a2')):>6} "
            f"{r['compliance_pct']:>7.1f} {r['violation_pct']:>7.2f} {r['cold_start_hits']:>9} "
            f"{r['p99_ms']:>8.0f} {r['mean_replicas']:>8.2f} {r['peak_replicas']:>5}"
        )
    note = trim_note(doc["autoscalers"].get("minimal_a2", {}))
    return "\n".join(lines + ([note] if note else []))


def trim_note(row: dict[str, Any]) -> str | None:
    """How ClairA2 was trimmed (``clair_trim``), in words; None when it was not."""
    if "clair_trim_runs" not in row:
        return None
    state = ("minimal: nothing left to try" if row["clair_trim_finished"]
             else "stopped at the run budget, not minimal")  # fmt: skip
    tested = row["clair_trimmed"] - row["clair_trimmed_free"]
    return (
        f"The minimal A2 trimmed from {row['clair_untrimmed_replica_seconds']:.0f} replica-s: "
        f"{tested} replicas out of windows that set a decision, kept after {row['clair_trim_runs']}"
        f" runs ({row['clair_trimmed_free']} more from windows that set none), {state}"
    )
