"""A deployment's advisor (``adapter.advisor``; the simulator's ``advisor`` section too): whether it
runs, whether it owns each function's count or pins a floor under the platform's autoscaler, its
lease and tick, and the numbers of each function's :class:`AdvisorConfig` a deployment may set. One
type, one default a field (the advisor's own, from :mod:`slackwise_policies.advisor_config`); the
YAML loader builds it directly, and :meth:`AdvisorSettings.config_for` makes each function's
:class:`AdvisorConfig` from it and the function's SLO."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

from slackwise_policies.advisor_config import (
    BURST_U,
    CURRENT_WINDOW_S,
    DEFAULT_PERCENTILE,
    DEFAULT_SETUP_S,
    HISTORY_S,
    MIN_SCALE_IN_GAP_S,
    AdvisorConfig,
    ResourceModel,
)
from slackwise_policies.headroom import parse_headroom
from slackwise_policies.settings_error import boolean, number, one_of

__all__ = ["CAPACITIES", "AdvisorSettings", "Capacity"]

#: ``own``: the advisor's decision is the replica count (the platform's autoscaler only
#: measures); ``floor``: it pins the minimum and the platform's autoscaler decides above it
Capacity = Literal["own", "floor"]
CAPACITIES: tuple[Capacity, ...] = get_args(Capacity)


@dataclass(frozen=True, kw_only=True, slots=True)
class AdvisorSettings:
    """The autoscaling advisor (Swayam) of a deployment: pins or owns each function's replicas
    ahead of demand. Off by default; ``slackwise serve --advisor`` or ``enabled: true`` turns it
    on (docs/advisor.md)."""

    enabled: bool = False
    capacity: Capacity = "own"
    #: an owned count lapses this long after this adapter last wrote it (it re-writes every
    #: third of it), so an adapter that dies stops counting
    lease_s: float = 30.0
    #: seconds between decisions
    tick_s: float = 1.0
    #: the burst threshold U on the forecast rate, or ``auto``: raised while more requests miss
    #: than the SLO allows, lowered while they do not (slackwise_policies.burst)
    burst_u: float | Literal["auto"] = BURST_U
    history_s: float = HISTORY_S
    min_scale_in_gap_s: float = MIN_SCALE_IN_GAP_S
    #: the setup time assumed until cold starts have been measured
    default_setup_s: float = DEFAULT_SETUP_S
    #: keep one replica warm across idle gaps the histogram says are short (hybrid keep-alive)
    keep_alive: bool = True
    #: never forecast below the recent rate (a 500 s regression lags a step in load)
    floor_at_current: bool = True
    #: the span of that recent rate, in seconds
    current_window_s: float = CURRENT_WINDOW_S
    #: replay (the controller's batching replayed on what it observed), batched (the analytic
    #: model of how the adapter serves) or swayam (the paper's RAND model)
    model: ResourceModel = "replay"
    #: the count answers to measured outcomes (slackwise_policies.evidence); false is an ablation
    evidence: bool = True
    #: spare capacity from the measured volatility (slackwise_policies.headroom): 0 (the default)
    #: holds none, ``auto`` half the largest swing seen in the last five minutes, another number
    #: scales it (auto is not the default until it is measured to pay: docs/advisor.md)
    headroom: float | Literal["auto"] = 0.0
    #: the requests the SLO's percentile is judged over: 0, the replay's whole run (a P99 over
    #: thousands); ``N``, every ``N`` consecutive requests (Swayam's SLA window, 1,000): the
    #: count then covers the clusters of misses a busy spell makes (docs/simulator.md)
    sla_window: int = 0

    def __post_init__(self) -> None:
        for key in ("enabled", "keep_alive", "evidence"):
            boolean(key, getattr(self, key))
        one_of("capacity", self.capacity, CAPACITIES)
        number("lease_s", self.lease_s)
        number("tick_s", self.tick_s)
        parse_headroom(self.headroom)
        # the advisor's own numbers are checked by the advisor's own type
        self.config_for(slo_ms=1.0, percentile=DEFAULT_PERCENTILE, max_replicas=1)

    def config_for(self, *, slo_ms: float, percentile: float, max_replicas: int) -> AdvisorConfig:
        """The advisor's settings for one function with this SLO and largest count."""
        return AdvisorConfig(
            slo_ms=slo_ms,
            percentile=percentile,
            max_replicas=max_replicas,
            history_s=self.history_s,
            burst_u=self.burst_u,
            min_scale_in_gap_s=self.min_scale_in_gap_s,
            default_setup_s=self.default_setup_s,
            floor_at_current=self.floor_at_current,
            current_window_s=self.current_window_s,
            model=self.model,
            sla_window=self.sla_window,
        )
