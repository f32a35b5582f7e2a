"""``adapter.hpa``: how many adapters a cluster runs, between two bounds, scaled on their CPU.

``slackwise manifests`` writes a HorizontalPodAutoscaler (``autoscaling/v2``) over the adapter's
Deployment from these settings (:mod:`knative.cluster.hpa`); the local platform ignores them::

    adapter:
      hpa:
        min_replicas: 2          # never fewer: one can go (a drain, a crash) while one answers
        max_replicas: 10         # (default 10, or min_replicas where that is more)
        target_cpu_percent: 70   # the pods' average CPU, in % of their CPU request
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from slackwise_config.reader import Reader

__all__ = ["HpaSettings", "hpa_settings"]


@dataclass(frozen=True)
class HpaSettings:
    """The adapter Deployment's HorizontalPodAutoscaler (see the module docstring)."""

    #: two, so one adapter can go (a drain, a crash) while the other answers
    min_replicas: int = 2
    max_replicas: int = 10
    #: the average CPU use the HPA holds the adapters' pods at, in % of their CPU request
    target_cpu_percent: int = 70


def hpa_settings(r: Reader, raw: Any, path: str = "adapter.hpa") -> HpaSettings:
    """``adapter.hpa`` read and checked; errors name the key and the value."""
    data = r.mapping(raw, path)
    r.only(data, path, {f.name for f in fields(HpaSettings)})
    d = HpaSettings()
    cpu = d.target_cpu_percent
    low = r.integer(data, "min_replicas", path, d.min_replicas, low=1)
    high = r.integer(data, "max_replicas", path, max(d.max_replicas, low), low=1)
    if high < low:
        raise r.fail(f"{path}.max_replicas", f"must be >= min_replicas ({low}), got {high}")
    return HpaSettings(
        min_replicas=low,
        max_replicas=high,
        target_cpu_percent=r.integer(data, "target_cpu_percent", path, cpu, low=1),
    )
