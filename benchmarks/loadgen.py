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
import re
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
    # --fresh-connections: every request on a new connection (thousands of independent clients)
    pool = Http1Pool(origin, max_idle=0 if args.fresh_connections else 4096)
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
    sent_at: list[float] = []
    from_send: list[float] = []  # the server's part: from when the request really left
    refusal_ms: list[float] = []
    no_retry_after = 0
    reasons: dict[str, int] = {}
    dropped = in_flight = 0
    tasks: set[asyncio.Task[None]] = set()

    async def send(i: int, at: float, counted: bool) -> None:
        nonlocal no_retry_after, dropped, in_flight
        lag = loop.time() - start - at
        if in_flight >= args.max_in_flight:  # the clients are all waiting: this one is not sent
            dropped += int(counted)
            return
        if counted:
            sent_at.append(loop.time() - start)
        in_flight += 1
        try:
            await exchange(i, at, counted, lag)
        finally:
            in_flight -= 1

    async def exchange(i: int, at: float, counted: bool, lag: float) -> None:
        nonlocal no_retry_after
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
            from_send.append(loop.time() - start - at - lag)
            size = answer.headers.get("x-batch-size")
            if size is not None and size.isdigit():
                batches.append(int(size))
        else:
            errors[status] = errors.get(status, 0) + 1
            if answer is not None:
                # what the server said, digits masked: a handful of distinct reasons
                kind = re.sub(r"[0-9.]+", "N", answer.text[:90])
                reasons[kind] = reasons.get(kind, 0) + 1
            if answer is not None and answer.status_code in (429, 503):
                refusal_ms.append((loop.time() - start - at - lag) * 1000.0)
                if "retry-after" not in answer.headers:
                    no_retry_after += 1

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
    measured = len(latencies) + sum(errors.values())  # sent and answered (or failed)
    lat = np.asarray(latencies) * 1000.0

    def pct(q: float) -> float:
        return round(float(np.percentile(lat, q)), 3) if len(lat) else math.nan

    wire_s = (sent_at[-1] - sent_at[0]) if len(sent_at) > 1 else 0.0
    # goodput is judged from when each request really left: a generator that falls behind its
    # schedule (it shares the machine) shows as lag_p99_ms, not as the server's latency
    good = (
        int(np.sum(np.asarray(from_send) * 1000.0 <= args.slo_ms))
        if args.slo_ms is not None
        else None
    )
    return {
        "rate": args.rate,
        "fresh_connections": bool(args.fresh_connections),
        "on_wire_rps": round(len(sent_at) / wire_s, 1) if wire_s > 0 else None,
        "goodput_rps": round(good / args.duration_s, 1) if good is not None else None,
        "refused": len(refusal_ms),
        "refusal_p99_ms": round(float(np.percentile(refusal_ms, 99)), 3) if refusal_ms else None,
        "refused_without_retry_after": no_retry_after,
        "timeouts": errors.get("Http1Timeout", 0),
        "client_dropped": dropped,
        "reasons": dict(sorted(reasons.items(), key=lambda kv: -kv[1])[:6]),
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


async def closed_loop(args: argparse.Namespace) -> dict[str, object]:
    """``--concurrency N``: N clients each sending its next request when the last is answered,
    for ``duration_s`` after ``warmup_s``: the most the server answers (its capacity)."""
    origin, path = Origin.parse(args.url)
    pool = Http1Pool(origin, max_idle=4096)
    bodies = _bodies(args.model, 64)
    headers = {"content-type": "application/json"}
    loop = asyncio.get_running_loop()
    start = loop.time()
    stop_at = start + args.warmup_s + args.duration_s
    ok: list[float] = []
    failed = 0

    async def client(k: int) -> None:
        nonlocal failed
        i = k
        while loop.time() < stop_at:
            sent = loop.time()
            try:
                answer = await pool.post(path or "/", bodies[i % len(bodies)], headers=headers,
                                         timeout_s=args.timeout_s)  # fmt: skip
                good = answer.status_code == 200
            except Http1Error:
                good = False
            if sent >= start + args.warmup_s:
                if good:
                    ok.append(loop.time() - sent)
                else:
                    failed += 1
            i += args.concurrency

    await asyncio.gather(*(client(k) for k in range(args.concurrency)))
    pool.close()
    lat = np.asarray(ok) * 1000.0
    return {
        "concurrency": args.concurrency,
        "ok_rps": round(len(ok) / args.duration_s, 1),
        "failed": failed,
        "p50_ms": round(float(np.percentile(lat, 50)), 3) if len(lat) else None,
        "p95_ms": round(float(np.percentile(lat, 95)), 3) if len(lat) else None,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url", required=True, help="the predict URL")
    parser.add_argument("--model", required=True, help="model kind whose sample inputs to send")
    parser.add_argument("--rate", type=float, help="requests per second (open loop)")
    parser.add_argument("--concurrency", type=int, help="closed loop with this many clients")
    parser.add_argument("--warmup-s", type=float, default=5.0)
    parser.add_argument("--duration-s", type=float, default=30.0)
    parser.add_argument("--timeout-s", type=float, default=10.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--fresh-connections", action="store_true", help="a new connection for every request"
    )
    parser.add_argument("--slo-ms", type=float, help="count answers within it (goodput_rps)")
    parser.add_argument(
        "--max-in-flight",
        type=int,
        default=2000,
        help="clients waiting at once; a request due when all are waiting is not sent "
        "(client_dropped): the generator's own sockets stay bounded",
    )
    args = parser.parse_args(argv)
    if args.concurrency is not None:
        if args.concurrency < 1:
            parser.error(f"--concurrency must be at least 1, got {args.concurrency}")
        job = closed_loop(args)
    elif args.rate is None or not (args.rate > 0 and math.isfinite(args.rate)):
        parser.error(f"--rate must be a positive number, got {args.rate}")
    else:
        job = run(args)
    try:
        import uvloop
    except ImportError:
        result = asyncio.run(job)
    else:
        result = uvloop.run(job)
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
