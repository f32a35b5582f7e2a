"""ROMA's simulated evaluation run: every system on a config's workload (see
:mod:`simulator.roma`), and the table the command prints."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from simulator.pool import map_jobs
from simulator.profiles import resolve_curves
from simulator.roma.config import RomaConfig
from simulator.roma.system import SYSTEMS, simulate_system
from slackwise_config import ConfigError

__all__ = ["cpu_work_s", "format_roma", "run_roma"]


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


def run_roma(
    config: RomaConfig, systems: tuple[str, ...] = SYSTEMS, *, jobs: int = 1
) -> dict[str, Any]:
    """Every system on the config's workload (in up to ``jobs`` processes): OUT.json."""
    unknown = [s for s in systems if s not in SYSTEMS]
    if unknown:
        raise ValueError(f"unknown system {unknown[0]!r}; expected one of {', '.join(SYSTEMS)}")
    for app in config.apps.values():
        cpu_work_s(app.profile)  # fail early, here, on a missing profile
    rows = map_jobs(_system_job, [(config, s) for s in systems], jobs)
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
    lines = [
        f"{'system':<13} {'V':>5} {'V %':>6} {'core-s':>8} {'mean ms':>8} {'p50 ms':>7} "
        f"{'p99 ms':>8} {'max ms':>8} {'on GPU':>7}"
    ]
    for name, r in doc["systems"].items():
        lines.append(
            f"{name:<13} {r['violations']:>5} {r['violation_pct']:>6.2f} "
            f"{r['core_seconds']:>8.1f} {r['mean_ms']:>8.1f} {r['p50_ms']:>7.1f} "
            f"{r['p99_ms']:>8.1f} {r['max_ms']:>8.1f} {r['gpu_share']:>7.3f}"
        )
    return "\n".join(lines)
