"""The batching decision: GrandSLAM Algorithm 1 prefixes and MLProxy's dispatch timeout."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from slackwise_policies.batching import BatchDecision, decide
from slackwise_policies.batching_settings import BatchingSettings
from slackwise_policies.latency import LatencyModel
from slackwise_policies.queue import QueuedRequest


@dataclass(frozen=True)
class Linear:
    """An expected time of ``a + b·n`` milliseconds and a P95 ``spread`` times that."""

    a_ms: float
    b_ms: float
    spread: float = 1.0

    def p95_ms(self, n: int, now: float) -> float:
        return (self.a_ms + self.b_ms * n) * self.spread

    def p99_ms(self, n: int, now: float) -> float:
        return (self.a_ms + self.b_ms * n) * self.spread

    def estimate_ms(self, n: int) -> float:
        return self.a_ms + self.b_ms * n


def waiting_at_most(max_wait_s: float | None) -> BatchingSettings:
    """The default batching settings with ``max_wait_s`` (given in seconds)."""
    return BatchingSettings(max_wait_ms=None if max_wait_s is None else max_wait_s * 1000.0)


def item(deadline: float, arrival: float = 0.0, size: int = 1) -> QueuedRequest:
    return QueuedRequest(deadline=deadline, arrival=arrival, size=size)


def test_empty_queue_waits_for_arrivals() -> None:
    assert decide(5.0, [], Linear(1, 1), limit=4) == BatchDecision(0, 0, None, "empty")


def test_largest_prefix_that_meets_every_deadline() -> None:
    # P95(n) = 10 + 10·n ms: 20, 30, 40, 50 ms for 1..4 requests, dispatched at t = 0.
    queue = [item(0.045), item(0.060), item(0.080), item(1.0)]
    decision = decide(0.0, queue, Linear(10, 10), limit=8)
    # Four would finish at 50 ms, past the head's 45 ms: three go, the batch is closed.
    assert decision == BatchDecision(take=3, instances=3, wake_at=None, reason="closed")


def test_behind_a_door_the_prefix_is_judged_by_the_tail() -> None:
    """Expected 10 + 10·n ms, a P99 1.3 times that: three requests would end at 40 ms by the
    mean, just in time for the head (45 ms), and at 52 ms by the tail. Behind the door
    (``tail_membership``) the batch is cut at what the tail brings in (two: 39 ms)."""
    queue = [item(0.045), item(1.0), item(1.0), item(1.0)]
    model = Linear(10, 10, spread=1.3)
    assert decide(0.0, queue, model, limit=3).take == 3
    decision = decide(0.0, queue, model, limit=3, tail_membership=True)
    assert (decision.take, decision.reason) == (2, "closed")


def test_a_member_with_a_tight_deadline_stops_the_walk() -> None:
    # Not deadline-ordered on purpose: the second member's deadline is the binding one.
    queue = [item(1.0), item(0.025), item(1.0)]
    decision = decide(0.0, queue, Linear(10, 10), limit=8)
    assert (decision.take, decision.reason) == (1, "closed")


def test_full_when_the_next_request_would_exceed_the_limit() -> None:
    queue = [item(1.0, size=2), item(1.0, size=1), item(1.0, size=3), item(1.0)]
    decision = decide(0.0, queue, Linear(1, 1), limit=4)
    assert decision == BatchDecision(take=2, instances=3, wake_at=None, reason="full")
    exact = decide(0.0, [*queue[:2], item(1.0)], Linear(1, 1), limit=4)
    assert exact == BatchDecision(take=3, instances=4, wake_at=None, reason="full")


def test_oversized_request_goes_alone() -> None:
    queue = [item(1.0, size=10), item(1.0)]
    decision = decide(0.0, queue, Linear(1, 1), limit=4)
    assert decision == BatchDecision(take=1, instances=10, wake_at=None, reason="oversized")


def test_late_head_goes_alone_and_does_not_drag_others() -> None:
    queue = [item(0.015), item(0.5), item(0.5)]  # alone it needs 20 ms: already late
    decision = decide(0.0, queue, Linear(10, 10), limit=8)
    assert decision == BatchDecision(take=1, instances=1, wake_at=None, reason="late")
    past = decide(2.0, [item(1.0), item(9.0)], Linear(10, 10), limit=8)
    assert (past.take, past.reason) == (1, "late")


def test_hopeless_requests_ride_along_without_holding_the_batch_back() -> None:
    # at t=2: the head can make it (due 2.5); the next is hopeless (due 1.0); the third can too
    queue = [item(2.5), item(1.0), item(2.6)]
    decision = decide(2.0, queue, Linear(10, 10), limit=8)
    assert decision.take == 0 and decision.reason == "wait"  # all three fit; wait for more
    full = decide(2.0, queue, Linear(10, 10), limit=3)
    assert full == BatchDecision(take=3, instances=3, wake_at=None, reason="full")


def test_max_wait_caps_the_wait_for_company() -> None:
    lone = [item(1.0, arrival=0.0)]  # SLO 1 s: MLProxy's rule would wait until 1.0 - P95(2)
    assert decide(0.0, lone, Linear(10, 10), limit=8).wake_at == pytest.approx(0.97)
    capped = decide(0.0, lone, Linear(10, 10), limit=8, settings=waiting_at_most(0.005))
    assert (capped.take, capped.wake_at) == (0, 0.005)
    due = decide(0.005, lone, Linear(10, 10), limit=8, settings=waiting_at_most(0.005))
    assert due == BatchDecision(take=1, instances=1, wake_at=None, reason="max_wait")
    assert not due.timeout_dispatch  # not a sign that the limit is too big
    eager = decide(0.0, lone, Linear(10, 10), limit=8, settings=waiting_at_most(0.0))
    assert eager.reason == "max_wait"


def test_late_requests_leave_together_up_to_the_limit() -> None:
    # after a cold start: five requests already past their deadlines, one still on time
    queue = [item(1.0), item(1.1), item(1.2), item(1.3), item(1.4), item(9.0)]
    decision = decide(2.0, queue, Linear(10, 10), limit=4)
    assert decision == BatchDecision(take=4, instances=4, wake_at=None, reason="late")
    rest = decide(2.0, queue[4:], Linear(10, 10), limit=4)
    assert (rest.take, rest.reason) == (1, "late")
    wide = decide(2.0, queue, Linear(10, 10), limit=2, late_limit=8)
    assert wide == BatchDecision(take=5, instances=5, wake_at=None, reason="late")


def test_mlproxy_dispatch_timeout_hand_worked() -> None:
    """SLO 100 ms; P95(n) = 10 + 10·n ms; FIFO; the head arrived at t = 10.000 s.

    At t = 10.020 with one request (N_q = 1): DTO = 100 − P95(2) = 100 − 30 = 70 ms,
    FRT = 20 ms, TO = DTO − FRT = 50 ms, so wake at 10.070.
    A second request arrives at 10.030 (N_q = 2): DTO = 100 − P95(3) = 60 ms, FRT = 30 ms,
    TO = 30 ms, so wake at 10.060. At 10.060 TO = 0: dispatch both, on timeout.
    """
    model = Linear(10, 10)
    slo_s = 0.100
    first = item(10.0 + slo_s, arrival=10.0)
    one = decide(10.020, [first], model, limit=8, deadline_aware=False)
    assert one.take == 0 and one.reason == "wait"
    assert one.wake_at == pytest.approx(10.020 + 0.050)

    second = item(10.030 + slo_s, arrival=10.030)
    two = decide(10.030, [first, second], model, limit=8, deadline_aware=False)
    assert two.wake_at == pytest.approx(10.030 + 0.030)

    due = decide(10.060, [first, second], model, limit=8, deadline_aware=False)
    assert due == BatchDecision(take=2, instances=2, wake_at=None, reason="timeout")
    assert due.timeout_dispatch


def test_deadline_aware_waits_by_the_same_rule() -> None:
    queue = [item(10.1, arrival=10.0), item(10.2, arrival=10.01)]
    decision = decide(10.02, queue, Linear(10, 10), limit=8)
    assert decision.reason == "wait"
    assert decision.wake_at == pytest.approx(10.1 - 0.040)  # head deadline − P95(2 + 1)


def test_fifo_baseline_ignores_member_deadlines() -> None:
    queue = [item(0.015), item(0.5), item(0.5)]
    fifo = decide(0.0, queue, Linear(10, 10), limit=8, deadline_aware=False)
    # No late rule and no deadline cut: DTO < 0, the whole queue leaves on timeout.
    assert fifo == BatchDecision(take=3, instances=3, wake_at=None, reason="timeout")
    aware = decide(0.0, queue, Linear(10, 10), limit=8)
    assert (aware.take, aware.reason) == (1, "late")


def test_deadline_order_versus_arrival_order() -> None:
    first, second = item(1.0, arrival=0.0), item(2.0, arrival=0.001)
    tight = item(0.035, arrival=0.002)
    arrival_order = [first, second, tight]
    by_deadline = sorted(arrival_order, key=lambda p: p.deadline)
    model = Linear(10, 10)
    # FIFO: the two oldest fill the batch of two; `tight` waits behind them and will be late.
    fifo = decide(0.0, arrival_order, model, limit=2, deadline_aware=False)
    assert (fifo.take, fifo.reason) == (2, "full")
    assert tight not in arrival_order[: fifo.take]
    # Slack order (GrandSLAM §4.3) puts `tight` first: it leaves now, in the batch of two.
    slack = decide(0.0, by_deadline, model, limit=2)
    assert (slack.take, slack.reason) == (2, "full")
    assert by_deadline[: slack.take] == [tight, first]
    # With room for a third, the baseline still waits for its timeout, now set by `tight`:
    # 35 ms − P95(4) = 35 − 50 < 0, so the whole queue leaves at once.
    baseline = decide(0.0, arrival_order, model, limit=8, deadline_aware=False)
    assert baseline == BatchDecision(take=3, instances=3, wake_at=None, reason="timeout")
    # Deadline-aware, slack order: P95(3) = 40 ms > 35 ms, so two go and the batch is closed.
    aware = decide(0.0, by_deadline, model, limit=8)
    assert (aware.take, aware.reason) == (2, "closed")


def test_works_with_the_real_latency_model() -> None:
    model = LatencyModel.from_prior(10.0, 10.0, spread=1.0)
    decision = decide(0.0, [item(0.045), item(0.06), item(0.08), item(1.0)], model, limit=8)
    assert (decision.take, decision.reason) == (3, "closed")


def test_bad_input_is_refused() -> None:
    with pytest.raises(ValueError, match="limit"):
        decide(0.0, [item(1.0)], Linear(1, 1), limit=0)
    with pytest.raises(ValueError, match="size"):
        decide(0.0, [item(1.0), item(1.0, size=0)], Linear(1, 1), limit=4)


pending = st.builds(
    QueuedRequest,
    deadline=st.floats(min_value=-0.05, max_value=0.5),
    arrival=st.floats(min_value=-0.5, max_value=0.0),
    size=st.integers(min_value=1, max_value=6),
)


def check_invariants(
    now: float,
    queue: Sequence[QueuedRequest],
    model: Linear,
    limit: int,
    decision: BatchDecision,
    *,
    deadline_aware: bool,
    late_limit: int | None = None,
) -> None:
    def start_by(deadline: float, n: int) -> float:
        """The latest dispatch time for ``n`` instances to finish by ``deadline``, expected."""
        return deadline - model.estimate_ms(n) / 1000.0

    def wait_until(deadline: float, n: int) -> float:
        """The latest dispatch time by the tail estimate (the dispatch timeout)."""
        return deadline - model.p95_ms(n, now) / 1000.0

    assert 0 <= decision.take <= len(queue)
    if not queue:
        assert decision.reason == "empty"
        return
    if decision.take == 0:
        assert decision.reason == "wait" and decision.wake_at is not None
        # deadline-aware, requests that cannot make it even alone hold nothing back
        held = [p for p in queue if not deadline_aware or now <= start_by(p.deadline, p.size)]
        assert held and held[0] is queue[0]
        assert now < decision.wake_at <= min(p.deadline for p in held)
        # Everything queued fits, and still meets every deadline when dispatched at wake_at.
        total = sum(p.size for p in queue)
        assert total < limit
        assert all(decision.wake_at <= wait_until(p.deadline, total) for p in held)
        assert all(decision.wake_at <= start_by(p.deadline, total) for p in held)
        return
    batch = queue[: decision.take]
    assert decision.wake_at is None
    assert decision.instances == sum(p.size for p in batch) > 0
    if decision.reason == "oversized":
        assert decision.take == 1 and batch[0].size > limit
        return
    if decision.reason == "late":
        # only requests that cannot make their deadline even alone ride a late batch
        cap = limit if late_limit is None else max(limit, late_limit)
        assert deadline_aware
        assert decision.instances <= cap
        assert all(now > start_by(p.deadline, p.size) for p in batch)
        rest = queue[decision.take :]
        if rest and decision.instances + rest[0].size <= cap:
            assert now <= start_by(rest[0].deadline, rest[0].size)
        return
    assert decision.instances <= limit
    if deadline_aware:
        # every member that could make its deadline alone still makes it in the batch
        savable = [p for p in batch if now <= start_by(p.deadline, p.size)]
        assert all(now <= start_by(p.deadline, decision.instances) for p in savable)
    rest = queue[decision.take :]
    if decision.reason == "full":
        assert decision.instances == limit or decision.instances + rest[0].size > limit
    elif decision.reason == "closed":
        # The smaller batch meets every deadline; adding the next request would break one.
        grown = decision.instances + rest[0].size
        assert grown <= limit
        grown_batch = [*batch, rest[0]]
        assert any(
            now > start_by(p.deadline, grown) and now <= start_by(p.deadline, p.size)
            for p in grown_batch
        )
    else:
        assert decision.reason in ("timeout", "max_wait") and not rest
        assert decision.instances < limit


@given(
    queue=st.lists(pending, max_size=12),
    now=st.floats(min_value=0.0, max_value=0.1),
    a_ms=st.floats(min_value=0.1, max_value=50.0),
    b_ms=st.floats(min_value=0.0, max_value=20.0),
    limit=st.integers(min_value=1, max_value=16),
    deadline_aware=st.booleans(),
    by_deadline=st.booleans(),
    spread=st.floats(min_value=1.0, max_value=3.0),
    late_limit=st.none() | st.integers(min_value=1, max_value=32),
    max_wait_s=st.none() | st.floats(min_value=0.0, max_value=0.2),
)
def test_decision_invariants(
    queue: list[QueuedRequest],
    now: float,
    a_ms: float,
    b_ms: float,
    limit: int,
    deadline_aware: bool,
    by_deadline: bool,
    spread: float,
    late_limit: int | None,
    max_wait_s: float | None,
) -> None:
    key = (lambda p: p.deadline) if by_deadline else (lambda p: p.arrival)
    queue.sort(key=key)
    model = Linear(a_ms, b_ms, spread)
    decision = decide(
        now,
        queue,
        model,
        limit=limit,
        deadline_aware=deadline_aware,
        late_limit=late_limit,
        settings=waiting_at_most(max_wait_s),
    )
    if decision.take == 0 and queue and max_wait_s is not None:
        assert decision.wake_at is not None
        assert (
            decision.wake_at <= min(p.arrival for p in queue) + max_wait_s * 1000.0 / 1000.0
        )  # the settings hold ms
    check_invariants(
        now, queue, model, limit, decision, deadline_aware=deadline_aware, late_limit=late_limit
    )


@given(
    queue=st.lists(pending, min_size=1, max_size=12),
    a_ms=st.floats(min_value=0.1, max_value=50.0),
    b_ms=st.floats(min_value=0.0, max_value=20.0),
    limit=st.integers(min_value=1, max_value=16),
)
def test_waiting_until_wake_at_then_dispatches_or_waits_again_later(
    queue: list[QueuedRequest], a_ms: float, b_ms: float, limit: int
) -> None:
    queue.sort(key=lambda p: p.deadline)
    model = Linear(a_ms, b_ms)
    first = decide(0.0, queue, model, limit=limit)
    if first.take == 0:
        assert first.wake_at is not None
        again = decide(first.wake_at, queue, model, limit=limit)
        assert again.take == len(queue) and again.reason == "timeout"
