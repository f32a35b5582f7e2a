"""One ROMA system simulated over a whole workload, in steps of ``step_ms`` (see
:mod:`simulator.roma`): arrivals join their model's queue, free GPUs choose a batch, CPU
executables progress what runs and take new requests, and every second the controllers set each
executable's cores."""

from __future__ import annotations

import math
import random
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from simulator.roma.config import RomaApp, RomaConfig
from simulator.service import ServiceCurve
from slackwise_policies.roma import (
    CoreController,
    GpuCandidate,
    RuleController,
    gpu_batch,
    gpu_choice,
    load_floor,
    round_robin,
    supervise,
)

__all__ = ["SYSTEMS", "arrivals", "simulate_system", "summary_row"]

SYSTEMS = ("roma", "roma_batched", "roma_ff", "rr_ct", "rr_rules", "rr_max", "rr_min")


@dataclass
class _Executable:
    """One model's CPU executable on one worker."""

    cores: float
    running: list[list[float]] = field(default_factory=list)  # [arrival, work left in core-s]

    def threads(self) -> int:
        return max(0, math.ceil(self.cores - 1e-9))


def arrivals(app: RomaApp, config: RomaConfig, rng: random.Random) -> list[float]:
    """The app's Poisson arrival times, its rate stepped every ``step_s`` (Table 1)."""
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


def _seconds(curve: ServiceCurve) -> Callable[[int], float]:
    """A GPU batch's time in seconds from its profile's median curve."""
    return lambda n: curve.median_ms(n) / 1000.0


def _measured(
    done: list[tuple[float, float]], queue: deque[float], now: float, recent: float | None
) -> float | None:
    """The response time a controller reads: the last second's completions, or, when its queue
    holds requests older than that, the head's age (a starved executable completes nothing)."""
    if queue and (recent is None or now - queue[0] > recent):
        return now - queue[0]
    return recent


class _System:
    """The state of one system's run; :meth:`tick` advances it one step."""

    def __init__(
        self,
        config: RomaConfig,
        system: str,
        cpu_s: Mapping[str, float],
        gpu: Mapping[str, ServiceCurve],
    ) -> None:
        self.config, self.system = config, system
        self.apps = [config.apps[n] for n in config.apps]
        apps, n = self.apps, len(self.apps)
        self.rng = random.Random(config.seed)
        self.pending = [deque(arrivals(app, config, self.rng)) for app in apps]
        self.arrived = sum(len(p) for p in self.pending)
        self.queues: list[deque[float]] = [deque() for _ in apps]
        self.work_s = [cpu_s[a.profile] for a in apps]
        self.gpu_s = [_seconds(gpu[a.profile]) for a in apps]
        self.fixed = {"rr_max": config.cores / n, "rr_min": 1.0 / n}.get(system)
        start = self.fixed if self.fixed is not None else 1.0
        workers = range(config.workers)
        self.execs = [[_Executable(start) for _ in apps] for _ in workers]
        self.pi = [
            [
                CoreController(config.gain, config.zero, config.u_min, config.cores, start)
                for _ in apps
            ]
            for _ in workers
        ]
        self.rules = [
            [RuleController(config.u_min, config.cores, start) for _ in apps] for _ in workers
        ]
        self.gpus_busy: list[tuple[float, int, list[float]]] = []  # (free at, app, arrivals)
        self.free_gpus = config.workers * config.gpus
        self.rr_next = 0
        self.done: list[list[tuple[float, float]]] = [[] for _ in apps]  # (completed at, rt)
        self.second: list[list[float]] = [[] for _ in apps]
        self.recent: list[float | None] = [None for _ in apps]
        self.violations, self.core_s, self.gpu_served, self.cpu_served = 0, 0.0, 0, 0
        # per app in this control period: arrivals, and requests started on the GPUs and CPUs
        self.came, self.on_gpu, self.on_cpu = [0] * n, [0] * n, [0] * n

    def tick(self, now: float, dt: float) -> None:
        for i in range(len(self.apps)):
            while self.pending[i] and self.pending[i][0] <= now:
                self.queues[i].append(self.pending[i].popleft())
                self.came[i] += 1
        self._gpus(now)
        self._cpus(now, dt)
        self.core_s += sum(ex.cores for node in self.execs for ex in node) * dt

    def _gpus(self, now: float) -> None:
        """Finish the GPU batches due, then every free GPU chooses one."""
        still = []
        for free_at, i, batch in self.gpus_busy:
            if free_at <= now:
                for t in batch:
                    self.done[i].append((free_at, free_at - t))
                self.free_gpus += 1
            else:
                still.append((free_at, i, batch))
        self.gpus_busy = still
        queues, config = self.queues, self.config
        while self.free_gpus > 0 and any(queues):
            if self.system.startswith("roma"):
                cands = [
                    GpuCandidate(queues[i], self.recent[i], a.sla_s, self.gpu_s[i])
                    for i, a in enumerate(self.apps)
                ]
                pick = gpu_choice(cands, now, alpha=config.alpha, beta=config.beta)
                assert pick is not None
                n = (
                    gpu_batch(cands[pick], now, config.max_batch)
                    if self.system == "roma_batched"
                    else 1
                )
            else:  # round robin over the non-empty queues
                turn = round_robin([bool(q) for q in queues], self.rr_next)
                assert turn is not None  # some queue is non-empty
                pick, self.rr_next, n = turn, (turn + 1) % len(self.apps), 1
            batch = [queues[pick].popleft() for _ in range(min(n, len(queues[pick])))]
            self.gpus_busy.append((now + self.gpu_s[pick](len(batch)), pick, batch))
            self.gpu_served += len(batch)
            self.on_gpu[pick] += len(batch)
            self.free_gpus -= 1

    def _cpus(self, now: float, dt: float) -> None:
        """Progress what runs, then hand out free threads (random queue, random executable)."""
        for node in self.execs:
            for i, ex in enumerate(node):
                if not ex.running:
                    continue
                rate = min(1.0, ex.cores / len(ex.running)) if ex.cores > 0 else 0.0
                left = []
                for item in ex.running:
                    item[1] -= rate * dt
                    if item[1] <= 1e-12:
                        self.done[i].append((now, now - item[0]))
                    else:
                        left.append(item)
                ex.running = left
        waiting = [i for i in range(len(self.apps)) if self.queues[i]]
        while waiting:
            i = self.rng.choice(waiting)
            slots = [node[i] for node in self.execs if len(node[i].running) < node[i].threads()]
            if not slots:
                waiting.remove(i)
                continue
            self.rng.choice(slots).running.append([self.queues[i].popleft(), self.work_s[i]])
            self.on_cpu[i] += 1
            self.cpu_served += 1
            if not self.queues[i]:
                waiting.remove(i)

    def control(self, now: float) -> None:
        """The control period (1 s): count the second's violations, set every executable's
        cores."""
        apps = self.apps
        for i in range(len(apps)):
            fresh = [rt for at, rt in self.done[i] if at > now - 1.0]
            self.done[i] = [(at, rt) for at, rt in self.done[i] if at > now - 1.0]
            self.second[i].extend(fresh)
            if fresh:
                self.recent[i] = mean = sum(fresh) / len(fresh)
                self.violations += mean > apps[i].sla_s
        if self.fixed is None:
            for w, node in enumerate(self.execs):
                self._allocate(w, node, now)
        n = len(apps)
        self.came, self.on_gpu, self.on_cpu = [0] * n, [0] * n, [0] * n

    def _allocate(self, w: int, node: list[_Executable], now: float) -> None:
        apps, config = self.apps, self.config
        if self.system == "rr_rules":
            for i, ex in enumerate(node):
                ex.cores = self.rules[w][i].next_allocation(now, self.recent[i], apps[i].sla_s)
            return
        # the CPUs' share of the arrivals: as the last period split them
        floors = [
            load_floor(
                self.came[i]
                * self.on_cpu[i]
                / max(1, self.on_cpu[i] + self.on_gpu[i])
                / config.workers,
                self.work_s[i],
                config.ff_utilization,
            )
            if self.system == "roma_ff"
            else 0.0
            for i in range(len(apps))
        ]
        demands = [
            self.pi[w][i].next_allocation(
                _measured(self.done[i], self.queues[i], now, self.recent[i]),
                config.alpha * apps[i].sla_s,
                floor=floors[i],
            )
            for i in range(len(apps))
        ]
        granted = supervise(demands, config.cores, gpu_cores=config.gpu_cores, gamma=config.gamma)
        for i, ex in enumerate(node):
            self.pi[w][i].granted(granted[i])
            ex.cores = granted[i]


def simulate_system(
    config: RomaConfig, system: str, cpu_s: Mapping[str, float], gpu: Mapping[str, ServiceCurve]
) -> dict[str, Any]:
    """One system over the whole workload; the row of ``systems.{system}``."""
    if system not in SYSTEMS:
        raise ValueError(f"unknown system {system!r}; expected one of {', '.join(SYSTEMS)}")
    run = _System(config, system, cpu_s, gpu)
    dt = config.step_ms / 1000.0
    next_second = 1.0
    for k in range(1, round(config.duration_s / dt) + 1):
        now = k * dt
        run.tick(now, dt)
        if now + 1e-9 >= next_second:
            next_second += 1.0
            run.control(now)
    rts = sorted(rt for per_app in run.second for rt in per_app)
    row = summary_row(
        rts, run.violations, run.core_s, run.gpu_served, run.cpu_served, len(run.apps), config
    )
    row["arrived"] = run.arrived  # the rest were still queued or running at the end
    return row


def summary_row(
    rts: list[float],
    violations: int,
    core_s: float,
    gpu_served: int,
    cpu_served: int,
    apps: int,
    config: RomaConfig,
) -> dict[str, Any]:
    """A system's row: requests, violations (and their share of the app-seconds), core-seconds,
    response-time summary (ms), the GPUs' share of the requests."""

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
