"""``slackwise demo``: real functions scaling from zero, under load, and back to zero.

Until the adapter's experiment exists this is the main job: it starts the local platform with
the configured functions, and for each function sends a burst while it is at zero (cold starts,
buffered by the activator), then an open-loop Poisson load, then nothing until the KPA scales the
function back to zero. It prints the replica timeline and, per function, latencies, cold starts
and replica-seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from dataclasses import dataclass
from typing import TextIO

import httpx
import numpy as np

from functions.registry import create_model
from knative.local.platform import LocalPlatform
from loadtests.openloop import Record, poisson_arrivals, run_open_loop
from slackwise_config import Config


@dataclass(frozen=True, kw_only=True)
class DemoPlan:
    burst: int = 8
    rate_rps: float = 4.0
    steady_s: float = 20.0
    idle_limit_s: float = 60.0
    instances_per_request: int = 1
    seed: int = 1


def _bodies(kind: str, n: int, per_request: int) -> list[bytes]:
    samples = create_model(kind).sample_instances(max(n, 1) * per_request)
    return [
        json.dumps({"instances": samples[i * per_request : (i + 1) * per_request]}).encode()
        for i in range(n)
    ]


def _percentile(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")


async def _drive(
    platform: LocalPlatform, name: str, bodies: list[bytes], plan: DemoPlan
) -> list[Record]:
    arrivals = [0.0] * plan.burst + poisson_arrivals(
        plan.rate_rps, plan.steady_s, seed=plan.seed, start_s=1.0
    )
    url = f"{platform.url(name)}/v1/models/{name}:predict"
    async with httpx.AsyncClient(
        trust_env=False,
        limits=httpx.Limits(max_connections=500),
        headers=platform.auth_headers(),
    ) as c:
        return await run_open_loop(
            c, url, arrivals, lambda i: bodies[i % len(bodies)], timeout_s=120.0
        )


async def _timeline(platform: LocalPlatform, out: TextIO, stop: asyncio.Event) -> None:
    start = time.monotonic()
    names = platform.functions
    out.write("time_s  " + "  ".join(f"{n}(ready/desired)" for n in names) + "\n")
    while not stop.is_set():
        cells = []
        for name in names:
            c = platform.replicas(name)
            cells.append(f"{c.ready}/{c.desired}".ljust(len(name) + 16))
        out.write(f"{time.monotonic() - start:6.1f}  " + "  ".join(cells) + "\n")
        out.flush()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), 2.0)


async def _until_zero(platform: LocalPlatform, name: str, limit_s: float) -> bool:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        counts = platform.replicas(name)
        if counts.ready + counts.starting + counts.draining == 0:
            return True
        await asyncio.sleep(0.5)
    return False


def _report(name: str, outcomes: list[Record], usage: dict[str, float | int], out: TextIO) -> None:
    ok = [o for o in outcomes if o.status == 200]
    lat = [o.latency_s * 1000.0 for o in ok]
    burst = [o.latency_s * 1000.0 for o in ok if o.scheduled_s == 0.0]
    out.write(
        f"{name:<14} {len(outcomes):>5} {len(ok):>5} {_percentile(lat, 50):>8.1f} "
        f"{_percentile(lat, 95):>8.1f} {_percentile(lat, 99):>8.1f} {max(burst, default=0):>9.1f} "
        f"{usage['cold_starts']:>5} {usage['cold_start_mean_s']:>8.2f} "
        f"{usage['replica_seconds']:>9.1f}\n"
    )
    for o in outcomes:
        if o.status != 200:
            out.write(f"    request {o.index}: status {o.status} {o.error}\n")


async def run_demo(config: Config, plan: DemoPlan, out: TextIO) -> int:
    """Run the scenario, one function after another so each cold start is its own.

    Returns 0 when every request was answered with 200 and every function went back to zero.
    """
    bodies = {
        name: _bodies(fn.model, 16, plan.instances_per_request)
        for name, fn in config.functions.items()
    }
    async with LocalPlatform(config) as platform:
        out.write(f"platform gateway at http://{config.platform.host}:{platform.port}\n")
        for name in platform.functions:
            out.write(f"  {name}: {platform.url(name)}/v1/models/{name}:predict\n")
        stop = asyncio.Event()
        timeline = asyncio.create_task(_timeline(platform, out, stop))
        results = []
        zero = True
        for name in platform.functions:
            out.write(
                f"--- {name}: burst of {plan.burst} at zero, then {plan.rate_rps:g} req/s "
                f"for {plan.steady_s:g} s\n"
            )
            results.append(await _drive(platform, name, bodies[name], plan))
            out.write(f"--- {name}: load done; waiting for scale to zero\n")
            zero = await _until_zero(platform, name, plan.idle_limit_s) and zero
        stop.set()
        await timeline
        out.write(
            "\nfunction        sent    ok   p50_ms   p95_ms   p99_ms burst_max  cold "
            "cold_s  replica_s\n"
        )
        for name, outcomes in zip(platform.functions, results, strict=True):
            _report(name, outcomes, platform.usage(name), out)
        out.write("\nscaled back to zero: " + ("yes" if zero else "no (idle limit reached)") + "\n")
        events = platform.events()
        cold = [e for e in events if e.kind == "cold_start"]
        out.write(
            f"cold starts: {len(cold)}; scale decisions: "
            f"{sum(1 for e in events if e.kind == 'scale')}\n"
        )
    failed = sum(1 for outcomes in results for o in outcomes if o.status != 200)
    return 0 if failed == 0 and zero else 1
