"""Service time against allocated cores, measured: the check of ROMA's CPU model.

The ROMA simulator (:mod:`simulator.roma`) models an executable given ``u`` cores as a CFS quota
shared by the requests it runs: each progresses at ``min(1, u / running)`` of a core, so ``c``
clients in a closed loop see a mean response time of ``c · work / min(c, u)`` (plus the path's
fixed cost), where ``work`` is one request's in-process time on one core. This benchmark runs
the real thing: one replica of each model on the local platform (``threads`` threads, as the
live ROMA experiment runs it), its cgroup CPU quota set to each allocation in turn
(:mod:`knative.local.cpu_quota`; none = no quota), ``c`` clients sending batch-1 requests back
to back over HTTP for ``--seconds`` each, and prints measured against modelled.

    .venv/bin/python benchmarks/cores_profile.py [--models imagenet,embed] \
        [--cores 0.25,0.5,1,1.5,2] [--clients 1,2] [--seconds 8] [--period-ms 100,10] [--json OUT]

The modelled columns take ``work`` from the packaged CPU profile (batch-1 in-process median at
one thread). ``--period-ms`` sets the CFS period of the quota (``platform.cpu_period_ms``): a
request at a fractional quota runs at full speed until the period's budget is spent and then
waits out the rest of the period, so the period bounds that stall.
Needs a writable cgroup cpu controller for fractional allocations (it says when it fell back to
CPU affinity, which bounds whole cores only). Run it on an otherwise idle machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from pathlib import Path
from typing import Any

import httpx

from functions.registry import create_model
from knative.local.platform import LocalPlatform
from simulator.roma import cpu_work_s
from slackwise_config import parse_config


def _config(model: str, threads: int, period_ms: float) -> Any:
    pinned = {"autoscaling.knative.dev/min-scale": "1", "autoscaling.knative.dev/max-scale": "1"}
    function = {"model": model, "threads": threads, "container_concurrency": threads,
                "annotations": pinned}  # fmt: skip
    platform = {"queue_depth": 1000, "request_timeout_s": 60, "cpu_period_ms": period_ms}
    return parse_config({"platform": platform, "functions": {model: function}})


async def _closed_loop(
    url: str, body: bytes, clients: int, seconds: float, headers: dict[str, str]
) -> list[float]:
    """``clients`` senders, each sending its next request when the last is answered."""
    latencies: list[float] = []
    end = time.perf_counter() + seconds
    async with httpx.AsyncClient(trust_env=False, timeout=60.0, headers=headers) as client:

        async def sender() -> None:
            while time.perf_counter() < end:
                started = time.perf_counter()
                answer = await client.post(url, content=body)
                answer.raise_for_status()
                latencies.append(time.perf_counter() - started)

        await asyncio.gather(*(sender() for _ in range(clients)))
    return latencies


async def measure(
    model: str,
    allocations: list[float | None],
    clients: list[int],
    seconds: float,
    threads: int,
    period_ms: float,
) -> list[dict[str, Any]]:
    """One row per (allocation, clients): measured mean, p50, p95 ms and throughput."""
    body = json.dumps({"instances": create_model(model).sample_instances(1)}).encode()
    rows = []
    async with LocalPlatform(_config(model, threads, period_ms)) as platform:
        while platform.replicas(model).ready < 1:
            await asyncio.sleep(0.1)
        url = f"{platform.url(model)}/v1/models/{model}:predict"
        auth = platform.auth_headers()
        await _closed_loop(url, body, 1, 2.0, auth)  # warm the model and the connection
        for cores in allocations:
            platform.set_cores(model, cores)
            for c in clients:
                await _closed_loop(url, body, c, 1.0, auth)  # settle at this allocation
                lat = sorted(await _closed_loop(url, body, c, seconds, auth))
                rows.append({
                    "model": model, "threads": threads, "period_ms": period_ms,
                    "cores": cores, "clients": c,
                    "requests": len(lat),
                    "mean_ms": round(1000 * statistics.fmean(lat), 2),
                    "p50_ms": round(1000 * lat[len(lat) // 2], 2),
                    "p95_ms": round(1000 * lat[min(len(lat) - 1, int(0.95 * len(lat)))], 2),
                    "rps": round(len(lat) / seconds, 1),
                })  # fmt: skip
        platform.set_cores(model, None)
    return rows


def modelled(rows: list[dict[str, Any]]) -> None:
    """Add the simulator's fluid model: ``min(c, u)`` cores of progress over ``work`` core-ms a
    request, so ``min(c, u) / work`` requests a second and a mean of ``c · work / min(c, u)``."""
    for r in rows:
        work = cpu_work_s(r["model"]) * 1000.0
        c, u = r["clients"], r["cores"] if r["cores"] is not None else float(r["threads"])
        busy = min(c, u, r["threads"])
        r["work_ms"] = round(work, 2)
        r["modelled_rps"] = round(1000.0 * busy / work, 1)
        r["modelled_ms"] = round(c * work / busy, 2)


def table(rows: list[dict[str, Any]]) -> str:
    lines = ["| model | CFS period ms | cores | clients | requests | mean ms | p50 ms | p95 ms "
             "| modelled mean ms | req/s | modelled req/s |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in rows:
        cores = "none" if r["cores"] is None else f"{r['cores']:g}"
        lines.append(
            f"| {r['model']} | {r['period_ms']:g} | {cores} | {r['clients']} | {r['requests']} "
            f"| {r['mean_ms']:.1f} | {r['p50_ms']:.1f} | {r['p95_ms']:.1f} "
            f"| {r['modelled_ms']:.1f} | {r['rps']:.1f} | {r['modelled_rps']:.1f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="imagenet,embed")
    parser.add_argument("--cores", default="0.25,0.5,1,1.5,2")
    parser.add_argument("--clients", default="1,2")
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--period-ms", default="100", help="CFS periods to compare, e.g. 100,10")
    parser.add_argument("--json", help="write the rows here")
    args = parser.parse_args()
    allocations: list[float | None] = [None, *(float(x) for x in args.cores.split(","))]
    clients = [int(x) for x in args.clients.split(",")]
    rows: list[dict[str, Any]] = []
    for model in args.models.split(","):
        for period in (float(p) for p in args.period_ms.split(",")):
            rows += asyncio.run(
                measure(model, allocations, clients, args.seconds, args.threads, period)
            )
    modelled(rows)
    print(table(rows))
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
