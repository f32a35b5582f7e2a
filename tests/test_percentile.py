"""The batched response-time percentile model (Swayam §4.3 / Theorem 2, adapted to batches)."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slackwise_policies.latency import LatencyModel
from slackwise_policies.percentile import (
    ServiceModel,
    erlang_c,
    min_replicas,
    queue_state,
    response_time_cdf,
    response_time_percentile,
)

EXP10 = ServiceModel(a_ms=10.0, distribution="exponential")  # μ = 100/s
DET10 = ServiceModel(a_ms=10.0, distribution="deterministic")


def mmc_survival(t_ms: float, lam: float, mu: float, c: int) -> float:
    """P(T > t) in M/M/c, written out independently of the module (rates per ms)."""
    a = lam / mu
    terms = sum(a**k / math.factorial(k) for k in range(c))
    last = a**c / math.factorial(c) * c / (c - a)
    wait = last / (terms + last)
    theta = c * mu - lam
    served = math.exp(-mu * t_ms)
    if abs(theta - mu) < 1e-12:
        both = math.exp(-mu * t_ms) * (1 + mu * t_ms)
    else:
        both = (mu * math.exp(-theta * t_ms) - theta * math.exp(-mu * t_ms)) / (mu - theta)
    return (1 - wait) * served + wait * both


def test_erlang_c_known_values() -> None:
    assert erlang_c(1, 0.5) == pytest.approx(0.5)
    assert erlang_c(2, 1.5) == pytest.approx(9 / 14)
    assert erlang_c(3, 0.0) == 0.0
    assert erlang_c(3, 3.0) == 1.0


@pytest.mark.parametrize(("rate", "p"), [(10.0, 95.0), (50.0, 99.0), (90.0, 50.0)])
def test_mm1_percentile_is_exponential(rate: float, p: float) -> None:
    # M/M/1: the response time is Exp(μ − λ)
    expected = -math.log(1 - p / 100) / (100.0 - rate) * 1000.0
    assert response_time_percentile(rate, 1, EXP10, p) == pytest.approx(expected, rel=1e-6)


@pytest.mark.parametrize(("rate", "replicas"), [(150.0, 2), (350.0, 4), (50.0, 3)])
def test_mmc_percentile_matches_erlang_c_closed_form(rate: float, replicas: int) -> None:
    t = response_time_percentile(rate, replicas, EXP10, 99.0)
    assert mmc_survival(t, rate / 1000, 0.1, replicas) == pytest.approx(0.01, rel=1e-6)


def test_slots_per_replica_count_like_replicas() -> None:
    two_slots = ServiceModel(a_ms=10.0, distribution="exponential", slots_per_replica=2)
    assert response_time_percentile(150.0, 1, two_slots, 99.0) == pytest.approx(
        response_time_percentile(150.0, 2, EXP10, 99.0)
    )


@pytest.mark.parametrize("rate", [20.0, 50.0, 80.0])
def test_md1_mean_wait_is_pollaczek_khinchine(rate: float) -> None:
    rho = rate / 100.0
    state = queue_state(rate, 1, DET10)
    assert state.mean_wait_ms == pytest.approx(rho * 10.0 / (2 * (1 - rho)))
    # the tail: P(W > w) = ρ·exp(−2(1−ρ)w/S), the classic exponential approximation of M/D/1
    t = response_time_percentile(rate, 1, DET10, 99.0)
    assert t == pytest.approx(10.0 + math.log(rho / 0.01) * 10.0 / (2 * (1 - rho)))


def test_md1_percentile_no_wait_below_the_waiting_probability() -> None:
    # at ρ = 0.04 only 4 % of requests wait: the P95 is the bare service time
    assert response_time_percentile(4.0, 1, DET10, 95.0) == pytest.approx(10.0)


def test_idle_percentile_is_the_service_quantile() -> None:
    service = ServiceModel(a_ms=20.0, b_ms_per_item=2.0, spread=1.5, batch_limit=8)
    assert response_time_percentile(0.0, 1, service, 95.0) == pytest.approx(22.0 * 1.5)
    assert response_time_percentile(0.0, 1, service, 50.0) < 22.0  # a log-normal's median


def test_batching_raises_capacity() -> None:
    single = ServiceModel(a_ms=20.0, b_ms_per_item=2.0, spread=1.2, batch_limit=1)
    batched = ServiceModel(a_ms=20.0, b_ms_per_item=2.0, spread=1.2, batch_limit=16)
    assert not queue_state(100.0, 1, single).stable  # 100/s > 1/22 ms
    state = queue_state(100.0, 1, batched)
    assert state.stable and 1.0 < state.batch_size < 16.0
    assert math.isfinite(response_time_percentile(100.0, 1, batched, 95.0))
    assert response_time_percentile(100.0, 1, single, 95.0) == math.inf


def test_no_replica_serves_nothing() -> None:
    assert response_time_percentile(1.0, 0, EXP10, 95.0) == math.inf
    assert response_time_cdf(1e6, 1.0, 0, EXP10) == 0.0


def test_collect_and_overhead_shift_the_percentile() -> None:
    base = response_time_percentile(30.0, 1, DET10, 95.0)
    shifted = response_time_percentile(30.0, 1, DET10, 95.0, collect_ms=5.0, overhead_ms=1.0)
    assert shifted == pytest.approx(base + 6.0)


def test_cdf_reaches_the_percentile() -> None:
    service = ServiceModel(a_ms=15.0, b_ms_per_item=1.0, spread=1.4, batch_limit=8)
    t = response_time_percentile(300.0, 2, service, 99.0)
    assert response_time_cdf(t, 300.0, 2, service) == pytest.approx(0.99, abs=1e-6)


services = st.builds(
    ServiceModel,
    a_ms=st.floats(1.0, 100.0),
    b_ms_per_item=st.floats(0.0, 10.0),
    spread=st.floats(1.0, 3.0),
    batch_limit=st.integers(1, 32),
    slots_per_replica=st.integers(1, 4),
    distribution=st.sampled_from(["lognormal", "exponential", "deterministic"]),
)


@settings(max_examples=60, deadline=None)
@given(service=services, rate=st.floats(0.0, 2000.0), replicas=st.integers(1, 20))
def test_percentile_falls_with_replicas(service: ServiceModel, rate: float, replicas: int) -> None:
    more = response_time_percentile(rate, replicas + 1, service, 95.0)
    fewer = response_time_percentile(rate, replicas, service, 95.0)
    assert more <= fewer * (1 + 1e-6) or fewer == math.inf


@settings(max_examples=60, deadline=None)
@given(
    service=services,
    rate=st.floats(0.0, 2000.0),
    factor=st.floats(1.0, 3.0),
    replicas=st.integers(1, 20),
)
def test_percentile_grows_with_rate(
    service: ServiceModel, rate: float, factor: float, replicas: int
) -> None:
    low = response_time_percentile(rate, replicas, service, 99.0)
    high = response_time_percentile(rate * factor, replicas, service, 99.0)
    assert low <= high * (1 + 1e-6)


@settings(max_examples=40, deadline=None)
@given(service=services, rate=st.floats(0.1, 3000.0), slo_ms=st.floats(10.0, 1000.0))
def test_min_replicas_is_minimal(service: ServiceModel, rate: float, slo_ms: float) -> None:
    n = min_replicas(rate, slo_ms, 95.0, service, max_replicas=200)
    meets = response_time_percentile(rate, n, service, 95.0) <= slo_ms
    if meets:
        assert n == 1 or response_time_percentile(rate, n - 1, service, 95.0) > slo_ms
    else:  # infeasible: capped, and the cap really does not meet it
        assert n == 200


def test_min_replicas_edges() -> None:
    assert min_replicas(0.0, 100.0, 95.0, EXP10) == 0
    # a lone batch's P95 above the SLO: no replica count helps
    slow = ServiceModel(a_ms=200.0, spread=1.2)
    assert min_replicas(1.0, 100.0, 95.0, slow, max_replicas=7) == 7
    # M/M/c: 250/s at μ = 100/s needs 3 at least; the SLO picks how many more
    assert min_replicas(250.0, 1000.0, 95.0, EXP10) == 3
    assert min_replicas(250.0, 40.0, 95.0, EXP10) > 3


def test_from_latency_model_reads_fit_and_spread() -> None:
    model = LatencyModel.from_prior(12.0, 3.0, spread=1.5)
    service = ServiceModel.from_latency_model(model, 0.0, batch_limit=8, container_concurrency=0)
    assert (service.a_ms, service.b_ms_per_item, service.spread) == (12.0, 3.0, 1.5)
    assert service.slots_per_replica == 1 and service.batch_limit == 8
    assert service.quantile_ms(4, 0.95) == pytest.approx(model.p95_ms(4, 0.0))


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"a_ms": math.nan}, "a_ms"),
        ({"a_ms": 1.0, "spread": 0.5}, "spread"),
        ({"a_ms": 1.0, "batch_limit": 0}, "batch_limit"),
        ({"a_ms": 1.0, "slots_per_replica": 0}, "slots_per_replica"),
        ({"a_ms": 1.0, "distribution": "gamma"}, "distribution"),
        ({"a_ms": 1.0, "b_ms_per_item": -1.0}, "b_ms_per_item"),
    ],
)
def test_bad_service_names_the_field(kwargs: dict[str, object], name: str) -> None:
    with pytest.raises(ValueError, match=name):
        ServiceModel(**kwargs)  # type: ignore[arg-type]


def test_bad_arguments_name_the_value() -> None:
    with pytest.raises(ValueError, match="percentile"):
        response_time_percentile(1.0, 1, EXP10, 100.0)
    with pytest.raises(ValueError, match="rate"):
        response_time_percentile(-1.0, 1, EXP10, 95.0)
    with pytest.raises(ValueError, match="replicas"):
        response_time_percentile(1.0, -1, EXP10, 95.0)
    with pytest.raises(ValueError, match="max_replicas"):
        min_replicas(1.0, 10.0, 95.0, EXP10, max_replicas=0)


def test_the_shared_search_finds_the_first_count_that_meets_from_any_start() -> None:
    from slackwise_policies.fewest import fewest_meeting

    asked: list[int] = []

    def first_at(first: int) -> Callable[[int], bool]:
        def meets(n: int) -> bool:
            asked.append(n)
            return n >= first

        return meets

    for first in (1, 2, 7, 50, 999, 1000):
        for low in (1, 3):
            asked.clear()
            assert fewest_meeting(first_at(first), low, 1000) == max(first, low)
            assert len(asked) <= 2 * 10 + 2  # gallop and bisect, not a walk
    assert fewest_meeting(lambda n: False, 1, 40) == 40  # none meets: the cap
    assert fewest_meeting(lambda n: True, 60, 40) == 40  # the bound is past the cap
