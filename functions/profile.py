"""Measure a function's batch latency and cold start: ``slackwise profile KIND``.

For each batch size, after one warm-up call, the profiler times ``repeats`` calls (fewer when
a batch size has used up ``--budget-s`` seconds, but at least three) and keeps the median and
P95, two ways:

- **inprocess**: ``model.predict`` on already validated instances, in this process;
- **http**: a POST of the batch to a real ``python -m functions.serve`` process on loopback,
  timed by the client (request bodies are encoded beforehand); its ``x-compute-ms`` header is
  kept as ``server_compute``.

The cold start is measured on the same process: spawn to a 200 from the readiness endpoint
(``ready_s``), the model's own load time (``load_ms``) and the first request's round trip
(``first_request_ms``). The line ``a + b * batch`` is fitted to the in-process medians. The
result goes to ``OUT/<kind>.json`` (``OUT/<kind>-t<threads>.json`` for more than one thread);
the schema is in :mod:`functions.profile_format`.
"""

from __future__ import annotations

import argparse
import datetime
import json
import logging
import os
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from functions.device import DeviceUnavailable, parse_device
from functions.headers import COMPUTE_MS
from functions.profile_format import ColdStart, LatencyStat, LinearFit, Machine, Profile
from functions.registry import KINDS, create_model
from functions.server_process import ServerProcess, ServerStartError

logger = logging.getLogger(__name__)

DEFAULT_BATCH_SIZES = (1, 2, 4, 8, 16, 32, 64)
MIN_REPEATS = 3
#: skip the warm-up call when the previous batch size suggests it would take longer than this
WARMUP_LIMIT_MS = 2000.0


def stat(samples_ms: list[float]) -> LatencyStat:
    """Median and 95th percentile (linear interpolation) of the samples."""
    values = np.asarray(samples_ms, dtype=np.float64)
    return LatencyStat(median=float(np.median(values)), p95=float(np.percentile(values, 95)))


def fit_line(medians: dict[int, LatencyStat]) -> LinearFit:
    """Least-squares ``a + b * n`` over the batch sizes' medians."""
    sizes = sorted(medians)
    if len(sizes) == 1:
        return LinearFit(a_ms=0.0, b_ms_per_item=medians[sizes[0]].median / sizes[0])
    slope, intercept = np.polyfit(
        np.asarray(sizes, dtype=np.float64), [medians[n].median for n in sizes], 1
    )
    return LinearFit(a_ms=float(intercept), b_ms_per_item=float(slope))


def gpu_name(device: str) -> str | None:
    """The name torch gives the GPU behind ``device`` (None for ``cpu``)."""
    if device == "cpu":
        return None
    import torch

    return str(torch.cuda.get_device_name(torch.device(device)))


def machine(device: str = "cpu") -> Machine:
    """This machine's CPU model, the cores this process may use and the GPU it computed on."""
    cpu_model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu_model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        logger.debug("no /proc/cpuinfo; using %s", cpu_model)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return Machine(cpu_model=cpu_model, cores=int(cores or 1), gpu=gpu_name(device))


def _time_calls(
    call: Callable[[], float | None], *, repeats: int, budget_s: float, warmup: bool
) -> tuple[list[float], list[float]]:
    """Wall times (ms) of ``call`` and what it returned (server-side ms), after a warm-up."""
    if warmup:
        call()
    wall: list[float] = []
    reported: list[float] = []
    started = time.perf_counter()
    floor = min(MIN_REPEATS, repeats)
    while len(wall) < repeats:
        if len(wall) >= floor and time.perf_counter() - started > budget_s:
            break
        t0 = time.perf_counter()
        server_ms = call()
        wall.append((time.perf_counter() - t0) * 1000.0)
        if server_ms is not None:
            reported.append(server_ms)
    return wall, reported


def _want_warmup(previous: tuple[int, float] | None, size: int) -> bool:
    if previous is None:
        return True
    prev_size, prev_ms = previous
    return prev_ms * size / prev_size < WARMUP_LIMIT_MS


def measure_inprocess(
    kind: str,
    *,
    threads: int,
    sizes: list[int],
    repeats: int,
    budget_s: float,
    device: str = "cpu",
) -> tuple[dict[int, LatencyStat], float]:
    """Per batch size latency of ``model.predict``; also the load time in ms."""
    model = create_model(kind, threads=threads, device=device)
    model.check_device()
    t0 = time.perf_counter()
    model.load()
    load_ms = (time.perf_counter() - t0) * 1000.0
    instances = [model.validate(i) for i in model.sample_instances(max(sizes))]
    table: dict[int, LatencyStat] = {}
    previous: tuple[int, float] | None = None
    for size in sizes:
        batch = instances[:size]

        def call(batch: list[Any] = batch) -> None:
            model.predict(batch)

        wall, _ = _time_calls(
            call, repeats=repeats, budget_s=budget_s, warmup=_want_warmup(previous, size)
        )
        table[size] = stat(wall)
        previous = (size, table[size].median)
        logger.info("%s inprocess b=%d median %.2f ms", kind, size, table[size].median)
    return table, load_ms


def _post(client: httpx.Client, url: str, body: bytes) -> float:
    response = client.post(url, content=body, headers={"content-type": "application/json"})
    if response.status_code != 200:
        raise RuntimeError(f"POST {url} answered {response.status_code}: {response.text[:500]}")
    return float(response.headers[COMPUTE_MS])


def measure_http(
    kind: str,
    *,
    threads: int,
    sizes: list[int],
    repeats: int,
    budget_s: float,
    ready_timeout_s: float,
    device: str = "cpu",
) -> tuple[ColdStart, dict[int, LatencyStat], dict[int, LatencyStat]]:
    """Cold start, client round-trip and server compute per batch size, on a real process."""
    instances = create_model(kind).sample_instances(max(sizes))
    bodies = {n: json.dumps({"instances": instances[:n]}).encode() for n in sizes}
    http: dict[int, LatencyStat] = {}
    compute: dict[int, LatencyStat] = {}
    timeout = httpx.Timeout(600.0, connect=5.0)
    with (
        ServerProcess(kind, threads=threads, device=device) as server,
        httpx.Client(timeout=timeout) as client,
    ):
        ready_s = server.wait_ready(client, timeout_s=ready_timeout_s)
        load_ms = float(client.get(server.ready_url).json().get("load_ms", 0.0))
        t0 = time.perf_counter()
        _post(client, server.predict_url, bodies[sizes[0]])
        first_ms = (time.perf_counter() - t0) * 1000.0
        cold = ColdStart(ready_s=ready_s, load_ms=load_ms, first_request_ms=first_ms)
        previous: tuple[int, float] | None = None
        for size in sizes:

            def call(body: bytes = bodies[size]) -> float:
                return _post(client, server.predict_url, body)

            wall, reported = _time_calls(
                call, repeats=repeats, budget_s=budget_s, warmup=_want_warmup(previous, size)
            )
            http[size] = stat(wall)
            compute[size] = stat(reported)
            previous = (size, http[size].median)
            logger.info("%s http b=%d median %.2f ms", kind, size, http[size].median)
    return cold, http, compute


def profile(
    kind: str,
    *,
    threads: int = 1,
    sizes: list[int] | None = None,
    repeats: int = 20,
    budget_s: float = 15.0,
    http: bool = True,
    ready_timeout_s: float = 180.0,
    device: str = "cpu",
) -> Profile:
    """Measure ``kind``; HTTP first, so the server process has the cores to itself."""
    sizes = sorted(set(sizes or DEFAULT_BATCH_SIZES))
    http_table: dict[int, LatencyStat] = {}
    compute: dict[int, LatencyStat] = {}
    cold: ColdStart | None = None
    if http:
        cold, http_table, compute = measure_http(
            kind,
            threads=threads,
            sizes=sizes,
            repeats=repeats,
            budget_s=budget_s,
            ready_timeout_s=ready_timeout_s,
            device=device,
        )
    inprocess, load_ms = measure_inprocess(
        kind, threads=threads, sizes=sizes, repeats=repeats, budget_s=budget_s, device=device
    )
    if cold is None:
        cold = ColdStart(ready_s=None, load_ms=load_ms, first_request_ms=None)
    return Profile(
        kind=kind,
        threads=threads,
        machine=machine(device),
        measured_at=datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        cold_start_s=cold,
        inprocess=inprocess,
        http=http_table,
        server_compute=compute,
        linear_fit=fit_line(inprocess),
        repeats=repeats,
        device=device,
    )


def output_path(out_dir: Path, kind: str, threads: int) -> Path:
    """``OUT/<kind>.json`` for one thread, ``OUT/<kind>-t<threads>.json`` otherwise."""
    return out_dir / (f"{kind}.json" if threads == 1 else f"{kind}-t{threads}.json")


def _batch_sizes(value: str) -> list[int]:
    try:
        sizes = [int(part) for part in value.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"batch sizes must be integers, got {value!r}") from None
    if not sizes or any(n < 1 for n in sizes):
        raise argparse.ArgumentTypeError(f"batch sizes must be positive, got {value!r}")
    return sizes


def _device(value: str) -> str:
    try:
        return parse_device(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _positive_int(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {value!r}") from None
    if number < 1:
        raise argparse.ArgumentTypeError(f"expected at least 1, got {number}")
    return number


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``profile`` command's arguments."""
    parser.add_argument("kind", help=f"model kind: {', '.join(sorted(KINDS))}")
    parser.add_argument("--threads", type=_positive_int, default=1, help="compute threads")
    parser.add_argument(
        "--device",
        type=_device,
        default="cpu",
        help="where the model computes: cpu, cuda or cuda:N (default cpu)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="output directory (default functions/profiles/cpu, or .../gpu for a GPU)",
    )
    parser.add_argument(
        "--batch-sizes",
        type=_batch_sizes,
        default=list(DEFAULT_BATCH_SIZES),
        help="comma-separated batch sizes (default 1,2,4,8,16,32,64)",
    )
    parser.add_argument("--repeats", type=_positive_int, default=20, help="timed calls per size")
    parser.add_argument(
        "--budget-s",
        type=float,
        default=15.0,
        help="stop repeating a batch size after this many seconds (at least 3 calls)",
    )
    parser.add_argument("--no-http", action="store_true", help="skip the server process")
    parser.add_argument("--ready-timeout-s", type=float, default=180.0)


def _summary(result: Profile) -> str:
    lines = [f"{result.kind} threads={result.threads}  batch: median/p95 ms"]
    for size in result.batch_sizes:
        local = result.inprocess[size]
        row = f"  b={size:<3} inprocess {local.median:9.2f} / {local.p95:9.2f}"
        if size in result.http:
            remote = result.http[size]
            row += f"   http {remote.median:9.2f} / {remote.p95:9.2f}"
        lines.append(row)
    cold = result.cold_start_s
    ready = "-" if cold.ready_s is None else f"{cold.ready_s:.2f} s"
    first = "-" if cold.first_request_ms is None else f"{cold.first_request_ms:.1f} ms"
    lines.append(f"  cold start: ready {ready}, load {cold.load_ms:.0f} ms, first request {first}")
    fit = result.linear_fit
    lines.append(f"  fit: {fit.a_ms:.2f} ms + {fit.b_ms_per_item:.3f} ms/item")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    """Run the ``profile`` command; 0 on success, 2 for bad arguments, 1 if a run failed."""
    if args.kind not in KINDS:
        print(
            f"slackwise profile: unknown model kind {args.kind!r}; "
            f"known: {', '.join(sorted(KINDS))}",
            file=sys.stderr,
        )
        return 2
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = str(args.threads)
    try:
        result = profile(
            args.kind,
            threads=args.threads,
            sizes=args.batch_sizes,
            repeats=args.repeats,
            budget_s=args.budget_s,
            http=not args.no_http,
            ready_timeout_s=args.ready_timeout_s,
            device=args.device,
        )
    except (ServerStartError, RuntimeError, httpx.HTTPError, DeviceUnavailable) as exc:
        print(f"slackwise profile: {args.kind} failed: {exc}", file=sys.stderr)
        return 1
    out = args.out or Path("functions/profiles") / ("cpu" if args.device == "cpu" else "gpu")
    path = output_path(out, args.kind, args.threads)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result.to_json(), indent=2) + "\n", encoding="utf-8")
    print(_summary(result))
    print(f"wrote {path}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m functions.profile KIND ...`` (the same as ``slackwise profile``)."""
    parser = argparse.ArgumentParser(prog="python -m functions.profile", description=__doc__)
    add_arguments(parser)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
