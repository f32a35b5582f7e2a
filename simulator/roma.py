"""ROMA's evaluation (seed 003, §5, Tables 1–2) simulated on our models: workers with CPU cores
and GPUs, one CPU executable per model per worker with a core allocation, one GPU executable per
GPU holding every model, and five systems deciding which model a free GPU serves and how many
cores each CPU executable gets:

============  =============================  ====================================================
system        GPU                            CPU cores per executable
============  =============================  ====================================================
``roma``      Algorithm 1 (most deficient)   CT controllers (PI, every 1 s) under Algorithm 2
``rr_ct``     round robin                    CT controllers under Algorithm 2
``rr_rules``  round robin                    ±1 core at ≥ 0.8 / ≤ 0.2 × SLA, every 15 s
``rr_max``    round robin                    every core, split evenly
``rr_min``    round robin                    one core per worker, split evenly
============  =============================  ====================================================

``roma_batched`` adds what the paper does not do: a GPU serves a batch of the chosen model's
queue sized by its head's slack (:func:`adapter.policies.roma.gpu_batch`), not one request.
``roma_ff`` is ``roma`` with a feed-forward floor under each CT controller's demand: the cores
the last second's arrivals call for at ``ff_utilization``, counting the CPUs' share of them as
the GPUs and the CPUs split that second's starts
(:func:`adapter.policies.roma.load_floor`).

How a CPU executable serves (modelled; ``benchmarks/cores_profile.py`` measures it against real
quotas, see docs/roma.md): our functions run one request per
thread, so an executable with ``u`` cores runs up to ``ceil(u)`` requests at once and shares the
``u`` cores among them (a CFS quota: each progresses at ``min(1, u / running)`` of a core); a
request needs the profile's batch-1 in-process time of one core (``functions/profiles/cpu``,
measured at one thread). The CPU scheduler takes the oldest request of a random non-empty queue
for a random executable of that model with a free thread, as ROMA's does. A GPU batch takes the
H100 profile's time (``functions/profiles/gpu``). Time advances in steps of ``step_ms``.

Counted as the paper counts: ``violations`` are (app, second) pairs whose completed requests'
mean response time exceeds the app's SLA; ``core_seconds`` the allocation granted, summed over
executables and time (RR+max: every core for the whole run).
"""

from __future__ import annotations

import math
import random
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from adapter.policies.roma import (
    CoreController,
    GpuCandidate,
    RuleController,
    gpu_batch,
    gpu_choice,
    load_floor,
    round_robin,
    supervise,
)
from simulator.profiles import resolve_curves
from simulator.roma_config import (
    RomaApp,
    RomaConfig,
    is_roma_config,
    load_roma_config,
    parse_roma_config,
)
from simulator.service import ServiceCurve
from slackwise_core.config import ConfigError

__all__ = [
    "SYSTEMS",
    "RomaApp",
    "RomaConfig",
    "arrivals",
    "format_roma",
    "is_roma_config",
    "load_roma_config",
    "parse_roma_config",
    "run_roma",
    "simulate_system",
    "summary_row",
]

SYSTEMS = ("roma", "roma_batched", "roma_ff", "rr_ct", "rr_rules", "rr_max", "rr_min")


@dataclass
class _Executable:
    """One model's CPU executable on one worker."""

    cores: float
    running: list[list[float]] = field(default_factory=list)  # [arrival, work left in core-s]

    def threads(self) -> int:
        return max(0, math.ceil(self.cores - 1e-9))


def arrivals(app: RomaApp, config: RomaConfig, rng: random.Random) -> list[float]:
    out, t = [], 0.0
    for i, rate in enumerate(app.workload):
        end = config.duration_s if i == len(app.workload) - 1 else (i + 1) * config.step_s
        end = min(end, config.duration_s)
        while rate > 0:
            t += rng.expovariate(rate)
            if t >= end:
                break
            out.append(t)
        t = end
    return out


def simulate_system(config: RomaConfig, system: str, cpu_s: Mapping[str, float],
                    gpu: Mapping[str, ServiceCurve]) -> dict[str, Any]:  # fmt: skip
    """One system over the whole workload; the row of ``systems.{system}``."""
    if system not in SYSTEMS:
        raise ValueError(f"unknown system {system!r}; expected one of {', '.join(SYSTEMS)}")
    names = list(config.apps)
    apps = [config.apps[n] for n in names]
    rng = random.Random(config.seed)
    pending = [deque(arrivals(app, config, rng)) for app in apps]
    arrived = sum(len(p) for p in pending)
    queues: list[deque[float]] = [deque() for _ in apps]
    work_s = [cpu_s[a.profile] for a in apps]
    gpu_s = [lambda n, c=gpu[a.profile]: c.median_ms(n) / 1000.0 for a in apps]
    share = config.cores / len(apps)
    fixed = {"rr_max": share, "rr_min": 1.0 / len(apps)}.get(system)
    start = fixed if fixed is not None else 1.0
    execs = [[_Executable(start) for _ in apps] for _ in range(config.workers)]
    pi = [[CoreController(config.gain, config.zero, config.u_min, config.cores, start)
           for _ in apps] for _ in range(config.workers)]  # fmt: skip
    rules = [[RuleController(config.u_min, config.cores, start) for _ in apps]
             for _ in range(config.workers)]  # fmt: skip
    gpus_busy: list[tuple[float, int, list[float]]] = []  # (free at, app, arrivals)
    free_gpus = config.workers * config.gpus
    rr_next = 0
    done: list[list[tuple[float, float]]] = [[] for _ in apps]  # (completed at, response)
    second: list[list[float]] = [[] for _ in apps]
    recent: list[float | None] = [None for _ in apps]
    violations, core_s, gpu_served, cpu_served = 0, 0.0, 0, 0
    # per app in this control period: arrivals, and requests started on the GPUs and on the CPUs
    came, on_gpu, on_cpu = [0 for _ in apps], [0 for _ in apps], [0 for _ in apps]
    dt = config.step_ms / 1000.0
    steps = round(config.duration_s / dt)
    next_second = 1.0
    for k in range(1, steps + 1):
        now = k * dt
        for i in range(len(apps)):
            while pending[i] and pending[i][0] <= now:
                queues[i].append(pending[i].popleft())
                came[i] += 1
        # GPUs: finish, then every free one chooses
        still = []
        for free_at, i, batch in gpus_busy:
            if free_at <= now:
                for t in batch:
                    done[i].append((free_at, free_at - t))
                free_gpus += 1
            else:
                still.append((free_at, i, batch))
        gpus_busy = still
        while free_gpus > 0 and any(queues):
            if system.startswith("roma"):
                cands = [GpuCandidate(queues[i], recent[i], apps[i].sla_s, gpu_s[i])
                         for i in range(len(apps))]  # fmt: skip
                pick = gpu_choice(cands, now, alpha=config.alpha, beta=config.beta)
                assert pick is not None
                n = (gpu_batch(cands[pick], now, config.max_batch)
                     if system == "roma_batched" else 1)  # fmt: skip
            else:  # round robin over the non-empty queues
                turn = round_robin([bool(q) for q in queues], rr_next)
                assert turn is not None  # some queue is non-empty
                pick, rr_next, n = turn, (turn + 1) % len(apps), 1
            batch = [queues[pick].popleft() for _ in range(min(n, len(queues[pick])))]
            gpus_busy.append((now + gpu_s[pick](len(batch)), pick, batch))
            gpu_served += len(batch)
            on_gpu[pick] += len(batch)
            free_gpus -= 1
        # CPUs: progress what runs, then hand out free threads (random queue, random executable)
        for node in execs:
            for i, ex in enumerate(node):
                if not ex.running:
                    continue
                rate = min(1.0, ex.cores / len(ex.running)) if ex.cores > 0 else 0.0
                left = []
                for item in ex.running:
                    item[1] -= rate * dt
                    if item[1] <= 1e-12:
                        done[i].append((now, now - item[0]))
                    else:
                        left.append(item)
                ex.running = left
        waiting = [i for i in range(len(apps)) if queues[i]]
        while waiting:
            i = rng.choice(waiting)
            slots = [node[i] for node in execs if len(node[i].running) < node[i].threads()]
            if not slots:
                waiting.remove(i)
                continue
            rng.choice(slots).running.append([queues[i].popleft(), work_s[i]])
            on_cpu[i] += 1
            cpu_served += 1
            if not queues[i]:
                waiting.remove(i)
        core_s += sum(ex.cores for node in execs for ex in node) * dt
        if now + 1e-9 >= next_second:  # the control period: 1 s
            next_second += 1.0
            for i in range(len(apps)):
                fresh = [rt for at, rt in done[i] if at > now - 1.0]
                done[i] = [(at, rt) for at, rt in done[i] if at > now - 1.0]
                second[i].extend(fresh)
                mean = sum(fresh) / len(fresh) if fresh else None
                if fresh:
                    recent[i] = mean
                    violations += mean is not None and mean > apps[i].sla_s
            if fixed is None:
                for w, node in enumerate(execs):
                    if system == "rr_rules":
                        for i, ex in enumerate(node):
                            ex.cores = rules[w][i].next_allocation(now, recent[i], apps[i].sla_s)
                        continue
                    # the CPUs' share of the arrivals: as the last period split them
                    floors = [load_floor(came[i] * on_cpu[i] / max(1, on_cpu[i] + on_gpu[i])
                                         / config.workers, work_s[i],
                                         config.ff_utilization) if system == "roma_ff" else 0.0
                              for i in range(len(apps))]  # fmt: skip
                    demands = [pi[w][i].next_allocation(_measured(done[i], queues[i], now,
                                                                  recent[i]),
                                                        config.alpha * apps[i].sla_s,
                                                        floor=floors[i])
                               for i in range(len(apps))]  # fmt: skip
                    granted = supervise(demands, config.cores, gpu_cores=config.gpu_cores,
                                        gamma=config.gamma)  # fmt: skip
                    for i, ex in enumerate(node):
                        pi[w][i].granted(granted[i])
                        ex.cores = granted[i]
            came, on_gpu, on_cpu = [0 for _ in apps], [0 for _ in apps], [0 for _ in apps]
    rts = sorted(rt for per_app in second for rt in per_app)
    row = summary_row(rts, violations, core_s, gpu_served, cpu_served, len(apps), config)
    row["arrived"] = arrived  # the rest were still queued or running at the end
    return row


def _measured(done: list[tuple[float, float]], queue: deque[float], now: float,
              recent: float | None) -> float | None:  # fmt: skip
    """The response time a controller reads: the last second's completions, or, when its queue
    holds requests older than that, the head's age (a starved executable completes nothing)."""
    if queue and (recent is None or now - queue[0] > recent):
        return now - queue[0]
    return recent


def summary_row(rts: list[float], violations: int, core_s: float, gpu_served: int, cpu_served: int,
         apps: int, config: RomaConfig) -> dict[str, Any]:  # fmt: skip
    def pct(q: float) -> float:
        return round(1000 * rts[min(len(rts) - 1, int(q * len(rts)))], 1) if rts else math.nan

    windows = apps * round(config.duration_s)
    return {
        "requests": len(rts),
        "violations": int(violations),
        "violation_pct": round(100.0 * violations / windows, 2),
        "core_seconds": round(core_s, 1),
        "mean_ms": round(1000 * sum(rts) / len(rts), 1) if rts else math.nan,
        "p50_ms": pct(0.5),
        "p99_ms": pct(0.99),
        "max_ms": round(1000 * rts[-1], 1) if rts else math.nan,
        "gpu_share": round(gpu_served / max(1, gpu_served + cpu_served), 3),
    }


def cpu_work_s(kind: str) -> float:
    """One request's work on one core: the CPU profile's batch-1 in-process median (one thread)."""
    from functions.profile_format import load_profile
    from functions.profiles import packaged

    path = packaged(kind)
    if not path.is_file():
        raise ConfigError(f"no CPU profile for {kind!r} ({path})")
    profile = load_profile(path)
    if 1 not in profile.inprocess:
        raise ConfigError(f"{path}: no batch-1 in-process latency")
    return profile.inprocess[1].median / 1000.0


def _system_job(config: RomaConfig, system: str) -> dict[str, Any]:
    profiles = {a.profile for a in config.apps.values()}
    cpu = {p: cpu_work_s(p) for p in profiles}
    gpu = resolve_curves("gpu", {p: p for p in profiles}, config.base_dir)
    return simulate_system(config, system, cpu, gpu)


def run_roma(config: RomaConfig, systems: tuple[str, ...] = SYSTEMS, *,
             jobs: int = 1) -> dict[str, Any]:  # fmt: skip
    """Every system on the config's workload (in up to ``jobs`` processes): OUT.json."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    unknown = [s for s in systems if s not in SYSTEMS]
    if unknown:
        raise ValueError(f"unknown system {unknown[0]!r}; expected one of {', '.join(SYSTEMS)}")
    for app in config.apps.values():
        cpu_work_s(app.profile)  # fail early, here, on a missing profile
    if jobs > 1 and len(systems) > 1:
        ctx = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=min(jobs, len(systems)), mp_context=ctx) as pool:
            rows = list(pool.map(_system_job, [config] * len(systems), systems))
    else:
        rows = [_system_job(config, s) for s in systems]
    return {
        "config": config.source,
        "workers": config.workers,
        "cores_per_worker": config.cores,
        "gpus_per_worker": config.gpus,
        "duration_s": config.duration_s,
        "sla_s": {n: a.sla_s for n, a in config.apps.items()},
        "systems": dict(zip(systems, rows, strict=True)),
    }


def format_roma(doc: Mapping[str, Any]) -> str:
    """The systems' table the command prints (Table 2's columns)."""
    lines = [f"{'system':<13} {'V':>5} {'V %':>6} {'core-s':>8} {'mean ms':>8} {'p50 ms':>7} "
             f"{'p99 ms':>8} {'max ms':>8} {'on GPU':>7}"]  # fmt: skip
    for name, r in doc["systems"].items():
        lines.append(
            f"{name:<13} {r['violations']:>5} {r['violation_pct']:>6.2f} "
            f"{r['core_seconds']:>8.1f} {r['mean_ms']:>8.1f} {r['p50_ms']:>7.1f} "
            f"{r['p99_ms']:>8.1f} {r['max_ms']:>8.1f} {r['gpu_share']:>7.3f}"
        )
    return "\n".join(lines)
