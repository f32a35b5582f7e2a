"""Open-loop Poisson load at one rate, from its own process; latency from the scheduled send time.

Run: ``.venv/bin/python benchmarks/loadgen.py --url http://127.0.0.1:8700/v1/models/digits:predict
--model digits --rate 200 --warmup-s 5 --duration-s 30``

Requests leave at Poisson times whatever the answers do (an open loop: a slow server cannot slow
the offered load down), over keep-alive connections of the lean client (one per request in
flight), so the generator's own CPU stays small. Only requests scheduled after the warm-up count.
Latency is measured from when the request was *scheduled*, so a generator that falls behind
shows it as latency, not as a lower rate. Prints ``measuring`` on its own line when the warm-up
ends (callers sample CPU counters then), and one JSON line with the results at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import sys
import time

import numpy as np

from functions.samples import sample_instances
from knative.http1 import Http1Error, Http1Pool, Origin


def _bodies(model: str, count: int) -> list[bytes]:
    return [
        json.dumps({"instances": [x]}, separators=(",", ":")).encode()
        for x in sample_instances(model, count)
    ]


async def run(args: argparse.Namespace) -> dict[str, object]:
    origin, path = Origin.parse(args.url)
    path = path or "/"
    pool = Http1Pool(origin, max_idle=4096)
    bodies = _bodies(args.model, 64)
    headers = {"content-type": "application/json"}
    rng = np.random.default_rng(args.seed)
    total_s = args.warmup_s + args.duration_s
    gaps = rng.exponential(1.0 / args.rate, size=int(args.rate * total_s * 1.2) + 16)
    schedule = np.cumsum(gaps)
    schedule = schedule[schedule < total_s]
    loop = asyncio.get_running_loop()
    latencies: list[float] = []
    batches: list[int] = []
    errors: dict[str, int] = {}
    lags: list[float] = []
    tasks: set[asyncio.Task[None]] = set()

    async def send(i: int, at: float, counted: bool) -> None:
        lag = loop.time() - start - at
        try:
            answer = await pool.post(
                path, bodies[i % len(bodies)], headers=headers, timeout_s=args.timeout_s
            )
            status = str(answer.status_code)
        except Http1Error as exc:
            status = type(exc).__name__
            answer = None
        if not counted:
            return
        lags.append(lag)
        if answer is not None and answer.status_code == 200:
            latencies.append(loop.time() - start - at)
            size = answer.headers.get("x-batch-size")
            if size is not None and size.isdigit():
                batches.append(int(size))
        else:
            errors[status] = errors.get(status, 0) + 1

    start = loop.time()
    announced = False
    for i, at in enumerate(schedule):
        now = loop.time() - start
        if not announced and at >= args.warmup_s:
            if now < args.warmup_s:
                await asyncio.sleep(args.warmup_s - now)
            print("measuring", flush=True)
            announced = True
            now = loop.time() - start
        if at > now:
            await asyncio.sleep(at - now)
        task = loop.create_task(send(i, float(at), at >= args.warmup_s))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
    if not announced:
        print("measuring", flush=True)
    if tasks:
        await asyncio.wait(set(tasks))
    pool.close()
    measured = len(latencies) + sum(errors.values())
    lat = np.asarray(latencies) * 1000.0

    def pct(q: float) -> float:
        return round(float(np.percentile(lat, q)), 3) if len(lat) else math.nan

    return {
        "rate": args.rate,
        "requests": measured,
        "ok": len(latencies),
        "errors": errors,
        "error_ratio": (sum(errors.values()) / measured) if measured else 0.0,
        "p50_ms": pct(50),
        "p95_ms": pct(95),
        "p99_ms": pct(99),
        "mean_batch": round(float(np.mean(batches)), 2) if batches else None,
        "lag_p99_ms": round(float(np.percentile(lags, 99)) * 1000.0, 3) if lags else None,
        "wall_s": round(time.time(), 3),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url", required=True, help="the predict URL")
    parser.add_argument("--model", required=True, help="model kind whose sample inputs to send")
    parser.add_argument("--rate", type=float, required=True, help="requests per second")
    parser.add_argument("--warmup-s", type=float, default=5.0)
    parser.add_argument("--duration-s", type=float, default=30.0)
    parser.add_argument("--timeout-s", type=float, default=10.0)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if not (args.rate > 0 and math.isfinite(args.rate)):
        parser.error(f"--rate must be a positive number, got {args.rate}")
    try:
        import uvloop
    except ImportError:
        result = asyncio.run(run(args))
    else:
        result = uvloop.run(run(args))
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
