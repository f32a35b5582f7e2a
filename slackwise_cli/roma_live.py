"""ROMA live on this machine: functions sharing its cores, their CPU allocation set every second.

``slackwise experiment -c experiments/roma-2apps.yaml`` reads a ROMA config (the ``roma:``
section of :mod:`simulator.roma`, with ``live: true``) and runs each system on a fresh local
platform: one warm replica per app (min- and max-scale 1: ROMA's static deployment, one CPU
executable per model), open-loop Poisson load stepped every ``step_s`` as in Table 1
(:class:`slackwise_cli.roma_load.Load`), sent straight to the platform (its activator's queue is
the model's queue; the adapter is not in the path here). Every second a controller loop reads
each app's mean response time over the last second (or, when nothing completed, the age of its
oldest request still out) and sets each function's cores through
:meth:`knative.local.platform.LocalPlatform.set_cores`, a cgroup quota on its replica:

* ``roma``: a CT controller per app (PI, Eqs. 11–12) under Algorithm 2's supervisor (no GPU on
  this machine, so no GPU scheduler: ROMA's CPU half, which is also RR+CT here);
* ``roma_ff``: the same with a feed-forward floor under each demand, the cores the last
  second's arrivals call for at ``ff_utilization`` (:func:`slackwise_policies.roma.load_floor`,
  one request's work measured on the warm replica before the run);
* ``rr_rules``: ±1 core at ≥ 0.8 / ≤ 0.2 × SLA, every 15 s;
* ``rr_max``: every core, split evenly; ``rr_min``: one core, split evenly.

With ``roma.gpus: 1`` the run also starts a GPU executable (one process holding every app's
model, on ``roma.gpu_device``), and every system's load goes through the adapter with its GPU
route on (``adapter.gpu``, :mod:`adapter.serving.gpu_route`: the one ROMA live path, the same
that serves in production): a free GPU takes first from the head of a function's queue
(Algorithm 1 for the ``roma`` systems, a slack-sized batch for ``roma_batched``, round robin for
the others), and the adapter sends the rest to the CPU replicas one request at a time (each
function's ``max_batch`` is 1, as ROMA's CPU executables take them); the supervisor keeps
``roma.gpu_cores`` for the GPU executable. An executable that cannot use its device refuses to
start, and the run stops with its reason.

Counted as in the simulation: violations are (app, second) pairs whose mean response time (of
the requests completed in that second) exceeds the SLA; core-seconds the cores set, over time.
A request the adapter refuses counts as failed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import random
import time
from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, Any

import httpx

from simulator.roma import RomaConfig, arrivals, summary_row
from slackwise_cli.roma_load import Load, median_s
from slackwise_config import Config, parse_config
from slackwise_policies.roma import CoreController, NodeCores, RuleController, load_floor, supervise

if TYPE_CHECKING:
    from adapter.serving.state import AdapterState
    from knative.local.platform import LocalPlatform

__all__ = ["LIVE_SYSTEMS", "run_cli", "run_live"]

LIVE_SYSTEMS = ("roma", "roma_ff", "rr_rules", "rr_max", "rr_min")
#: accepted besides: the same as ``roma`` without GPUs
GPU_SYSTEMS = ("roma_batched",)
#: through the adapter (its batching in the path): its own CT controllers (``adapter.cores``),
#: with the feed-forward floor, or every core fixed (RR+max's cores)
ADAPTER_SYSTEMS = ("adapter_ct", "adapter_ff", "adapter_max")
#: the adapter's GPU route policy (``adapter.gpu.policy``) each system runs with a GPU
GPU_POLICY = {
    "roma": "roma",
    "roma_ff": "roma",
    "roma_batched": "roma_batched",
    **dict.fromkeys(("rr_rules", "rr_max", "rr_min"), "round_robin"),
}
#: how long a GPU executable may take to load every model
GPU_READY_S = 300.0
#: how long requests still out at the end may take to answer before they count as failed
DRAIN_S = 30.0


def _platform_config(config: RomaConfig, system: str = "", gpu_url: str | None = None) -> Config:
    """The local platform's config and the adapter's: each app's SLA as its function's SLO;
    for ``adapter_ct`` / ``adapter_ff`` ``adapter.cores`` with this experiment's controller
    settings; with ``gpu_url`` the adapter's GPU route on, each CPU replica sent one request at
    a time."""
    threads = config.threads
    pinned = {"autoscaling.knative.dev/min-scale": "1", "autoscaling.knative.dev/max-scale": "1"}
    functions: dict[str, dict[str, Any]] = {
        name: {
            "model": app.profile,
            "threads": threads,
            "container_concurrency": threads,
            "annotations": pinned,
            "slo_ms": 1000 * app.sla_s,
        }
        for name, app in config.apps.items()
    }
    platform = {
        "queue_depth": 100000,
        "request_timeout_s": 60,
        "cpu_period_ms": config.cpu_period_ms,
    }
    adapter: dict[str, Any] = {"max_queue": 100000}
    if system in ("adapter_ct", "adapter_ff"):
        adapter["cores"] = {
            "enabled": True,
            "node_cores": config.cores,
            "alpha": config.alpha,
            "gain": config.gain,
            "zero": config.zero,
            "u_min": config.u_min,
            "feed_forward": config.ff_utilization if system == "adapter_ff" else None,
        }
    if gpu_url is not None:
        adapter["gpu"] = {
            "url": gpu_url,
            "functions": list(config.apps),
            "policy": GPU_POLICY[system],
            "alpha": config.alpha,
            "beta": config.beta,
            "max_batch": config.max_batch,
        }
        for spec in functions.values():
            spec["max_batch"] = 1
    raw = {"platform": platform, "functions": functions, "adapter": adapter}
    return parse_config(raw, config.source)


@contextlib.asynccontextmanager
async def _adapter_in_front(
    cfg: Config, platform: LocalPlatform
) -> AsyncIterator[tuple[str, AdapterState]]:
    """The adapter (its batching, and its core controllers and GPU route where ``cfg`` enables
    them) served over HTTP on a free port in front of ``platform``; its base URL and state."""
    from adapter.serving.app import create_app
    from adapter.serving.http_server import serve
    from adapter.serving.platform_view import LocalView

    stop = asyncio.Event()
    bound: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    app = create_app(cfg, view=LocalView(platform))
    task = asyncio.create_task(serve(app, "127.0.0.1", 0, ready=bound.set_result, stop=stop))
    try:
        port = await asyncio.wait_for(bound, 60)
        yield f"http://127.0.0.1:{port}", app.state.adapter
    finally:
        stop.set()
        await task


def _instance(kind: str) -> Any:
    from functions.registry import create_model

    return create_model(kind).sample_instances(1)[0]


def _gpu_device(config: RomaConfig) -> str:
    """The GPU executable's device: ``cuda`` → ``cuda:0``; ``cuda:N`` as given; ``cpu`` runs it
    on the CPU (the same executable and route, for tests)."""
    return "cuda:0" if config.gpu_device == "cuda" else config.gpu_device


@contextlib.asynccontextmanager
async def _gpu_executable(config: RomaConfig) -> AsyncIterator[str | None]:
    """The GPU executable, every app's model in it, ready; its base URL (None without a GPU).
    ServerStartError: it refused its device or failed to start, its output says why."""
    from functions.server_process import ServerProcess

    if config.gpus == 0:
        yield None
        return
    kinds = list(dict.fromkeys(app.profile for app in config.apps.values()))
    server = ServerProcess(
        kinds[0], also=tuple(kinds[1:]), device=_gpu_device(config), threads=config.threads
    )

    def start() -> None:
        with httpx.Client(trust_env=False, timeout=5.0) as client:
            server.start()
            server.wait_ready(client, timeout_s=GPU_READY_S)

    try:
        await asyncio.to_thread(start)
        yield server.base_url
    finally:
        server.stop()


class _Cores:
    """What a live system does with a second's readings: the cores each app's replica gets
    (``now``), fixed, set by this loop's controllers, or read from the adapter's."""

    def __init__(self, config: RomaConfig, system: str, apps: int) -> None:
        self._config, self._system = config, system
        share = config.cores / apps
        self.fixed = {"rr_max": share, "rr_min": 1.0 / apps, "adapter_max": share}.get(system)
        #: adapter_ct / adapter_ff: the adapter's own controllers set the cores
        self.by_adapter = system in ("adapter_ct", "adapter_ff")
        kept = config.gpu_cores if config.gpus > 0 else 0.0  # cores the GPU executable keeps
        self.now = (
            [self.fixed] * apps
            if self.fixed is not None
            else supervise([1.0] * apps, config.cores, gpu_cores=kept)
        )
        # a replica runs at most ``threads`` requests at once: more cores than that are not used
        most = min(config.cores, float(config.threads))
        pi = [CoreController(config.gain, config.zero, config.u_min, most, c) for c in self.now]
        self._node = NodeCores(pi, config.cores, gpu_cores=kept, gamma=config.gamma)
        self._rules = [RuleController(config.u_min, most, c) for c in self.now]

    def step(
        self,
        now: float,
        signals: Sequence[float | None],
        slas: Sequence[float],
        cpu_arrivals: Sequence[float],
        work_s: Sequence[float],
    ) -> bool:
        """The next period's cores from the response ``signals`` and the arrivals the CPUs
        served (``cpu_arrivals``); whether this loop sets them."""
        if self.fixed is not None or self.by_adapter:
            return False
        if self._system == "rr_rules":
            self.now = [
                r.next_allocation(now, m, sla)
                for r, m, sla in zip(self._rules, signals, slas, strict=True)
            ]
            return True
        ff = self._config.ff_utilization
        floors = [
            load_floor(n, w, ff) if self._system == "roma_ff" else 0.0
            for n, w in zip(cpu_arrivals, work_s, strict=True)
        ]
        self.now = self._node.step(list(signals), [self._config.alpha * s for s in slas], floors)
        return True


async def _one(config: RomaConfig, system: str) -> dict[str, Any]:
    from knative.local.platform import LocalPlatform

    names = list(config.apps)
    apps = [config.apps[n] for n in names]
    slas = [a.sla_s for a in apps]
    rng = random.Random(config.seed)
    schedules = [arrivals(app, config, rng) for app in apps]
    bodies = [json.dumps({"instances": [_instance(a.profile)]}).encode() for a in apps]
    cores = _Cores(config, system, len(apps))
    violations, core_s = 0, 0.0
    async with contextlib.AsyncExitStack() as stack:
        gpu_url = await stack.enter_async_context(_gpu_executable(config))
        cfg = _platform_config(config, system, gpu_url)
        platform = await stack.enter_async_context(LocalPlatform(cfg))
        while any(platform.replicas(n).ready < 1 for n in names):
            await asyncio.sleep(0.1)
        client = await stack.enter_async_context(
            httpx.AsyncClient(
                trust_env=False,
                timeout=60.0,
                headers=platform.auth_headers(),
                limits=httpx.Limits(max_connections=512),
            )
        )
        base = platform.url(names[0])
        # one request's work, measured on the warm replica before any quota (the feed-forward
        # floor's unit; the packaged profile was timed on other inputs and other machines)
        work_s = [
            await median_s(client, f"{base}/v1/models/{n}:predict", b, 20, warm=2)
            for n, b in zip(names, bodies, strict=True)
        ]
        state = None
        if system.startswith("adapter_") or gpu_url is not None:  # the adapter from now on
            base, state = await stack.enter_async_context(_adapter_in_front(cfg, platform))
        gpu = state.gpu if state is not None else None
        if not cores.by_adapter:
            for name, c in zip(names, cores.now, strict=True):
                platform.set_cores(name, c)
        load = Load(client, base, names, bodies, schedules)
        sender = asyncio.create_task(load.run())
        on_gpu = [0 for _ in names]  # requests the GPU took per app, up to the last period
        for second in range(1, round(config.duration_s) + 1):
            await asyncio.sleep(max(0.0, second - load.now()))
            now = load.now()
            if cores.by_adapter:
                cores.now = [platform.cores(n) or 0.0 for n in names]
            core_s += sum(cores.now)
            means, signals = load.second(now)
            violations += sum(m is not None and m > s for m, s in zip(means, slas, strict=True))
            # the CPUs' share of the arrivals: what the GPU did not take this period
            served = [gpu.served[n] for n in names] if gpu is not None else [0] * len(names)
            took = [s - b for s, b in zip(served, on_gpu, strict=True)]
            on_gpu = served
            cpu = [max(0, n - t) for n, t in zip(load.came, took, strict=True)]
            load.came[:] = [0] * len(names)
            if cores.step(now, signals, slas, cpu, work_s):
                for name, allocated in zip(names, cores.now, strict=True):
                    platform.set_cores(name, allocated)
        # what is still out after the drain counts as unanswered (a failed request)
        _, late = await asyncio.wait([sender], timeout=DRAIN_S)
        for task in late:
            task.cancel()
        await asyncio.gather(sender, return_exceptions=True)
    answered = sorted(rt for rt in load.every if math.isfinite(rt))
    gpu_served = sum(on_gpu)
    row = summary_row(
        answered, violations, core_s, gpu_served, len(load.every) - gpu_served, len(apps), config
    )
    row["work_ms"] = {n: round(1000 * w, 2) for n, w in zip(names, work_s, strict=True)}
    row["arrived"] = sum(len(s) for s in schedules)
    row["failed"] = len(load.every) - len(answered)
    row["refused"] = load.refused  # of the failed: answered with a refusal at the door
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
        raise ValueError(
            f"{through[0]} runs without GPUs (its cores are the adapter's own "
            "controllers'); set roma.gpus: 0"
        )
    if config.gpus > 1:
        raise ValueError(
            f"roma.gpus: live runs drive one GPU executable (the adapter's GPU "
            f"route), got {config.gpus}"
        )
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
    from slackwise_config import ConfigError

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
