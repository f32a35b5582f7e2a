"""Hybrid keep-alive from the idle-gap histogram (Shahrad et al., ATC'20), with a break-even."""

from __future__ import annotations

import random

import pytest

from slackwise_policies.keepalive import KeepAlive, KeepAliveConfig


def test_too_few_gaps_fall_back_to_the_fixed_grace() -> None:
    policy = KeepAlive(KeepAliveConfig(min_samples=10, fallback_keep_alive_s=90.0))
    for _ in range(5):
        policy.observe_gap(30.0)
    window = policy.window()
    assert window.source == "fallback" and "fewer than 10" in window.reason
    assert policy.keep_alive_s(0.0) == 90.0
    assert policy.should_keep_warm(100.0, idle_since=20.0)
    assert not policy.should_keep_warm(111.0, idle_since=20.0)


def test_regular_gaps_give_prewarm_and_keep_alive_windows() -> None:
    policy = KeepAlive(KeepAliveConfig(setup_s=10.0))
    rng = random.Random(3)
    for _ in range(200):
        policy.observe_gap(rng.uniform(118.0, 122.0))  # invoked about every two minutes
    window = policy.window()
    assert window.source == "histogram"
    assert window.prewarm_s == pytest.approx(118.0 * 0.9, abs=1.0)
    assert window.keep_until_s == pytest.approx(122.0 * 1.1, abs=1.2)
    idle_since = 1000.0
    assert not policy.should_keep_warm(idle_since + 30.0, idle_since)  # released in between
    assert policy.should_keep_warm(idle_since + window.prewarm_s - 9.0, idle_since)  # pre-warm
    assert policy.should_keep_warm(idle_since + 121.0, idle_since)
    assert not policy.should_keep_warm(idle_since + 140.0, idle_since)


def test_a_flat_histogram_is_not_representative() -> None:
    policy = KeepAlive(KeepAliveConfig(range_s=100.0, min_cv=2.0))
    for i in range(1000):
        policy.observe_gap(float(i % 100) + 0.5)  # every bin equally likely
    window = policy.window()
    assert window.source == "fallback" and "flat" in window.reason


def test_gaps_beyond_the_range_fall_back() -> None:
    policy = KeepAlive(KeepAliveConfig(range_s=600.0, max_out_of_bounds=0.5))
    for i in range(30):
        policy.observe_gap(5.0 if i % 3 == 0 else 5000.0)
    window = policy.window()
    assert window.source == "fallback" and "beyond" in window.reason


def test_break_even_caps_keep_alive_when_cold_starts_are_cheap() -> None:
    cheap = KeepAlive(KeepAliveConfig(cold_start_cost_s=5.0))
    dear = KeepAlive(KeepAliveConfig(cold_start_cost_s=10_000.0))
    for policy in (cheap, dear):
        for i in range(100):
            policy.observe_gap(2.0 if i % 2 else 300.0)  # short pauses and long breaks
    # cheap: a replica idle for 300 s costs far more than one 5 s cold start
    assert cheap.window().keep_until_s < 10.0
    assert cheap.window().break_even_s is not None
    # dear: keep it through the long breaks too
    assert dear.window().keep_until_s >= 300.0


def test_memory_is_bounded_and_the_histogram_follows_drift() -> None:
    policy = KeepAlive(KeepAliveConfig(max_samples=100))
    for _ in range(500):
        policy.observe_gap(10.5)
    for _ in range(100):
        policy.observe_gap(60.5)
    assert policy.samples == 100
    assert policy.window().prewarm_s == pytest.approx(60.0 * 0.9)


def test_not_idle_yet_keeps_warm() -> None:
    policy = KeepAlive()
    assert policy.should_keep_warm(5.0, idle_since=10.0)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("bin_s", 0.0),
        ("range_s", 0.5),
        ("tail_percentile", 1.0),
        ("margin", 1.5),
        ("min_samples", 0),
        ("cold_start_cost_s", -1.0),
        ("fallback_keep_alive_s", float("nan")),
    ],
)
def test_bad_config_names_field_and_value(field: str, value: float) -> None:
    with pytest.raises(ValueError, match=field):
        KeepAliveConfig(**{field: value})  # type: ignore[arg-type]


def test_bad_gap_is_refused() -> None:
    with pytest.raises(ValueError, match="gap_s"):
        KeepAlive().observe_gap(-1.0)
