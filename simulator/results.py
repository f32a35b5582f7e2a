"""What one simulated run measured: per app (violations, latency percentiles, time per stage),
per function (batches, cold starts, replica-seconds, peak fleet) and overall."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from simulator.stations import AppRoute, Station

__all__ = ["AppResult", "FunctionResult", "SimResult", "StageResult", "summarize"]


@dataclass(frozen=True, slots=True)
class StageResult:
    """Mean time per request at one stage of an app (Fig. 11's stacked bars)."""

    function: str
    queue_ms: float
    compute_ms: float


@dataclass(frozen=True, slots=True)
class AppResult:
    name: str
    slo_ms: float
    requests: int
    violation_pct: float
    p50_ms: float
    p99_ms: float
    mean_ms: float
    stages: tuple[StageResult, ...]


@dataclass(frozen=True, slots=True)
class FunctionResult:
    name: str
    batches: int
    mean_batch: float
    cold_batches: int
    replica_seconds: float
    peak_replicas: int
    #: measured requests that reached the function while it had no ready replica
    cold_start_hits: int = 0


@dataclass(frozen=True, slots=True)
class SimResult:
    """One run of one policy: the measured requests (after the warm-up) and the fleet's cost."""

    policy: str
    rate_rps: float
    requests: int
    violation_pct: float
    p50_ms: float
    p99_ms: float
    mean_ms: float
    mean_batch: float
    replica_seconds: float
    duration_s: float
    events: int
    apps: tuple[AppResult, ...]
    functions: tuple[FunctionResult, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "rate_rps": round(self.rate_rps, 3),
            "violation_pct": round(self.violation_pct, 4),
            "p50_ms": round(self.p50_ms, 3),
            "p99_ms": round(self.p99_ms, 3),
            "mean_ms": round(self.mean_ms, 3),
            "mean_batch": round(self.mean_batch, 3),
            "replica_seconds": round(self.replica_seconds, 3),
            "duration_s": round(self.duration_s, 3),
            "stages": {
                a.name: [
                    {
                        "function": s.function,
                        "queue_ms": round(s.queue_ms, 3),
                        "compute_ms": round(s.compute_ms, 3),
                    }
                    for s in a.stages
                ]
                for a in self.apps
            },
            "apps": {
                a.name: {
                    "slo_ms": round(a.slo_ms, 3),
                    "requests": a.requests,
                    "violation_pct": round(a.violation_pct, 4),
                    "p50_ms": round(a.p50_ms, 3),
                    "p99_ms": round(a.p99_ms, 3),
                    "mean_ms": round(a.mean_ms, 3),
                }
                for a in self.apps
            },
            "functions": {
                f.name: {
                    "batches": f.batches,
                    "mean_batch": round(f.mean_batch, 3),
                    "cold_batches": f.cold_batches,
                    "cold_start_hits": f.cold_start_hits,
                    "replica_seconds": round(f.replica_seconds, 3),
                    "peak_replicas": f.peak_replicas,
                }
                for f in self.functions
            },
        }


def _stats(values: np.ndarray) -> tuple[float, float, float]:
    if len(values) == 0:
        return 0.0, 0.0, 0.0
    p50, p99 = np.percentile(values, [50, 99])
    return float(p50), float(p99), float(values.mean())


def summarize(
    *,
    policy: str,
    rate_rps: float,
    end: float,
    events: int,
    latencies_s: np.ndarray,
    app_of: np.ndarray,
    violations: int,
    apps: Sequence[AppRoute],
    stations: Sequence[Station],
    queue_s: Sequence[Sequence[float]],
    compute_s: Sequence[Sequence[float]],
) -> SimResult:
    """The run's result from the measured requests' latencies (seconds) and app indices, and
    the stations' counters at ``end`` (the last completion)."""
    lat = latencies_s * 1000.0
    measured = len(lat)
    app_results = []
    for i, app in enumerate(apps):
        own = lat[app_of == i]
        count = len(own)
        p50, p99, mean = _stats(own)
        slo_ms = app.slo_s * 1000.0
        missed = int(np.count_nonzero(own > slo_ms)) if count else 0
        stages = tuple(
            StageResult(
                function=st.name,
                queue_ms=1000.0 * queue_s[i][k] / count if count else 0.0,
                compute_ms=1000.0 * compute_s[i][k] / count if count else 0.0,
            )
            for k, st in enumerate(app.stations)
        )
        app_results.append(
            AppResult(
                name=app.name,
                slo_ms=slo_ms,
                requests=count,
                violation_pct=100.0 * missed / count if count else 0.0,
                p50_ms=p50,
                p99_ms=p99,
                mean_ms=mean,
                stages=stages,
            )
        )
    functions = []
    total_batches = total_instances = 0
    replica_s = 0.0
    for st in stations:
        fn_s = st.replica_seconds(end)
        replica_s += fn_s
        total_batches += st.batches
        total_instances += st.instances
        functions.append(
            FunctionResult(
                name=st.name,
                batches=st.batches,
                mean_batch=st.instances / st.batches if st.batches else 0.0,
                cold_batches=st.cold_batches,
                replica_seconds=fn_s,
                peak_replicas=st.peak,
                cold_start_hits=st.cold_hits,
            )
        )
    p50, p99, mean = _stats(lat)
    return SimResult(
        policy=policy,
        rate_rps=rate_rps,
        requests=measured,
        violation_pct=100.0 * violations / measured if measured else 0.0,
        p50_ms=p50,
        p99_ms=p99,
        mean_ms=mean,
        mean_batch=total_instances / total_batches if total_batches else 0.0,
        replica_seconds=replica_s,
        duration_s=end,
        events=events,
        apps=tuple(app_results),
        functions=tuple(functions),
    )
