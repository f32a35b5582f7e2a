"""How ``benchmarks/peers.py`` finds one running system's max rate under the SLO.

Load comes from ``benchmarks/loadgen.py`` in its own process: open-loop Poisson at a fixed rate,
``warmup_s`` then ``duration_s`` measured, latency from the scheduled send time. A rate passes
when P95 <= SLO, P99 <= 2x SLO, fewer than 0.1 % of requests fail and the generator dropped
none. The search starts from the system's closed-loop throughput (64 clients, each sending its
next request when the last is answered): half of it is tried first, then bisection between the
highest rate that passed and the lowest that failed, ``refine`` times. CPU per request is the CPU
seconds the system's processes (and their children) used in the measured window over the
requests measured there; ``front_cpu_ms`` counts the root process alone (slackwise's adapter, with
its replicas excluded).
"""

from __future__ import annotations

import contextlib
import json
import math
import subprocess
import sys
from dataclasses import dataclass
from typing import Any

import psutil
from peer_systems import ROOT, Running

LOADGEN = str(ROOT / "benchmarks" / "loadgen.py")
CLOSED_LOOP_CLIENTS = 64


@dataclass(frozen=True)
class Probe:
    """How long each rate is offered and which seed draws its arrivals."""

    warmup_s: float
    duration_s: float
    seed: int


def closed_loop(running: Running, model: str, probe: Probe) -> float:
    """Requests answered per second by ``CLOSED_LOOP_CLIENTS`` clients in a closed loop."""
    cmd = [
        sys.executable,
        LOADGEN,
        "--url",
        running.url,
        "--model",
        model,
        "--concurrency",
        str(CLOSED_LOOP_CLIENTS),
        "--warmup-s",
        str(probe.warmup_s),
        "--duration-s",
        str(max(3.0, probe.duration_s / 2)),
    ]
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
    lines = [line for line in out.stdout.splitlines() if line.startswith("{")]
    if not lines:
        raise RuntimeError(f"the closed-loop generator printed nothing: {out.stderr[-400:]}")
    return float(json.loads(lines[-1])["ok_rps"])


def passes(result: dict[str, Any], slo_ms: float) -> bool:
    """The pass rule: P95 <= SLO, P99 <= 2x SLO, under 0.1 % errors, nothing dropped."""
    return bool(
        result["error_ratio"] < 0.001
        and not result["client_dropped"]
        and result["p95_ms"] <= slo_ms
        and result["p99_ms"] <= 2 * slo_ms
    )


def measure(
    running: Running, model: str, rate: float, slo_ms: float, probe: Probe
) -> dict[str, Any]:
    """One open-loop rate against ``running``: the generator's result with CPU and the verdict."""
    cmd = [
        sys.executable,
        LOADGEN,
        "--url",
        running.url,
        "--model",
        model,
        "--rate",
        f"{rate:g}",
        "--warmup-s",
        str(probe.warmup_s),
        "--duration-s",
        str(probe.duration_s),
        "--seed",
        str(probe.seed),
    ]
    gen = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert gen.stdout is not None
    gen_proc = psutil.Process(gen.pid)
    cpu0 = front0 = cpu1 = front1 = gen_cpu = 0.0
    result: dict[str, Any] = {}
    for line in gen.stdout:
        if line.strip() == "measuring":
            cpu0, front0 = running.cpu_s(), running.cpu_s(root_only=True)
            with contextlib.suppress(psutil.NoSuchProcess):
                t = gen_proc.cpu_times()
                gen_cpu = -(t.user + t.system)
        elif line.startswith("{"):
            cpu1, front1 = running.cpu_s(), running.cpu_s(root_only=True)
            result = json.loads(line)
            with contextlib.suppress(psutil.NoSuchProcess):
                t = gen_proc.cpu_times()
                gen_cpu += t.user + t.system
    gen.wait()
    if not result:
        raise RuntimeError(f"the load generator printed no result (exit {gen.returncode})")
    n = max(1, int(result["requests"]))
    passed = passes(result, slo_ms)
    return {
        "rate": round(rate, 1),
        "passed": passed,
        "p50_ms": result["p50_ms"],
        "p95_ms": result["p95_ms"],
        "p99_ms": result["p99_ms"],
        "error_ratio": round(result["error_ratio"], 5),
        # by status, and by the answers' first words (which refusal, which failure)
        "errors": result.get("errors") or {},
        "reasons": result.get("reasons") or {},
        "client_dropped": result["client_dropped"],
        "mean_batch": result["mean_batch"],
        "cpu_ms_per_request": round(1000.0 * (cpu1 - cpu0) / n, 3),
        "front_cpu_ms_per_request": round(1000.0 * (front1 - front0) / n, 3),
        "loadgen_cpu_ms_per_request": round(1000.0 * gen_cpu / n, 3),
        "requests": result["requests"],
    }


def _show(label: str, model: str, p: dict[str, Any]) -> None:
    print(
        f"  {label:44s} {model:8s} {p['rate']:7.0f} req/s  p50 {p['p50_ms']:7.2f}  "
        f"p95 {p['p95_ms']:8.2f}  p99 {p['p99_ms']:8.2f} ms  err {p['error_ratio']:.4f}  "
        f"batch {p['mean_batch'] or 1:5.2f}  cpu {p['cpu_ms_per_request']:5.2f} ms/req  "
        f"{'pass' if p['passed'] else 'FAIL'}",
        flush=True,
    )


def sweep(running: Running, model: str, slo_ms: float, probe: Probe, refine: int) -> dict[str, Any]:
    """The highest rate that passes, found from the closed-loop throughput by bisection."""
    label = running.setup.label
    capacity = closed_loop(running, model, probe)
    print(f"  {label:44s} {model:8s} closed loop: {capacity:.0f} req/s", flush=True)
    points: list[dict[str, Any]] = []

    def run(rate: float) -> dict[str, Any]:
        point = measure(running, model, rate, slo_ms, probe)
        points.append(point)
        _show(label, model, point)
        return point

    good: dict[str, Any] | None = None
    bad: dict[str, Any] | None = None
    rate = max(1.0, 0.5 * capacity)
    while good is None and rate >= 1.0:
        point = run(rate)
        if point["passed"]:
            good = point
        else:
            bad = point
            rate /= 2.0
    rate = max(1.0, 1.05 * capacity)
    while good is not None and bad is None and rate < 1e5:
        # the half passed: try the closed-loop throughput itself and on up until a rate fails
        point = run(rate)
        if point["passed"]:
            good = point
            rate *= 1.25
        else:
            bad = point
    for _ in range(refine if good is not None and bad is not None else 0):
        assert good is not None and bad is not None
        point = run((good["rate"] + bad["rate"]) / 2.0)
        if point["passed"]:
            good = point
        else:
            bad = point
    return {
        "closed_loop_rps": capacity,
        "max_rate": good["rate"] if good is not None else None,
        "at_max": good,
        "points": sorted(points, key=lambda p: p["rate"]),
    }


def median_and_range(values: list[float | None], digits: int = 1) -> dict[str, float | None]:
    """Median (to ``digits`` decimals), lowest and highest of the numbers among ``values`` (None
    where there are none)."""
    xs = sorted(v for v in values if v is not None and not math.isnan(v))
    if not xs:
        return {"median": None, "low": None, "high": None}
    mid = len(xs) // 2
    median = xs[mid] if len(xs) % 2 else (xs[mid - 1] + xs[mid]) / 2.0
    return {"median": round(median, digits), "low": xs[0], "high": xs[-1]}
