"""AIMD max batch size (MLProxy Algorithm 2) and the mode presets."""

from __future__ import annotations

import dataclasses
import random
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from slackwise_policies.aimd import AIMD, AIMDDecision, AIMDSettings
from slackwise_policies.modes import MLPROXY, PRESETS, SLACKWISE, preset


def aimd_with(**settings: Any) -> AIMD:
    """An AIMD with the judging rules these tests were written for (a 5 % miss ratio, no
    timeout ratio, cold-aware); a test names what it changes. The modes own the defaults."""
    rules: dict[str, Any] = {
        "miss_threshold": 0.05,
        "timeout_ratio_threshold": None,
        "cold_aware": True,
        "timeouts_per_batch": False,
    }
    limits = {k: settings.pop(k) for k in ("initial", "maximum", "minimum") if k in settings}
    return AIMD(AIMDSettings(**{**rules, **settings}), **limits)


def feed(
    aimd: AIMD,
    now: float,
    count: int,
    *,
    latency_ms: float = 20.0,
    slo_ms: float = 100.0,
    missed: int = 0,
    timeouts: int = 0,
    cold: int = 0,
) -> None:
    """``count`` requests at ``now``; the first ``missed``/``timeouts``/``cold`` carry the flag."""
    for i in range(count):
        aimd.record(
            now,
            latency_ms=latency_ms,
            slo_ms=slo_ms,
            missed=i < missed,
            timeout_dispatch=i < timeouts,
            cold=i < cold,
        )


def period(aimd: AIMD, start: float, **window: Any) -> AIMDDecision:
    """One 30 s period starting at ``start`` with 20 requests; the decision at its end."""
    feed(aimd, start, 20, **window)
    decision = aimd.update(start + 30.0)
    assert decision is not None
    return decision


def test_additive_increase_each_good_period() -> None:
    aimd = aimd_with(initial=4, maximum=64)
    limits = []
    for k in range(3):
        decision = period(aimd, 30.0 * k)
        assert decision.action == "increase" and decision.violations == ()
        limits.append(decision.new_limit)
    assert limits == [5, 6, 7]
    assert aimd.limit == 7


def test_misses_decrease_by_mult() -> None:
    aimd = aimd_with(initial=10, maximum=64, miss_threshold=0.05)
    decision = period(aimd, 0.0, missed=4)
    assert (decision.old_limit, decision.new_limit, decision.action) == (10, 8, "decrease")
    assert decision.stats.miss_ratio == pytest.approx(0.2)
    assert decision.violations[0].startswith("miss ratio")
    assert period(aimd, 30.0, missed=4).new_limit == 6  # 8 × 0.8 = 6.4


def test_p95_above_the_fraction_of_the_slo_decreases() -> None:
    aimd = aimd_with(initial=10, maximum=64, p95_fraction=0.8, miss_threshold=None)
    decision = period(aimd, 0.0, latency_ms=85.0, slo_ms=100.0)
    assert decision.action == "decrease"
    assert decision.stats.p95_ms == 85.0
    assert decision.stats.p95_slo_fraction == pytest.approx(0.85)
    assert decision.violations == ("P95/SLO 0.850 > 0.8",)
    assert period(aimd, 30.0, latency_ms=80.0, slo_ms=100.0).action == "increase"


def test_too_many_timeout_dispatches_decrease() -> None:
    aimd = aimd_with(initial=10, maximum=64, timeout_ratio_threshold=0.5)
    decision = period(aimd, 0.0, timeouts=12)
    assert decision.action == "decrease" and decision.stats.timeout_ratio == pytest.approx(0.6)
    assert period(aimd, 30.0, timeouts=10).action == "increase"  # 0.5 is not above 0.5


def test_cold_dominated_window_holds_when_cold_aware() -> None:
    aimd = aimd_with(initial=10, maximum=64, cold_aware=True, cold_dominated=0.5)
    decision = period(aimd, 0.0, latency_ms=1000.0, missed=15, cold=15)
    assert decision.action == "hold-cold" and decision.new_limit == 10
    assert decision.stats.cold_ratio == pytest.approx(0.75)
    assert decision.violations == ()


def test_cold_dominated_window_decreases_when_not_cold_aware() -> None:
    aimd = aimd_with(initial=10, maximum=64, cold_aware=False)
    decision = period(aimd, 0.0, latency_ms=1000.0, missed=15, cold=15)
    assert (decision.action, decision.new_limit) == ("decrease", 8)
    assert decision.stats.judged == 20


def test_a_few_cold_samples_are_left_out_of_the_judgement() -> None:
    aimd = aimd_with(initial=10, maximum=64, cold_aware=True)
    feed(aimd, 0.0, 4, latency_ms=5000.0, missed=4, timeouts=4, cold=4)
    feed(aimd, 0.0, 16)
    decision = aimd.update(30.0)
    assert decision is not None and decision.action == "increase"
    assert (decision.stats.samples, decision.stats.judged) == (20, 16)
    assert decision.stats.miss_ratio == 0.0 and decision.stats.p95_ms == 20.0


def test_empty_window_holds() -> None:
    aimd = aimd_with(initial=10, maximum=64)
    assert aimd.update(0.0) is None  # starts the clock
    decision = aimd.update(30.0)
    assert decision is not None
    assert (decision.action, decision.new_limit, decision.stats.samples) == ("hold-idle", 10, 0)


def test_bounds_are_respected() -> None:
    high = aimd_with(initial=4, maximum=6)
    assert [period(high, 30.0 * k).new_limit for k in range(5)] == [5, 6, 6, 6, 6]
    low = aimd_with(initial=4, minimum=2, maximum=6)
    assert [period(low, 30.0 * k, missed=20).new_limit for k in range(4)] == [3, 2, 2, 2]


def test_fractional_add_accumulates() -> None:
    aimd = aimd_with(initial=4, maximum=64, add=0.5)
    assert [period(aimd, 30.0 * k).new_limit for k in range(4)] == [4, 5, 5, 6]


def test_period_boundaries_with_injected_time() -> None:
    aimd = aimd_with(initial=4, maximum=64, period_s=30.0)
    feed(aimd, 100.0, 5)  # the first record starts the clock at 100
    assert aimd.update(129.999) is None
    first = aimd.update(130.0)
    assert first is not None and first.at == 130.0 and first.stats.samples == 5
    assert aimd.update(130.0) is None  # one decision per period
    feed(aimd, 140.0, 3)
    assert aimd.update(159.9) is None
    second = aimd.update(160.0)
    assert second is not None and second.stats.samples == 3  # the window was reset
    # A late update covers everything since the last decision and realigns to the grid.
    third = aimd.update(255.0)
    assert third is not None and third.action == "hold-idle"
    assert aimd.update(279.9) is None
    assert aimd.update(280.0) is not None


@pytest.mark.parametrize(
    ("kwargs", "key"),
    [
        ({"initial": 0, "maximum": 4}, "initial"),
        ({"initial": 2, "maximum": 4, "minimum": 0}, "minimum"),
        ({"initial": 1, "maximum": 0}, "maximum"),
        ({"initial": 2, "maximum": 4, "mult": 1.0}, "mult"),
        ({"initial": 2, "maximum": 4, "add": 0.0}, "add"),
        ({"initial": 2, "maximum": 4, "period_s": 0.0}, "period_s"),
        ({"initial": 2, "maximum": 4, "cold_dominated": 1.5}, "cold_dominated"),
        ({"initial": 2, "maximum": 4, "miss_threshold": -0.1}, "miss_threshold"),
    ],
)
def test_bad_settings_name_the_key(kwargs: dict[str, Any], key: str) -> None:
    with pytest.raises(ValueError, match=key):
        aimd_with(**kwargs)


def test_bad_samples_are_refused() -> None:
    aimd = aimd_with(initial=2, maximum=4)
    with pytest.raises(ValueError, match="slo_ms"):
        feed(aimd, 0.0, 1, slo_ms=0.0)
    with pytest.raises(ValueError, match="latency_ms"):
        feed(aimd, 0.0, 1, latency_ms=float("nan"))


# (seconds since the previous event, record or update, latency_ms, missed, timeout, cold)
Event = tuple[float, bool, float, bool, bool, bool]
events = st.lists(
    st.tuples(
        st.floats(min_value=0.0, max_value=20.0),
        st.booleans(),
        st.floats(min_value=0.0, max_value=500.0),
        st.booleans(),
        st.booleans(),
        st.booleans(),
    ),
    max_size=80,
)


@given(
    events=events,
    minimum=st.integers(min_value=1, max_value=4),
    span=st.integers(min_value=0, max_value=20),
    cold_aware=st.booleans(),
)
def test_limit_stays_within_bounds(
    events: list[Event], minimum: int, span: int, cold_aware: bool
) -> None:
    maximum = minimum + span
    aimd = aimd_with(initial=minimum, minimum=minimum, maximum=maximum, cold_aware=cold_aware)
    now = 0.0
    for step, is_record, latency_ms, missed, timeout, cold in events:
        now += step
        if is_record:
            aimd.record(
                now,
                latency_ms=latency_ms,
                slo_ms=100.0,
                missed=missed,
                timeout_dispatch=timeout,
                cold=cold,
            )
        else:
            # the latest decision since the last call (a record past a period's end takes it)
            decision = aimd.update(now)
            if decision is not None:
                assert decision.new_limit == aimd.limit and decision.at <= now
                if decision.action in ("hold-cold", "hold-idle"):
                    assert decision.new_limit == decision.old_limit
                if decision.action == "hold-cold":
                    assert cold_aware
        assert minimum <= aimd.limit <= maximum


def test_presets_describe_the_two_modes() -> None:
    assert SLACKWISE.order == "deadline" and SLACKWISE.deadline_aware and SLACKWISE.aimd.cold_aware
    assert MLPROXY.order == "arrival" and not MLPROXY.deadline_aware
    assert MLPROXY.aimd == AIMDSettings()  # the defaults are the paper's Algorithm 2
    assert (MLPROXY.aimd.period_s, MLPROXY.aimd.add, MLPROXY.aimd.mult) == (30.0, 1.0, 0.8)
    assert MLPROXY.aimd.p95_fraction == 0.8 and MLPROXY.aimd.miss_threshold is None
    assert not MLPROXY.aimd.cold_aware
    assert preset("mlproxy") is MLPROXY and set(PRESETS) == {"slackwise", "mlproxy"}
    with pytest.raises(ValueError, match="mode must be one of"):
        preset("fifo")
    with pytest.raises(dataclasses.FrozenInstanceError):
        SLACKWISE.aimd.cold_aware = False  # type: ignore[misc]


def test_the_mlproxy_mode_is_algorithm_2_as_published() -> None:
    """MLProxy's Algorithm 2: Max_BS starts at 1, grows by 1 each 30 s without a violation, and
    its timeout input is the ratio of *batches* dispatched on their timeout."""
    aimd = MLPROXY.aimd_for(64)
    assert aimd.limit == 1 and MLPROXY.aimd.timeouts_per_batch
    aimd.update(0.0)  # the clock starts
    for k in range(3):  # calm periods: +1 each
        t = 30.0 * k
        aimd.record(t + 1.0, latency_ms=10.0, slo_ms=100.0, missed=False, timeout_dispatch=False,
                    cold=False)  # fmt: skip
        aimd.update(t + 30.0)
    assert aimd.limit == 4
    # one batch of 19 left on its timeout, one of 1 filled up: by requests 0.95 of them timed
    # out (over TO_thresh 0.9), by batches half did (under it): the paper counts batches
    t = 90.0
    aimd.dispatched(t + 1.0, bound=False, timeout=True)
    aimd.dispatched(t + 2.0, bound=False, timeout=False)
    for i in range(20):
        aimd.record(t + 3.0, latency_ms=10.0, slo_ms=100.0, missed=False,
                    timeout_dispatch=i < 19, cold=False)  # fmt: skip
    decision = aimd.update(t + 30.0)
    assert decision is not None and decision.action == "increase" and aimd.limit == 5
    assert decision.stats.timeout_ratio == 0.5
    by_request = AIMD(SLACKWISE.aimd, initial=4, maximum=64)  # the request-weighted ratio
    by_request.update(0.0)
    by_request.dispatched(1.0, bound=False, timeout=True)
    by_request.dispatched(2.0, bound=False, timeout=False)
    for i in range(20):
        by_request.record(3.0, latency_ms=10.0, slo_ms=100.0, missed=False,
                          timeout_dispatch=i < 19, cold=False)  # fmt: skip
    decision = by_request.update(30.0)
    assert decision is not None and decision.stats.timeout_ratio == 0.95


def test_preset_builds_its_aimd() -> None:
    aimd = AIMD(MLPROXY.aimd, initial=4, maximum=32)
    decision = period(aimd, 0.0, latency_ms=1000.0, missed=15, cold=15)
    assert decision.action == "decrease"  # the baseline counts cold starts
    cold_aware = AIMD(SLACKWISE.aimd, initial=4, maximum=32)
    assert period(cold_aware, 0.0, latency_ms=1000.0, missed=15, cold=15).action == "hold-cold"


def test_the_limit_does_not_depend_on_how_often_it_is_asked() -> None:
    """Periods end on fixed boundaries: asking on every step (live) or only now and then (the
    simulator) gives the same limits at the same times."""
    rng = random.Random(5)
    samples = [(i * 0.37, rng.uniform(5.0, 120.0)) for i in range(400)]

    def run(ask_every: int) -> list[int]:
        aimd = aimd_with(initial=4, maximum=32, period_s=10.0, miss_threshold=0.05)
        aimd.update(0.0)
        limits = []
        for i, (now, latency) in enumerate(samples):
            if i % ask_every == 0:
                aimd.update(now)
            aimd.record(now, latency_ms=latency, slo_ms=100.0, missed=latency > 100.0,
                        timeout_dispatch=False, cold=False)  # fmt: skip
            limits.append(aimd.limit)
        return limits

    assert run(1) == run(7) == run(1000)
    assert len(set(run(1))) > 2  # it moved


def backlogged(
    aimd: AIMD, start: float, seconds: int, *, bound: bool = True, **window: Any
) -> list[AIMDDecision]:
    """``seconds`` of 10 ms batches from ``start`` (each answered at once, its members fed),
    every one bound by the limit (``bound``) or not; the decisions taken on the way."""
    decisions = []
    for tick in range(seconds * 100):
        now = start + tick / 100.0
        aimd.dispatched(now, bound=bound)
        feed(aimd, now, 1, **window)
        decision = aimd.update(now)
        if decision is not None:
            decisions.append(decision)
    return decisions


def test_a_limit_that_holds_a_backlog_back_doubles_every_second_without_violations() -> None:
    aimd = aimd_with(initial=4, maximum=64, period_s=30.0, backlog_mult=2.0, backlog_period_s=1.0)
    decisions = backlogged(aimd, 0.0, 5)
    assert [d.action for d in decisions] == ["increase-backlog"] * 4  # at 1, 2, 3 and 4 s
    assert [d.new_limit for d in decisions] == [8, 16, 32, 64]
    assert aimd.limit == 64  # at the maximum it stays
    # MLProxy's AIMD (no backlog rule) over the same 5 s: nothing until its period ends
    plain = aimd_with(initial=4, maximum=64, period_s=30.0)
    assert backlogged(plain, 0.0, 5) == [] and plain.limit == 4


def test_batches_the_arrivals_sized_or_a_violation_keep_the_additive_steps() -> None:
    free = aimd_with(initial=4, maximum=64, period_s=30.0, backlog_mult=2.0, backlog_period_s=1.0)
    assert backlogged(free, 0.0, 5, bound=False) == [] and free.limit == 4
    slow = aimd_with(initial=8, maximum=64, period_s=30.0, backlog_mult=2.0, backlog_period_s=1.0,
                p95_fraction=0.8)  # fmt: skip
    assert backlogged(slow, 0.0, 5, latency_ms=90.0) == [] and slow.limit == 8
    decision = slow.update(30.0)  # the period's end judges it as any window: too slow
    assert decision is not None and decision.action == "decrease" and slow.limit == 6


def test_the_backlog_rule_decides_the_same_however_often_it_is_asked() -> None:
    def run(ask_every: int) -> list[tuple[float, int]]:
        aimd = aimd_with(initial=2, maximum=64, backlog_mult=2.0, backlog_period_s=1.0)
        limits = []
        for tick in range(700):
            now = tick / 100.0
            aimd.dispatched(now, bound=tick < 350)  # backlogged for 3.5 s, then not
            feed(aimd, now, 1)
            if tick % ask_every == 0:
                aimd.update(now)
            limits.append((now, aimd.limit))
        return limits

    assert run(1) == run(7) == run(1000)
    # doubled at 1, 2, 3 s and at 4 s (half its batches bound), then not: 2 -> 32
    assert run(1)[-1][1] == 32


def test_the_backlog_rule_is_slackwise_modes_not_mlproxys() -> None:
    assert SLACKWISE.aimd.backlog_mult == 2.0 and MLPROXY.aimd.backlog_mult is None
    with pytest.raises(ValueError, match="backlog_mult"):
        aimd_with(initial=4, maximum=64, backlog_mult=1.0)
    with pytest.raises(ValueError, match="backlog_period_s"):
        aimd_with(initial=4, maximum=64, backlog_period_s=0.0)


def test_behind_a_backlog_misses_from_queueing_do_not_hold_the_limit_small() -> None:
    # every tenth request missed its deadline (it queued), the batches themselves are quick:
    # the backlog rule grows the limit; the period's end still judges the misses
    aimd = aimd_with(initial=4, maximum=64, period_s=30.0, miss_threshold=0.01, backlog_mult=2.0)
    decisions = []
    for tick in range(300):
        now = tick / 100.0
        aimd.dispatched(now, bound=True)
        feed(aimd, now, 10, missed=1)
        if (decision := aimd.update(now)) is not None:
            decisions.append(decision)
    assert [d.new_limit for d in decisions] == [8, 16]
    later = backlogged(aimd, 3.0, 35, missed=1)
    assert [d.new_limit for d in later[:2]] == [32, 64]  # the maximum, at 4 s
    # a full period after the last growth the whole window is judged, misses too
    cut = [d for d in later if d.action == "decrease"]
    assert len(cut) == 1 and cut[0].at == 34.0 and "miss ratio" in cut[0].violations[0]


def test_a_window_in_which_the_limit_held_a_request_back_at_the_door_counts_as_bound() -> None:
    # batches the arrivals sized (not bound): no growth, as above; one refusal the limit made
    # in a window makes it grow as a bound one does, and only in the slackwise mode
    aimd = aimd_with(initial=4, maximum=64, period_s=30.0, backlog_mult=2.0, backlog_period_s=1.0)
    assert backlogged(aimd, 0.0, 2, bound=False) == [] and aimd.limit == 4
    aimd.held_back(2.05)
    decisions = backlogged(aimd, 2.05, 2, bound=False)
    assert [(d.action, d.new_limit) for d in decisions] == [("increase-backlog", 8)]
    plain = aimd_with(initial=4, maximum=64, period_s=30.0)
    plain.held_back(0.5)
    assert backlogged(plain, 0.5, 3, bound=False) == [] and plain.limit == 4


def test_the_door_asks_about_a_held_back_refusal_only_while_it_would_count() -> None:
    aimd = aimd_with(initial=4, maximum=64, period_s=30.0, backlog_mult=2.0, backlog_period_s=1.0)
    assert aimd.listens_for_held_back
    aimd.held_back(0.5)
    assert not aimd.listens_for_held_back  # once a window is enough
    backlogged(aimd, 0.5, 2, bound=False)  # grown at 1 s: a new window opens
    assert aimd.limit == 8 and aimd.listens_for_held_back
    assert not aimd_with(initial=4, maximum=64).listens_for_held_back  # MLProxy: no backlog rule
    full = aimd_with(initial=64, maximum=64, backlog_mult=2.0)
    assert not full.listens_for_held_back  # at the maximum already
