"""The stage-estimate helper shared by the live chain route and the simulator."""

from __future__ import annotations

import pytest

from slackwise_policies.estimates import BatchSizeTracker, stage_estimates, stage_gains
from slackwise_policies.latency import LatencyModel


def test_estimates_read_each_model_at_its_rounded_batch_size() -> None:
    a = LatencyModel.from_prior(10.0, 2.0)
    b = LatencyModel.from_prior(1.0, 5.0)
    assert stage_estimates([a, b], [3.6, 0.2]) == [a.estimate_ms(4), b.estimate_ms(1)]
    assert stage_estimates([a, b], [3.6, 0.2]) == [18.0, 6.0]


def test_queue_aware_estimates_add_the_batch_rounds_queued_ahead() -> None:
    a = LatencyModel.from_prior(10.0, 2.0)  # 18 ms at 4
    b = LatencyModel.from_prior(1.0, 5.0)  # 6 ms at 1
    # a: 8 queued, batches of 4, 2 slots -> one round ahead, then its own; b: nothing queued
    assert stage_estimates([a, b], [3.6, 0.2], [8, 0], [2, 1]) == [36.0, 6.0]
    # with nothing queued anywhere it is the plain estimate
    assert stage_estimates([a, b], [3.6, 0.2], [0, 0], [1, 1]) == [18.0, 6.0]
    # no ready replica counts one slot (the activator's batch)
    assert stage_estimates([a], [4.0], [4], [0]) == [36.0]
    with pytest.raises(ValueError, match="one value per stage"):
        stage_estimates([a, b], [1.0, 1.0], [1], [1, 1])


def test_gains_say_where_batching_pays() -> None:
    flat = LatencyModel.from_prior(10.0, 0.0)  # a batch costs what one does: doubling halves it
    linear = LatencyModel.from_prior(0.0001, 5.0)  # cost per request never falls
    half = LatencyModel.from_prior(10.0, 10.0)  # L(1) 20, L(2) 30: a quarter less per request
    gains = stage_gains([flat, linear, half], [1, 1, 1])
    assert gains[0] == pytest.approx(0.5) and gains[1] == pytest.approx(0.0, abs=1e-3)
    assert gains[2] == pytest.approx(1 - 30 / 40)


def test_estimates_need_one_size_per_stage() -> None:
    with pytest.raises(ValueError, match="one batch size per stage"):
        stage_estimates([LatencyModel.from_prior(1.0, 1.0)], [1.0, 2.0])


def test_tracker_starts_at_one_then_the_first_batch_then_moves_by_alpha() -> None:
    t = BatchSizeTracker(alpha=0.5)
    assert t.mean == 1.0
    t.observe(8)
    assert t.mean == 8.0
    t.observe(4)
    assert t.mean == 6.0


@pytest.mark.parametrize("alpha", [0.0, 1.5, float("nan")])
def test_tracker_rejects_bad_alpha(alpha: float) -> None:
    with pytest.raises(ValueError, match="alpha"):
        BatchSizeTracker(alpha=alpha)


def test_tracker_rejects_empty_batch() -> None:
    with pytest.raises(ValueError, match="batch size"):
        BatchSizeTracker().observe(0)
