"""Rate prediction by least squares over a history window (Swayam §4.2)."""

from __future__ import annotations

import pytest

from slackwise_policies.rate import RatePredictor


def feed(predictor: RatePredictor, rates: list[int], start: int = 0) -> float:
    """Record ``rates[i]`` arrivals spread over second ``start + i``; returns the end time."""
    for i, rate in enumerate(rates):
        for k in range(rate):
            predictor.record(start + i + (k + 0.5) / rate)
    return float(start + len(rates))


def test_nothing_recorded_predicts_zero() -> None:
    predictor = RatePredictor()
    assert predictor.predict(100.0, 10.0) == 0.0
    assert predictor.current(100.0) == 0.0


def test_constant_rate() -> None:
    predictor = RatePredictor()
    end = feed(predictor, [20] * 300)
    assert predictor.predict(end, 0.0) == pytest.approx(20.0)
    assert predictor.predict(end, 100.0) == pytest.approx(20.0)
    assert predictor.current(end) == pytest.approx(20.0)


def test_linear_trend_is_extrapolated() -> None:
    predictor = RatePredictor()
    rates = [10 + i // 10 for i in range(400)]  # +0.1/s per second
    end = feed(predictor, rates)
    # the rate of second s is about 10 + (s - 4.5)/10; at end + 10 s it is about 50.5
    assert predictor.predict(end, 10.0) == pytest.approx(51.0, abs=1.0)
    assert predictor.predict(end, 10.0) > predictor.predict(end, 0.0) > rates[-100]


def test_falling_trend_never_goes_negative() -> None:
    predictor = RatePredictor()
    end = feed(predictor, [max(0, 50 - i // 2) for i in range(120)])
    assert predictor.predict(end, 500.0) == 0.0


def test_step_up_is_followed_as_history_fills() -> None:
    predictor = RatePredictor(history_s=100.0)
    end = feed(predictor, [10] * 200 + [40] * 20)
    early = predictor.predict(end, 0.0)
    assert early > 10.0  # the trend shows at once
    end = feed(predictor, [40] * 200, start=int(end))
    assert predictor.predict(end, 10.0) == pytest.approx(40.0)  # the step left the window


def test_spike_lifts_the_forecast_then_leaves_the_window() -> None:
    predictor = RatePredictor(history_s=60.0)
    end = feed(predictor, [5] * 100 + [100] * 3 + [5] * 20)
    assert predictor.predict(end, 0.0) > 5.0
    end = feed(predictor, [5] * 60, start=int(end))
    assert predictor.predict(end, 30.0) == pytest.approx(5.0)


def test_silence_counts_as_zero_after_the_first_arrival() -> None:
    predictor = RatePredictor(history_s=100.0)
    end = feed(predictor, [30] * 50)
    assert predictor.predict(end + 200.0, 0.0) == 0.0
    assert predictor.current(end + 200.0) == 0.0


def test_little_history_gives_the_mean_rate() -> None:
    predictor = RatePredictor()
    predictor.record(0.2, 5)
    # only the filling bucket: its arrivals over at least one bucket's time
    assert predictor.predict(0.5, 10.0) == pytest.approx(5.0)
    predictor.record(1.5, 3)
    assert predictor.predict(1.9, 10.0) == pytest.approx(5.0)  # one complete bucket, no trend
    assert predictor.predict(2.0, 10.0) == pytest.approx(4.0)  # mean of 5 and 3, no trend
    predictor.record(2.5, 1)
    assert predictor.predict(3.0, 10.0) == pytest.approx(3.0)


def test_window_bounds_memory() -> None:
    predictor = RatePredictor(history_s=50.0)
    feed(predictor, [3] * 1000)
    assert len(predictor._counts) <= 50
    assert predictor.total == 3000


def test_out_of_order_arrivals_join_their_bucket() -> None:
    ordered, shuffled = RatePredictor(), RatePredictor()
    times = [0.5, 1.5, 2.5, 3.5] * 5
    for t in sorted(times):
        ordered.record(t)
    for t in times:
        shuffled.record(t)
    assert shuffled.predict(4.0, 3.0) == pytest.approx(ordered.predict(4.0, 3.0))


def test_current_uses_the_recent_window() -> None:
    short, long = RatePredictor(current_window_s=10.0), RatePredictor(current_window_s=20.0)
    for predictor in (short, long):
        end = feed(predictor, [10] * 50 + [50] * 10)
    assert short.current(end) == pytest.approx(50.0)
    assert long.current(end) == pytest.approx(30.0)
    assert short.current(end + 5.0) == pytest.approx(25.0)  # five silent seconds
    # a shorter window on request (never longer than the configured one)
    assert long.current(end, 10.0) == pytest.approx(50.0)
    assert long.current(end, 15.0) == pytest.approx((5 * 10 + 10 * 50) / 15.0)
    assert short.current(end, 60.0) == pytest.approx(50.0)


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"bucket_s": 0.0}, "bucket_s"),
        ({"history_s": 1.0}, "history_s"),
        ({"current_window_s": -1.0}, "current_window_s"),
        ({"min_fit_buckets": 1}, "min_fit_buckets"),
    ],
)
def test_bad_settings_name_the_field(kwargs: dict[str, float], name: str) -> None:
    with pytest.raises(ValueError, match=name):
        RatePredictor(**kwargs)  # type: ignore[arg-type]


def test_bad_calls_name_the_value() -> None:
    predictor = RatePredictor()
    with pytest.raises(ValueError, match="count"):
        predictor.record(0.0, -1)
    with pytest.raises(ValueError, match="horizon_s"):
        predictor.predict(0.0, -1.0)
