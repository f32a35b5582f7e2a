"""A ROMA experiment's config (the top-level ``roma:`` key), simulated or live.

Checked key by key: a bad key or value is a :class:`~slackwise_config.ConfigError` naming it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import yaml

from functions.device import parse_device
from slackwise_config.gpu import GPU_MAX_BATCH
from slackwise_config.reader import Reader, read_yaml
from slackwise_config.typed import named, read_fields
from slackwise_policies.settings_error import integer, number, within

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

    def __post_init__(self) -> None:
        for key in ("workers", "max_batch", "threads"):
            integer(key, getattr(self, key), 1)
        integer("gpus", self.gpus, 0)
        integer("seed", self.seed, 0)
        for key in ("cores", "gpu_cores", "gain", "zero", "u_min"):
            number(key, getattr(self, key), allow_low=True)
        for key in ("alpha", "beta", "gamma"):
            within(key, getattr(self, key), 0.0, 1.0, closed="[]")
        within("ff_utilization", self.ff_utilization, 0.0, 1.0, closed="(]")
        for key in ("step_s", "duration_s", "step_ms"):
            number(key, getattr(self, key))
        within("cpu_period_ms", self.cpu_period_ms, 1.0, 1000.0, closed="[]")


def is_roma_config(path: str | Path) -> bool:
    """Whether the YAML file at ``path`` is a ROMA experiment (a top-level ``roma:`` key)."""
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return False  # the regular loader reports it
    return isinstance(data, dict) and "roma" in data


def load_roma_config(path: str | Path) -> RomaConfig:
    path = Path(path)
    return parse_roma_config(read_yaml(path), str(path), path.parent)


#: the fields of :class:`RomaConfig` the ``roma:`` section does not set by name
_NOT_KEYS = {"source", "base_dir"}


def parse_roma_config(data: Any, source: str, base_dir: Path | None = None) -> RomaConfig:
    r = Reader(source)
    top = r.mapping(data, "")
    r.only(top, "", {"roma"})
    d = r.mapping(top.get("roma"), "roma")
    r.only(d, "roma", {f.name for f in fields(RomaConfig)} - _NOT_KEYS)
    plain = read_fields(r, RomaConfig, {k: v for k, v in d.items() if k != "apps"}, "roma")
    try:
        plain["gpu_device"] = parse_device(plain.get("gpu_device", "cuda"))
    except ValueError as exc:
        raise r.fail("roma.gpu_device", str(exc)) from None
    with named(r, "roma"):
        return RomaConfig(source=source, apps=_apps(r, d), base_dir=base_dir or Path.cwd(), **plain)


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
