"""Open-loop Poisson load at one rate, from its own process; latency from the scheduled send time.

Run: ``.venv/bin/python benchmarks/loadgen.py --url http://127.0.0.1:8700/v1/models/digits:predict
--model digits --rate 200 --warmup-s 5 --duration-s 30``

Requests leave at Poisson times whatever the answers do (an open loop: a slow server cannot slow
the offered load down), over keep-alive connections (one per request in flight), sent from
callbacks with no task per request (``loadtests/flood.py``), or each on a new connection
from raw sockets in one epoll set (``--fresh-connections``, ``loadtests/fresh.py``), so the
generator's own CPU stays small. Only requests scheduled after the warm-up count.
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
from loadtests.flood import OpenLoop
from loadtests.fresh import FreshLoop
from slackwise_core.http1 import Http1Error, Http1Pool, Origin


def _bodies(model: str, count: int) -> list[bytes]:
    return [
        json.dumps({"instances": [x]}, separators=(",", ":")).encode()
        for x in sample_instances(model, count)
    ]


def _requests(origin: Origin, path: str, bodies: list[bytes]) -> list[bytes]:
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {origin.host}:{origin.port}\r\n"
        "content-type: application/json\r\n"
    ).encode("latin-1")
    return [head + b"content-length: %d\r\n\r\n" % len(body) + body for body in bodies]


async def run(args: argparse.Namespace) -> dict[str, object]:
    origin, path = Origin.parse(args.url)
    rng = np.random.default_rng(args.seed)
    total_s = args.warmup_s + args.duration_s
    gaps = rng.exponential(1.0 / args.rate, size=int(args.rate * total_s * 1.2) + 16)
    schedule = np.cumsum(gaps)
    schedule = schedule[schedule < total_s]
    requests = _requests(origin, path or "/", _bodies(args.model, 64))
    measuring = lambda: print("measuring", flush=True)  # noqa: E731
    if args.fresh_connections:
        # every request on a new connection (thousands of independent clients), from raw
        # sockets: through asyncio the generator's core ran out at about 3,500 a second
        fresh = FreshLoop(origin.host, origin.port, requests, warmup_s=args.warmup_s,
                          timeout_s=args.timeout_s, max_in_flight=args.max_in_flight,
                          timings=args.timings)  # fmt: skip
        out = fresh.run(schedule.tolist(), measuring)
    else:
        gen = OpenLoop(origin.host, origin.port, requests, warmup_s=args.warmup_s,
                       timeout_s=args.timeout_s, max_in_flight=args.max_in_flight,
                       timings=args.timings)  # fmt: skip
        out = await gen.run(schedule.tolist(), measuring)
    errors = out.errors
    measured = len(out.latencies) + sum(errors.values())  # sent and answered (or failed)
    lat = np.asarray(out.latencies) * 1000.0

    def pct(q: float) -> float:
        return round(float(np.percentile(lat, q)), 3) if len(lat) else math.nan

    sent_at = out.sent_at
    wire_s = (sent_at[-1] - sent_at[0]) if len(sent_at) > 1 else 0.0
    # goodput is judged from when each request really left: a generator that falls behind its
    # schedule (it shares the machine) shows as lag_p99_ms, not as the server's latency
    good = (
        int(np.sum(np.asarray(out.from_send) * 1000.0 <= args.slo_ms))
        if args.slo_ms is not None
        else None
    )
    # the same answers judged from when each was scheduled (the generator's lag counted too)
    good_scheduled = int(np.sum(lat <= args.slo_ms)) if args.slo_ms is not None else None
    refusals = out.refusal_ms
    result: dict[str, object] = {
        "rate": args.rate,
        "fresh_connections": bool(args.fresh_connections),
        "on_wire_rps": round(len(sent_at) / wire_s, 1) if wire_s > 0 else None,
        "goodput_rps": round(good / args.duration_s, 1) if good is not None else None,
        "refused": len(refusals),
        # admitted, then given up when its deadline passed before dispatch (a 503): a miss
        "given_up": out.given_up,
        "refusal_p99_ms": round(float(np.percentile(refusals, 99)), 3) if refusals else None,
        "refused_without_retry_after": out.no_retry_after,
        "timeouts": errors.get("Http1Timeout", 0),
        "client_dropped": out.dropped,
        "reasons": dict(sorted(out.reasons.items(), key=lambda kv: -kv[1])[:6]),
        "requests": measured,
        "sent": len(sent_at),
        "ok": len(out.latencies),
        "ok_within_slo": good,
        "ok_within_slo_from_schedule": good_scheduled,
        "errors": errors,
        "error_ratio": (sum(errors.values()) / measured) if measured else 0.0,
        "p50_ms": pct(50),
        "p95_ms": pct(95),
        "p99_ms": pct(99),
        "mean_batch": round(float(np.mean(out.batches)), 2) if out.batches else None,
        "lag_p99_ms": round(float(np.percentile(out.lags, 99)) * 1000.0, 3) if out.lags else None,
        "wall_s": round(time.time(), 3),
    }
    if args.timings:
        result["timings"] = out.timings
    return result


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
        "--timings",
        action="store_true",
        help="also print each answer's (batch size, queue, upstream and total ms) as timings",
    )
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
