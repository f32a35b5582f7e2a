"""The replay percentile model: the controller's batching replayed on observed service times."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slackwise_policies.advisor import Advisor
from slackwise_policies.advisor_config import AdvisorConfig
from slackwise_policies.latency import LatencyModel
from slackwise_policies.percentile import ServiceModel
from slackwise_policies.replay import (
    ObservedService,
    quantised_up,
    replay_min_replicas,
    replay_percentile,
    windows_keep,
    worst_window_ms,
)


def linear(a: float, b: float, limit: int, spread: float = 1.2) -> ObservedService:
    means = tuple(a + b * n for n in range(1, limit + 1))
    return ObservedService(means, tuple(m * spread for m in means), means)


def test_a_lone_request_takes_its_service_time() -> None:
    # 1 rps on a 10 ms service: nobody waits, so the P95 is the service's own P95
    service = linear(10.0, 0.0, 1, spread=1.5)
    assert replay_percentile(1.0, 1, service, 1000.0, 95.0) == pytest.approx(15.0, rel=0.05)


def test_deterministic_single_server_matches_pollaczek_khinchine() -> None:
    # M/D/1 at ρ = 0.5, batches of one: mean wait ρ·S/(2(1−ρ)) = 5 ms on a 10 ms service.
    # The median response is below the mean (15 ms); the P99 is well above the service time.
    service = ObservedService((10.0,), (10.0,), (10.0,))
    p50 = replay_percentile(50.0, 1, service, 10_000.0, 50.0, requests=40_000)
    p99 = replay_percentile(50.0, 1, service, 10_000.0, 99.0, requests=40_000)
    assert 10.0 <= p50 < 15.0
    assert p99 > 40.0


def test_batching_needs_fewer_replicas_than_one_at_a_time() -> None:
    # a large fixed cost per batch: batches of up to 16 share it
    one = linear(20.0, 1.0, 1)
    sixteen = linear(20.0, 1.0, 16)
    alone = replay_min_replicas(400.0, 200.0, 99.0, one, requests=4000)
    batched = replay_min_replicas(400.0, 200.0, 99.0, sixteen, requests=4000)
    assert batched < alone
    assert alone >= 9  # 400 rps × 21 ms needs more than 8.4 busy servers


def test_min_replicas_is_the_fewest_that_meet_the_slo() -> None:
    service = linear(18.0, 4.2, 32)
    n = replay_min_replicas(900.0, 110.0, 99.0, service, requests=6000)
    assert replay_percentile(900.0, n, service, 110.0, 99.0, requests=6000) <= 110.0
    assert replay_percentile(900.0, n - 1, service, 110.0, 99.0, requests=6000) > 110.0
    assert replay_min_replicas(0.0, 110.0, 99.0, service) == 0


def test_an_overloaded_fleet_shows_a_growing_backlog() -> None:
    service = linear(50.0, 50.0, 1)  # 100 ms each: one replica serves 10 rps
    assert replay_percentile(20.0, 1, service, 200.0, 95.0, requests=2000) > 10_000.0


def test_the_estimate_caps_the_batch_by_the_deadline() -> None:
    # the real service is 5 + n ms either way; 300 rps on one replica needs batches of 3 or more.
    # An estimate of 10·n ms lets at most two share a 25 ms deadline, so requests queue until
    # they are late (then they leave together, as the controller's late batches do).
    real = tuple(5.0 + n for n in range(1, 9))
    pessimistic = ObservedService(real, real, tuple(10.0 * n for n in range(1, 9)))
    honest = ObservedService(real, real, real)
    assert replay_percentile(300.0, 1, honest, 25.0, 95.0, requests=4000) < 25.0
    assert replay_percentile(300.0, 1, pessimistic, 25.0, 95.0, requests=4000) > 25.0


@settings(max_examples=15, deadline=None)
@given(rate=st.floats(50.0, 800.0), replicas=st.integers(1, 6))
def test_another_replica_never_makes_the_tail_much_worse(rate: float, replicas: int) -> None:
    service = linear(18.0, 4.2, 16)
    one = replay_percentile(rate, replicas, service, 110.0, 95.0, requests=3000)
    more = replay_percentile(rate, replicas + 1, service, 110.0, 95.0, requests=3000)
    assert more <= one * 1.05 + 1.0


def test_observed_sizes_replace_the_fit() -> None:
    model = LatencyModel.from_prior(10.0, 1.0)
    for i in range(40):
        model.observe(i * 0.1, 4, 100.0 + i % 5, 100.0 + i % 5, cold=False)
    service = ObservedService.from_latency_model(model, 4.0, batch_limit=6, container_concurrency=0)
    assert service.slots == 1 and service.batch_limit == 6
    assert service.median_ms[3] == pytest.approx(102.0, rel=0.03)  # observed at 4
    assert service.p95_ms[3] == pytest.approx(104.0, rel=0.03)
    # unobserved sizes take the fit (which learned from the samples at 4) and its spread
    assert service.median_ms[0] == pytest.approx(quantised_up(model.estimate_ms(1)))
    assert list(service.estimate_ms) == sorted(service.estimate_ms)


def test_past_the_largest_size_seen_the_observed_curve_continues_at_its_own_slope() -> None:
    # a fixed overhead hides the per-instance cost at small batches (22 ms up to 3, then 5 ms
    # an instance); a line through every size seen is pulled flat by the small ones
    def true_ms(n: int) -> float:
        return max(22.0, 7.0 + 5.0 * n)

    model = LatencyModel.from_prior(20.0, 1.0)
    t = 0.0
    for _ in range(20):
        for n in range(1, 9):
            t += 0.01
            model.observe(t, n, true_ms(n), true_ms(n), cold=False)
    assert model.b_ms_per_item < 4.5  # the fit's slope is under the top sizes' 5 ms
    service = ObservedService.from_latency_model(model, t, batch_limit=30, container_concurrency=1)
    assert service.median_ms[7] == pytest.approx(true_ms(8), rel=0.03)  # observed
    for n in (12, 20, 30):  # unobserved: the top sizes' slope, not the line's
        assert service.median_ms[n - 1] == pytest.approx(true_ms(n), rel=0.03)
        assert service.median_ms[n - 1] > model.estimate_ms(n) * 1.05
        # what the batching decision is replayed with prices them as high
        assert service.estimate_ms[n - 1] >= service.median_ms[n - 1]
    # one size seen: nothing to continue, the fit and its spread stand
    lone = LatencyModel.from_prior(10.0, 1.0)
    for i in range(20):
        lone.observe(i * 0.1, 4, 100.0, 100.0, cold=False)
    only = ObservedService.from_latency_model(lone, 2.0, batch_limit=8, container_concurrency=1)
    assert only.median_ms[7] == pytest.approx(quantised_up(lone.estimate_ms(8)))


def test_bad_input_is_named() -> None:
    service = linear(10.0, 1.0, 2)
    with pytest.raises(ValueError, match="rate"):
        replay_percentile(-1.0, 1, service, 100.0, 99.0)
    with pytest.raises(ValueError, match="replicas"):
        replay_percentile(1.0, 0, service, 100.0, 99.0)
    with pytest.raises(ValueError, match="percentile"):
        replay_percentile(1.0, 1, service, 100.0, 100.0)
    with pytest.raises(ValueError, match="one value per batch size"):
        ObservedService((1.0, 2.0), (1.0,), (1.0, 2.0))
    with pytest.raises(ValueError, match="p95_ms"):
        ObservedService((1.0,), (math.nan,), (1.0,))


def test_the_advisor_sizes_with_the_replay_once_it_has_observations() -> None:
    config = AdvisorConfig(slo_ms=110.0, percentile=99.0, current_window_s=10.0)
    analytic = ServiceModel(a_ms=18.0, b_ms_per_item=4.2, spread=1.2, batch_limit=32)
    observed = linear(18.0, 4.2, 32)
    advisor = Advisor(config, analytic, start=0.0)
    for t in range(10):
        advisor.record(float(t), 900)
    decision = advisor.decide(10.0, kpa_wants=0, observed=observed)
    expected = replay_min_replicas(quantised_up(decision.model_rate), 110.0, 99.0, observed,
                                   max_replicas=config.max_replicas)  # fmt: skip
    assert decision.needed == expected
    assert decision.percentile_ms <= 110.0
    # the same tick again is a cache hit and the same answer
    assert advisor.decide(10.5, kpa_wants=0).needed == expected


def test_a_window_holds_its_percentile_where_the_run_as_a_whole_would_not() -> None:
    # 2,000 requests, 1 % of them late (20), all in one cluster: the run's P99 is within the SLO,
    # the window of 1,000 that holds the cluster misses 20 where its P99 allows 10
    latencies = [10.0] * 2000
    for i in range(500, 520):
        latencies[i] = 500.0
    assert windows_keep(latencies, 2000, 99.0, 100.0)
    assert not windows_keep(latencies, 1000, 99.0, 100.0)
    assert worst_window_ms(latencies, 1000, 99.0) == 500.0
    # spread out, ten in every thousand, the same misses keep every window
    spread = [500.0 if i % 100 == 0 else 10.0 for i in range(2000)]
    assert windows_keep(spread, 1000, 99.0, 100.0)
    assert worst_window_ms(spread, 1000, 99.0) == 10.0


@settings(max_examples=30, deadline=None)
@given(
    latencies=st.lists(st.sampled_from([5.0, 50.0, 150.0]), min_size=1, max_size=600),
    window=st.integers(1, 300),
    percentile=st.sampled_from([50.0, 90.0, 95.0, 99.0]),
)
def test_counting_misses_and_the_worst_windows_percentile_agree(
    latencies: list[float], window: int, percentile: float
) -> None:
    worst = worst_window_ms(latencies, window, percentile)
    assert windows_keep(latencies, window, percentile, 100.0) == (worst <= 100.0)


def test_judged_by_windows_the_count_covers_the_clusters_a_busy_spell_makes() -> None:
    # embed on its CPU profile at 800 req/s, the Fig. 9 SLO (5 x the batch-1 median, P99):
    # a busy spell puts a dozen late together, so every window of 1,000 keeping its P99 takes
    # more replicas than the P99 of the run as a whole, and that count keeps every window
    means = tuple(22.0 if n <= 3 else 18.0 + 4.2 * n for n in range(1, 65))
    service = ObservedService(means, tuple(m * 1.2 for m in means), means)
    whole = replay_min_replicas(800.0, 110.6, 99.0, service)
    judged = replay_min_replicas(800.0, 110.6, 99.0, service, window=1000)
    assert judged > whole
    assert replay_percentile(800.0, judged, service, 110.6, 99.0, window=1000) <= 110.6
    assert replay_percentile(800.0, judged - 1, service, 110.6, 99.0, window=1000) > 110.6
    with pytest.raises(ValueError, match="window"):
        replay_percentile(800.0, judged, service, 110.6, 99.0, window=-5)


def test_the_advisor_judges_its_sla_window_when_configured() -> None:
    means = tuple(22.0 if n <= 3 else 18.0 + 4.2 * n for n in range(1, 65))
    observed = ObservedService(means, tuple(m * 1.2 for m in means), means)
    analytic = ServiceModel(a_ms=18.0, b_ms_per_item=4.2, spread=1.2, batch_limit=64)
    counts = []
    for window in (0, 1000):
        config = AdvisorConfig(slo_ms=110.6, percentile=99.0, burst_u=1.0, sla_window=window)
        advisor = Advisor(config, analytic, start=0.0)
        for t in range(10):
            advisor.record(float(t), 800)
        decision = advisor.decide(10.0, kpa_wants=0, observed=observed)
        assert decision.percentile_ms <= 110.6
        counts.append(decision.needed)
    assert counts[1] > counts[0]
    with pytest.raises(ValueError, match="sla_window"):
        AdvisorConfig(slo_ms=110.6, sla_window=-1)
