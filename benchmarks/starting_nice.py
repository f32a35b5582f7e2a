"""A replica starting beside a busy one: what ``platform.starting_nice`` changes.

On the local platform (real replica processes), one embed replica serves a closed loop of
``--clients`` clients through the platform's gateway (each sends one single-sentence request,
waits for the answer, sends the next); ``--before-s`` into the run the count is set to two, and
the second replica loads its model while the first serves. Per setting of ``starting_nice`` (0:
the start competes as an equal, 10: it yields), over ``--repeat`` runs, medians (range):

* the second replica's cold start (decision to ready, as the platform measures it);
* the serving replica's answers per second and their P95 latency while the second starts,
  against the seconds before (the cost of the start to the requests being served).

    .venv/bin/python benchmarks/starting_nice.py --json docs/results/starting-nice.json
    .venv/bin/python benchmarks/starting_nice.py --cpus 0 --json docs/results/starting-nice-1.json

``--cpus``: the CPUs the benchmark, its platform and the replicas may use (``taskset``'s list;
all of them by default): ``--cpus 0`` is a node of one core, where the second replica brings no
CPU of its own. Run it on a quiet machine: the clients, the platform and both replicas share
these cores.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from functions.samples import sample_request
from knative.local.platform import LocalPlatform
from slackwise_cli.repeats import commit
from slackwise_cli.results import machine
from slackwise_config import Config, parse_config

ROOT = Path(__file__).resolve().parent.parent


def _config(nice: int | str) -> Config:
    return parse_config(
        {
            "platform": {
                "starting_nice": nice,
                "autoscaler": {"allow-zero-initial-scale": "true", "initial-scale": "0"},
            },
            "functions": {"embed": {"model": "embed", "threads": 1, "container_concurrency": 1}},
        }
    )


async def _client(
    client: httpx.AsyncClient,
    url: str,
    body: bytes,
    stop: asyncio.Event,
    out: list[tuple[float, float, int]],
) -> None:
    while not stop.is_set():
        sent = time.monotonic()
        response = await client.post(
            url, content=body, headers={"content-type": "application/json"}, timeout=60
        )
        out.append((sent, time.monotonic(), response.status_code))


async def _one(nice: int | str, clients: int, before_s: float, after_s: float) -> dict[str, Any]:
    body = json.dumps(sample_request("embed", 1)).encode()
    async with LocalPlatform(_config(nice)) as platform:
        headers = platform.auth_headers()
        async with httpx.AsyncClient(trust_env=False, headers=headers) as client:
            await platform.set_scale("embed", 1)
            while platform.replicas("embed").ready < 1:
                await asyncio.sleep(0.05)
            url = f"{platform.url('embed')}/v1/models/embed:predict"
            stop, answers = asyncio.Event(), list[tuple[float, float, int]]()
            tasks = [asyncio.create_task(_client(client, url, body, stop, answers))
                     for _ in range(clients)]  # fmt: skip
            await asyncio.sleep(before_s)
            started = time.monotonic()
            await platform.set_scale("embed", 2)
            while platform.replicas("embed").ready < 2:
                await asyncio.sleep(0.02)
            ready = time.monotonic()
            await asyncio.sleep(after_s)
            stop.set()
            await asyncio.gather(*tasks)
            await platform.set_scale("embed", None)
        platform.close_logs()
    warm = [a for a in answers if started - before_s + 2.0 <= a[0] < started]
    during = [a for a in answers if started <= a[0] < ready]
    after = [a for a in answers if ready <= a[0] < ready + after_s]

    def p95(rows: list[Any]) -> float:
        ms = sorted((done - sent) * 1000.0 for sent, done, _ in rows)
        return round(ms[max(0, int(0.95 * len(ms)) - 1)], 1) if ms else float("nan")

    return {
        "starting_nice": nice,
        "cpus": sorted(os.sched_getaffinity(0)),
        "cold_start_s": round(ready - started, 2),
        "rps_before": round(len(warm) / (before_s - 2.0), 1),
        "rps_during": round(len(during) / (ready - started), 1),
        "rps_after": round(len(after) / after_s, 1),
        "p95_before_ms": p95(warm),
        "p95_during_ms": p95(during),
        "p95_after_ms": p95(after),
        "errors": sum(1 for _, _, status in answers if status != 200),
    }


def _cell(values: list[float]) -> str:
    med = statistics.median(values)
    return (
        f"{med:g}" if min(values) == max(values) else f"{med:g} ({min(values):g}-{max(values):g})"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=4, help="closed-loop clients (default 4)")
    parser.add_argument("--before-s", type=float, default=8.0, help="serving before the start")
    parser.add_argument("--after-s", type=float, default=2.0, help="serving after it is ready")
    parser.add_argument("--repeat", type=int, default=3, help="runs per setting (default 3)")
    parser.add_argument(
        "--nice", default="0,10", help="starting_nice settings: steps or auto (default 0,10)"
    )
    parser.add_argument("--cpus", help="the CPUs to run on, e.g. 0 or 0,1 (default: all)")
    parser.add_argument("--json", type=Path, help="write every run here")
    args = parser.parse_args(argv)
    try:
        settings = [n if n == "auto" else int(n) for n in args.nice.split(",")]
        cpus = None if args.cpus is None else {int(c) for c in args.cpus.split(",")}
        if cpus is not None:
            os.sched_setaffinity(0, cpus)  # the platform and its replicas inherit them
    except (ValueError, OSError) as exc:
        parser.error(f"--nice {args.nice!r} / --cpus {args.cpus!r}: {exc}")
    runs = []
    for i in range(args.repeat):  # settings alternate, so drift in the machine hits both
        for nice in settings if i % 2 == 0 else reversed(settings):
            runs.append(asyncio.run(_one(nice, args.clients, args.before_s, args.after_s)))
            print(json.dumps(runs[-1]), file=sys.stderr, flush=True)
    columns = ("cold_start_s", "rps_before", "rps_during", "p95_before_ms", "p95_during_ms")
    print(
        "| starting_nice | cold start s | answers/s before | while it starts "
        "| P95 before ms | while it starts |"
    )
    print("|---|---|---|---|---|---|")
    for nice in settings:
        mine = [r for r in runs if r["starting_nice"] == nice]
        print(f"| {nice} | " + " | ".join(_cell([r[c] for r in mine]) for c in columns) + " |")
    print(f"\nMedians of {args.repeat} runs (range), {args.clients} closed-loop clients, embed, "
          f"CPUs {','.join(map(str, sorted(os.sched_getaffinity(0))))}, "
          f"commit {commit(ROOT)}.")  # fmt: skip
    if args.json:
        command = " ".join(["benchmarks/starting_nice.py", *(argv or sys.argv[1:])])
        doc = {"runs": runs, "clients": args.clients, "before_s": args.before_s,
               "cpus": sorted(os.sched_getaffinity(0)),
               "after_s": args.after_s, "commit": commit(ROOT), "machine": machine(),
               "command": command}  # fmt: skip
        args.json.write_text(json.dumps(doc, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
