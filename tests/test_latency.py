"""The latency model: online a + b·n fit (GrandSLAM §3.2) and windowed P95 (MLProxy §2.2)."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from slackwise_policies.latency import LatencyModel, LatencyModels
from slackwise_policies.latency_curve import Curve


def feed_linear(
    model: LatencyModel,
    *,
    a: float,
    b: float,
    count: int,
    sizes: tuple[int, ...] = (1, 2, 4, 8, 16, 32),
    noise_ms: float = 0.0,
    start: float = 0.0,
    seed: int = 7,
) -> float:
    """Feed ``count`` warm samples of ``a + b·n`` (plus Gaussian noise); returns the last time."""
    rng = random.Random(seed)
    now = start
    for i in range(count):
        n = sizes[i % len(sizes)]
        y = a + b * n + rng.gauss(0.0, noise_ms)
        now = start + i * 0.01
        model.observe(now, n, y * 0.9, y, cold=False)
    return now


def test_prior_answers_before_any_traffic() -> None:
    model = LatencyModel.from_prior(12.0, 3.0, spread=1.5)
    assert model.estimate_ms(4) == pytest.approx(24.0)
    assert model.p95_ms(4, now=0.0) == pytest.approx(36.0)
    assert (model.a_ms, model.b_ms_per_item) == (12.0, 3.0)


def test_negative_intercept_prior_is_floored() -> None:
    model = LatencyModel.from_prior(-58.69, 24.694, floor_ms=5.0)
    assert model.estimate_ms(1) == 5.0
    assert model.estimate_ms(4) == pytest.approx(-58.69 + 4 * 24.694)


def test_fit_recovers_a_and_b_from_noisy_samples() -> None:
    model = LatencyModel.from_prior(1.0, 0.1, half_life_samples=2000.0)
    feed_linear(model, a=20.0, b=5.0, count=3000, sizes=tuple(range(1, 33)), noise_ms=2.0)
    assert model.a_ms == pytest.approx(20.0, abs=0.5)
    assert model.b_ms_per_item == pytest.approx(5.0, abs=0.05)
    assert model.compute_estimate_ms(10) == pytest.approx(0.9 * 70.0, rel=0.02)


def test_one_batch_size_keeps_the_prior_slope() -> None:
    model = LatencyModel.from_prior(10.0, 2.0)
    for i in range(50):
        model.observe(i * 0.1, 4, 25.0, 30.0, cold=False)
    assert model.b_ms_per_item == pytest.approx(2.0, rel=0.02)
    assert model.estimate_ms(4) == pytest.approx(30.0, rel=0.01)
    assert model.estimate_ms(8) == pytest.approx(38.0, rel=0.02)


def test_forgetting_follows_a_function_that_slows_down() -> None:
    model = LatencyModel.from_prior(10.0, 1.0, half_life_samples=50.0)
    last = feed_linear(model, a=10.0, b=1.0, count=600)
    feed_linear(model, a=30.0, b=3.0, count=600, start=last + 1.0)
    assert model.a_ms == pytest.approx(30.0, abs=0.5)
    assert model.b_ms_per_item == pytest.approx(3.0, abs=0.05)


def test_slope_is_never_negative() -> None:
    model = LatencyModel.from_prior(10.0, 1.0)
    for i in range(100):
        n = 1 + i % 8
        model.observe(i * 0.01, n, 1.0, 50.0 - n, cold=False)
    assert model.b_ms_per_item == 0.0
    assert model.estimate_ms(8) == pytest.approx(model.estimate_ms(1))


def test_cold_samples_change_nothing() -> None:
    model = LatencyModel.from_prior(5.0, 1.0, min_samples=5)
    last = feed_linear(model, a=10.0, b=2.0, count=300, noise_ms=0.5)
    before = [(model.estimate_ms(n), model.p95_ms(n, last)) for n in (1, 3, 8, 32)]
    for i in range(200):
        n = 1 + i % 32
        model.observe(last, n, 10 * (10.0 + 2.0 * n), 10 * (10.0 + 2.0 * n), cold=True)
    after = [(model.estimate_ms(n), model.p95_ms(n, last)) for n in (1, 3, 8, 32)]
    assert after == before
    assert model.cold_samples == 200
    assert model.warm_samples == 300


def test_observed_p95_per_batch_size_and_window_forgetting() -> None:
    model = LatencyModel.from_prior(5.0, 1.0, spread=1.2, window_s=10.0, min_samples=20)
    for i in range(20):
        model.observe(100.0 + i * 0.1, 8, 1.0, float(i + 1), cold=False)
    assert model.samples_at(8, 102.0) == 20
    assert model.p95_ms(8, now=102.0) == 19.0  # nearest rank: ceil(0.95 · 20) = 19th of 1..20
    # The first sample (t = 100.0) leaves the window at t > 110.0: too few samples, so the fit.
    assert model.samples_at(8, 110.05) == 19
    fallback = model.p95_ms(8, now=110.05)
    assert fallback == pytest.approx(model.estimate_ms(8) * model.spread(110.05))
    assert model.samples_at(8, 200.0) == 0


def test_the_mean_per_batch_size_follows_the_window_and_falls_back_to_the_estimate() -> None:
    model = LatencyModel.from_prior(5.0, 1.0, window_s=10.0, min_samples=4, max_samples_per_size=8)
    assert model.mean_ms(8, now=0.0) == model.estimate_ms(8)  # nothing seen: the estimate
    # small and large inputs in batches of 8: 20 ms and 80 ms, one large in four
    for i in range(12):
        model.observe(100.0 + i * 0.1, 8, 1.0, 80.0 if i % 4 == 3 else 20.0, cold=False)
    # the window keeps the last 8 (two large): mean 35, where the median says 20
    assert model.mean_ms(8, now=101.2) == pytest.approx((6 * 20.0 + 2 * 80.0) / 8)
    assert model.mean_ms(8, now=101.2) < model.p95_ms(8, now=101.2)
    assert model.mean_ms(4, now=101.2) == model.estimate_ms(4)  # a size not seen
    assert model.mean_ms(8, now=200.0) == model.estimate_ms(8)  # the window has passed
    with pytest.raises(ValueError, match="batch size"):
        model.mean_ms(0, now=0.0)


def test_thin_sizes_use_the_fit_times_the_learned_spread() -> None:
    model = LatencyModel.from_prior(10.0, 2.0, spread=3.0, min_samples=10, window_s=30.0)
    assert model.spread(0.0) == 3.0  # the prior's until the pool holds min_samples
    for i in range(100):
        # Exactly linear in n, ×1.1 on every fifth sample: the fit's ratio P95 is about 1.1.
        n = 1 + i % 4
        y = (10.0 + 2.0 * n) * (1.1 if i % 5 == 0 else 1.0)
        model.observe(i * 0.01, n, y, y, cold=False)
    spread = model.spread(1.0)
    assert 1.0 <= spread < 1.15
    assert model.p95_ms(16, now=1.0) == pytest.approx(model.estimate_ms(16) * spread)
    assert model.spread(100.0) == 3.0  # the pool has left the window


def test_window_memory_is_bounded() -> None:
    model = LatencyModel.from_prior(1.0, 1.0, max_samples_per_size=32, min_samples=8)
    for i in range(1000):
        model.observe(0.0, 2, 3.0, 3.0 + i, cold=False)
    assert model.samples_at(2, 0.0) == 32
    assert model.p95_ms(2, 0.0) >= 3.0 + 1000 - 32  # only the newest samples remain


@pytest.mark.parametrize(
    ("batch_size", "compute_ms", "round_trip_ms"),
    [(0, 1.0, 1.0), (1, -1.0, 1.0), (1, 1.0, float("nan")), (1, 1.0, float("inf"))],
)
def test_bad_samples_are_refused(batch_size: int, compute_ms: float, round_trip_ms: float) -> None:
    model = LatencyModel.from_prior(1.0, 1.0)
    with pytest.raises(ValueError, match="must be"):
        model.observe(0.0, batch_size, compute_ms, round_trip_ms, cold=False)


def test_bad_settings_name_the_key() -> None:
    with pytest.raises(ValueError, match="spread"):
        LatencyModel.from_prior(1.0, 1.0, spread=0.5)
    with pytest.raises(ValueError, match="window_s"):
        LatencyModel.from_prior(1.0, 1.0, window_s=0.0)
    with pytest.raises(ValueError, match="max_samples_per_size"):
        LatencyModel.from_prior(1.0, 1.0, min_samples=10, max_samples_per_size=5)
    with pytest.raises(ValueError, match="batch size"):
        LatencyModel.from_prior(1.0, 1.0).p95_ms(0, 0.0)


def test_one_model_per_size_class() -> None:
    made: list[str] = []

    def factory(size_class: str) -> LatencyModel:
        made.append(size_class)
        return LatencyModel.from_prior(10.0 if size_class == "small" else 40.0, 1.0)

    models = LatencyModels(factory)
    assert models["small"] is models["small"]
    assert models["large"].estimate_ms(1) == pytest.approx(41.0)
    assert made == ["small", "large"]
    assert "small" in models and "medium" not in models
    assert sorted(models) == ["large", "small"] and len(models) == 2


samples = st.lists(
    st.tuples(
        st.integers(min_value=1, max_value=64),
        st.floats(min_value=0.0, max_value=1e4, allow_nan=False),
        st.booleans(),
    ),
    max_size=60,
)


def test_the_curve_follows_a_super_linear_function_where_the_line_cannot() -> None:
    """face_embed-like: 10 ms alone, 30 ms at 8, 200 ms at 32 (super-linear). The line through
    those sizes misprices both ends; the curve is the measured median at each size seen,
    interpolated between them and monotone."""
    truth = {1: 10.0, 8: 30.0, 16: 70.0, 32: 200.0}
    line = LatencyModel.from_prior(5.0, 1.0, min_samples=5)
    curve = LatencyModel.from_prior(5.0, 1.0, min_samples=5, curve=True)
    rng = random.Random(3)
    for i in range(400):
        n = rng.choice(list(truth))
        y = truth[n] * rng.uniform(0.97, 1.03)
        for model in (line, curve):
            model.observe(i * 0.01, n, y, y, cold=False)
    for n, expected in truth.items():
        assert curve.estimate_ms(n) == pytest.approx(expected, rel=0.04)
    assert curve.estimate_ms(24) == pytest.approx((70 + 200) / 2, rel=0.05)  # interpolated
    assert curve.estimate_ms(40) > curve.estimate_ms(32)  # past the sizes seen: the slope
    line_error = max(abs(line.estimate_ms(n) / t - 1) for n, t in truth.items())
    curve_error = max(abs(curve.estimate_ms(n) / t - 1) for n, t in truth.items())
    assert curve_error < 0.04 < 0.3 < line_error


def test_the_curve_is_the_line_until_a_size_has_enough_samples() -> None:
    model = LatencyModel.from_prior(5.0, 1.0, min_samples=5, curve=True)
    for i in range(4):
        model.observe(i * 0.01, 8, 100.0, 100.0, cold=False)
    a, b = model.a_ms, model.b_ms_per_item
    assert model.estimate_ms(8) == pytest.approx(a + 8 * b)
    model.observe(0.05, 8, 100.0, 100.0, cold=False)
    assert model.estimate_ms(8) == pytest.approx(100.0)


@pytest.mark.parametrize("curve", [False, True], ids=["line", "curve"])
@given(observations=samples)
def test_estimates_are_monotone_and_floored(
    observations: list[tuple[int, float, bool]], curve: bool
) -> None:
    model = LatencyModel.from_prior(-5.0, 2.0, min_samples=3, floor_ms=0.5, curve=curve)
    for i, (n, y, cold) in enumerate(observations):
        model.observe(i * 0.5, n, y, y, cold=cold)
    now = len(observations) * 0.5
    estimates = [model.estimate_ms(n) for n in range(1, 65)]
    assert all(e >= 0.5 for e in estimates)
    assert estimates == sorted(estimates)
    assert all(model.p95_ms(n, now) > 0.0 for n in range(1, 65))
    assert model.cold_samples + model.warm_samples == len(observations)


# the profile's medians by batch size (qa on this CPU: cheapest per instance at 8, dearer past it)
PROFILE = {1: 18.5, 2: 24.9, 4: 26.6, 8: 38.6, 16: 126.9, 32: 279.0, 64: 550.0}


def test_a_profiled_curve_prices_the_sizes_not_measured_yet_as_the_profile_says() -> None:
    """Having measured only small batches, a model with the profile's curve prices a batch of
    16 at the profile's 127 ms, scaled by how the measured sizes compared with the profile (here
    twice as slow); without it the sizes seen are continued by the line's slope, and the batch
    the profile says is dearest per instance looks the cheapest."""
    profiled = LatencyModel.from_prior(5.0, 1.0, min_samples=5, curve=True, prior_curve=PROFILE)
    plain = LatencyModel.from_prior(5.0, 1.0, min_samples=5, curve=True)
    assert profiled.estimate_ms(16) == pytest.approx(126.9)  # before any sample: the profile
    assert profiled.largest_measured_batch() == 64
    assert plain.largest_measured_batch() == 0
    for i in range(60):
        for n in (1, 2, 4):
            for model in (profiled, plain):
                model.observe(i * 0.1, n, 2 * PROFILE[n], 2 * PROFILE[n], cold=False)
    assert profiled.estimate_ms(4) == pytest.approx(2 * 26.6)  # measured wins where measured
    assert profiled.estimate_ms(16) == pytest.approx(2 * 126.9)
    assert profiled.estimate_ms(12) == pytest.approx(2 * (38.6 + 126.9) / 2)
    per_instance = [profiled.estimate_ms(n) / n for n in range(1, 65)]
    assert per_instance.index(min(per_instance)) + 1 == 8
    assert plain.estimate_ms(16) / 16 < plain.estimate_ms(4) / 4  # the line's slope: no bend
    assert plain.largest_measured_batch() == 4


def test_a_profiled_curve_rejects_a_bad_point() -> None:
    with pytest.raises(ValueError, match="prior_curve"):
        LatencyModel.from_prior(5.0, 1.0, curve=True, prior_curve={0: 3.0})
    with pytest.raises(ValueError, match="prior_curve"):
        LatencyModel.from_prior(5.0, 1.0, curve=True, prior_curve={4: float("nan")})


@given(
    points=st.lists(
        st.tuples(st.integers(1, 80), st.floats(0.01, 100.0)), min_size=1, max_size=8,
        unique_by=lambda p: p[0],
    ),
    slope=st.floats(0.0, 20.0),
    floor=st.floats(0.0, 50.0),
)  # fmt: skip
def test_the_curve_is_the_running_maximum_of_its_points_interpolation(
    points: list[tuple[int, float]], slope: float, floor: float
) -> None:
    """At every size, max(floor, the points' interpolation, the size before) (the knots are
    only how it is kept)."""
    points.sort()
    curve = Curve.through(points, slope=slope, floor=floor)
    first, v_first = points[0]
    last = 0.0
    for n in range(1, points[-1][0] + 1):
        if n < first:
            raw = v_first - slope * (first - n)
        else:
            i = max(k for k, (m, _) in enumerate(points) if m <= n)
            (n0, v0), (n1, v1) = points[i], points[min(i + 1, len(points) - 1)]
            raw = v0 if n1 == n0 else v0 + (v1 - v0) * (n - n0) / (n1 - n0)
        last = max(floor, raw, last)
        assert curve.at(n) == pytest.approx(last, rel=1e-9, abs=1e-9)


def test_the_tail_the_door_prices_at_is_the_quantile_it_names() -> None:
    """``p99_ms`` reads ``tail_quantile`` of the measured round trips: one batch in ten stalled
    by 250 ms sets the P99, not the P90 (what benchmarks/door_flood.py sweeps)."""
    model = LatencyModel(a_ms=10.0, b_ms_per_item=1.0)
    for i in range(200):
        model.observe(i * 0.01, 4, 14.0, 264.0 if i % 10 == 0 else 14.0, cold=False)
    assert model.p99_ms(4, 2.0) == pytest.approx(264.0)
    model.tail_quantile = 0.85
    assert model.p99_ms(4, 2.0) == pytest.approx(14.0)


def test_a_small_batch_is_not_priced_slower_at_its_tail_than_a_larger_one_measured() -> None:
    """Batches of 13 measured at 80-90 ms, and batches of one and two whose few slow samples
    (run beside another replica's batch on a shared core and behind a stall, 4.5 times the
    alone line) read as tails of 109-132 ms: the P99 of the small sizes is capped by the larger
    one's."""
    model = LatencyModel.from_prior(19.0, 5.2, curve=True)
    now = 0.0
    for i in range(200):
        now = i * 0.1
        model.observe(now, 13, 80.0, 80.0 + (i % 10), cold=False)
        if i % 10 == 0:  # 20 of each small size, a third of them slow
            for n in (1, 2):
                slow = i % 30 == 0
                ms = (19.0 + 5.2 * n) * (4.5 if slow else 1.0)
                model.observe(now, n, ms, ms, cold=False)
    assert model.p99_ms(13, now) == pytest.approx(89.0)
    for n in (1, 2, 4, 8):
        assert model.p99_ms(n, now) <= model.p99_ms(13, now)
    assert model.p99_ms(1, now) == pytest.approx(89.0)  # its own window says 109: capped
    assert model.p99_ms(20, now) > model.p99_ms(13, now)  # above the sizes measured: no cap
    # once the slow ones leave the window, each size reads its own tail again
    later = now + 31.0
    for i in range(20):
        for n in (1, 2, 13):
            model.observe(later + i * 0.01, n, 19.0 + 5.2 * n, 19.0 + 5.2 * n, cold=False)
    assert model.p99_ms(1, later + 0.2) == pytest.approx(24.2)
