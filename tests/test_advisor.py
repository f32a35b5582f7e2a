"""The autoscaling advisor: Swayam's predictive scale-out and regulated scale-in, as a floor."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slackwise_policies.advisor import Advisor
from slackwise_policies.advisor_config import AdvisorConfig, AdvisorDecision
from slackwise_policies.advisor_settings import AdvisorSettings
from slackwise_policies.function_autoscaler import function_autoscaler
from slackwise_policies.latency import LatencyModel
from slackwise_policies.percentile import ServiceModel, min_replicas, response_time_percentile
from slackwise_policies.settings_error import SettingsError

#: one request per batch, 20 ms each: 50 requests/s per replica at most
SERVICE = ServiceModel(a_ms=20.0, distribution="deterministic")


def drive(
    advisor: Advisor,
    rate: Callable[[int], float],
    start: int,
    end: int,
    *,
    kpa_wants: int = 0,
    share: tuple[int, int] = (0, 1),
) -> list[AdvisorDecision]:
    """Each second: record ``rate(s)`` arrivals (this advisor's ``share`` of them) and decide."""
    decisions = []
    index, parts = share
    for s in range(start, end):
        count = round(rate(s))
        mine = [k for k in range(count) if k % parts == index]
        for k in mine:
            advisor.record(s + (k + 0.5) / count)
        decisions.append(advisor.decide(s + 1.0, kpa_wants=kpa_wants))
    return decisions


def test_scale_out_comes_ahead_of_a_predicted_rise() -> None:
    config = AdvisorConfig(slo_ms=100.0, burst_u=1.0, default_setup_s=10.0, floor_at_current=False)
    advisor = Advisor(config, SERVICE)

    def ramp(s: int) -> float:
        return 10.0 + 2.0 * s

    decisions = drive(advisor, ramp, 0, 200)
    ahead = 0
    for s in range(60, 200):
        pin = decisions[s].min_scale
        # warm when the load comes: enough for the rate t_setup later ...
        assert pin >= min_replicas(ramp(s + 10) * 0.97, 100.0, 95.0, SERVICE)
        # ... and so, often, more than the rate now needs
        ahead += pin > min_replicas(ramp(s), 100.0, 95.0, SERVICE)
        assert decisions[s].reason in ("scale-out", "steady")
    assert ahead > 50


def test_burst_threshold_multiplies_the_rate() -> None:
    one = Advisor(AdvisorConfig(slo_ms=100.0, burst_u=1.0), SERVICE)
    two = Advisor(AdvisorConfig(slo_ms=100.0, burst_u=2.0), SERVICE)
    d1 = drive(one, lambda s: 100.0, 0, 100)[-1]
    d2 = drive(two, lambda s: 100.0, 0, 100)[-1]
    assert d2.model_rate == pytest.approx(2 * d1.model_rate)
    assert d2.min_scale > d1.min_scale >= 3


def test_no_flapping_on_an_oscillating_rate() -> None:
    config = AdvisorConfig(slo_ms=100.0, min_scale_in_gap_s=120.0, history_s=60.0)
    advisor = Advisor(config, SERVICE)

    def wave(s: int) -> float:
        return 100.0 if (s // 15) % 2 == 0 else 160.0

    decisions = drive(advisor, wave, 0, 1200)
    needed = {d.needed for d in decisions[300:]}
    assert len(needed) > 1  # the model's count does move with the wave ...
    pins = {d.min_scale for d in decisions[300:]}
    assert len(pins) == 1  # ... the pin does not
    assert pins == {max(needed)}


def test_scale_in_waits_the_gap_between_steps() -> None:
    config = AdvisorConfig(
        slo_ms=100.0, min_scale_in_gap_s=60.0, scale_in_step=1, history_s=30.0, burst_u=1.0
    )
    advisor = Advisor(config, SERVICE)
    high = drive(advisor, lambda s: 300.0, 0, 200)
    top = high[-1].min_scale
    low = drive(advisor, lambda s: 20.0, 200, 1000)
    ins = [(200 + i + 1.0, d) for i, d in enumerate(low) if d.reason == "scale-in"]
    assert len(ins) >= 3
    times = [t for t, _ in ins]
    assert all(b - a >= 60.0 for a, b in itertools.pairwise(times))
    previous = top
    for _, decision in ins:
        assert decision.min_scale == previous - 1  # one replica per step
        previous = decision.min_scale
    assert low[-1].min_scale == low[-1].needed  # got there in the end


def test_scale_in_goes_straight_down_without_a_step_limit() -> None:
    config = AdvisorConfig(slo_ms=100.0, min_scale_in_gap_s=30.0, history_s=20.0)
    advisor = Advisor(config, SERVICE)
    drive(advisor, lambda s: 300.0, 0, 300)
    low = drive(advisor, lambda s: 0.0, 300, 500)
    ins = [d for d in low if d.reason == "scale-in"]
    # each time to the largest count asked for within the last gap, however far below the pin:
    # first to what the decaying forecast still asked for, then (a gap later) to zero
    assert len(ins) == 2 and ins[0].min_scale > 1
    assert ins[1].min_scale == 0 and low[-1].min_scale == 0


@settings(max_examples=30, deadline=None)
@given(
    kpa=st.lists(st.integers(0, 30), min_size=5, max_size=40),
    rate=st.floats(0.0, 500.0),
)
def test_never_below_what_the_kpa_wants(kpa: list[int], rate: float) -> None:
    advisor = Advisor(AdvisorConfig(slo_ms=100.0, min_scale_in_gap_s=5.0), SERVICE)
    for s, wants in enumerate(kpa):
        for k in range(round(rate)):
            advisor.record(s + k / max(1.0, rate))
        decision = advisor.decide(s + 1.0, kpa_wants=wants)
        assert decision.replicas == max(decision.min_scale, wants) >= wants
        assert decision.kpa_wants == wants
        assert 0 <= decision.min_scale <= 100


def test_frontends_share_the_load_and_agree() -> None:
    config = AdvisorConfig(slo_ms=100.0, frontends=2)
    left, right = Advisor(config, SERVICE), Advisor(config, SERVICE)
    alone = Advisor(AdvisorConfig(slo_ms=100.0), SERVICE)

    def rate(s: int) -> float:
        return 120.0 + 2 * (s // 10) * 2  # even counts: the two halves are equal

    a = drive(left, rate, 0, 300, share=(0, 2))
    b = drive(right, rate, 0, 300, share=(1, 2))
    c = drive(alone, rate, 0, 300)
    assert [d.min_scale for d in a] == [d.min_scale for d in b] == [d.min_scale for d in c]
    assert a[-1].model_rate == pytest.approx(c[-1].model_rate)
    assert a[-1].frontends == 2


def test_gossip_updates_the_frontend_count() -> None:
    advisor = Advisor(AdvisorConfig(slo_ms=100.0), SERVICE)
    before = drive(advisor, lambda s: 40.0, 0, 60)[-1]
    advisor.observe_frontends(60.0, 3)
    after = advisor.decide(61.0, kpa_wants=0)
    assert after.frontends == 3
    local = max(after.local_forecast, after.current_rate)
    assert after.model_rate == pytest.approx(3 * 2.0 * local)
    assert after.model_rate > 2.5 * before.model_rate
    with pytest.raises(ValueError, match="frontends"):
        advisor.observe_frontends(62.0, 0)


def test_setup_time_is_the_p95_of_recent_cold_starts() -> None:
    advisor = Advisor(AdvisorConfig(slo_ms=100.0, default_setup_s=7.0, setup_samples=20), SERVICE)
    assert advisor.setup_s == 7.0
    for i in range(40):
        advisor.observe_cold_start(float(i), 1.0 + i % 20)  # the last 20: 1..20 s
    assert advisor.setup_s == 19.0
    assert advisor.decide(50.0, kpa_wants=0).setup_s == 19.0
    with pytest.raises(ValueError, match="cold start"):
        advisor.observe_cold_start(51.0, -1.0)


def test_infeasible_slo_pins_the_maximum_and_says_so() -> None:
    slow = ServiceModel(a_ms=300.0, spread=1.2)
    advisor = Advisor(AdvisorConfig(slo_ms=100.0, max_replicas=4), slow)
    decision = drive(advisor, lambda s: 5.0, 0, 30)[-1]
    assert decision.min_scale == 4 and not decision.feasible
    assert decision.percentile_ms > 100.0


def test_where_no_count_meets_the_slo_it_pins_the_knee_not_the_maximum() -> None:
    # a service slower than the SLO: from some count on, more replicas do not help; pinning
    # max_replicas (100 where max-scale is unset) would pay for all of them
    slow = ServiceModel(a_ms=150.0, spread=1.2)
    advisor = Advisor(AdvisorConfig(slo_ms=100.0, max_replicas=100, burst_u=1.0), slow)
    decision = drive(advisor, lambda s: 20.0, 0, 30)[-1]
    assert not decision.feasible and decision.percentile_ms > 100.0
    assert 3 <= decision.min_scale < 20  # enough to keep up with 20 req/s of 150 ms, not 100
    best = response_time_percentile(20.0, 100, slow, advisor.config.percentile)
    assert decision.percentile_ms <= 1.05 * best
    fewer = response_time_percentile(20.0, decision.min_scale - 1, slow, advisor.config.percentile)
    assert fewer > 1.05 * best  # one fewer would be measurably worse


def test_a_new_service_model_is_used_from_the_next_decision() -> None:
    advisor = Advisor(AdvisorConfig(slo_ms=100.0, burst_u=1.0), SERVICE)
    before = drive(advisor, lambda s: 200.0, 0, 60)[-1]
    batched = ServiceModel(
        a_ms=20.0, b_ms_per_item=1.0, batch_limit=16, distribution="deterministic"
    )
    after = advisor.decide(61.0, kpa_wants=0, service=batched)
    assert after.needed < before.needed and after.service is batched


def test_idle_function_needs_nothing() -> None:
    advisor = Advisor(AdvisorConfig(slo_ms=100.0), SERVICE)
    decision = advisor.decide(10.0, kpa_wants=1)
    assert (decision.min_scale, decision.needed, decision.replicas) == (0, 0, 1)
    assert decision.reason == "steady" and decision.feasible


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("slo_ms", 0.0),
        ("percentile", 100.0),
        ("history_s", math.inf),
        ("burst_u", 0.5),
        ("frontends", 0),
        ("min_scale_in_gap_s", -1.0),
        ("scale_in_step", -1),
        ("default_setup_s", math.nan),
        ("setup_samples", 0),
        ("max_replicas", 0),
        ("history_s", 1.5),
    ],
)
def test_bad_config_names_field_and_value(field: str, value: float) -> None:
    kwargs: dict[str, float] = {"slo_ms": 100.0, field: value}
    with pytest.raises(SettingsError, match=field) as info:
        AdvisorConfig(**kwargs)  # type: ignore[arg-type]
    assert repr(value) in str(info.value)


def test_n_f_is_the_largest_count_any_replica_reported_within_the_setup_time() -> None:
    # replicas count only the adapters that reached them: one heard from both, one from one
    advisor = Advisor(AdvisorConfig(slo_ms=300.0, default_setup_s=5.0), ServiceModel(a_ms=10.0))
    advisor.observe_frontends(100.0, 2)
    advisor.observe_frontends(101.0, 1)
    assert advisor.frontends == 2
    advisor.observe_frontends(104.0, 1)
    assert advisor.frontends == 2  # the report of 2 is 4 s old: within t_setup
    advisor.observe_frontends(106.0, 1)
    assert advisor.frontends == 1  # now older than t_setup: the other adapter has gone


def test_the_seconds_before_the_first_request_are_not_a_trend() -> None:
    """An adapter up ten seconds before a steady 45 req/s begins: the forecast a setup time
    ahead is that rate, not the line through a step from the idle seconds (about 90 req/s
    when those seconds counted as zeros)."""
    auto = function_autoscaler(
        "embed",
        AdvisorSettings(enabled=True, capacity="own", keep_alive=False),
        slo_ms=300.0,
        percentile=95.0,
        model=LatencyModel.from_prior(20.0, 5.0),
        limit=lambda: 8,
        container_concurrency=1,
        max_scale=0,
        now=0.0,
    )
    auto.advisor.observe_cold_start(11.0, 10.4)
    for i in range(45 * 14):
        auto.arrived(10.0 + i / 45, 1)
    auto.decide(24.0, kpa_wants=1)
    assert auto.last is not None
    assert auto.last.local_forecast == pytest.approx(45.0, rel=0.1)
