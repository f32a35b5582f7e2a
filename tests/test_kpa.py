"""The KPA against hand-worked cases of Knative's algorithm, with the time injected."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from knative.kpa import KPA, Decision
from slackwise_core.knative_scaling import AutoscalerConfig, ScalingSpec, resolve_spec

G = "autoscaling.knative.dev/"


def spec(
    annotations: dict[str, str] | None = None,
    *,
    container_concurrency: int = 0,
    **config: object,
) -> ScalingSpec:
    anns = {G + k: v for k, v in (annotations or {}).items()}
    cfg = AutoscalerConfig(**config)  # type: ignore[arg-type]
    return resolve_spec(anns, container_concurrency=container_concurrency, config=cfg)


def feed(kpa: KPA, start: int, stop: int, value: float) -> None:
    """Record ``value`` once a second for t = start .. stop-1."""
    for t in range(start, stop):
        kpa.record(t, value)


def run(
    kpa: KPA, load: Callable[[int], float], until: int, *, replicas: int = 0
) -> dict[int, Decision]:
    """A closed loop: record every second, decide every 2 s, replicas ready at once."""
    decisions: dict[int, Decision] = {}
    for t in range(until + 1):
        kpa.record(t, load(t))
        if t % 2 == 0:
            decision = kpa.decide(t, ready=replicas, current=replicas)
            decisions[t] = decision
            replicas = decision.desired
    return decisions


# -- target ------------------------------------------------------------------------------------


def test_target_times_utilization() -> None:
    assert spec({"target": "10"}).target_value == pytest.approx(7.0)
    assert spec({"target": "10", "target-utilization-percentage": "100"}).target_value == 10.0


def test_container_concurrency_is_the_default_target_and_caps_the_annotation() -> None:
    assert spec(container_concurrency=10).target_value == pytest.approx(7.0)
    assert spec({"target": "50"}, container_concurrency=10).target == 10.0
    assert spec({"target": "5"}, container_concurrency=10).target == 5.0
    assert spec().target_value == pytest.approx(70.0)  # 100 × 70 %


def test_rps_target_takes_the_utilization_too() -> None:
    rps = spec({"metric": "rps"})
    assert rps.metric == "rps"
    assert rps.target_value == pytest.approx(140.0)  # 200 × 70 %
    assert spec({"metric": "rps", "target": "10"}).target_value == pytest.approx(7.0)


def test_steady_concurrency_over_the_stable_window() -> None:
    kpa = KPA(spec({"target": "10"}))
    feed(kpa, 0, 60, 21.0)
    decision = kpa.decide(59, ready=3, current=3)
    assert decision.stable_value == 21.0
    assert decision.desired == 3  # ceil(21 / 7)
    assert not decision.panicking
    assert decision.reason == "stable"


def test_rps_metric_scales_on_rps_over_its_target() -> None:
    kpa = KPA(spec({"metric": "rps", "target": "10"}))
    feed(kpa, 0, 60, 21.0)
    assert kpa.decide(59, ready=3, current=3).desired == 3  # ceil(21 / 7)
    feed(kpa, 60, 120, 22.0)
    assert kpa.decide(119, ready=3, current=3).desired == 4


# -- rate limits -------------------------------------------------------------------------------


def test_scale_up_rate_limit() -> None:
    kpa = KPA(spec({"target": "1"}, max_scale_up_rate=2.0))
    feed(kpa, 0, 60, 100.0)
    assert kpa.decide(59, ready=1, current=1).desired == 2
    assert kpa.decide(59, ready=0, current=0).desired == 2  # ready counts as at least 1
    assert kpa.decide(59, ready=5, current=5).desired == 10


def test_scale_up_by_at_least_one_when_the_rate_is_small() -> None:
    kpa = KPA(spec({"target": "1", "target-utilization-percentage": "100"}, max_scale_up_rate=1.1))
    feed(kpa, 0, 60, 3.0)
    assert kpa.decide(59, ready=2, current=2).desired == 3  # ceil(1.1 × 2)


def test_scale_down_rate_limit() -> None:
    kpa = KPA(spec({"target": "10"}))
    feed(kpa, 0, 60, 0.0)
    assert kpa.decide(59, ready=10, current=10).desired == 5  # floor(10 / 2)
    assert kpa.decide(59, ready=3, current=3).desired == 1


# -- panic -------------------------------------------------------------------------------------


def test_panic_entry_hold_and_exit() -> None:
    kpa = KPA(spec({"target": "10", "target-utilization-percentage": "100"}))
    assert kpa.spec.panic_window_s == 6.0
    feed(kpa, 0, 60, 10.0)
    calm = kpa.decide(59, ready=1, current=1)
    assert (calm.desired, calm.panicking) == (1, False)

    feed(kpa, 60, 66, 40.0)
    burst = kpa.decide(65, ready=1, current=1)
    assert burst.panic_value == 40.0
    assert burst.stable_value == 13.0  # (54 × 10 + 6 × 40) / 60
    assert burst.panicking  # ceil(40 / 10) / 1 = 4 ≥ 200 %
    assert burst.desired == 4  # the larger of stable (2) and panic (4)

    feed(kpa, 66, 127, 0.0)
    held = kpa.decide(80, ready=4, current=4)
    assert held.panicking and held.desired == 4  # stable says 2: no decrease while panicking
    assert kpa.decide(125, ready=4, current=4).panicking  # exactly one window after: still
    after = kpa.decide(126, ready=4, current=4)
    assert not after.panicking
    assert after.desired == 2  # stable 0, limited by floor(4 / 2)


def test_panic_threshold_boundary() -> None:
    kpa = KPA(spec({"target": "10", "target-utilization-percentage": "100"}))
    feed(kpa, 0, 6, 30.0)  # panic desired 3
    assert not kpa.decide(5, ready=2, current=2).panicking  # 3 / 2 < 200 %
    feed(kpa, 6, 12, 40.0)  # panic desired 4
    assert kpa.decide(11, ready=2, current=2).panicking  # 4 / 2 = 200 %


def test_panic_is_extended_by_each_tick_over_the_threshold() -> None:
    kpa = KPA(spec({"target": "10", "target-utilization-percentage": "100"}))
    feed(kpa, 0, 6, 40.0)
    assert kpa.decide(5, ready=1, current=1).panicking
    feed(kpa, 6, 50, 0.0)
    feed(kpa, 50, 56, 80.0)
    assert kpa.decide(55, ready=4, current=4).panicking  # 8 / 4: panic renewed at 55
    feed(kpa, 56, 120, 0.0)
    assert kpa.decide(115, ready=8, current=8).panicking
    assert not kpa.decide(116, ready=8, current=8).panicking


# -- window averages ---------------------------------------------------------------------------


def test_gaps_between_samples_count_as_zero() -> None:
    kpa = KPA(spec())
    kpa.record(0, 60.0)
    kpa.record(10, 60.0)
    decision = kpa.decide(10, ready=1, current=1)
    assert decision.stable_value == pytest.approx(120 / 11, abs=1e-6)
    # the panic window (6 s) saw a window of silence, so it starts afresh at t=10
    assert decision.panic_value == 60.0


def test_no_reach_back_before_the_first_sample() -> None:
    kpa = KPA(spec())
    kpa.record(100, 30.0)
    decision = kpa.decide(100, ready=1, current=1)
    assert decision.stable_value == 30.0
    assert decision.panic_value == 30.0


def test_average_stops_at_the_last_sample_and_empties_after_a_window() -> None:
    kpa = KPA(spec())
    feed(kpa, 0, 10, 30.0)
    assert kpa.decide(20, ready=1, current=1).stable_value == 30.0
    assert kpa.decide(20, ready=1, current=1).panic_value == 0.0  # 11 s > 6 s panic window
    assert kpa.decide(68, ready=1, current=1).stable_value == 30.0  # buckets 9 .. 9
    assert kpa.decide(69, ready=1, current=1).stable_value == 0.0


def test_a_window_of_silence_starts_the_average_afresh() -> None:
    kpa = KPA(spec())
    feed(kpa, 0, 60, 30.0)
    kpa.record(200, 12.0)
    assert kpa.decide(200, ready=1, current=1).stable_value == 12.0


def test_samples_within_one_second_are_averaged_and_stale_ones_dropped() -> None:
    kpa = KPA(spec())
    kpa.record(100.1, 10.0)
    kpa.record(100.7, 20.0)
    kpa.record(30.0, 1000.0)  # over a window older than the newest sample
    assert kpa.decide(100.9, ready=1, current=1).stable_value == 15.0


def test_weighted_exponential_weighs_recent_seconds_more() -> None:
    rising = KPA(spec({"metric-aggregation-algorithm": "weighted-exponential"}))
    falling = KPA(spec({"metricAggregationAlgorithm": "weightedExponential"}))
    for t, value in enumerate([10.0, 10.0, 5.0, 5.0]):
        falling.record(t, value)
        rising.record(t, 15.0 - value)
    assert falling.spec.aggregation == "weighted-exponential"
    # a 60 s window decays by 0.2 a second, newest first: 10×0.2 + 10×0.16 + 5×0.128 + 5×0.1024
    assert rising.decide(3, ready=1, current=1).stable_value == pytest.approx(4.752)
    assert falling.decide(3, ready=1, current=1).stable_value == pytest.approx(4.104)
    steady = KPA(spec({"metric-aggregation-algorithm": "weighted-exponential"}))
    feed(steady, 0, 60, 21.0)
    assert steady.decide(59, ready=3, current=3).stable_value == pytest.approx(21.0, rel=1e-4)


def test_negative_values_are_refused() -> None:
    with pytest.raises(ValueError, match="-1"):
        KPA(spec()).record(0, -1.0)


# -- scale-down delay --------------------------------------------------------------------------


def test_scale_down_delay_holds_the_highest_recent_count() -> None:
    anns = {"target": "10", "target-utilization-percentage": "100", "window": "6s"}
    delayed = KPA(spec({**anns, "scale-down-delay": "10s"}))
    plain = KPA(spec(anns))

    def load(t: int) -> float:
        return 50.0 if t < 6 else 0.0

    got: dict[int, int] = {}
    want: dict[int, int] = {}
    for t in range(31):
        delayed.record(t, load(t))
        plain.record(t, load(t))
        if t % 2 == 0:
            got[t] = delayed.decide(t, ready=5, current=5).desired
            want[t] = plain.decide(t, ready=5, current=5).desired
    assert want[4] == 5 and want[12] < 5
    for t in got:
        assert got[t] == max(want[s] for s in want if t - 10 < s <= t)
    assert got[12] == 5 and got[14] == 5


# -- bounds and initial scale ------------------------------------------------------------------


def test_min_and_max_scale_bound_the_count() -> None:
    kpa = KPA(spec({"target": "1", "min-scale": "2", "max-scale": "3"}))
    feed(kpa, 0, 60, 0.0)
    assert kpa.decide(59, ready=2, current=2).desired == 2
    feed(kpa, 60, 120, 100.0)
    decision = kpa.decide(119, ready=2, current=2)
    assert decision.desired == 3
    assert decision.reason == "max-scale"


def test_pinned_min_scale_overrides_the_spec() -> None:
    kpa = KPA(spec({"min-scale": "3"}))
    feed(kpa, 0, 60, 0.0)
    assert kpa.decide(59, ready=3, current=3, min_scale=5).desired == 5
    assert kpa.decide(59, ready=3, current=3).desired == 3
    assert kpa.decide(59, ready=3, current=3, min_scale=0).desired == 1  # floor(3 / 2)


def test_initial_scale_is_held_until_reached() -> None:
    kpa = KPA(spec({"initial-scale": "3"}))
    assert kpa.decide(0, ready=0, current=0).desired == 3  # no data yet
    feed(kpa, 0, 10, 0.0)
    held = kpa.decide(9, ready=2, current=3)
    assert (held.desired, held.reason) == (3, "initial scale")
    assert kpa.decide(11, ready=3, current=3).desired == 1  # reached: floor(3 / 2)
    assert kpa.decide(13, ready=1, current=1).desired == 1  # never asked for again


def test_zero_initial_scale_when_allowed() -> None:
    kpa = KPA(spec({"initial-scale": "0"}, allow_zero_initial_scale=True))
    assert kpa.decide(0, ready=0, current=0).desired == 0


def test_no_data_keeps_the_current_count() -> None:
    kpa = KPA(spec())
    kpa.decide(0, ready=0, current=0)
    decision = kpa.decide(1, ready=4, current=4)
    assert (decision.desired, decision.reason) == (4, "no data yet")


def test_activation_scale_applies_to_nonzero_counts_only() -> None:
    kpa = KPA(spec({"activation-scale": "3", "target": "10"}))
    feed(kpa, 0, 60, 1.0)
    assert kpa.decide(59, ready=1, current=1).desired == 3
    quiet = KPA(
        spec({"activation-scale": "3", "initial-scale": "0"}, allow_zero_initial_scale=True)
    )
    feed(quiet, 0, 60, 0.0)
    assert quiet.decide(59, ready=0, current=0).desired == 0


# -- scale to zero -----------------------------------------------------------------------------


def _last_traffic_at_10(t: int) -> float:
    return 5.0 if t <= 10 else 0.0


def test_scale_to_zero_after_the_stable_window_and_the_grace_period() -> None:
    kpa = KPA(spec())
    decisions = run(kpa, _last_traffic_at_10, 130)
    # the stable average reaches 0 at t=70; the revision, active since t=2, goes inactive
    assert all(decisions[t].desired == 1 for t in range(0, 100, 2))
    assert decisions[68].stable_value > 0 and decisions[70].stable_value == 0
    assert kpa.inactive_since == 70
    assert decisions[98].reason == "inactive, waiting to scale to zero"
    assert decisions[100].desired == 0  # 30 s grace period after going inactive
    assert decisions[102].reason == "scaled to zero"


def test_pod_retention_period_when_longer_than_the_grace_period() -> None:
    decisions = run(
        KPA(spec({"scale-to-zero-pod-retention-period": "1m"})), _last_traffic_at_10, 140
    )
    assert decisions[128].desired == 1
    assert decisions[130].desired == 0
    shorter = run(
        KPA(spec({"scale-to-zero-pod-retention-period": "10s"})), _last_traffic_at_10, 110
    )
    assert decisions[98].desired == 1 and shorter[100].desired == 0


def test_active_for_less_than_a_window_stays_at_one() -> None:
    kpa = KPA(spec({"window": "6s"}))
    decisions = run(kpa, lambda t: 5.0 if t == 0 else 0.0, 40)
    assert decisions[6].stable_value == 0.0
    assert decisions[6].reason == "active for less than a window"  # active since t=2
    assert kpa.inactive_since == 8
    assert decisions[36].desired == 1 and decisions[38].desired == 0


def test_scale_to_zero_disabled_keeps_one() -> None:
    decisions = run(KPA(spec(enable_scale_to_zero=False)), _last_traffic_at_10, 300)
    assert all(d.desired == 1 for d in decisions.values())
    assert decisions[300].reason == "scale to zero disabled"


def test_a_request_at_zero_scales_up_at_once() -> None:
    kpa = KPA(spec())
    run(kpa, _last_traffic_at_10, 120)
    assert kpa.decide(120, ready=0, current=0).desired == 0
    kpa.record(120.5, 1.0)
    decision = kpa.decide(120.5, ready=0, current=0)
    assert decision.desired == 1
    assert kpa.inactive_since is None


def test_a_burst_after_silence_is_sized_from_the_fresh_window() -> None:
    kpa = KPA(spec({"target": "10"}))
    kpa.record(500, 100.0)
    decision = kpa.decide(500, ready=0, current=0)
    assert decision.desired == 15  # ceil(100 / 7), not diluted over the 60 s window
    assert decision.panicking


# -- properties --------------------------------------------------------------------------------


@st.composite
def specs(draw: st.DrawFn) -> ScalingSpec:
    min_scale = draw(st.integers(0, 4))
    max_scale = draw(st.one_of(st.just(0), st.integers(max(1, min_scale), 12)))
    anns = {
        "target": str(draw(st.sampled_from([1, 2.5, 10]))),
        "min-scale": str(min_scale),
        "max-scale": str(max_scale),
        "initial-scale": str(draw(st.integers(0, 4))),
        "window": draw(st.sampled_from(["6s", "10s", "60s"])),
        "scale-down-delay": draw(st.sampled_from(["0s", "4s"])),
    }
    return spec(
        anns,
        allow_zero_initial_scale=True,
        enable_scale_to_zero=draw(st.booleans()),
        max_scale_up_rate=draw(st.sampled_from([1.5, 2.0, 1000.0])),
        max_scale_down_rate=draw(st.sampled_from([1.5, 2.0, 10.0])),
        scale_to_zero_grace_period_s=draw(st.sampled_from([6.0, 30.0])),
    )


ticks = st.lists(
    st.tuples(st.floats(0, 60, allow_nan=False), st.integers(0, 15), st.integers(0, 15)),
    max_size=40,
)


@settings(max_examples=150, deadline=None)
@given(specs(), ticks, st.one_of(st.none(), st.integers(0, 4)))
def test_bounds_always_hold(
    s: ScalingSpec, steps: list[tuple[float, int, int]], pin: int | None
) -> None:
    kpa = KPA(s)
    floor_scale = s.min_scale if pin is None else pin
    for i, (value, ready, extra) in enumerate(steps):
        now = 3.0 * i
        kpa.record(now, value)
        desired = kpa.decide(now, ready=ready, current=ready + extra, min_scale=pin).desired
        if s.max_scale > 0:
            assert desired <= max(s.max_scale, floor_scale)
        assert desired >= floor_scale
        if not s.enable_scale_to_zero:
            assert desired >= 1


@settings(max_examples=150, deadline=None)
@given(specs(), st.lists(st.tuples(st.floats(0, 200, allow_nan=False), st.booleans()), max_size=60))
def test_scale_up_never_beats_the_rate_limit(
    s: ScalingSpec, steps: list[tuple[float, bool]]
) -> None:
    kpa = KPA(s)
    ready = current = 0
    reached = s.initial_scale == 0
    for i, (value, lagging) in enumerate(steps):
        now = 2.0 * i
        kpa.record(now, value)
        reached = reached or ready >= s.initial_scale
        desired = kpa.decide(now, ready=ready, current=current).desired
        if reached and desired > s.min_scale:
            assert desired <= max(current, math.ceil(s.max_scale_up_rate * max(ready, 1)))
        # replicas appear at once or one tick late; they go away at once
        ready = desired if desired < ready or not lagging else ready
        current = desired
