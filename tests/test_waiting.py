"""Waiting for company only when it pays: the rule in slackwise_policies.batching and its inputs."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slackwise_policies.batching import BatchDecision, decide
from slackwise_policies.batching_settings import BatchingSettings
from slackwise_policies.queue import QueuedRequest
from slackwise_policies.waiting import FIRST_SPAN, PathMargin, RecentRate
from tests.test_batching import Linear


def lone(deadline: float = 0.050) -> list[QueuedRequest]:
    return [QueuedRequest(deadline=deadline, arrival=0.0)]


def test_a_lone_request_at_a_low_rate_leaves_at_once() -> None:
    # 10 req/s, 2.5 ms a request: one slot is busy 2.5 % of the time; waiting buys nothing
    d = decide(0.0, lone(), Linear(2.0, 0.5), limit=64, arrival_rate=10.0, slots=1)
    assert d == BatchDecision(take=1, instances=1, wake_at=None, reason="no_gain")
    # without the rate it waits until its dispatch timeout, as MLProxy does
    mlproxy = decide(0.0, lone(), Linear(2.0, 0.5), limit=64)
    assert mlproxy.take == 0 and mlproxy.wake_at == pytest.approx(0.050 - 0.003)


def test_a_busy_function_waits_only_as_long_as_the_batch_it_needs_takes_to_arrive() -> None:
    # 1000 req/s on one slot: batches of n keep it busy (2 + 0.5 n) / n of the time, <= 0.7 from
    # n = 10 on; nine more requests are expected in 9 ms
    d = decide(0.0, lone(), Linear(2.0, 0.5), limit=64, arrival_rate=1000.0, slots=1)
    assert d.take == 0 and d.reason == "wait"
    assert d.wake_at == pytest.approx(0.009)
    ten = [QueuedRequest(deadline=0.050, arrival=i / 1000) for i in range(10)]
    d = decide(0.010, ten, Linear(2.0, 0.5), limit=64, arrival_rate=1000.0, slots=1)
    assert d == BatchDecision(take=10, instances=10, wake_at=None, reason="no_gain")


def test_more_slots_need_smaller_batches() -> None:
    # four slots share the load: batches of 1 keep them busy 62.5 %, under 0.7
    d = decide(0.0, lone(), Linear(2.0, 0.5), limit=64, arrival_rate=1000.0, slots=4)
    assert d.reason == "no_gain"


def test_no_wait_when_not_one_more_arrival_is_expected_before_the_timeout() -> None:
    # busy enough to want company, but the slack left holds 0.5 expected arrivals
    q = lone(deadline=0.0035)
    d = decide(0.0, q, Linear(2.0, 0.5), limit=64, arrival_rate=1000.0 / 6, slots=1,
               settings=BatchingSettings(wait_utilization=0.1))  # fmt: skip
    assert d.reason == "alone"


def test_the_path_margin_comes_off_the_dispatch_timeout() -> None:
    d = decide(0.0, lone(), Linear(2.0, 0.5), limit=64, margin_s=0.004)
    assert d.wake_at == pytest.approx(0.050 - 0.003 - 0.004)
    late = decide(0.046, lone(), Linear(2.0, 0.5), limit=64, margin_s=0.004)
    assert late.reason == "timeout"


@settings(max_examples=400, deadline=None)  # CPU-bound: a busy CI box is slow, not wrong
@given(
    rate=st.floats(min_value=0.0, max_value=5000.0),
    slots=st.integers(min_value=1, max_value=8),
    n=st.integers(min_value=1, max_value=20),
    now=st.floats(min_value=0.0, max_value=0.04),
)
def test_waiting_never_passes_the_dispatch_timeout(
    rate: float, slots: int, n: int, now: float
) -> None:
    queue = [QueuedRequest(deadline=0.050, arrival=0.0) for _ in range(n)]
    model = Linear(2.0, 0.5)
    d = decide(now, queue, model, limit=64, arrival_rate=rate, slots=slots, margin_s=0.001)
    latest = 0.050 - model.p95_ms(n + 1, now) / 1000.0 - 0.001
    if d.take == 0:
        assert d.wake_at is not None and now < d.wake_at <= latest + 1e-12
    else:
        assert 0 < d.instances <= n
        if d.reason in ("no_gain", "alone"):
            assert d.instances == n  # sent at once, with everything queued


def test_recent_rate_counts_instances_in_its_window() -> None:
    rate = RecentRate(window_s=1.0)
    assert rate.rate(0.0) == 0.0
    for i in range(10):
        rate.record(i * 0.1, size=2)
    assert rate.rate(0.95) == pytest.approx(20.0)
    assert rate.rate(0.95, since_first=True) == pytest.approx(20.0 / 0.95)  # since 0.0
    assert rate.rate(1.55) == pytest.approx(8.0)  # arrivals at 0.6 .. 0.9 remain
    assert rate.rate(5.0) == 0.0
    with pytest.raises(ValueError, match="window_s"):
        RecentRate(window_s=0)


def test_recent_rate_reads_a_flood_at_its_rate_from_its_first_arrivals() -> None:
    """Read ``since_first`` (the batching's read), within the first window after the first
    arrival the rate is over the time since it (at least FIRST_SPAN of the window), not over a
    window that has not passed: a flood of 20,000 a second that starts with the process reads
    as such at 50 ms, where it read as 1,000."""
    rate = RecentRate(window_s=1.0)
    for i in range(1000):
        rate.record(i / 20_000.0)
    assert rate.rate(0.05, since_first=True) == pytest.approx(20_000.0, rel=0.01)
    assert rate.rate(0.05) == pytest.approx(1_000.0)  # over the whole window, as the door reads
    # then nothing came: it falls as it should
    assert rate.rate(0.5, since_first=True) == pytest.approx(2_000.0)
    assert rate.rate(2.0, since_first=True) == 0.0
    lone = RecentRate(window_s=1.0)
    lone.record(3.0)  # one arrival at once reads over FIRST_SPAN of the window, not over nothing
    assert lone.rate(3.0, since_first=True) == pytest.approx(1.0 / FIRST_SPAN)


def test_path_margin_is_a_recent_p95_above_its_floor() -> None:
    margin = PathMargin(floor_ms=1.0, maxlen=100)
    assert margin.margin_ms() == 1.0
    for i in range(100):
        margin.observe(float(i % 10))  # 0..9 ms
    assert margin.margin_ms() == pytest.approx(1.0 + 9.0)
    for _ in range(100):
        margin.observe(0.5)  # the old samples age out
    assert margin.margin_ms() == pytest.approx(1.5)


def test_no_wait_where_no_batch_reaches_the_target_and_the_slots_keep_up() -> None:
    """An image model on the CPU: a batch costs what its members cost alone (10 ms each, plus
    1 ms of round trip). At 85 req/s one slot is busy 93.5 % of the time with batches of one and
    never under 85 % with any: no size reaches 0.7, the slot keeps up anyway, so waiting would
    only add latency (only a replica reaches the target). Before, it waited for the most the
    deadline allowed: up to 40 ms here."""
    flat = Linear(1.0, 10.0)
    d = decide(0.0, lone(), flat, limit=8, arrival_rate=85.0, slots=1)
    assert d == BatchDecision(take=1, instances=1, wake_at=None, reason="no_gain")
    # the same model past what one slot can do (110 req/s: 121 %): a batch of 8 relieves it by
    # 9 % of its busy time, under MIN_RELIEF: still no wait
    d = decide(0.0, lone(deadline=0.2), flat, limit=8, arrival_rate=110.0, slots=1)
    assert d.reason == "no_gain"


def test_an_overloaded_slot_waits_for_the_batch_that_relieves_it_most() -> None:
    """A model that batching speeds up (20 ms + 2 ms a member) at 120 req/s on one slot: busy
    264 % with batches of one, 84 % with batches of 4 (the limit), never 0.7 within it: it
    waits for the 4 (deadlines permitting). At 40 req/s (88 % with batches of one, 48 % with
    two) it waits for the size that reaches 0.7: 2."""
    model = Linear(20.0, 2.0)
    d = decide(0.0, lone(deadline=0.5), model, limit=4, arrival_rate=120.0, slots=1)
    assert d.take == 0 and d.reason == "wait"
    assert d.wake_at == pytest.approx(3 / 120.0)  # three more members, at 120 a second
    d = decide(0.0, lone(deadline=0.5), model, limit=4, arrival_rate=40.0, slots=1)
    assert d.take == 0 and d.wake_at == pytest.approx(1 / 40.0)
