"""One function's autoscaling policy: Swayam's advisor, the hybrid keep-alive histogram, and the
pin they imply (pure; :mod:`slackwise_policies.advisor_driver` holds one per function, live and in
the simulator)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from slackwise_policies.advisor import Advisor
from slackwise_policies.advisor_config import MAX_REPLICAS, AdvisorDecision
from slackwise_policies.advisor_settings import AdvisorSettings
from slackwise_policies.burst import SLA_WINDOW
from slackwise_policies.evidence import Evidence
from slackwise_policies.headroom import Headroom, HeadroomConfig, parse_headroom
from slackwise_policies.keepalive import KeepAlive, KeepAliveConfig
from slackwise_policies.latency import LatencyModel
from slackwise_policies.onsets import Onsets
from slackwise_policies.percentile import ServiceModel
from slackwise_policies.replay import ObservedService
from slackwise_policies.returns import Returns

__all__ = [
    "DRIFT_RATIO",
    "DRIFT_S",
    "FunctionAutoscaler",
    "function_autoscaler",
]

#: a step in service time: the last seconds' batches this many times the window's median
DRIFT_RATIO = 1.5
DRIFT_S = 1.0


@dataclass
class FunctionAutoscaler:
    """One function's advisor, keep-alive histogram and the pin last written."""

    name: str
    advisor: Advisor
    keep_alive: KeepAlive | None
    model: LatencyModel
    limit: Callable[[], int]
    container_concurrency: int
    max_scale: int
    last_arrival: float | None = None
    pinned: int | None = None
    last: AdvisorDecision | None = None
    keep_warm: bool = False
    #: what the requests measured: a floor above the model's count while they disagree with it
    #: (None: the model's count alone, ``advisor.evidence: false``, an ablation)
    evidence: Evidence | None = field(default_factory=Evidence)
    _prepared: tuple[float, ObservedService] | None = None
    _recent: tuple[float, float | None] | None = None
    #: the last seconds' service times over the window's (LatencyModel.drift), as last seen
    drift: float | None = None
    #: spare capacity from the measured volatility (None: the lean count, ``headroom: 0``)
    headroom: Headroom | None = field(default_factory=Headroom)
    _factor: tuple[float, float] | None = None
    #: the requests a cold start after a lull delays, against a window's allowance: the last
    #: replica stays through lulls while it would break the SLA (None: off, with the keep-alive)
    onsets: Onsets | None = None
    #: each level's returns after the count fell below it: a level whose return broke a window
    #: of the SLA is held as long as its return took (None: off, with the keep-alive)
    returns: Returns | None = None

    def outcome(self, now: float, missed: bool, *, served: bool = True) -> None:
        """A request finished at ``now``, in time or ``missed`` (late, pruned, refused);
        ``served``: a replica answered it (not refused at the door, not pruned)."""
        if self.evidence is not None:
            self.evidence.outcome(now, missed, served=served)
        if self.advisor.burst is not None:
            self.advisor.burst.outcome(now, missed)

    def service(self, now: float) -> ServiceModel:
        return ServiceModel.from_latency_model(
            self.model,
            now,
            batch_limit=max(1, self.limit()),
            container_concurrency=self.container_concurrency,
        )

    def arrived(self, now: float, instances: int) -> None:
        """``instances`` arrived at ``now``: the rate history and, for the idle gap before
        them, the keep-alive histogram (gaps under a second are the same burst)."""
        self.advisor.record(now, instances)
        if self.evidence is not None:
            self.evidence.arrived(now)
        if self.keep_alive is not None and self.last_arrival is not None:
            gap = now - self.last_arrival
            if gap >= 1.0:
                self.keep_alive.observe_gap(gap)
                if self.onsets is not None:
                    self.onsets.gap_ended(now, self.advisor.setup_s)
        if self.onsets is not None:
            self.onsets.arrived(now, instances)
        if self.returns is not None:
            self.returns.arrived(now, instances)
        self.last_arrival = now

    def cold_start(self, now: float, seconds: float) -> None:
        """A batch waited ``seconds`` for a replica to start: one sample of ``t_setup``."""
        if seconds > 0:
            self.advisor.observe_cold_start(now, seconds)

    def observed(self, now: float) -> ObservedService | None:
        """What the replay model is fed at ``now`` (``None`` for the analytic models)."""
        if self.advisor.config.model != "replay":
            return None
        prepared = self._prepared
        if prepared is not None and prepared[0] == now:
            return prepared[1]
        observed = ObservedService.from_latency_model(
            self.model,
            now,
            batch_limit=max(1, self.limit()),
            container_concurrency=self.container_concurrency,
            recent_s=self.recent_s(now),
        )
        self._prepared = (now, observed)
        return observed

    def recent_s(self, now: float) -> float | None:
        """How far back the replayed service times (and the current rate, besides its usual
        window) look at ``now`` (None: the latency model's whole window): while the evidence's
        floor stands, since it was raised; else, when the
        last ``DRIFT_S`` of batches ran ``DRIFT_RATIO`` times slower than the window's median
        at their sizes, those seconds, so the model sees a step in service time before the
        requests it slows miss (``advisor.evidence: false`` turns both off). Worked out once
        per ``now``: the replayed service times and the rate of one decision look as far back."""
        if self._recent is not None and self._recent[0] == now:
            return self._recent[1]
        self.drift = self.model.drift(now, DRIFT_S)
        recent = None if self.evidence is None else self.evidence.recent_s(now)
        drifting = self.drift is not None and self.drift >= DRIFT_RATIO
        if recent is None and self.evidence is not None and drifting:
            recent = DRIFT_S
        self._recent = (now, recent)
        return recent

    def headroom_factor(self, now: float) -> float:
        """The spare the measured volatility asks for at ``now``, as a factor on the rate the
        model sizes for (:mod:`slackwise_policies.headroom`); 1 while a swing is under way (the
        model replays the recent service times already) or with ``headroom: 0``. The evidence
        is taken once per ``now``: :meth:`prepare` and :meth:`decide` see the same factor."""
        if self._factor is not None and self._factor[0] == now:
            return self._factor[1]
        recent = self.recent_s(now)
        factor = 1.0
        if self.headroom is not None:
            advisor = self.advisor
            setup = max(1.0, advisor.setup_s)
            sized = advisor.rates_at(now, recent)[2] / advisor.frontends
            self.headroom.observe(
                now,
                drift=self.drift,
                recent_rate=advisor.rates.current(now, setup),
                recent_s=setup,
                sized_rate=sized,
            )
            factor = self.headroom.factor(now)
            if recent is not None:
                factor = 1.0
        self._factor = (now, factor)
        return factor

    def prepare(self, now: float) -> Callable[[], None] | None:
        """The expensive half of the decision at ``now``, as a call that touches only the
        advisor's cache (run it in a worker thread, then :meth:`decide` at the same ``now``);
        ``None`` when there is nothing expensive to do."""
        observed = self.observed(now)
        if observed is None:
            return None
        factor = self.headroom_factor(now)
        rate = self.advisor.rates_at(now, self.recent_s(now), factor)[2]
        advisor = self.advisor

        def warm() -> None:
            advisor.warm(rate, observed)
            if factor > 1.0:
                advisor.warm(rate / factor, observed)  # the lean count, for the spare

        return warm

    def decide(
        self, now: float, kpa_wants: int, current: int | None = None, overdue: int = 0
    ) -> int:
        """One advisor decision at ``now`` and the pin it implies (see :meth:`pin_for`), raised
        by the evidence while measured outcomes (and ``overdue``: requests queued past their
        deadline) disagree with the model (``current``: the count in force, default
        ``kpa_wants``); :meth:`slackwise_policies.advisor_driver.AdvisorDriver.step` calls this,
        live and simulated."""
        decision = self.advisor.decide(
            now,
            kpa_wants=kpa_wants,
            service=self.service(now),
            observed=self.observed(now),
            recent_s=self.recent_s(now),
            headroom=self.headroom_factor(now),
        )
        self.last = decision
        count = self.pin_for(decision, now)
        if self.evidence is not None:
            count = self.evidence.floor(
                now,
                model=count,
                current=kpa_wants if current is None else current,
                setup_s=self.advisor.setup_s,
                most=self.max_scale,
                overdue=overdue,
            )
        if self.returns is not None:  # the replicas in force or asked for, whichever is more
            self.returns.decided(
                now,
                needed=decision.needed,
                count=max(count, kpa_wants),
                model_rate=decision.model_rate,
                setup_s=self.advisor.setup_s,
            )
        return count

    def pin_for(self, decision: AdvisorDecision, now: float) -> int:
        """The floor to write: the advisor's, one warm replica across short idle gaps, and
        across every lull while a cold start after one would break a window of the SLA."""
        pin = decision.min_scale
        self.keep_warm = False
        if self.keep_alive is not None and self.last_arrival is not None:
            self.keep_warm = self.keep_alive.should_keep_warm(now, self.last_arrival) or (
                self.onsets is not None and self.onsets.keeps(now, self.last_arrival)
            )
            if self.keep_warm:
                pin = max(pin, 1)
        if self.returns is not None:
            bursty = self.onsets is not None and self.onsets.breaks(now)
            pin = max(pin, self.returns.level(now, bursty=bursty))
        if self.max_scale > 0:
            pin = min(pin, self.max_scale)
        return pin

    def status(self) -> dict[str, Any]:
        d = self.last
        out: dict[str, Any] = {
            "pinned": self.pinned,
            "keep_warm": self.keep_warm,
            "evidence_floor": None if self.evidence is None else self.evidence.level,
            "evidence": "off" if self.evidence is None else self.evidence.reason,
            "drift": None if self.drift is None else round(self.drift, 3),
            "headroom": "off" if self.headroom is None else self.headroom.reason,
            "burst_u": self.advisor.burst_u,
            "onsets": "off" if self.onsets is None else self.onsets.reason,
            "returns": "off" if self.returns is None else self.returns.reason,
            "burst_u_reason": None if self.advisor.burst is None else self.advisor.burst.reason,
        }
        if d is not None:
            out.update(
                reason=d.reason,
                needed=d.needed,
                kpa_wants=d.kpa_wants,
                feasible=d.feasible,
                model_rate=round(d.model_rate, 3),
                frontends=d.frontends,
                setup_s=round(d.setup_s, 3),
                headroom_factor=round(d.headroom, 3),
                spare=d.spare,
            )
        return out


def function_autoscaler(
    name: str,
    settings: AdvisorSettings,
    *,
    slo_ms: float,
    percentile: float,
    model: LatencyModel,
    limit: Callable[[], int],
    container_concurrency: int,
    max_scale: int,
    now: float,
    owns: bool = True,
) -> FunctionAutoscaler:
    """One function's advisor and keep-alive built from the adapter's advisor settings (for
    :class:`slackwise_policies.advisor_driver.AdvisorDriver`, live and simulated alike);
    ``owns``: the count is the function's (else a floor under the KPA, whose own scale-in
    decides above it: no level is held by its returns)."""
    config = settings.config_for(
        slo_ms=slo_ms, percentile=percentile, max_replicas=max_scale or MAX_REPLICAS
    )
    service = ServiceModel.from_latency_model(
        model, now, batch_limit=max(1, limit()), container_concurrency=container_concurrency
    )
    return FunctionAutoscaler(
        name=name,
        # the rate history starts at the first arrival: the seconds an adapter was up before
        # any traffic are not a trend (counted as zeros, a flat 45 req/s read as 90 req/s ten
        # seconds ahead once a step from them entered the fit)
        advisor=Advisor(config, service),
        keep_alive=KeepAlive(KeepAliveConfig()) if settings.keep_alive else None,
        onsets=_onsets(settings, percentile) if settings.keep_alive else None,
        returns=(
            Returns(allowance=_allowance(settings, percentile))
            if settings.keep_alive and owns
            else None
        ),
        model=model,
        limit=limit,
        container_concurrency=container_concurrency,
        max_scale=max_scale,
        evidence=Evidence() if settings.evidence else None,
        headroom=_headroom(settings.headroom),
    )


def _allowance(settings: AdvisorSettings, percentile: float) -> int:
    """The late requests one window of the SLA may hold: the advisor's ``sla_window``
    (Swayam's 1,000 when it judges the whole run) times what the percentile lets miss."""
    window = settings.sla_window or SLA_WINDOW
    return math.floor(window * (1.0 - percentile / 100.0) + 1e-9)


def _onsets(settings: AdvisorSettings, percentile: float) -> Onsets:
    """The lulls' onsets against the late requests one window of the SLA may hold."""
    return Onsets(allowance=_allowance(settings, percentile))


def _headroom(value: float | Literal["auto"]) -> Headroom | None:
    """``advisor.headroom`` as the policy: none at 0 (the lean count), else its scale."""
    scale = parse_headroom(value)
    return None if scale == 0.0 else Headroom(HeadroomConfig(scale=scale))
