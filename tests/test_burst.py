"""The burst threshold from evidence (``advisor.burst_u: auto``): raised while more requests miss
than the SLO allows, lowered while they do not (virtual clock)."""

from __future__ import annotations

import pytest

from slackwise_policies.advisor import Advisor
from slackwise_policies.advisor_config import BURST_U, AdvisorConfig
from slackwise_policies.advisor_settings import AdvisorSettings
from slackwise_policies.burst import BurstThreshold
from slackwise_policies.function_autoscaler import function_autoscaler
from slackwise_policies.latency import LatencyModel
from slackwise_policies.percentile import ServiceModel
from slackwise_policies.settings_error import SettingsError

SERVICE = ServiceModel(a_ms=5.0, distribution="deterministic")


def _second(
    burst: BurstThreshold, s: int, answered: int, missed: int, setup_s: float = 5.0
) -> float:
    """``answered`` outcomes in second ``s`` (``missed`` of them late), then an update."""
    for k in range(answered):
        burst.outcome(s + (k + 0.5) / answered, k < missed)
    return burst.update(s + 1.0, setup_s)


def test_misses_above_the_allowance_raise_u_once_per_setup_and_window() -> None:
    burst = BurstThreshold(percentile=99.0, start=1.2)
    us = [_second(burst, s, 200, 6) for s in range(60)]  # 3 % missing against 1 % allowed
    raises = [s for s in range(1, 60) if us[s] > us[s - 1]]
    assert raises == [1, 16, 31, 46]  # the first, then every 5 s setup + 10 s window
    assert us[-1] == pytest.approx(1.2 * 1.15**4)
    assert "raised" in burst.reason


def test_a_calm_service_lowers_u_to_the_forecast_and_a_middling_one_holds_it() -> None:
    calm = BurstThreshold(percentile=99.0, start=2.0)
    us = [_second(calm, s, 200, 0) for s in range(600)]
    assert us[210] == pytest.approx(2.0 * 0.998**210, rel=0.02)  # from 2 to 1.3 in ~210 s
    assert us[-1] == 1.0  # never under the forecast
    middling = BurstThreshold(percentile=99.0, start=2.0)  # 0.4 %: between 1/4 and 1/2 of 1 %
    held = [_second(middling, s, 500, 2) for s in range(100)]
    assert held[-1] == 2.0


def test_the_allowance_is_the_slo_percentile_and_few_outcomes_decide_nothing() -> None:
    p95 = BurstThreshold(percentile=95.0, start=2.0)
    assert [_second(p95, s, 200, 2) for s in range(30)][-1] < 2.0  # 1 %: under a P95's 5 % / 4
    sparse = BurstThreshold(percentile=99.0, start=2.0)
    assert [_second(sparse, s, 5, 5) for s in range(15)][-1] == 2.0  # 50 outcomes in a window
    capped = BurstThreshold(percentile=99.0, start=2.0)
    assert max(_second(capped, s, 200, 100, setup_s=0.0) for s in range(200)) == 3.0


def test_the_update_is_the_same_however_often_it_is_asked_at_one_time() -> None:
    burst = BurstThreshold(percentile=99.0, start=1.5)
    _second(burst, 0, 200, 0)
    once = burst.update(5.0, 5.0)
    assert burst.update(5.0, 5.0) == once and burst.update(4.0, 5.0) == once


def test_the_function_autoscaler_feeds_its_outcomes_to_the_advisors_threshold() -> None:
    settings = AdvisorSettings(burst_u="auto")
    model = LatencyModel(a_ms=5.0, b_ms_per_item=1.0)
    auto = function_autoscaler(
        "f",
        settings,
        slo_ms=100.0,
        percentile=99.0,
        model=model,
        limit=lambda: 8,
        container_concurrency=1,
        max_scale=10,
        now=0.0,
    )
    burst = auto.advisor.burst
    assert burst is not None and burst.u == BURST_U
    for s in range(40):
        for k in range(100):
            t = s + k / 100
            auto.arrived(t, 1)
            auto.outcome(t, missed=k < 10)
        auto.decide(s + 1.0, kpa_wants=1)
    assert auto.last is not None and auto.last.burst_u > BURST_U
    status = auto.status()
    assert status["burst_u"] == auto.last.burst_u and "raised" in status["burst_u_reason"]


def test_the_setting_takes_auto_and_numbers_and_names_a_bad_value() -> None:
    config = AdvisorSettings(burst_u="auto").config_for(
        slo_ms=100.0, percentile=99.0, max_replicas=10
    )
    assert config.burst_u == "auto" and Advisor(config, SERVICE).burst_u == BURST_U
    assert Advisor(AdvisorConfig(slo_ms=100.0, burst_u=1.5), SERVICE).burst is None
    with pytest.raises(SettingsError, match="burst_u"):
        AdvisorConfig(slo_ms=100.0, burst_u=0.5)
    with pytest.raises(SettingsError, match="auto or a finite number"):
        AdvisorConfig(slo_ms=100.0, burst_u="sometimes")  # type: ignore[arg-type]


def test_a_raised_u_is_held_for_the_hold_before_it_is_lowered() -> None:
    burst = BurstThreshold(percentile=99.0, start=1.0)
    us = [_second(burst, s, 200, 6 if s < 2 else 0) for s in range(400)]
    raised = us[1]
    assert raised == pytest.approx(1.15)
    assert all(u == raised for u in us[1:300])  # calm, but within 300 s of the raise
    assert us[320] < raised


def _clustered(burst: BurstThreshold, s: int, answered: int, late: set[int]) -> float:
    """``answered`` outcomes in second ``s``, those at the indices in ``late`` missed."""
    for k in range(answered):
        burst.outcome(s + (k + 0.5) / answered, k in late)
    return burst.update(s + 1.0, 5.0)


def test_a_cluster_that_fails_a_window_of_the_sla_raises_u_where_the_share_does_not() -> None:
    # 500 answers a second, 11 late in one burst every 10 s: 0.22 % over 10 s, under half of 1 %
    # allowed, but a window of 1,000 requests holds 11 misses where a P99 SLA allows 10
    clustered = BurstThreshold(percentile=99.0, start=1.0)
    us = [
        _clustered(clustered, s, 500, set(range(11)) if s % 10 == 5 else set()) for s in range(60)
    ]
    assert us[4] == 1.0 and us[5] == pytest.approx(1.15) and us[-1] > 1.15
    assert "of the last 1000 missed, 10 allowed" in clustered.reason
    # as many misses, spread one a second: every window meets the SLA
    spread = BurstThreshold(percentile=99.0, start=1.0)
    assert [_clustered(spread, s, 500, {7}) for s in range(60)][-1] == 1.0
    # 10 late in a window is what the SLA allows: no raise
    allowed = BurstThreshold(percentile=99.0, start=1.0)
    assert [
        _clustered(allowed, s, 500, set(range(10)) if s % 10 == 5 else set()) for s in range(60)
    ][-1] == 1.0
