"""An advisor's settings and what one of its decisions says (:mod:`slackwise_policies.advisor`
decides): the fields, their one default each, and their checks, which name the field and the
value."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal, get_args

from slackwise_policies.percentile import ServiceModel
from slackwise_policies.settings_error import (
    SettingsError,
    boolean,
    integer,
    number,
    one_of,
    within,
)

__all__ = [
    "BURST_RATIO",
    "BURST_U",
    "DEFAULT_PERCENTILE",
    "DEFAULT_SETUP_S",
    "HISTORY_S",
    "MAX_REPLICAS",
    "MIN_SCALE_IN_GAP_S",
    "RESOURCE_MODELS",
    "AdvisorConfig",
    "AdvisorDecision",
    "Reason",
    "ResourceModel",
]

#: ``scale-out``: the pin rose now; ``scale-in``: it fell now; ``hold``: the model wants fewer
#: but the gap has not passed; ``steady``: the model wants the pin as it is
Reason = Literal["scale-out", "scale-in", "hold", "steady"]


#: which resource model sizes the fleet (AdvisorConfig.model)
ResourceModel = Literal["replay", "batched", "swayam"]
RESOURCE_MODELS: tuple[ResourceModel, ...] = get_args(ResourceModel)


#: how far above the current window's rate the recent span's must be to count as a burst
BURST_RATIO = 1.5


#: the percentile an SLO bounds when its app does not say (``apps.X.percentile``)
DEFAULT_PERCENTILE = 95.0
#: the advisor's defaults that a deployment may change (slackwise_policies.advisor_settings)
HISTORY_S = 500.0
BURST_U = 2.0
MIN_SCALE_IN_GAP_S = 60.0
#: the span of the current rate the forecast is floored at, in seconds
CURRENT_WINDOW_S = 10.0
DEFAULT_SETUP_S = 5.0
#: the largest count the advisor pins when the function sets no max-scale
MAX_REPLICAS = 100


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
    model (see :func:`slackwise_policies.percentile.response_time_percentile`).
    """

    slo_ms: float
    percentile: float = DEFAULT_PERCENTILE
    history_s: float = HISTORY_S
    bucket_s: float = 1.0
    current_window_s: float = CURRENT_WINDOW_S
    #: the burst threshold ``U``, or ``auto``: set by the measured misses
    #: (:mod:`slackwise_policies.burst`)
    burst_u: float | Literal["auto"] = BURST_U
    frontends: int = 1
    min_scale_in_gap_s: float = MIN_SCALE_IN_GAP_S
    scale_in_step: int = 0
    default_setup_s: float = DEFAULT_SETUP_S
    setup_samples: int = 20
    setup_percentile: float = 95.0
    max_replicas: int = MAX_REPLICAS
    floor_at_current: bool = True
    collect_ms: float = 0.0
    overhead_ms: float = 0.0
    #: the resource model: ``replay`` (the controller's batching replayed on the service times
    #: it observed per batch size: :mod:`slackwise_policies.replay`; ``batched`` until the first
    #: observations are passed in), ``batched`` (the analytic model of one queue served in
    #: batches: :mod:`slackwise_policies.percentile`) or ``swayam`` (the paper's random dispatch of
    #: single requests, Eq. 1 and Theorem 2: :mod:`slackwise_policies.swayam_model`)
    model: ResourceModel = "replay"
    #: Swayam's SLA window: 0 judges the replay's percentile over its whole run; ``N`` asks it
    #: of every ``N`` consecutive requests (sliding by ``N`` / 100), as the SLA's compliance
    #: is counted (the replay model only)
    sla_window: int = 0

    def __post_init__(self) -> None:
        number("slo_ms", self.slo_ms)
        within("percentile", self.percentile, 0.0, 100.0)
        within("setup_percentile", self.setup_percentile, 0.0, 100.0)
        number("bucket_s", self.bucket_s)
        number("history_s", self.history_s)
        if self.history_s < 2.0 * self.bucket_s:
            raise SettingsError(
                "history_s",
                f"must be at least two buckets ({2 * self.bucket_s:g}), got {self.history_s!r}",
            )
        number("current_window_s", self.current_window_s)
        if self.burst_u != "auto":
            real = not isinstance(self.burst_u, bool) and isinstance(self.burst_u, (int, float))
            if not (real and math.isfinite(self.burst_u) and self.burst_u >= 1.0):
                raise SettingsError(
                    "burst_u", f"must be auto or a finite number >= 1, got {self.burst_u!r}"
                )
        integer("frontends", self.frontends, 1)
        number("min_scale_in_gap_s", self.min_scale_in_gap_s, allow_low=True)
        integer("scale_in_step", self.scale_in_step, 0)
        number("default_setup_s", self.default_setup_s, allow_low=True)
        integer("setup_samples", self.setup_samples, 1)
        integer("max_replicas", self.max_replicas, 1)
        boolean("floor_at_current", self.floor_at_current)
        one_of("model", self.model, RESOURCE_MODELS)
        integer("sla_window", self.sla_window, 0)
        number("collect_ms", self.collect_ms, allow_low=True)
        number("overhead_ms", self.overhead_ms, allow_low=True)


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
    #: the headroom factor the model rate carries (slackwise_policies.headroom; 1: none) and how
    #: many of ``needed`` it added (the count at the rate without it, subtracted)
    headroom: float = 1.0
    spare: int = 0
