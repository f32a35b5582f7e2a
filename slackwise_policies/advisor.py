"""The autoscaling advisor of one function: Swayam's predictive, SLO-aware replica floor.

Swayam (Middleware'17 §4) provisions ahead of demand because a backend takes ``t_setup`` to
start. Each frontend, on its own: predicts the request rate ``t_setup`` ahead by linear
regression over its history (§4.2), scales its local rate by the number of frontends ``n_F`` to
get the global rate, multiplies by the burst threshold ``U``, and asks an analytical model for
the fewest backends that keep the SLO percentile (§4.3, here :func:`slackwise_policies.percentile.
min_replicas`, adapted to batched service). A larger count is acted on at once (proactive
scale-out); a smaller one only after a minimum time between scale-ins (``RegulateScaleDown``,
Algorithm 1), so that short oscillations do not churn replicas.

On Knative the advisor does not start replicas itself: it *pins a floor* (the Revision's
``min-scale``) and the KPA keeps deciding above it. :meth:`Advisor.decide` therefore takes what
the KPA wants and reports both; the pin never lowers the count (``replicas = max(min_scale,
kpa_wants)``), and the KPA stays free to scale down to the pin.

Rules chosen where the paper leaves room:

* ``t_setup`` is the P95 of the last ``setup_samples`` measured cold starts
  (:meth:`Advisor.observe_cold_start`), ``default_setup_s`` before the first.
* ``n_F`` comes from the functions' gossip header (:meth:`Advisor.observe_frontends`), the
  configured ``frontends`` until then. As in Swayam, a frontend that has not yet heard of a peer's
  failure over-provisions until it does.
* **Floor at the current rate** (``floor_at_current``, on by default; not in Swayam): the
  regression over 500 s lags a step, so the model's input is never below the rate seen over the
  last ``current_window_s``. It reacts no faster than the KPA would, but with the SLO model.
* **Scale-in** happens when the pin has not changed for ``min_scale_in_gap_s`` and every count
  the model asked for within the last gap was lower; the pin then drops to the largest of them
  (so a rate oscillating faster than the gap holds the pin at its peak: no flapping), by at most
  ``scale_in_step`` replicas when that is set (0: all the way, as Swayam).
* When even ``max_replicas`` cannot meet the SLO (the service itself is too slow for it: a
  slowed node, a stall's batches), more replicas stop helping long before ``max_replicas``: the
  pin is the fewest that come within ``_KNEE`` (5 %) of the percentile ``max_replicas`` would
  reach, and the decision says ``feasible=False``.

Pure: the time is an argument; nothing here reads a clock or does I/O.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable

from slackwise_policies.advisor_config import (
    BURST_RATIO,
    BURST_U,
    AdvisorConfig,
    AdvisorDecision,
    Reason,
)
from slackwise_policies.burst import BurstThreshold
from slackwise_policies.fewest import fewest_meeting
from slackwise_policies.percentile import ServiceModel, min_replicas, response_time_percentile
from slackwise_policies.rate import RatePredictor
from slackwise_policies.replay import (
    ObservedService,
    quantised_up,
    replay_min_replicas,
    replay_percentile,
)
from slackwise_policies.swayam_model import (
    RandDispatch,
    rand_min_replicas,
    rand_response_percentile_ms,
)

__all__ = ["Advisor"]

#: answers of the replay model kept per advisor (quantised rate × observed service)
_REPLAY_CACHE = 512
#: where no count meets the SLO: the fewest replicas within this share of the best percentile
_KNEE = 0.05
#: RAND's delays for the paper's model: sub-millisecond hops, a 1 ms gap between retries
_RAND = RandDispatch()


def _nearest_rank(values: list[float], percentile: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(percentile / 100.0 * len(ordered)) - 1)]


class Advisor:
    """Swayam's frontend loop for one function as seen by one adapter (time injected)."""

    def __init__(
        self, config: AdvisorConfig, service: ServiceModel, *, start: float | None = None
    ) -> None:
        self.config = config
        self.service = service
        self.rates = RatePredictor(
            history_s=config.history_s,
            bucket_s=config.bucket_s,
            current_window_s=config.current_window_s,
            start=start,
        )
        self._cold_starts: deque[float] = deque(maxlen=config.setup_samples)
        self._frontends = config.frontends
        self._frontend_reports: deque[tuple[float, int]] = deque()
        self._pin = 0
        self._changed_at: float | None = None
        self._needs: deque[tuple[float, int]] = deque()
        #: what the controller observed per batch size (the replay model's input)
        self.observed: ObservedService | None = None
        self._replayed: dict[tuple[float, ObservedService], tuple[int, float]] = {}
        #: ``burst_u: auto``: U set by the measured misses (:mod:`slackwise_policies.burst`)
        self.burst: BurstThreshold | None = None
        if config.burst_u == "auto":
            self.burst = BurstThreshold(percentile=config.percentile, start=BURST_U)

    # -- inputs --------------------------------------------------------------------------------

    def record(self, now: float, count: int = 1) -> None:
        """Count ``count`` arrivals at this adapter at ``now``."""
        self.rates.record(now, count)

    def observe_cold_start(self, now: float, seconds: float) -> None:
        """A measured cold start (request to ready) of ``seconds``."""
        if not (math.isfinite(seconds) and seconds >= 0.0):
            raise ValueError(f"cold start seconds must be a finite number >= 0, got {seconds!r}")
        self._cold_starts.append(seconds)

    def observe_frontends(self, now: float, count: int) -> None:
        """A function replica's report of how many adapters it heard from (the gossip).

        Each replica counts only the adapters that reached it, so reports differ between
        replicas; ``n_F`` is the largest count reported within the last ``t_setup`` (at least one
        second), which is the count of a replica that heard from every adapter.
        """
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise ValueError(f"frontends must be an integer >= 1, got {count!r}")
        reports = self._frontend_reports  # a sliding-window maximum: counts fall left to right
        while reports and reports[-1][1] <= count:
            reports.pop()
        reports.append((now, count))
        horizon = now - max(1.0, self.setup_s)
        while reports[0][0] < horizon:
            reports.popleft()
        self._frontends = reports[0][1]

    # -- state ---------------------------------------------------------------------------------

    @property
    def setup_s(self) -> float:
        """``t_setup``: P95 of the recent cold starts, the default before any."""
        if not self._cold_starts:
            return self.config.default_setup_s
        return _nearest_rank(list(self._cold_starts), self.config.setup_percentile)

    @property
    def burst_u(self) -> float:
        """``U``: the configured number, or as last measured with ``burst_u: auto``."""
        if self.burst is not None:
            return self.burst.u
        assert self.config.burst_u != "auto"
        return self.config.burst_u

    @property
    def frontends(self) -> int:
        """``n_F`` as last reported (the configured default before any report)."""
        return self._frontends

    @property
    def min_scale(self) -> int:
        """The pin as last decided (0 before the first decision)."""
        return self._pin

    # -- the decision --------------------------------------------------------------------------

    def _fewest(self, rate: float) -> tuple[int, float]:
        """The fewest replicas for the SLO at ``rate`` and their percentile, by the configured
        resource model (where none meets it, the knee: :meth:`_knee`)."""
        cfg = self.config
        if cfg.model == "replay" and self.observed is not None:
            return self._replay(rate, self.observed)
        if cfg.model == "swayam":
            needed = rand_min_replicas(
                rate,
                cfg.slo_ms,
                cfg.percentile,
                self.service,
                _RAND,
                max_replicas=cfg.max_replicas,
            )
        else:
            needed = min_replicas(
                rate,
                cfg.slo_ms,
                cfg.percentile,
                self.service,
                max_replicas=cfg.max_replicas,
                collect_ms=cfg.collect_ms,
                overhead_ms=cfg.overhead_ms,
            )
        if needed == 0:
            return 0, 0.0
        service = self.service

        def at(n: int) -> float:
            if cfg.model == "swayam":
                return rand_response_percentile_ms(rate, n, service, cfg.percentile, _RAND)
            return response_time_percentile(
                rate,
                n,
                service,
                cfg.percentile,
                collect_ms=cfg.collect_ms,
                overhead_ms=cfg.overhead_ms,
            )

        return self._knee(needed, at(needed), at)

    def _knee(self, needed: int, value: float, at: Callable[[int], float]) -> tuple[int, float]:
        """``(needed, value)`` when it meets the SLO; else the fewest replicas whose percentile
        (``at``) comes within ``_KNEE`` of ``value``, what ``max_replicas`` reach: beyond them
        replicas cost and do not help."""
        cfg = self.config
        if value <= cfg.slo_ms or needed < cfg.max_replicas:
            return needed, value
        good_enough = value * (1.0 + _KNEE)
        knee = fewest_meeting(lambda n: at(n) <= good_enough, 1, cfg.max_replicas)
        return knee, at(knee)

    def rates_at(
        self, now: float, recent_s: float | None = None, headroom: float = 1.0
    ) -> tuple[float, float, float]:
        """The local forecast ``t_setup`` ahead, the current local rate and the rate the model
        sizes for (the larger of the two when ``floor_at_current``, × ``n_F`` × ``U`` ×
        ``headroom``: :mod:`slackwise_policies.headroom`). With
        ``recent_s`` (while measured outcomes disagree with the model), the rate over only the
        last ``recent_s`` replaces it when it is at least ``BURST_RATIO`` times as high: a
        burst beyond the forecast counts in full at once, not spread over
        ``current_window_s``; a second's ordinary noise above the mean does not (taking the
        larger of the two always would size every disagreement for its noisiest second)."""
        cfg = self.config
        forecast = self.rates.predict(now, self.setup_s)
        current = self.rates.current(now)
        if recent_s is not None:
            recent = self.rates.current(now, recent_s)
            if recent >= BURST_RATIO * current:
                current = recent
        local = max(forecast, current) if cfg.floor_at_current else forecast
        if self.burst is not None:
            self.burst.update(now, self.setup_s)
        return forecast, current, local * self._frontends * self.burst_u * headroom

    def warm(self, rate: float, observed: ObservedService) -> None:
        """Compute and keep the replay model's answer for ``rate`` on ``observed`` so that the
        next :meth:`decide` finds it. Touches nothing but the cache: the live loop runs it in a
        worker thread, so a search of a few tens of milliseconds does not stall requests."""
        if self.config.model == "replay" and rate > 0.0:
            self._replay(rate, observed)

    def _replay(self, rate: float, observed: ObservedService) -> tuple[int, float]:
        """The replay model's count and percentile at ``rate`` rounded up to a 2 % step, cached:
        rates and observations repeat from tick to tick."""
        if rate <= 0.0:
            return 0, 0.0
        key = (quantised_up(rate), observed)
        hit = self._replayed.get(key)
        if hit is not None:
            return hit
        cfg = self.config
        needed = replay_min_replicas(
            key[0],
            cfg.slo_ms,
            cfg.percentile,
            observed,
            max_replicas=cfg.max_replicas,
            window=cfg.sla_window,
        )

        def at(n: int) -> float:
            return replay_percentile(
                key[0], n, observed, cfg.slo_ms, cfg.percentile, window=cfg.sla_window
            )

        needed, value = self._knee(needed, at(needed), at)
        if len(self._replayed) >= _REPLAY_CACHE:
            self._replayed = {}  # replaced, not cleared: a reader in another thread keeps its own
        self._replayed[key] = (needed, value)
        return needed, value

    def decide(
        self,
        now: float,
        *,
        kpa_wants: int,
        service: ServiceModel | None = None,
        observed: ObservedService | None = None,
        recent_s: float | None = None,
        headroom: float = 1.0,
    ) -> AdvisorDecision:
        """The floor to pin at ``now``; ``service`` (when given) replaces the service model,
        which follows the latency fit and the batch limit in use, ``observed`` what the
        replay model replays, ``recent_s`` how recent a rate counts (:meth:`rates_at`), and
        ``headroom`` the spare the measured volatility asks for, as a factor on the rate."""
        if isinstance(kpa_wants, bool) or not isinstance(kpa_wants, int) or kpa_wants < 0:
            raise ValueError(f"kpa_wants must be an integer >= 0, got {kpa_wants!r}")
        if service is not None:
            self.service = service
        if observed is not None:
            self.observed = observed
        cfg = self.config
        setup = self.setup_s
        forecast, current, model_rate = self.rates_at(now, recent_s, headroom)
        needed, percentile_ms = self._fewest(model_rate)
        feasible = percentile_ms <= cfg.slo_ms
        spare = 0
        if headroom > 1.0:  # what the lean count would be: the spare, shown with its reason
            spare = max(0, needed - self._fewest(model_rate / headroom)[0])

        needs = self._needs
        needs.append((now, needed))
        while needs and needs[0][0] < now - cfg.min_scale_in_gap_s:
            needs.popleft()

        reason: Reason
        if needed > self._pin:
            self._pin, self._changed_at, reason = needed, now, "scale-out"
        elif needed == self._pin:
            reason = "steady"
        else:
            recent = max(count for _, count in needs)
            quiet = self._changed_at is None or now - self._changed_at >= cfg.min_scale_in_gap_s
            if quiet and recent < self._pin:
                target = recent
                if cfg.scale_in_step > 0:
                    target = max(target, self._pin - cfg.scale_in_step)
                self._pin, self._changed_at, reason = target, now, "scale-in"
            else:
                reason = "hold"

        return AdvisorDecision(
            min_scale=self._pin,
            kpa_wants=kpa_wants,
            replicas=max(self._pin, kpa_wants),
            needed=needed,
            reason=reason,
            feasible=feasible,
            local_forecast=forecast,
            current_rate=current,
            model_rate=model_rate,
            frontends=self._frontends,
            setup_s=setup,
            burst_u=self.burst_u,
            percentile_ms=percentile_ms,
            service=self.service,
            headroom=headroom,
            spare=spare,
        )
