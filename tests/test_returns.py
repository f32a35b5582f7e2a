"""Each level's hold priced by its returns (slackwise_policies.returns), on a virtual clock."""

from __future__ import annotations

from dataclasses import replace

import pytest

from slackwise_policies.advisor_driver import AdvisorDriver
from slackwise_policies.advisor_settings import AdvisorSettings
from slackwise_policies.latency import LatencyModel
from slackwise_policies.returns import BURST_HOLD_S, HOLD_S, MARGIN, Returns
from tests.test_onsets import _bursty, _embed

SETUP_S = 7.0


def _tick(returns: Returns, now: float, *, needed: int, count: int, rate: float = 0.0) -> None:
    """One second: ``rate`` arrivals, then a decision of ``count`` for a model that needed
    ``needed`` for 140 requests a second."""
    returns.arrived(now, int(rate))
    returns.decided(now, needed=needed, count=count, model_rate=140.0, setup_s=SETUP_S)


def _episode(returns: Returns, start: float, *, seconds: int, rate: float) -> float:
    """``seconds`` at level 2 from ``start`` with ``rate`` arrivals a second, then one at
    level 1: the count follows the need at once (no hold of its own). The end."""
    for k in range(seconds):
        count = max(2, returns.level(start + k))
        _tick(returns, start + k, needed=2, count=count, rate=rate)
    end = start + seconds
    _tick(returns, end, needed=1, count=max(1, returns.level(end)), rate=10.0)
    return end


def test_a_return_that_breaks_a_window_holds_its_level_as_long_as_it_took() -> None:
    returns = Returns(allowance=10)
    last = _episode(returns, 0.0, seconds=10, rate=150.0) - 1.0  # level 2 last needed at 9
    assert returns.level(last + 30.0) == 0  # nothing measured: the count may fall
    # the need comes back 191 s after it was last needed, 150 a second where the one kept
    # replica carries 70 (the model's 140 for two, in proportion): 560 beyond it in 7 s
    back = last + 191.0
    last = _episode(returns, back, seconds=10, rate=150.0) - 1.0
    assert returns.hold(2) == pytest.approx(MARGIN * 191.0)
    assert "held 210 s" in returns.reason
    assert returns.level(last + 200.0) == 2
    assert returns.level(last + MARGIN * 191.0 + 1.0) == 0


def test_a_return_the_kept_replicas_carry_holds_nothing_even_for_a_bursty_function() -> None:
    returns = Returns(allowance=10)
    last = _episode(returns, 0.0, seconds=10, rate=60.0) - 1.0
    assert returns.level(last + 100.0, bursty=True) == 2  # the prior: nothing measured yet
    back = last + BURST_HOLD_S + 50.0
    assert returns.level(back, bursty=True) == 0
    last = _episode(returns, back, seconds=10, rate=60.0) - 1.0  # 60 a second, 70 carried
    assert returns.hold(2, bursty=True) == 0.0
    assert returns.level(last + 1.0, bursty=True) == 0
    assert "within the 10" in returns.reason


def test_a_level_held_by_the_count_is_not_a_return_and_the_hold_is_capped() -> None:
    returns = Returns(allowance=10)
    for k in range(30):  # the need falls to one and comes back while another floor holds two
        _tick(returns, float(k), needed=1 if 5 <= k < 20 else 2, count=2, rate=150.0)
    assert returns.hold(2) == 0.0  # no replica started: nothing to measure
    _tick(returns, 40.0, needed=1, count=1)
    _episode(returns, 4000.0, seconds=10, rate=150.0)  # an hour later: capped
    assert returns.hold(2) == HOLD_S


def test_levels_are_measured_apart_and_bad_settings_are_named() -> None:
    returns = Returns(allowance=10)
    _tick(returns, 0.0, needed=4, count=4)
    _tick(returns, 1.0, needed=2, count=2)
    _tick(returns, 101.0, needed=4, count=4, rate=100.0)  # 3 and 4 come back together
    for k in range(8):
        _tick(returns, 102.0 + k, needed=4, count=4, rate=100.0)
    # the two kept carry 140 x 2 / 4 = 70 a second: 30 beyond them each second
    assert returns.hold(3) == returns.hold(4) == pytest.approx(MARGIN * 101.0)
    assert returns.hold(2) == 0.0
    with pytest.raises(ValueError, match="allowance"):
        Returns(allowance=-1)
    with pytest.raises(ValueError, match="burst_hold_s"):
        Returns(allowance=1, burst_hold_s=float("nan"))


def test_a_bursty_function_holds_a_level_it_reached_until_its_returns_are_measured() -> None:
    bursty, sparse = _embed(), _embed()
    end = _bursty(bursty, size=60)
    _bursty(sparse, size=3)
    assert bursty.returns is not None and bursty.returns.allowance == 10
    for auto in (bursty, sparse):
        assert auto.returns is not None
        auto.returns.decided(end, needed=3, count=3, model_rate=300.0, setup_s=SETUP_S)
    later = end + 120.0
    decision = replace(
        bursty.advisor.decide(later, kpa_wants=0, service=bursty.service(later)), min_scale=0
    )
    assert bursty.pin_for(decision, later) == 3  # its lulls end in bursts: held
    assert sparse.pin_for(decision, later) == 0
    assert bursty.pin_for(decision, end + BURST_HOLD_S + 1.0) == 1  # the onsets' last replica
    assert "no return measured yet" in bursty.status()["returns"]


def test_a_floor_under_the_kpa_holds_no_level_by_its_returns() -> None:
    settings = AdvisorSettings(enabled=True, capacity="floor")
    floor = AdvisorDriver(settings, owns=False)
    owned = AdvisorDriver(settings, owns=True)
    for driver in (floor, owned):
        driver.add(
            0.0,
            "embed",
            slo_ms=110.0,
            percentile=99.0,
            model=LatencyModel.from_prior(20.0, 4.0),
            limit=lambda: 16,
            container_concurrency=1,
            max_scale=0,
        )
    assert floor.functions["embed"].returns is None
    assert owned.functions["embed"].returns is not None
    assert floor.functions["embed"].status()["returns"] == "off"
