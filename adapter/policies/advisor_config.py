"""An advisor's settings and what one of its decisions says (:mod:`adapter.policies.advisor`
decides): the fields, their one default each, and their checks, which name the field and the
value."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

from adapter.policies.percentile import ServiceModel

__all__ = [
    "BURST_RATIO",
    "DEFAULT_PERCENTILE",
    "RESOURCE_MODELS",
    "AdvisorConfig",
    "AdvisorConfigError",
    "AdvisorDecision",
    "Reason",
    "ResourceModel",
]

#: ``scale-out``: the pin rose now; ``scale-in``: it fell now; ``hold``: the model wants fewer
#: but the gap has not passed; ``steady``: the model wants the pin as it is
Reason = Literal["scale-out", "scale-in", "hold", "steady"]


#: which resource model sizes the fleet (AdvisorConfig.model)
ResourceModel = Literal["replay", "batched", "swayam"]
RESOURCE_MODELS: tuple[ResourceModel, ...] = ("replay", "batched", "swayam")


class AdvisorConfigError(ValueError):
    """An advisor setting out of range; the message names the field and the value."""


#: how far above the current window's rate the recent span's must be to count as a burst
BURST_RATIO = 1.5


def _positive(name: str, value: float, *, allow_zero: bool = False) -> None:
    ok = math.isfinite(value) and (value >= 0.0 if allow_zero else value > 0.0)
    if not ok:
        bound = ">= 0" if allow_zero else "> 0"
        raise AdvisorConfigError(f"{name} must be a finite number {bound}, got {value!r}")


def _integer(name: str, value: int, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise AdvisorConfigError(f"{name} must be an integer >= {minimum}, got {value!r}")


#: the percentile an SLO bounds when its app does not say (``apps.X.percentile``)
DEFAULT_PERCENTILE = 95.0


@dataclass(frozen=True, kw_only=True, slots=True)
class AdvisorConfig:
    """Settings of one function's advisor (seconds, milliseconds and percent as named).

    ``slo_ms`` and ``percentile`` are the SLO (e.g. P95 ≤ 600 ms); ``history_s`` the regression
    window (Swayam: 500 s); ``burst_u`` the burst threshold ``U ≥ 1``; ``frontends`` the default
    ``n_F``; ``min_scale_in_gap_s`` the least time between two scale-ins and the span over which
    a lower count must hold; ``scale_in_step`` the most replicas one scale-in releases (0: no
    limit); ``default_setup_s`` the cold start assumed before one is measured (Swayam: 10 s;
    here 5 s, and 60 s between scale-ins: what the deployments run with);
    ``max_replicas`` the largest pin; ``collect_ms`` and ``overhead_ms`` go to the percentile
    model (see :func:`adapter.policies.percentile.response_time_percentile`).
    """

    slo_ms: float
    percentile: float = DEFAULT_PERCENTILE
    history_s: float = 500.0
    bucket_s: float = 1.0
    current_window_s: float = 10.0
    burst_u: float = 2.0
    frontends: int = 1
    min_scale_in_gap_s: float = 60.0
    scale_in_step: int = 0
    default_setup_s: float = 5.0
    setup_samples: int = 20
    setup_percentile: float = 95.0
    max_replicas: int = 100
    floor_at_current: bool = True
    collect_ms: float = 0.0
    overhead_ms: float = 0.0
    #: the resource model: ``replay`` (the controller's batching replayed on the service times
    #: it observed per batch size: :mod:`adapter.policies.replay`; ``batched`` until the first
    #: observations are passed in), ``batched`` (the analytic model of one queue served in
    #: batches: :mod:`adapter.policies.percentile`) or ``swayam`` (the paper's random dispatch of
    #: single requests, Eq. 1 and Theorem 2: :mod:`adapter.policies.swayam_model`)
    model: ResourceModel = "replay"

    def __post_init__(self) -> None:
        _positive("slo_ms", self.slo_ms)
        for name in ("percentile", "setup_percentile"):
            value = getattr(self, name)
            if not (math.isfinite(value) and 0.0 < value < 100.0):
                raise AdvisorConfigError(f"{name} must be within (0, 100) percent, got {value!r}")
        _positive("bucket_s", self.bucket_s)
        _positive("history_s", self.history_s)
        if self.history_s < 2.0 * self.bucket_s:
            raise AdvisorConfigError(
                f"history_s must be at least two buckets ({2 * self.bucket_s:g}), "
                f"got {self.history_s!r}"
            )
        _positive("current_window_s", self.current_window_s)
        if not (math.isfinite(self.burst_u) and self.burst_u >= 1.0):
            raise AdvisorConfigError(f"burst_u must be a finite number >= 1, got {self.burst_u!r}")
        _integer("frontends", self.frontends, 1)
        _positive("min_scale_in_gap_s", self.min_scale_in_gap_s, allow_zero=True)
        _integer("scale_in_step", self.scale_in_step, 0)
        _positive("default_setup_s", self.default_setup_s, allow_zero=True)
        _integer("setup_samples", self.setup_samples, 1)
        _integer("max_replicas", self.max_replicas, 1)
        if not isinstance(self.floor_at_current, bool):
            raise AdvisorConfigError(
                f"floor_at_current must be true or false, got {self.floor_at_current!r}"
            )
        if self.model not in RESOURCE_MODELS:
            raise AdvisorConfigError(
                f"model must be one of {', '.join(RESOURCE_MODELS)}, got {self.model!r}"
            )
        _positive("collect_ms", self.collect_ms, allow_zero=True)
        _positive("overhead_ms", self.overhead_ms, allow_zero=True)


@dataclass(frozen=True, slots=True, kw_only=True)
class AdvisorDecision:
    """One tick of the advisor: the floor to pin and everything it was computed from.

    ``min_scale`` is the pin (the platform's min-scale); ``replicas`` the count to expect,
    ``max(min_scale, kpa_wants)``; ``needed`` the model's count for this tick alone (before
    the scale-in regulation). Rates are requests per second: ``local_forecast`` this adapter's
    regression ``setup_s`` ahead, ``current_rate`` its recent rate, ``model_rate`` the global
    rate × ``burst_u`` the model was given. ``percentile_ms`` is the model's percentile for
    ``model_rate`` on ``needed`` replicas (inf when none can serve it).
    """

    min_scale: int
    kpa_wants: int
    replicas: int
    needed: int
    reason: Reason
    feasible: bool
    local_forecast: float
    current_rate: float
    model_rate: float
    frontends: int
    setup_s: float
    burst_u: float
    percentile_ms: float
    service: ServiceModel = field(repr=False)
    #: the headroom factor the model rate carries (adapter.policies.headroom; 1: none) and how
    #: many of ``needed`` it added (the count at the rate without it, subtracted)
    headroom: float = 1.0
    spare: int = 0
