"""The burst threshold from evidence (``advisor.burst_u: auto``): U follows how far the seconds
ran above what the count serving them was sized for (virtual clock)."""

from __future__ import annotations

import random

import pytest

from adapter.policies.advisor import Advisor
from adapter.policies.advisor_config import BURST_U, AdvisorConfig
from adapter.policies.advisor_settings import AdvisorSettings
from adapter.policies.burst import BurstThreshold
from adapter.policies.percentile import ServiceModel
from adapter.policies.settings_error import SettingsError

SERVICE = ServiceModel(a_ms=5.0, distribution="deterministic")


def _run(advisor: Advisor, per_second: list[int]) -> list[float]:
    """Each second's arrivals spread over it, then a decision; the U of each decision."""
    us = []
    for s, count in enumerate(per_second):
        for k in range(count):
            advisor.record(s + (k + 0.5) / count)
        us.append(advisor.decide(s + 1.0, kpa_wants=0).burst_u)
    return us


def _auto(percentile: float = 99.0) -> Advisor:
    config = AdvisorConfig(slo_ms=100.0, percentile=percentile, burst_u="auto", default_setup_s=5.0)
    return Advisor(config, SERVICE, start=0.0)


def test_a_steady_rate_measures_u_near_one_and_a_swinging_one_measures_its_swing() -> None:
    rng = random.Random(1)
    steady = _run(_auto(), [200] * 600)
    # every other second at three times the rate of the rest: the sizing (the mean and the
    # forecast) sits at twice the low seconds, so the high ones run 1.5 times above it
    swinging = _run(_auto(), [300 if s % 2 else 100 for s in range(600)])
    noisy = _run(_auto(), [max(0, round(rng.gauss(200, 40))) for _ in range(600)])
    assert steady[:30] == [BURST_U] * 30  # too few seconds judged: Swayam's U
    assert steady[-1] == pytest.approx(1.0, abs=0.02)
    assert swinging[-1] == pytest.approx(1.5, abs=0.1)
    # Poisson-like noise of 20 %: the 99th percentile second is about 1.5 times the sizing
    assert 1.3 < noisy[-1] < 1.7


def test_u_follows_the_slo_percentile_and_forgets_old_swings() -> None:
    swings = [300 if s % 10 == 0 else 200 for s in range(600)]
    p99 = _run(_auto(99.0), swings)[-1]
    p50 = _run(_auto(50.0), swings)[-1]
    assert p99 > 1.3 and p50 == pytest.approx(1.0, abs=0.05)
    # a burst that ended more than the history window ago no longer counts
    calm_after = _run(_auto(), [600 if 100 <= s < 140 else 200 for s in range(800)])
    assert max(calm_after[140:400]) > 1.5
    assert calm_after[-1] == pytest.approx(1.0, abs=0.02)


def test_a_second_is_judged_against_the_sizing_one_setup_time_before_it() -> None:
    burst = BurstThreshold(percentile=99.0, history_s=500.0, start=2.0, min_samples=1)
    burst.sized(0.0, 100.0)
    burst.sized(8.0, 400.0)  # too late for the second at 10 with a 5 s setup
    assert burst.judge([(10.0, 200.0)], setup_s=5.0) == pytest.approx(2.0)
    assert burst.judge([(10.0, 900.0)], setup_s=5.0) == pytest.approx(2.0)  # judged once
    burst.sized(14.0, 400.0)
    assert burst.judge([(20.0, 200.0)], setup_s=5.0) == pytest.approx(2.0)  # the larger of 2, 0.5
    assert burst.judge([], setup_s=5.0) == pytest.approx(2.0)


def test_u_stays_within_one_and_its_cap() -> None:
    burst = BurstThreshold(percentile=99.0, history_s=500.0, start=2.0, min_samples=1)
    burst.sized(0.0, 100.0)
    assert burst.judge([(10.0, 10.0)], setup_s=1.0) == 1.0
    assert burst.judge([(11.0, 100_000.0)], setup_s=1.0) == 3.0


def test_the_setting_takes_auto_and_numbers_and_names_a_bad_value() -> None:
    assert (
        AdvisorSettings(burst_u="auto")
        .config_for(slo_ms=100.0, percentile=99.0, max_replicas=10)
        .burst_u
        == "auto"
    )
    assert Advisor(AdvisorConfig(slo_ms=100.0, burst_u=1.5), SERVICE).burst is None
    with pytest.raises(SettingsError, match="burst_u"):
        AdvisorConfig(slo_ms=100.0, burst_u=0.5)
    with pytest.raises(SettingsError, match="burst_u"):
        AdvisorConfig(slo_ms=100.0, burst_u="sometimes")  # type: ignore[arg-type]
