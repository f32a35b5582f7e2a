"""Swayam's own resource model (random dispatch, Eq. 1 and Theorem 2), checked by hand."""

from __future__ import annotations

import math

import pytest

from slackwise_policies.advisor import Advisor
from slackwise_policies.advisor_config import AdvisorConfig
from slackwise_policies.percentile import ServiceModel
from slackwise_policies.swayam_model import (
    RandDispatch,
    rand_min_replicas,
    rand_response_cdf,
    rand_response_percentile_ms,
    rand_wait_percentile_ms,
)

FIXED = ServiceModel(a_ms=20.0, b_ms_per_item=0.0, spread=1.0, distribution="deterministic")
RAND = RandDispatch(d1_ms=1.0, d2_ms=1.0, delta_ms=2.0)  # a retry costs 4 ms


def test_eq1_is_the_geometric_number_of_retries() -> None:
    # 10 backends of 50 req/s at 400 req/s: each busy with probability 0.8
    wait = rand_wait_percentile_ms(400.0, 10, FIXED, 99.0, RAND)
    tries = math.log(0.01) / math.log(0.8)
    assert wait == pytest.approx(1.0 + (tries - 1.0) * 4.0)


def test_theorem2_steps_through_the_retries_of_a_fixed_execution_time() -> None:
    # P(R <= t) with a 20 ms execution: each retry adds 4 ms; at t = d1 + 20 + 4r exactly r
    # retries have had their chance
    for r in range(4):
        t = 1.0 + 20.0 + 4.0 * r
        expected = 1.0 - 0.8 ** (r + 1)
        assert rand_response_cdf(400.0, 10, FIXED, t, RAND) == pytest.approx(expected)
    p99 = rand_response_percentile_ms(400.0, 10, FIXED, 99.0, RAND)
    retries = math.ceil(math.log(0.01) / math.log(0.8) - 1.0)  # the step Eq. 1 falls in
    assert p99 == pytest.approx(1.0 + 20.0 + 4.0 * retries, abs=0.01)


def test_an_idle_fleet_answers_in_one_hop_and_a_saturated_one_never() -> None:
    assert rand_response_percentile_ms(1.0, 10, FIXED, 99.0, RAND) == pytest.approx(21.0, abs=0.01)
    assert rand_response_percentile_ms(500.0, 10, FIXED, 99.0, RAND) == math.inf
    assert rand_response_cdf(600.0, 10, FIXED, 1e6, RAND) == 0.0


def test_the_fewest_backends_meet_the_slo_and_one_fewer_does_not() -> None:
    service = ServiceModel(a_ms=20.0, b_ms_per_item=0.0, spread=1.5)  # log-normal
    n = rand_min_replicas(300.0, 60.0, 99.0, service, RAND)
    assert rand_response_percentile_ms(300.0, n, service, 99.0, RAND) <= 60.0
    assert rand_response_percentile_ms(300.0, n - 1, service, 99.0, RAND) > 60.0
    assert rand_min_replicas(0.0, 60.0, 99.0, service, RAND) == 0


def test_the_advisor_can_size_the_fleet_with_the_papers_model() -> None:
    service = ServiceModel(a_ms=20.0, b_ms_per_item=2.0, spread=1.2, batch_limit=8)
    decisions = {}
    for model in ("batched", "swayam"):
        advisor = Advisor(AdvisorConfig(slo_ms=100.0, model=model, burst_u=1.0), service, start=0)
        for second in range(60):
            advisor.record(float(second), 200)
        decisions[model] = advisor.decide(60.0, kpa_wants=0)
    # one request per backend at a time needs more backends than batches of up to 8
    assert decisions["swayam"].needed > decisions["batched"].needed >= 1
    assert decisions["swayam"].feasible
