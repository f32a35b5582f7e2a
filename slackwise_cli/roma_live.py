"""ROMA live on this machine: functions sharing its cores, their CPU allocation set every second.

``slackwise experiment -c experiments/roma-2apps.yaml`` reads a ROMA config (the ``roma:``
section of :mod:`simulator.roma`, with ``live: true``) and runs each system on a fresh local
platform: one warm replica per app (min- and max-scale 1: ROMA's static deployment, one CPU
executable per model), open-loop Poisson load stepped every ``step_s`` as in Table 1, sent
straight to the platform (its activator's queue is the model's queue; the adapter is not in the
path here). Every second a controller loop reads each app's mean response time over the last
second (or, when nothing completed, the age of its oldest request still out) and sets each
function's cores through :meth:`knative.local.platform.LocalPlatform.set_cores`, a cgroup quota
on its replica:

* ``roma``: a CT controller per app (PI, Eqs. 11–12) under Algorithm 2's supervisor (no GPU on
  this machine, so no GPU scheduler: ROMA's CPU half, which is also RR+CT here);
* ``roma_ff``: the same with a feed-forward floor under each demand, the cores the last
  second's arrivals call for at ``ff_utilization`` (:func:`adapter.policies.roma.load_floor`,
  one request's work measured on the warm replica before the run);
* ``rr_rules``: ±1 core at ≥ 0.8 / ≤ 0.2 × SLA, every 15 s;
* ``rr_max``: every core, split evenly; ``rr_min``: one core, split evenly.

With ``roma.gpus`` > 0 the run also starts one GPU executable per GPU (one process holding
every app's model, on ``roma.gpu_device``), and requests wait in the dispatcher's per-model
queues (:mod:`slackwise_cli.roma_dispatch`): a free GPU takes first (Algorithm 1 for the ``roma``
systems, a slack-sized batch for ``roma_batched``, round robin for the others), then the CPU
replicas' free threads; the supervisor keeps ``roma.gpu_cores`` for the GPU executables. An
executable that cannot use its device refuses to start, and the run stops with its reason.

Counted as in the simulation: violations are (app, second) pairs whose mean response time (of
the requests completed in that second) exceeds the SLA; core-seconds the cores set, over time.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import random
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx

from adapter.policies.roma import (
    CoreController,
    NodeCores,
    RuleController,
    load_floor,
    response_signal,
    supervise,
)
from simulator.roma import RomaConfig, arrivals, summary_row
from slackwise_cli.roma_dispatch import Dispatch, measure_gpu_time, median_s
from slackwise_core.config import Config, parse_config

__all__ = ["LIVE_SYSTEMS", "run_cli", "run_live"]

LIVE_SYSTEMS = ("roma", "roma_ff", "rr_rules", "rr_max", "rr_min")
#: accepted besides: the same as ``roma`` without GPUs
GPU_SYSTEMS = ("roma_batched",)
#: through the adapter (its batching in the path): its own CT controllers (``adapter.cores``),
#: with the feed-forward floor, or every core fixed (RR+max's cores)
ADAPTER_SYSTEMS = ("adapter_ct", "adapter_ff", "adapter_max")
#: how long a GPU executable may take to load every model
GPU_READY_S = 300.0
#: how long requests still out at the end may take to answer before they count as failed
DRAIN_S = 30.0


def _platform_config(config: RomaConfig, system: str = "") -> Config:
    """The local platform's config; for an ``adapter_*`` system also the adapter's: each app's
    SLA as its function's SLO and, for ``adapter_ct`` / ``adapter_ff``, ``adapter.cores`` with
    this experiment's controller settings."""
    threads = config.threads
    pinned = {"autoscaling.knative.dev/min-scale": "1", "autoscaling.knative.dev/max-scale": "1"}
    functions = {
        name: {"model": app.profile, "threads": threads, "container_concurrency": threads,
               "annotations": pinned, "slo_ms": 1000 * app.sla_s}
        for name, app in config.apps.items()
    }  # fmt: skip
    platform = {"queue_depth": 100000, "request_timeout_s": 60,
                "cpu_period_ms": config.cpu_period_ms}  # fmt: skip
    adapter: dict[str, Any] = {"max_queue": 100000}
    if system in ("adapter_ct", "adapter_ff"):
        adapter["cores"] = {
            "enabled": True, "node_cores": config.cores, "alpha": config.alpha,
            "gain": config.gain, "zero": config.zero, "u_min": config.u_min,
            "feed_forward": config.ff_utilization if system == "adapter_ff" else None,
        }  # fmt: skip
    raw = {"platform": platform, "functions": functions, "adapter": adapter}
    return parse_config(raw, config.source)


@contextlib.asynccontextmanager
async def _adapter_in_front(cfg: Config, platform: Any) -> AsyncIterator[str]:
    """The adapter (its batching, and its core controllers where ``cfg`` enables them) served
    over HTTP on a free port in front of ``platform``; its base URL."""
    from adapter.serving.app import create_app
    from adapter.serving.http_server import serve
    from adapter.serving.platform_view import LocalView

    stop = asyncio.Event()
    bound: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    app = create_app(cfg, view=LocalView(platform))
    task = asyncio.create_task(serve(app, "127.0.0.1", 0, ready=bound.set_result, stop=stop))
    try:
        yield f"http://127.0.0.1:{await asyncio.wait_for(bound, 60)}"
    finally:
        stop.set()
        await task


def _instance(kind: str) -> Any:
    from functions.registry import create_model

    return create_model(kind).sample_instances(1)[0]


def _gpu_devices(config: RomaConfig) -> list[str]:
    """The device of each GPU executable: ``cuda`` → ``cuda:0``, ``cuda:1``…; ``cuda:N`` counts
    from N; ``cpu`` runs them all on the CPU."""
    family, _, first = config.gpu_device.partition(":")
    if family == "cpu":
        return ["cpu"] * config.gpus
    return [f"cuda:{int(first or 0) + k}" for k in range(config.gpus)]


@contextlib.asynccontextmanager
async def _gpu_executables(config: RomaConfig) -> AsyncIterator[list[str]]:
    """One GPU executable per GPU, every app's model in each, ready; their base URLs (none
    without GPUs). ServerStartError: one refused or failed to start, its output says why."""
    from functions.server_process import ServerProcess

    kinds = list(dict.fromkeys(app.profile for app in config.apps.values()))
    started: list[ServerProcess] = []

    def start() -> None:
        with httpx.Client(trust_env=False, timeout=5.0) as client:
            for device in _gpu_devices(config) if config.gpus > 0 else []:
                server = ServerProcess(kinds[0], also=tuple(kinds[1:]), device=device,
                                       threads=config.threads)  # fmt: skip
                started.append(server)
                server.start()
                server.wait_ready(client, timeout_s=GPU_READY_S)

    try:
        await asyncio.to_thread(start)
        yield [server.base_url for server in started]
    finally:
        for server in started:
            server.stop()


async def _one(config: RomaConfig, system: str) -> dict[str, Any]:
    from knative.local.platform import LocalPlatform

    names = list(config.apps)
    apps = [config.apps[n] for n in names]
    rng = random.Random(config.seed)
    schedules = [arrivals(app, config, rng) for app in apps]
    instances = [_instance(app.profile) for app in apps]
    bodies = [json.dumps({"instances": [x]}).encode() for x in instances]
    share = config.cores / len(apps)
    fixed = {"rr_max": share, "rr_min": 1.0 / len(apps), "adapter_max": share}.get(system)
    # adapter_ct / adapter_ff: the adapter's own controllers set the cores; this loop reads them
    by_adapter = system in ("adapter_ct", "adapter_ff")
    kept = config.gpu_cores if config.gpus > 0 else 0.0  # cores the GPU executables keep
    cores = ([fixed] * len(apps) if fixed is not None
             else supervise([1.0] * len(apps), config.cores, gpu_cores=kept))  # fmt: skip
    # a replica runs at most ``threads`` requests at once: more cores than that are not used
    most = min(config.cores, float(config.threads))
    pi = [CoreController(config.gain, config.zero, config.u_min, most, c) for c in cores]
    node = NodeCores(pi, config.cores, gpu_cores=kept, gamma=config.gamma)
    rules = [RuleController(config.u_min, most, c) for c in cores]
    done: list[list[tuple[float, float]]] = [[] for _ in apps]  # (completed at, response s)
    out: list[dict[int, float]] = [{} for _ in apps]  # request id -> sent at
    every: list[float] = []
    came = [0 for _ in apps]  # requests sent in this control period
    violations, core_s = 0, 0.0
    cfg = _platform_config(config, system)
    async with contextlib.AsyncExitStack() as stack:
        gpu_urls = await stack.enter_async_context(_gpu_executables(config))
        platform = await stack.enter_async_context(LocalPlatform(cfg))
        while any(platform.replicas(n).ready < 1 for n in names):
            await asyncio.sleep(0.1)
        base = platform.url(names[0])
        client = httpx.AsyncClient(trust_env=False, timeout=60.0, headers=platform.auth_headers(),
                                   limits=httpx.Limits(max_connections=512))  # fmt: skip
        # one request's work, measured on the warm replica before any quota (the feed-forward
        # floor's unit; the packaged profile was timed on other inputs and other machines)
        work_s = [await median_s(client, f"{base}/v1/models/{n}:predict", b, 20, warm=2)
                  for n, b in zip(names, bodies, strict=True)]  # fmt: skip
        if system.startswith("adapter_"):  # the load goes through the adapter from now on
            base = await stack.enter_async_context(_adapter_in_front(cfg, platform))
        for name, c in zip(names, cores, strict=True):
            if not by_adapter:
                platform.set_cores(name, c)
        loop = asyncio.get_running_loop()
        dispatch = None
        if gpu_urls:  # GPU time per model, measured on the first warm GPU executable
            kinds = [a.profile for a in apps]
            gpu_s = [await measure_gpu_time(client, f"{gpu_urls[0]}/v1/models/{k}:predict", x)
                     for k, x in zip(kinds, instances, strict=True)]  # fmt: skip
            dispatch = Dispatch(
                client, names=names, kinds=kinds, instances=instances, cpu_urls=[base] * len(names),
                gpu_urls=gpu_urls, gpu_s=gpu_s, sla_s=[a.sla_s for a in apps],
                threads=config.threads, system=system, alpha=config.alpha, beta=config.beta,
                max_batch=config.max_batch, clock=lambda: loop.time() - start, rng=rng,
            )  # fmt: skip
        start = loop.time()

        async def send(i: int, k: int) -> None:
            sent = loop.time() - start
            out[i][k] = sent
            came[i] += 1
            try:
                if dispatch is not None:
                    ok = await dispatch.submit(i)
                else:
                    answer = await client.post(f"{base}/v1/models/{names[i]}:predict",
                                               content=bodies[i])  # fmt: skip
                    ok = answer.status_code == 200
            except httpx.HTTPError:
                ok = False
            except asyncio.CancelledError:  # still out when the drain ran out: unanswered
                del out[i][k]
                every.append(math.inf)
                raise
            finished = loop.time() - start
            del out[i][k]
            response = finished - sent if ok else math.inf
            done[i].append((finished, response))
            every.append(response)

        async def load(i: int) -> None:
            tasks = []
            try:
                for k, at in enumerate(schedules[i]):
                    await asyncio.sleep(max(0.0, at - (loop.time() - start)))
                    tasks.append(asyncio.create_task(send(i, k)))
                await asyncio.gather(*tasks)
            finally:  # cancelled at the end of the drain: so are the requests still out
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)

        senders = [asyncio.create_task(load(i)) for i in range(len(apps))]
        for second in range(1, round(config.duration_s) + 1):
            await asyncio.sleep(max(0.0, second - (loop.time() - start)))
            now = loop.time() - start
            if by_adapter:
                cores = [platform.cores(n) or 0.0 for n in names]
            core_s += sum(cores)
            measured: list[float | None] = []
            for i, app in enumerate(apps):
                fresh = [rt for at, rt in done[i] if at > now - 1.0]
                done[i] = [(at, rt) for at, rt in done[i] if at > now - 1.0]
                mean = sum(fresh) / len(fresh) if fresh else None
                violations += mean is not None and mean > app.sla_s
                if dispatch is not None and mean is not None:
                    dispatch.recent[i] = mean
                oldest = now - min(out[i].values()) if out[i] else None
                measured.append(response_signal(fresh, oldest))
            if fixed is not None or by_adapter:
                continue
            if system == "rr_rules":
                cores = [r.next_allocation(now, m, a.sla_s)
                         for r, m, a in zip(rules, measured, apps, strict=True)]  # fmt: skip
            else:
                # the CPUs' share of the arrivals, as the last period split them with the GPUs
                share_cpu = ([c / max(1, c + g) for c, g in zip(dispatch.on_cpu, dispatch.on_gpu,
                                                                strict=True)]
                             if dispatch is not None else [1.0] * len(apps))  # fmt: skip
                floors = [load_floor(n * f, w, config.ff_utilization) if system == "roma_ff"
                          else 0.0
                          for n, f, w in zip(came, share_cpu, work_s, strict=True)]  # fmt: skip
                cores = node.step(measured, [config.alpha * a.sla_s for a in apps], floors)
            came[:] = [0] * len(apps)
            if dispatch is not None:
                dispatch.on_cpu[:], dispatch.on_gpu[:] = [0] * len(apps), [0] * len(apps)
            for name, allocated in zip(names, cores, strict=True):
                platform.set_cores(name, allocated)
        # what is still out after the drain counts as unanswered (a failed request)
        _, late = await asyncio.wait(senders, timeout=DRAIN_S)
        for task in late:
            task.cancel()
        await asyncio.gather(*senders, return_exceptions=True)
        if dispatch is not None:
            await dispatch.close()
        await client.aclose()
    answered = sorted(rt for rt in every if math.isfinite(rt))
    on_gpu, on_cpu = ((dispatch.gpu_served, dispatch.cpu_served) if dispatch is not None
                      else (0, len(every)))  # fmt: skip
    row = summary_row(answered, violations, core_s, on_gpu, on_cpu, len(apps), config)
    row["work_ms"] = {n: round(1000 * w, 2) for n, w in zip(names, work_s, strict=True)}
    row["arrived"] = sum(len(s) for s in schedules)
    row["failed"] = len(every) - len(answered)
    return row


def run_live(config: RomaConfig, systems: tuple[str, ...] = LIVE_SYSTEMS) -> dict[str, Any]:
    """Each system in turn, live; the OUT.json document (``systems.{name}``)."""
    from slackwise_cli.results import machine

    known = LIVE_SYSTEMS + GPU_SYSTEMS + ADAPTER_SYSTEMS
    unknown = [s for s in systems if s not in known]
    if unknown:
        raise ValueError(f"unknown live system {unknown[0]!r}; expected {', '.join(known)}")
    through = [s for s in systems if s in ADAPTER_SYSTEMS]
    if through and config.gpus > 0:
        raise ValueError(f"{through[0]} runs without GPUs (the adapter does not dispatch to a GPU "
                         "executable); set roma.gpus: 0")  # fmt: skip
    rows = {}
    for system in systems:
        started = time.perf_counter()
        rows[system] = asyncio.run(_one(config, system))
        rows[system]["wall_s"] = round(time.perf_counter() - started, 1)
        print(f"{system}: {rows[system]}", flush=True)
    return {
        "config": config.source,
        "live": True,
        "cores": config.cores,
        "threads": config.threads,
        "cpu_period_ms": config.cpu_period_ms,
        "gpus": config.gpus,
        "gpu_device": config.gpu_device if config.gpus else None,
        "duration_s": config.duration_s,
        "sla_s": {n: a.sla_s for n, a in config.apps.items()},
        "systems": rows,
        "ran_on": machine(),
    }


def run_cli(path: str, out_json: str | None, modes: str | None) -> int:
    """``slackwise experiment -c ROMA.yaml [--json OUT] [--modes a,b]``: 0, or 2 on a bad config."""
    import sys
    from pathlib import Path

    from functions.server_process import ServerStartError
    from simulator.roma import format_roma, load_roma_config
    from slackwise_core.config import ConfigError

    try:
        config = load_roma_config(path)
        if not config.live:
            raise ConfigError(f"{path}: roma.live is not true: run it with slackwise simulate")
        systems = tuple(modes.split(",")) if modes else LIVE_SYSTEMS
        doc = run_live(config, systems)
    except (ConfigError, ValueError) as exc:
        print(f"slackwise: {exc}", file=sys.stderr)
        return 2
    except httpx.HTTPError as exc:  # a function failed before the load started
        print(f"slackwise: {path}: a function did not answer: {exc}", file=sys.stderr)
        return 1
    except ServerStartError as exc:  # a GPU executable refused its device or did not load
        print(f"slackwise: {path}: the GPU executable did not start: {exc}", file=sys.stderr)
        return 2
    print(format_roma(doc))
    if out_json:
        Path(out_json).parent.mkdir(parents=True, exist_ok=True)
        Path(out_json).write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
        print(f"results: {out_json}")
    return 0
