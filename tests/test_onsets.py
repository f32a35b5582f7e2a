"""A cold start priced by the SLA: the requests a lull's end brings within one setup time."""

from __future__ import annotations

from dataclasses import replace

import pytest

from slackwise_policies.advisor_settings import AdvisorSettings
from slackwise_policies.function_autoscaler import FunctionAutoscaler, function_autoscaler
from slackwise_policies.latency import LatencyModel
from slackwise_policies.onsets import Onsets


def _lulls(onsets: Onsets, *, bursts: int, size: int, gap_s: float = 120.0) -> float:
    """``bursts`` lulls of ``gap_s``, each ended by ``size`` requests over two seconds; the
    time after the last burst."""
    now = 0.0
    for _ in range(bursts):
        now += gap_s
        onsets.gap_ended(now, setup_s=7.0)
        for i in range(size):
            onsets.arrived(now + 2.0 * i / size, 1)
        now += 2.0
    return now


def test_lulls_ending_in_bursts_larger_than_a_window_allows_keep_the_last_replica() -> None:
    onsets = Onsets(allowance=10)
    end = _lulls(onsets, bursts=3, size=40)
    assert onsets.damage(end + 10.0) == 40
    assert onsets.breaks(end + 10.0)
    assert onsets.keeps(end + 300.0, idle_since=end)
    assert "more than the 10" in onsets.reason


def test_lulls_ending_in_a_few_requests_let_the_replica_go() -> None:
    onsets = Onsets(allowance=10)
    end = _lulls(onsets, bursts=3, size=4)
    assert onsets.damage(end + 10.0) == 4
    assert not onsets.keeps(end + 30.0, idle_since=end)
    assert "within the 10" in onsets.reason


def test_only_the_arrivals_within_one_setup_time_of_the_lulls_end_count() -> None:
    onsets = Onsets(allowance=10)
    onsets.gap_ended(100.0, setup_s=5.0)
    for t in range(100, 120):  # one request a second for 20 s
        onsets.arrived(float(t), 1)
    assert onsets.damage(130.0) == 5  # 100..104: the rest came after a replica would be up


def test_the_hold_ends_and_the_median_follows_the_recent_lulls() -> None:
    onsets = Onsets(allowance=10, samples=3, hold_s=600.0)
    end = _lulls(onsets, bursts=3, size=40)
    assert onsets.keeps(end + 599.0, idle_since=end)
    assert not onsets.keeps(end + 601.0, idle_since=end)  # idle that long: it starts cold
    end = _lulls(onsets, bursts=2, size=3)  # the function's lulls now end quietly
    assert not onsets.breaks(end + 10.0)


def test_nothing_counted_keeps_nothing_and_bad_settings_are_named() -> None:
    assert not Onsets(allowance=10).keeps(50.0, idle_since=0.0)
    with pytest.raises(ValueError, match="allowance"):
        Onsets(allowance=-1)
    with pytest.raises(ValueError, match="hold_s"):
        Onsets(allowance=1, hold_s=float("nan"))


def _embed(sla_window: int = 0) -> FunctionAutoscaler:
    return function_autoscaler(
        "embed",
        AdvisorSettings(enabled=True, capacity="own", sla_window=sla_window),
        slo_ms=110.0,
        percentile=99.0,
        model=LatencyModel.from_prior(20.0, 4.0),
        limit=lambda: 16,
        container_concurrency=1,
        max_scale=0,
        now=0.0,
    )


def _bursty(auto: FunctionAutoscaler, size: int) -> float:
    """Bursts of ``size`` requests over two seconds after lulls of 20 to 60 s, then a lull of
    200 s: the keep-alive histogram's tail (P99 + 10 %) ends well before it."""
    now = 0.0
    for k in range(30):
        now += 20.0 + 40.0 * (k % 2)
        for i in range(size):
            auto.arrived(now + 2.0 * i / size, 1)
        now += 2.0
    return now


def test_a_bursty_function_keeps_its_last_replica_through_a_lull_the_keep_alive_ends() -> None:
    bursty, sparse = _embed(), _embed()
    end = _bursty(bursty, size=60)
    _bursty(sparse, size=3)
    assert bursty.onsets is not None and bursty.onsets.allowance == 10  # 1 % of 1,000
    idle = end + 150.0
    assert bursty.keep_alive is not None
    assert not bursty.keep_alive.should_keep_warm(idle, end)  # the histogram alone lets it go
    # what the keep-alive adds to an advisor that asks for none
    decision = replace(
        bursty.advisor.decide(idle, kpa_wants=0, service=bursty.service(idle)), min_scale=0
    )
    assert bursty.pin_for(decision, idle) == 1 and bursty.keep_warm
    assert sparse.pin_for(decision, idle) == 0 and not sparse.keep_warm
    assert "more than the 10" in bursty.status()["onsets"]


def test_the_allowance_follows_the_advisors_sla_window() -> None:
    onsets = _embed(sla_window=5000).onsets
    assert onsets is not None and onsets.allowance == 50
