"""``adapter.cores``: ROMA's CPU half in front of the functions (off unless enabled).

Each period the adapter reads every controlled function's response times (the requests it
answered in the period, or the oldest still queued when that is longer), a CT controller per
function asks for cores against ``alpha`` × the function's SLO, Algorithm 2 scales the asks to
``node_cores`` (less ``gpu_cores``), and the platform sets them: a cgroup quota on the local
platform, an in-place pod resize on Knative (:mod:`adapter.serving.cores`)::

    adapter:
      cores:
        enabled: true
        node_cores: 2          # the cores the controlled functions share (default: this machine's)
        alpha: 0.5             # set point: alpha x the function's SLO
        gain: 0.6              # the PI controller's K and a (Eqs. 11-12)
        zero: 0.11
        u_min: 0.25            # the least a function is given, and the most is its threads
        period_s: 1.0
        feed_forward: 0.6      # optional: a floor from the arrivals at this utilization
        functions: [imagenet, embed]   # default: every function on the CPU
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, Protocol

from slackwise_config.reader import Reader, flag, fraction, name_list

__all__ = ["CoreSettings", "check_cores", "core_settings"]


class _Function(Protocol):
    """What the check reads of a function (:class:`slackwise_config.model.FunctionConfig`)."""

    @property
    def device(self) -> str: ...


@dataclass(frozen=True)
class CoreSettings:
    """ROMA's CT controllers over the CPU functions' cores (see the module docstring)."""

    enabled: bool = False
    #: the cores the controlled functions share (None: this machine's, ``os.cpu_count()``)
    node_cores: float | None = None
    #: cores kept for GPU executables on the node (Algorithm 2)
    gpu_cores: float = 0.0
    alpha: float = 0.5
    gain: float = 0.6
    zero: float = 0.11
    u_min: float = 0.25
    period_s: float = 1.0
    #: the utilization the feed-forward floor holds (None: no floor, the paper's controller)
    feed_forward: float | None = None
    #: the functions controlled (empty: every function on the CPU)
    functions: tuple[str, ...] = ()


def core_settings(r: Reader, raw: Any, path: str = "adapter.cores") -> CoreSettings:
    data = r.mapping(raw, path)
    r.only(data, path, {f.name for f in fields(CoreSettings)})
    d = CoreSettings()
    node = data.get("node_cores")
    listed = name_list(r, data, "functions", path)
    return CoreSettings(
        enabled=flag(r, data, "enabled", path, d.enabled),
        node_cores=None if node is None else r.number(data, "node_cores", path, 1.0, low=0.01),
        gpu_cores=r.number(data, "gpu_cores", path, d.gpu_cores, low=0.0),
        alpha=fraction(r, data, "alpha", path, d.alpha),
        gain=r.number(data, "gain", path, d.gain, low=0.0),
        zero=r.number(data, "zero", path, d.zero, low=0.0, high=1.0),
        u_min=r.number(data, "u_min", path, d.u_min, low=0.01),
        period_s=r.number(data, "period_s", path, d.period_s, low=0.05),
        feed_forward=None
        if data.get("feed_forward") is None
        else fraction(r, data, "feed_forward", path, 0.6),
        functions=listed,
    )


def check_cores(r: Reader, settings: CoreSettings, functions: Mapping[str, _Function]) -> None:
    """Every controlled function exists and computes on the CPU; the node has cores left."""
    path = "adapter.cores"
    for name in settings.functions:
        if name not in functions:
            raise r.fail(f"{path}.functions", f"no function named {name!r}")
        if functions[name].device != "cpu":
            raise r.fail(
                f"{path}.functions",
                f"{name!r} computes on {functions[name].device}: its cores are not "
                "the CPU executable's to set",
            )
    if settings.node_cores is not None and settings.gpu_cores >= settings.node_cores:
        left = f"leaves none of node_cores {settings.node_cores:g} for the CPU functions"
        raise r.fail(f"{path}.gpu_cores", f"{left}, got {settings.gpu_cores:g}")
