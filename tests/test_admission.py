"""Admission at the door (adapter.policies.admission), pure: refused when the evidence says
late, admitted when nothing ahead could make it late, Retry-After in whole seconds."""

from __future__ import annotations

import pytest

from adapter.policies.admission import at_the_door, expected_finish


def est(n: int) -> float:
    return 10.0 + 2.0 * n  # ms


def door(queued: int, *, due: float = 0.1, ready: int = 1, lag_s: float = 0.0,
         slots: int = 1):  # type: ignore[no-untyped-def]  # fmt: skip
    return at_the_door(
        0.0, due, size=1, queued=queued, queued_requests=queued, batch_limit=8, slots=slots,
        ready=ready, estimate_ms=est, slo_s=due, lag_s=lag_s,
    )  # fmt: skip


def test_expected_finish_counts_full_rounds_and_its_own_batch() -> None:
    # 20 ahead in batches of 8 on one slot: two full rounds (26 ms each), then a batch of 5
    assert expected_finish(0.0, size=1, queued=20, batch_limit=8, slots=1, estimate_ms=est) == (
        (2 * 26.0 + 20.0) / 1000.0
    )
    # two slots halve the rounds
    assert expected_finish(0.0, size=1, queued=20, batch_limit=8, slots=2, estimate_ms=est) == (
        (1 * 26.0 + 20.0) / 1000.0
    )


def test_a_short_queue_is_admitted_a_long_one_refused_with_retry_after() -> None:
    assert door(10) is None  # one round (26 ms) + own batch (16 ms) < 100 ms
    refusal = door(80)  # ten rounds: 260 ms + 12 ms, 172 ms late
    assert refusal is not None and not refusal.warming
    assert abs(refusal.late_s - 0.172) < 1e-9
    assert refusal.retry_after_s == 1.0  # whole seconds, at least one
    assert "behind 80 queued requests" in refusal.reason
    long = door(8 * 400)  # 400 rounds: over 10 s late
    assert long is not None and long.retry_after_s == 11.0


def test_nothing_ahead_is_always_admitted_even_if_the_model_says_too_slow() -> None:
    # a model gone stale (one slow batch) must not refuse for ever: the request goes at once
    assert door(0, due=0.001) is None


def test_scaling_from_zero_waits_for_the_cold_start_like_the_activator() -> None:
    assert door(800, ready=0) is None


def test_the_adapters_own_lag_refuses_before_the_queue_is_judged() -> None:
    assert door(0, lag_s=0.04) is None  # under half the SLO
    refusal = door(0, lag_s=0.3)
    assert refusal is not None and refusal.lag_s == 0.3 and refusal.retry_after_s == 1.0
    assert "overloaded" in refusal.reason
    cold = door(0, lag_s=2.5, ready=0)
    assert cold is not None and cold.warming and cold.retry_after_s == 3.0


def test_a_queue_refusal_holds_for_the_requests_after_it_within_a_bound() -> None:
    from adapter.policies.admission import HOLD_MAX_S, holds_until

    slightly = door(40)  # five rounds: 130 ms + 12 ms, 42 ms late
    assert slightly is not None
    # by the rule's arithmetic a request dt later fits again no sooner than late_s after...
    assert holds_until(5.0, slightly) == 5.0 + min(slightly.late_s, HOLD_MAX_S)
    barely = door(8 * 3 + 7)  # three rounds (78 ms) + its own full batch (26 ms): 4 ms late
    assert barely is not None and abs(holds_until(5.0, barely) - 5.004) < 1e-9
    # ...and what is judged afresh for each request is not held: the loop's lag, a cold start
    lagged = door(0, lag_s=0.3)
    assert lagged is not None and holds_until(5.0, lagged) == 5.0
    cold = door(0, lag_s=2.5, ready=0)
    assert cold is not None and holds_until(5.0, cold) == 5.0


def test_the_drain_pace_is_evidence_only_while_backlogs_keep_measuring_it() -> None:
    from adapter.policies.admission import Drain

    drain = Drain(alpha=1.0, stale_s=1.0)
    assert drain.s_per_instance(0.0) is None  # nothing measured yet
    drain.dispatched(0.00, 10, backlog=True)
    drain.dispatched(0.05, 10, backlog=True)  # 50 ms for 10 instances while they waited
    assert drain.s_per_instance(0.5) == pytest.approx(0.005)
    drain.dispatched(0.10, 10, backlog=False)  # the backlog is gone (measured one more time)
    assert drain.s_per_instance(1.0) == pytest.approx(0.005)
    # a second and more without a backlog: that pace says nothing about the queue now (a
    # slow one would otherwise refuse every short queue, which never grows to re-measure it)
    assert drain.s_per_instance(1.2) is None
    assert at_the_door(
        1.2, 1.3, size=1, queued=12, queued_requests=12, batch_limit=64, slots=1, ready=1,
        estimate_ms=lambda n: 1.0, slo_s=0.1, drain_s_per_instance=drain.s_per_instance(1.2),
    ) is None  # fmt: skip
    drain.dispatched(1.30, 10, backlog=True)
    drain.dispatched(1.32, 10, backlog=True)  # measured again: fresh evidence
    assert drain.s_per_instance(1.4) == pytest.approx(0.002)
