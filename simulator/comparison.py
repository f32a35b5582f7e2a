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

from collections.abc import Callable, Sequence
from dataclasses import asdict, replace
from typing import Any

from simulator.clairvoyance import simulated_need
from simulator.comparison_case import Case, bootstrap_count, case_for, scaler_row, scaler_settings
from simulator.config import AutoscalingConfig, SimConfig
from simulator.engine import Simulation
from simulator.minimal_clair import minimal_row
from simulator.paper_clair import paper_row
from simulator.pool import map_jobs
from simulator.run_setup import app_slos_ms
from simulator.runner import curves_for
from simulator.scalers import KpaScaler, Scaler
from simulator.service import ServiceCurve
from simulator.swayam_scalers import AdvisorScaler, OwnedScaler, window_needs
from slackwise_policies.advisor_settings import AdvisorSettings
from slackwise_policies.percentile import ServiceModel, min_replicas

__all__ = [
    "add_ratios",
    "clairvoyant_service",
    "compare",
    "format_fig9",
    "learning_scaler",
    "scaler_run",
    "trim_note",
]


#: the references every row is priced against (``vs_<name>``): Swayam's ClairA1 and ClairA2 as
#: the paper defines them, and the minimal per-window count found against the simulator
REFERENCES = ("clair_a1", "clair_a2", "minimal_a2")


def clairvoyant_service(curve: ServiceCurve, *, batch_limit: int, slots: int) -> ServiceModel:
    """The service the clairvoyant scalers know: the profile's linear fit as the mean, with the
    spread the largest measured P95 over that mean at any batch size up to ``batch_limit``."""
    a = max(curve.prior_a_ms, 0.1)
    b = max(curve.prior_b_ms, 0.0)
    spread = max([1.0] + [curve.p95_ms(n) / max(0.1, a + b * n) for n in range(1, batch_limit + 1)])
    return ServiceModel(
        a_ms=a, b_ms_per_item=b, spread=spread, batch_limit=batch_limit, slots_per_replica=slots
    )


def scaler_run(config: SimConfig, name: str, rate_rps: float, seed: int) -> dict[str, Any]:
    """One scaler over the config's single-function workload; its row of the comparison."""
    case = case_for(config, rate_rps, seed)
    if name in ("clair_a1", "clair_a2"):  # as the paper defines them: deadline-driven
        fn = config.functions[case.fn_name]
        medians, sigmas = case.curves[case.fn_name].tables(
            fn.max_batch, deterministic=config.service == "deterministic"
        )
        return paper_row(
            name,
            case.arrivals,
            slo_ms=case.slo_ms,
            level_pct=case.level,
            medians_ms=medians,
            sigmas=sigmas,
            seed=seed,
            max_batch=fn.max_batch,
            slots=fn.container_concurrency,
            setup_s=case.setup_s,
            collect_s=case.auto.collect_s,
            window=case.auto.window,
            step=case.auto.step,
        )
    if name in ("minimal_a1", "minimal_a2"):
        return minimal_row(config, name, case, _clair_needs(config, case))
    scaler, bootstrap = learning_scaler(config, name, case)
    sim = Simulation(
        config,
        case.policy,
        case.curves,
        rate_rps=rate_rps,
        requests=len(case.arrivals),
        seed=seed,
        scaler=scaler,
        arrivals=case.arrivals,
    )
    result = sim.run()
    latencies, _ = sim.latencies_by_arrival()
    return scaler_row(
        name, result, latencies, case.slo_ms, case.level, case.auto, case.setup_s, bootstrap, None
    )


def _model_need(config: SimConfig, case: Case) -> Callable[[float], int]:
    fn = config.functions[case.fn_name]
    service = clairvoyant_service(
        case.curves[case.fn_name],
        batch_limit=case.policy.batch_limit(fn.max_batch),
        slots=fn.container_concurrency,
    )
    return lambda rate: min_replicas(rate, case.slo_ms, case.level, service, max_replicas=case.cap)


def _clair_needs(config: SimConfig, case: Case) -> dict[str, list[int]]:
    need = _model_need(config, case)
    if case.auto.clair_needs == "simulated":
        need = simulated_need(
            config,
            case.fn_name,
            case.curves[case.fn_name],
            case.policy,
            slo_ms=case.slo_ms,
            level_pct=case.level,
            window=case.auto.window,
            step=case.auto.step,
            max_replicas=case.cap,
            seed=case.seed,
        )
    return {case.fn_name: window_needs(case.arrivals, tick_s=case.auto.tick_s, need=need)}


def swayam_settings(auto: AutoscalingConfig) -> AdvisorSettings:
    """Swayam as published (§4-5): its own resource model (Eq. 1 / Theorem 2), the predicted
    rate over 500 s times the burst threshold ``U`` = 2 (its default SLA), 10 s setup assumed
    until one is measured, backends collected once unused for the collection period (five
    minutes in Fig. 9), and none of this project's additions (no floor at the current rate, no
    keep-alive, no evidence rule, no headroom)."""
    return replace(
        auto.advisor,
        model="swayam",
        burst_u=2.0,
        history_s=500.0,
        default_setup_s=10.0,
        min_scale_in_gap_s=auto.collect_s,
        floor_at_current=False,
        keep_alive=False,
        evidence=False,
        headroom=0.0,
    )


def learning_scaler(config: SimConfig, name: str, case: Case) -> tuple[Scaler, int]:
    """``kpa``, ``advisor`` (the KPA with the advisor's floor), ``slackwise`` (the owned count)
    or ``swayam`` (the owned count with Swayam's published rules) for ``case``, and the ready
    replicas it starts with."""
    fn_name, auto, fn = case.fn_name, case.auto, config.functions[case.fn_name]
    bootstrap = bootstrap_count(case, _model_need(config, case))
    if name in ("slackwise", "swayam"):
        settings = auto.advisor if name == "slackwise" else swayam_settings(auto)
        owned = OwnedScaler(
            settings,
            slos_ms={fn_name: case.slo_ms},
            percentiles={fn_name: case.level},
            container_concurrency={fn_name: fn.container_concurrency},
            max_scale={fn_name: fn.scaling.max_scale},
            initial={fn_name: bootstrap},
        )
        return owned, bootstrap
    kpa = KpaScaler(
        {fn_name: fn.scaling},
        tick_s=config.autoscaler.tick_interval_s,
        initial={fn_name: bootstrap},
    )
    if name != "advisor":
        return kpa, bootstrap
    advisor = AdvisorScaler(
        kpa,
        auto.advisor,
        slos_ms={fn_name: case.slo_ms},
        percentiles={fn_name: case.level},
        container_concurrency={fn_name: fn.container_concurrency},
        max_scale={fn_name: fn.scaling.max_scale},
    )
    return advisor, bootstrap


def _job(config: SimConfig, name: str, rate_rps: float, seed: int) -> dict[str, Any]:
    return scaler_run(config, name, rate_rps, seed)


def add_ratios(rows: dict[str, dict[str, Any]]) -> None:
    """Each row's replica-seconds over each reference's (``vs_clair_a2``...; ``None`` where the
    reference is not among ``rows``) and over the costliest row's (``normalised``), in place."""
    top = max((r["replica_seconds"] for r in rows.values()), default=0.0)
    for row in rows.values():
        for ref in REFERENCES:
            base = rows.get(ref, {}).get("replica_seconds")
            row[f"vs_{ref}"] = round(row["replica_seconds"] / base, 4) if base else None
        row["normalised"] = round(row["replica_seconds"] / top, 4) if top else None


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
    add_ratios(by_name)
    settings = asdict(auto.advisor)
    settings.pop("enabled", None)
    return {
        "autoscaling": {
            "app": app_name,
            "function": fn.name,
            "slo_ms": round(app_slos_ms(config, curves)[app_name], 3),
            "service_level_pct": 100.0 - config.max_violation_pct,
            "setup_s": round(curve.cold_start_s if fn.cold_start_s is None else fn.cold_start_s, 3),
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
    }


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
    state = (
        "minimal: nothing left to try"
        if row["clair_trim_finished"]
        else "stopped at the run budget, not minimal"
    )
    tested = row["clair_trimmed"] - row["clair_trimmed_free"]
    return (
        f"The minimal A2 trimmed from {row['clair_untrimmed_replica_seconds']:.0f} replica-s: "
        f"{tested} replicas out of windows that set a decision, kept after {row['clair_trim_runs']}"
        f" runs ({row['clair_trimmed_free']} more from windows that set none), {state}"
    )
