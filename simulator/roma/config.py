"""A ROMA experiment's config (the top-level ``roma:`` key), simulated or live.

Checked key by key: a bad key or value is a :class:`~slackwise_core.config.ConfigError` naming it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from functions.device import parse_device
from slackwise_core.config import ConfigError
from slackwise_core.config.gpu import GPU_MAX_BATCH
from slackwise_core.config.reader import Reader

__all__ = ["RomaApp", "RomaConfig", "is_roma_config", "load_roma_config", "parse_roma_config"]


@dataclass(frozen=True)
class RomaApp:
    name: str
    profile: str
    sla_s: float
    #: requests per second in each step of ``step_s``
    workload: tuple[float, ...]


@dataclass(frozen=True)
class RomaConfig:
    source: str
    apps: Mapping[str, RomaApp]
    workers: int = 2
    cores: float = 6.0
    gpus: int = 1
    gpu_cores: float = 0.0
    step_s: float = 35.0
    duration_s: float = 300.0
    alpha: float = 0.8
    beta: float = 0.5
    gamma: float = 0.0
    gain: float = 0.6
    zero: float = 0.11
    u_min: float = 0.1
    #: ``roma_ff``: the utilization the feed-forward floor holds (``load_floor``)
    ff_utilization: float = 0.6
    max_batch: int = GPU_MAX_BATCH
    step_ms: float = 1.0
    seed: int = 1
    #: run on this machine (``slackwise experiment``) rather than simulated
    live: bool = False
    #: live: each replica's threads (and containerConcurrency), and the CFS period of its quota
    threads: int = 2
    cpu_period_ms: float = 100.0
    #: live with ``gpus`` > 0: the GPU executables' device (``cuda`` puts the k-th on
    #: ``cuda:k``; ``cpu`` runs the same executable and dispatch on the CPU, for tests)
    gpu_device: str = "cuda"
    base_dir: Path = field(default_factory=Path.cwd)


def is_roma_config(path: str | Path) -> bool:
    """Whether the YAML file at ``path`` is a ROMA experiment (a top-level ``roma:`` key)."""
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return False  # the regular loader reports it
    return isinstance(data, dict) and "roma" in data


def load_roma_config(path: str | Path) -> RomaConfig:
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"{path}: {exc}") from None
    return parse_roma_config(data, str(path), path.parent)


#: the keys of the ``roma:`` section
_KEYS = {
    "apps",
    "workers",
    "cores",
    "gpus",
    "gpu_cores",
    "step_s",
    "duration_s",
    "alpha",
    "beta",
    "gamma",
    "gain",
    "zero",
    "u_min",
    "ff_utilization",
    "max_batch",
    "step_ms",
    "seed",
    "live",
    "threads",
    "cpu_period_ms",
    "gpu_device",
}
#: the keys read as numbers with :class:`RomaConfig`'s defaults
_NUMBERS = (
    "cores",
    "gpu_cores",
    "step_s",
    "duration_s",
    "alpha",
    "beta",
    "gamma",
    "gain",
    "zero",
    "u_min",
    "ff_utilization",
    "step_ms",
)


def parse_roma_config(data: Any, source: str, base_dir: Path | None = None) -> RomaConfig:
    r = Reader(source)
    top = r.mapping(data, "")
    r.only(top, "", {"roma"})
    d = r.mapping(top.get("roma"), "roma")
    r.only(d, "roma", _KEYS)
    base = RomaConfig(source=source, apps={})
    apps = _apps(r, d)
    number = _numbers(r, d, base)
    live = d.get("live", False)
    if not isinstance(live, bool):
        raise r.fail("roma.live", f"must be true or false, got {live!r}")
    try:
        gpu_device = parse_device(r.string(d, "gpu_device", "roma", base.gpu_device))
    except ValueError as exc:
        raise r.fail("roma.gpu_device", str(exc)) from None
    return RomaConfig(
        source=source,
        apps=apps,
        **number,
        live=live,
        gpu_device=gpu_device,
        workers=r.integer(d, "workers", "roma", base.workers, low=1),
        gpus=r.integer(d, "gpus", "roma", base.gpus),
        max_batch=r.integer(d, "max_batch", "roma", base.max_batch, low=1),
        seed=r.integer(d, "seed", "roma", base.seed),
        threads=r.integer(d, "threads", "roma", base.threads, low=1),
        cpu_period_ms=r.number(
            d, "cpu_period_ms", "roma", base.cpu_period_ms, low=1.0, high=1000.0
        ),
        base_dir=base_dir or Path.cwd(),
    )


def _apps(r: Reader, d: Mapping[str, Any]) -> dict[str, RomaApp]:
    """``roma.apps``: at least one, each with its profile, SLA and per-step rates."""
    raw_apps = r.mapping(d.get("apps"), "roma.apps")
    if not raw_apps:
        raise r.fail("roma.apps", "at least one app is required")
    apps = {}
    for name, raw in raw_apps.items():
        where = f"roma.apps.{name}"
        a = r.mapping(raw, where)
        r.only(a, where, {"profile", "sla_s", "workload"})
        load = a.get("workload")
        if (
            not isinstance(load, list)
            or not load
            or not all(
                isinstance(x, (int, float)) and not isinstance(x, bool) and x >= 0 for x in load
            )
        ):
            raise r.fail(f"{where}.workload", f"must be a list of rates >= 0, got {load!r}")
        sla = r.number(a, "sla_s", where, 0.0)
        if sla <= 0:
            raise r.fail(f"{where}.sla_s", f"must be > 0, got {sla:g}")
        apps[name] = RomaApp(
            name, r.string(a, "profile", where, name), sla, tuple(float(x) for x in load)
        )
    return apps


def _numbers(r: Reader, d: Mapping[str, Any], base: RomaConfig) -> dict[str, float]:
    """The numeric settings (:data:`_NUMBERS`), the fractions within [0, 1] and the steps and
    the duration positive."""
    for key in ("alpha", "beta", "gamma", "ff_utilization"):
        value = r.number(d, key, "roma", getattr(base, key))
        if value > 1:
            raise r.fail(f"roma.{key}", f"must be within [0, 1], got {value:g}")
    number = {k: r.number(d, k, "roma", getattr(base, k)) for k in _NUMBERS}
    if number["ff_utilization"] <= 0:
        raise r.fail(
            "roma.ff_utilization", f"must be within (0, 1], got {number['ff_utilization']:g}"
        )
    if number["step_ms"] <= 0 or number["duration_s"] <= 0 or number["step_s"] <= 0:
        raise r.fail("roma", "step_ms, step_s and duration_s must be > 0")
    return number
