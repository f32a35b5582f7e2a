"""Evidence over the model (slackwise_policies.evidence), pure on the virtual clock: the count steps
up at once when measured outcomes disagree with the estimate, again after each setup time while
they still do, and steps back down one at a time once they agree."""

from __future__ import annotations

from typing import Any

import pytest

from slackwise_policies.evidence import STALL_S, Evidence, EvidenceConfig


def feed(ev: Evidence, start: float, seconds: float, per_s: int, miss_every: int) -> float:
    """``per_s`` outcomes a second from ``start``; every ``miss_every``-th missed (0: none)."""
    n = int(seconds * per_s)
    for i in range(n):
        ev.outcome(start + i / per_s, missed=miss_every > 0 and i % miss_every == 0)
    return start + seconds


def test_agreeing_evidence_leaves_the_model_alone() -> None:
    ev = Evidence()
    t = feed(ev, 0.0, 5.0, 20, 100)  # 1 % missed: under the 5 % it tolerates
    assert not ev.disagrees(t)
    assert ev.floor(t, model=1, current=1, setup_s=2.0, most=10) == 1
    assert ev.level is None


def test_a_step_change_in_service_time_doubles_the_count_at_once_then_after_each_setup() -> None:
    # the model (service times it observed before a neighbour arrived) keeps saying one replica
    ev = Evidence()
    t = feed(ev, 0.0, 3.0, 20, 2)  # half of the answers now miss
    assert ev.disagrees(t)
    assert ev.floor(t, model=1, current=1, setup_s=2.0, most=10) == 2  # at once, x2
    assert "missed" in (ev.reason or "")
    t = feed(ev, t, 1.0, 20, 2)
    assert ev.floor(t, model=1, current=2, setup_s=2.0, most=10) == 2  # new replicas still starting
    t = feed(ev, t, 3.0, 20, 4)  # the raise helped (a quarter miss now), not enough
    # the window still holds answers from before the new replicas were up: not yet
    assert ev.floor(t, model=1, current=2, setup_s=2.0, most=10) == 2
    t = feed(ev, t, 1.0, 20, 4)  # a setup and a whole window after the raise
    assert ev.floor(t, model=1, current=2, setup_s=2.0, most=10) == 4
    t = feed(ev, t, 5.0, 20, 8)
    assert ev.floor(t, model=1, current=4, setup_s=2.0, most=5) == 5  # max-scale caps it


def test_when_the_model_already_asks_for_more_the_floor_waits_for_its_replicas() -> None:
    ev = Evidence()
    t = feed(ev, 0.0, 3.0, 20, 2)  # half miss, and the model saw it: it asks for 3 of 1
    assert ev.floor(t, model=3, current=1, setup_s=2.0, most=0) == 3
    assert ev.level is None
    t = feed(ev, t, 2.0, 20, 2)  # its replicas are still starting: no doubling on top
    assert ev.floor(t, model=3, current=3, setup_s=2.0, most=0) == 3 and ev.level is None
    t = feed(ev, t, 3.5, 20, 2)  # up a window ago and still missing: now the floor
    assert ev.floor(t, model=3, current=3, setup_s=2.0, most=0) == 6


def test_a_raise_that_did_not_help_is_not_repeated_unless_requests_queue() -> None:
    # late in service itself (a service time over the SLO): more replicas do not help, and
    # doubling on would run to max-scale (or without end, when it is unbounded)
    ev = Evidence()
    t = feed(ev, 0.0, 3.0, 20, 1)
    assert ev.floor(t, model=1, current=1, setup_s=2.0, most=0) == 2
    t = feed(ev, t, 5.0, 20, 1)  # a setup and a window later: every answer late, none queued
    assert ev.floor(t, model=1, current=2, setup_s=2.0, most=0) == 2
    assert "did not help" in (ev.reason or "")
    t = feed(ev, t, 5.0, 20, 1)
    assert ev.floor(t, model=1, current=2, setup_s=2.0, most=0) == 2
    # requests waiting in the queue past their deadline: capacity is short after all
    assert ev.floor(t, model=1, current=2, setup_s=2.0, most=0, overdue=5) == 4


def test_a_stall_where_everything_misses_raises_it_too_and_never_lowers_the_model() -> None:
    ev = Evidence()
    t = feed(ev, 0.0, 2.0, 10, 1)  # a paused replica: every request late
    assert ev.floor(t, model=3, current=3, setup_s=1.0, most=0) == 6
    assert ev.floor(t, model=8, current=6, setup_s=1.0, most=0) == 8  # the model above it wins


def test_once_it_agrees_again_the_floor_steps_down_one_per_clear_period() -> None:
    ev = Evidence(EvidenceConfig(clear_s=10.0))
    t = feed(ev, 0.0, 3.0, 20, 2)
    assert ev.floor(t, model=1, current=2, setup_s=2.0, most=10) == 4
    t = feed(ev, t, 4.0, 20, 0)  # the window has only good answers now
    assert ev.floor(t, model=1, current=4, setup_s=2.0, most=10) == 4  # agreement starts
    t = feed(ev, t, 9.0, 20, 0)
    assert ev.floor(t, model=1, current=4, setup_s=2.0, most=10) == 4  # not yet clear_s
    t = feed(ev, t, 1.5, 20, 0)
    assert ev.floor(t, model=1, current=4, setup_s=2.0, most=10) == 3  # passive scale-in
    for expected in (2, 1):
        t = feed(ev, t, 10.0, 20, 0)
        assert ev.floor(t, model=1, current=expected + 1, setup_s=2.0, most=10) == expected
    assert ev.level is None  # released: the model's count again


def test_a_high_floor_comes_down_by_half_its_excess_per_clear_period() -> None:
    ev = Evidence(EvidenceConfig(clear_s=10.0))
    t = feed(ev, 0.0, 3.0, 20, 2)
    assert ev.floor(t, model=20, current=20, setup_s=2.0, most=0) == 40
    t = feed(ev, t, 4.0, 20, 0)
    assert ev.floor(t, model=5, current=40, setup_s=2.0, most=0) == 40  # agreement starts
    seen = []
    for _ in range(7):
        t = feed(ev, t, 10.0, 20, 0)
        seen.append(ev.floor(t, model=5, current=seen[-1] if seen else 40, setup_s=2.0, most=0))
    assert seen == [23, 14, 10, 8, 7, 6, 5]  # 35 over the model, then 18, 9, 5, 3, 2, 1
    assert ev.level is None


def test_too_few_outcomes_say_nothing() -> None:
    ev = Evidence()
    ev.outcome(0.0, missed=True)
    ev.outcome(0.5, missed=True)
    assert not ev.disagrees(1.0)
    assert ev.floor(1.0, model=1, current=1, setup_s=1.0, most=4) == 1


def test_old_outcomes_leave_the_window() -> None:
    ev = Evidence(EvidenceConfig(window_s=3.0))
    feed(ev, 0.0, 2.0, 20, 1)
    assert ev.disagrees(2.0)
    assert ev.counts(10.0) == (0, 0) and not ev.disagrees(10.0)


@pytest.mark.parametrize(
    "bad", [{"window_s": 0}, {"miss_fraction": 1.0}, {"factor": 1.0}, {"min_samples": 0}]
)
def test_bad_settings_are_refused(bad: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        EvidenceConfig(**bad)  # type: ignore[arg-type]


def test_a_stalled_replica_answering_nothing_is_seen_through_its_overdue_queue() -> None:
    # a replica stopped mid-run: no outcome arrives at all, yet requests wait past their deadline
    ev = Evidence()
    t = feed(ev, 0.0, 3.0, 20, 0)  # it was fine
    ev.arrived(t)  # then requests came and nothing came back for three seconds
    t += 3.0
    assert ev.counts(t) == (0, 0)
    assert ev.floor(t, model=1, current=1, setup_s=2.0, most=10, overdue=0) == 1  # silence alone
    assert ev.floor(t, model=1, current=1, setup_s=2.0, most=10, overdue=4) == 1  # too few yet
    # nothing answered for 3 s: the raise carries the rate and drains, within the 3 s window,
    # the backlog of 3 + 2 s (the setup) of arrivals: 1 x (1 + 5 / 3) -> 3, not the doubling's 2
    assert ev.floor(t, model=1, current=1, setup_s=2.0, most=10, overdue=12) == 3
    assert "queued past their deadline" in (ev.reason or "")
    assert "nothing answered for 3.0 s" in (ev.reason or "")


def test_a_stall_sizes_its_raise_for_the_backlog_a_slowdown_doubles() -> None:
    # the same misses and the same queue past its deadline; the one difference is whether a
    # replica still answers the requests that arrive
    slowed, stalled = Evidence(), Evidence()
    t = feed(slowed, 0.0, 3.0, 30, 0)
    feed(stalled, 0.0, 3.0, 30, 0)
    slowed.arrived(t)
    stalled.arrived(t)
    feed(slowed, t, 1.0, 30, 1)  # a slowdown: answers still come, every one late
    t += 1.0
    # three replicas; a new one is up in 5 s; for 1 s nothing answered what arrived: the queue a
    # new replica meets holds 1 + 5 s of arrivals, drained within the 3 s window: 3 x (1 + 6 / 3)
    assert slowed.floor(t, model=3, current=3, setup_s=5.0, most=50, overdue=40) == 6
    assert stalled.floor(t, model=3, current=3, setup_s=5.0, most=50, overdue=40) == 9
    # max-scale still caps it
    capped = Evidence()
    feed(capped, 0.0, 3.0, 30, 0)
    capped.arrived(3.0)
    assert capped.floor(4.0, model=3, current=3, setup_s=5.0, most=7, overdue=40) == 7
    # refusals at the door are no answers: the stall is still seen through them
    refusing = Evidence()
    feed(refusing, 0.0, 3.0, 30, 0)
    refusing.arrived(3.0)
    for i in range(30):
        refusing.outcome(3.0 + i / 30, missed=True, served=False)
    assert refusing.floor(4.0, model=3, current=3, setup_s=5.0, most=50, overdue=40) == 9
    # a lull's silence is not a stall: nothing waited through it
    lull = Evidence()
    feed(lull, 0.0, 3.0, 30, 0)
    lull.arrived(103.5)  # the first request after 100 s of nothing
    for i in range(30):
        lull.outcome(103.5 + i / 60, missed=True)
    lull.arrived(104.0)
    assert lull.floor(104.0, model=3, current=3, setup_s=5.0, most=50, overdue=40) == 6
    # a wait shorter than STALL_S is a busy replica, not a stall
    brief = Evidence()
    feed(brief, 0.0, 3.0, 30, 0)
    brief.arrived(3.0)
    assert (
        brief.floor(3.0 + 0.9 * STALL_S, model=3, current=3, setup_s=5.0, most=50, overdue=40) == 6
    )


def test_a_few_overdue_among_many_timely_answers_are_tolerated() -> None:
    ev = Evidence()
    t = feed(ev, 0.0, 3.0, 40, 0)  # 120 answers in time
    assert ev.floor(t, model=2, current=2, setup_s=2.0, most=10, overdue=3) == 2  # 2.4 %
    assert ev.floor(t, model=2, current=2, setup_s=2.0, most=10, overdue=9) == 4  # 7 %


def test_the_latency_models_recent_view_sees_a_step_the_window_still_hides() -> None:
    from slackwise_policies.latency import LatencyModel

    model = LatencyModel.from_prior(5.0, 1.0, window_s=30.0)
    t = 0.0
    for _ in range(250):  # 25 s of batches of 1 at 10 ms
        t += 0.1
        model.observe(t, 1, 10.0, 10.0, cold=False)
    for _ in range(30):  # then a neighbour arrives: 3 s at 40 ms
        t += 0.1
        model.observe(t, 1, 40.0, 40.0, cold=False)
    median, _ = model.observed_ms(1, t) or (0.0, 0.0)
    assert median == 10.0  # the 30 s window still says nothing changed
    assert model.observed_ms(1, t, recent_s=5.0) == (40.0, 40.0)
    assert model.observed_ms(2, t, recent_s=5.0) is None  # never seen: no evidence either way
    assert Evidence().recent_s(t) is None  # only while the evidence floor stands


def test_once_service_times_step_the_advisor_replays_the_service_times_of_now() -> None:
    from slackwise_policies.advisor_settings import AdvisorSettings
    from slackwise_policies.function_autoscaler import function_autoscaler
    from slackwise_policies.latency import LatencyModel

    model = LatencyModel.from_prior(5.0, 1.0, window_s=30.0)
    auto = function_autoscaler(
        "f", AdvisorSettings(enabled=True, default_setup_s=1.0, keep_alive=False),
        slo_ms=100.0, percentile=95.0, model=model, limit=lambda: 1,
        container_concurrency=1, max_scale=0, now=0.0,
    )  # fmt: skip
    t = 0.0
    for _ in range(250):  # 25 s at 20 req/s, 10 ms each: the model learns 10 ms
        t += 0.05
        auto.arrived(t, 1)
        model.observe(t, 1, 10.0, 10.0, cold=False)
        auto.outcome(t, False)
    before = auto.decide(t, 1, current=1)
    observed = auto.observed(t)
    assert observed is not None and observed.median_ms[0] < 12.0
    for _ in range(60):  # service time jumps to 60 ms: answers now miss their SLO
        t += 0.05
        auto.arrived(t, 1)
        model.observe(t, 1, 60.0, 60.0, cold=False)
        auto.outcome(t, True)
    after = auto.decide(t + 0.01, 1, current=before)
    # the last second's batches drifted 6x: the model replays them and asks for more itself, so
    # the floor waits for its replicas (it would double a count already raised for these misses)
    assert after >= 2 * before and auto.drift is not None and auto.drift >= 5.0
    assert auto.evidence is not None and auto.evidence.level is None
    observed = auto.observed(t + 0.02)
    assert observed is not None and observed.median_ms[0] >= 60.0  # what it measures now


def test_the_recent_view_forgets_a_stall_once_it_is_over() -> None:
    ev = Evidence()
    t = feed(ev, 0.0, 3.0, 20, 1)  # a stall: everything missed
    assert ev.floor(t, model=1, current=1, setup_s=1.0, most=10) == 2
    assert ev.recent_s(t + 0.5) == 1.0  # right after the raise: the last second
    assert ev.recent_s(t + 4.0) == 4.0  # since the raise
    assert ev.recent_s(t + 30.0) == 6.0  # never further back than two evidence windows


def test_a_step_in_service_time_is_seen_as_drift_before_anything_misses() -> None:
    from slackwise_policies.advisor_settings import AdvisorSettings
    from slackwise_policies.function_autoscaler import function_autoscaler
    from slackwise_policies.latency import LatencyModel

    def build(evidence: bool) -> tuple[Any, LatencyModel]:
        model = LatencyModel.from_prior(5.0, 1.0, window_s=30.0)
        auto = function_autoscaler(
            "f", AdvisorSettings(enabled=True, default_setup_s=1.0, keep_alive=False,
                                 evidence=evidence, headroom=0.0),
            slo_ms=100.0, percentile=95.0, model=model, limit=lambda: 1,
            container_concurrency=1, max_scale=0, now=0.0,
        )  # fmt: skip
        return auto, model

    for evidence in (True, False):
        auto, model = build(evidence)
        t = 0.0
        for _ in range(250):  # 25 s of 10 ms batches, all in time
            t += 0.1
            model.observe(t, 1, 10.0, 10.0, cold=False)
            auto.outcome(t, False)
        assert model.drift(t, 2.0) == pytest.approx(1.0)
        observed = auto.observed(t)
        assert observed is not None and observed.median_ms[0] < 12.0
        for _ in range(10):  # one second at 40 ms: still inside a 100 ms SLO, nothing missed
            t += 0.1
            model.observe(t, 1, 40.0, 40.0, cold=False)
            auto.outcome(t, False)
        assert model.drift(t, 1.0) == pytest.approx(4.0)
        observed = auto.observed(t + 0.01)
        assert observed is not None
        if evidence:  # the model replays what the batches take now, with no floor raised
            assert auto.evidence is not None and auto.evidence.level is None
            assert observed.median_ms[0] >= 40.0 and auto.status()["drift"] == 4.0
        else:  # the ablation: the 30 s window still says 10 ms
            assert observed.median_ms[0] < 12.0 and auto.status()["evidence"] == "off"


def test_drift_needs_a_few_batches_at_sizes_the_window_knows() -> None:
    from slackwise_policies.latency import LatencyModel

    model = LatencyModel.from_prior(5.0, 1.0, window_s=30.0)
    t = 0.0
    for _ in range(100):
        t += 0.1
        model.observe(t, 1, 10.0, 10.0, cold=False)
    for _ in range(2):  # two slow batches: not yet a step
        t += 0.1
        model.observe(t, 1, 50.0, 50.0, cold=False)
    assert model.drift(t, 2.0) is not None and model.drift(t, 2.0) == pytest.approx(1.0)
    t += 0.1
    model.observe(t, 8, 80.0, 80.0, cold=False)  # a size the window has too few of: left out
    assert model.drift(t, 0.25) is None


def test_a_burst_beyond_the_forecast_is_counted_in_full_once_the_evidence_disagrees() -> None:
    from slackwise_policies.advisor_settings import AdvisorSettings
    from slackwise_policies.function_autoscaler import function_autoscaler
    from slackwise_policies.latency import LatencyModel

    def run(evidence: bool) -> list[int]:
        model = LatencyModel.from_prior(5.0, 1.0, window_s=30.0)
        auto = function_autoscaler(
            "f", AdvisorSettings(enabled=True, default_setup_s=1.0, keep_alive=False,
                                 evidence=evidence, headroom=0.0),
            slo_ms=100.0, percentile=95.0, model=model, limit=lambda: 1,
            container_concurrency=1, max_scale=0, now=0.0,
        )  # fmt: skip
        t, count = 0.0, 1
        for _ in range(500):  # 25 s at 20 req/s, 10 ms each, all in time: one replica
            t += 0.05
            auto.arrived(t, 1)
            model.observe(t, 1, 10.0, 10.0, cold=False)
            auto.outcome(t, False)
        count = auto.decide(t, 1, current=count)
        assert count == 1
        counts = []
        for _ in range(24):  # then 400 req/s: one replica answers 100 of them, the rest miss
            for i in range(200):
                t += 0.0025
                auto.arrived(t, 1)
                if i % 4 == 0:
                    model.observe(t, 1, 10.0, 10.0, cold=False)
                auto.outcome(t, i % 4 != 0)
            count = auto.decide(t, 1, current=count)
            counts.append(count)  # one decision every half second
        return counts

    with_rule, without = run(True), run(False)
    full = without[-1]  # the count once the burst fills the 10 s rate window
    assert full >= 8
    # the rule counts the last seconds' rate once the misses show: the full count a second in
    assert with_rule[1] >= full and max(with_rule) <= full + 1
    # the model alone climbs with its rate window: half the full count a second in
    assert without[1] <= full // 2 and without.index(full) >= 8


def test_a_noisy_second_is_not_a_burst() -> None:
    from slackwise_policies.advisor_config import BURST_RATIO
    from slackwise_policies.advisor_settings import AdvisorSettings
    from slackwise_policies.function_autoscaler import function_autoscaler
    from slackwise_policies.latency import LatencyModel

    auto = function_autoscaler(
        "f", AdvisorSettings(enabled=True, default_setup_s=1.0, keep_alive=False,
                             floor_at_current=True, burst_u=1.0),
        slo_ms=100.0, percentile=95.0, model=LatencyModel.from_prior(5.0, 1.0, window_s=30.0),
        limit=lambda: 1, container_concurrency=1, max_scale=0, now=0.0,
    )  # fmt: skip
    advisor, t = auto.advisor, 0.0
    for second in range(30):  # 40 a second, then a second of 56 (a Poisson 2.5 sigma)
        for i in range(56 if second == 29 else 40):
            advisor.record(second + i / 60.0, 1)
        t = second + 0.999
    usual = advisor.rates_at(t)[1]
    noisy = advisor.rates.current(t, 1.0)
    assert noisy > usual * 1.2  # the last second was well above the window's mean...
    assert advisor.rates_at(t, 1.0)[1] == usual  # ...and still not a burst
    for i in range(200):  # a real burst: 200 in the next second
        advisor.record(t + 0.001 + i / 201.0, 1)
    t += 1.0
    assert advisor.rates_at(t, 1.0)[1] >= 190.0 > BURST_RATIO * advisor.rates_at(t)[1]


def test_the_function_autoscaler_times_a_stall_from_its_arrivals_and_its_replicas_answers() -> None:
    from tests.test_onsets import _embed

    auto = _embed()  # embed's autoscaler with the advisor's defaults, evidence on
    evidence = auto.evidence
    assert evidence is not None
    auto.arrived(1.0, 1)
    auto.outcome(1.02, False)  # answered by a replica
    assert evidence.stalled_s(2.0) == 0.0
    auto.arrived(2.0, 1)  # then nothing a replica answers: only the door's refusals
    for i in range(10):
        auto.outcome(2.0 + i / 10, True, served=False)
    assert evidence.stalled_s(3.0) == 1.0
    auto.outcome(3.1, True)  # a replica answers, late: the stall is over
    assert evidence.stalled_s(3.5) == 0.0
