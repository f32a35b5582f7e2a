"""Admission at the door (slackwise_policies.admission), pure: refused when the evidence says
late, admitted when nothing ahead could make it late, Retry-After in whole seconds."""

from __future__ import annotations

import math

import pytest

from slackwise_policies.admission import at_the_door, expected_finish


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


def test_its_own_batch_is_priced_with_the_company_admitted_before_a_slot_frees() -> None:
    """Every slot busy for 40 ms more, 3 queued, 200 instances a second admitted: about 8 more
    join its batch before it leaves, so the door prices a batch of 12, not 4 (a promise made
    for a batch smaller than the one the request rides leaves its head too little time, and
    the batcher then cuts that batch short at the head's deadline)."""

    def finish(free_at: float = -math.inf, company_per_s: float = 0.0) -> float:
        return expected_finish(
            0.0, size=1, queued=3, batch_limit=16, slots=1, estimate_ms=est, free_at=free_at,
            company_per_s=company_per_s,
        )  # fmt: skip

    assert finish(0.04) == pytest.approx(0.04 + est(4) / 1e3)
    assert finish(0.04, 200.0) == pytest.approx(0.04 + est(12) / 1e3)
    # a free slot takes it now: no company; and never past the batch limit
    assert finish(company_per_s=200.0) == pytest.approx(est(4) / 1e3)
    assert finish(0.04, 5000.0) == pytest.approx(0.04 + est(16) / 1e3)
    # behind a full round (20 queued, batches of 16: its batch is the second) the company
    # counts until that round has gone too: 40 + 42 ms at 100 a second, 9 more
    second = expected_finish(
        0.0, size=1, queued=20, batch_limit=16, slots=1, estimate_ms=est, free_at=0.04,
        company_per_s=100.0,
    )  # fmt: skip
    assert second == pytest.approx(0.04 + (est(16) + est(4 + 1 + 9)) / 1e3)


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
    from slackwise_policies.admission import HOLD_MAX_S, holds_until

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
    from slackwise_policies.admission import Drain

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


def test_the_lateness_margin_rises_on_late_finishes_is_capped_and_falls_back() -> None:
    """A late finish moves the margin up by a step (2 % of the SLO) times ``share``; one in
    time moves it down by a step times ``1 - share``: it settles where ``1 - share`` of the
    samples are late, never goes past ``cap`` of the SLO, and returns to 0 once all is well."""
    import random

    from slackwise_policies.admission import Lateness

    lateness = Lateness(step=0.02, share=0.99, cap=0.5)
    slo = 0.1
    lateness.finished(1.0, 0.9, slo)  # 100 ms late
    assert lateness.margin_s(1.0) == pytest.approx(0.02 * slo * 0.99)
    for _ in range(1000):
        lateness.finished(1.0, 0.9, slo, given_up=False)
    assert lateness.margin_s(1.0) == pytest.approx(0.5 * slo)  # capped
    assert lateness.margin_s(6.0) == pytest.approx(0.5 * slo)  # no fade until 5 s are calm
    assert lateness.margin_s(16.0) == pytest.approx(0.25 * slo)  # then a 10 s half-life
    # where a margin of m leaves exp(-m / 10 ms) x 5 % late, it settles where 1 % are late
    rng = random.Random(7)
    lateness = Lateness(step=0.02, share=0.99, cap=0.5, half_life_s=math.inf)
    late = []
    for _ in range(200_000):
        share_late = 0.05 * math.exp(-lateness.margin_s(1.0) / 0.010)
        is_late = rng.random() < share_late
        late.append(is_late)
        lateness.finished(1.0, 1.0 + (-0.01 if is_late else 0.01), slo)
    settled = sum(late[-100_000:]) / 100_000
    assert 0.005 < settled < 0.02
    assert lateness.margin_s(1.0) == pytest.approx(0.010 * math.log(5), rel=0.5)
    for _ in range(100_000):  # nothing late any more: back to the model's own estimate
        lateness.finished(1.0, 2.0, slo)
    assert lateness.margin_s(1.0) == 0.0


def _flood(margin: bool, *, rate: float = 1500.0, slo: float = 0.1, seconds: float = 30.0,
           warmup: float = 10.0) -> tuple[int, int, int]:  # fmt: skip
    """A function with one replica whose batches take exactly what its latency model says
    (5 ms + 1 ms an instance: about 1,000 a second at full batches), flooded at ``rate`` on
    virtual time; (admitted, of them in time, refused) after ``warmup``."""
    import random

    from slackwise_policies.admission import Lateness
    from slackwise_policies.controller import Controller
    from slackwise_policies.latency import LatencyModel
    from slackwise_policies.modes import preset
    from slackwise_policies.queue import QueuedRequest

    rng = random.Random(3)
    c: Controller[QueuedRequest] = Controller(
        name="f", preset=preset("slackwise"), model=LatencyModel(a_ms=5.0, b_ms_per_item=1.0),
        max_batch=64, container_concurrency=1, now=0.0, late="predict",
    )  # fmt: skip
    if not margin:
        c.lateness = Lateness(cap=0.0)
    now, seq, admitted, in_time, refused = 0.0, 0, 0, 0, 0
    arrival = rng.expovariate(rate)
    busy: tuple[float, list[QueuedRequest]] | None = None
    while now < seconds:
        now = arrival if busy is None else min(arrival, busy[0])
        if busy is not None and now >= busy[0]:
            batch = busy[1]
            took = (5.0 + 1.0 * len(batch)) / 1000.0
            c.completed(batch, now=now, instances=len(batch), round_trip_ms=took * 1e3,
                        compute_ms=took * 1e3, cold=False, timeout_dispatch=False)  # fmt: skip
            c.released()
            in_time += sum(now <= r.deadline for r in batch if r.arrival >= warmup)
            busy = None
        if now >= arrival:
            seq += 1
            request = QueuedRequest(deadline=now + slo, arrival=now, seq=seq)
            refusal = c.admit(request, now, ready=1, lag_s=0.0)
            if now >= warmup:
                admitted += refusal is None
                refused += refusal is not None
            arrival = now + rng.expovariate(rate)
        if busy is None:
            step = c.step(now, ready=1)  # (a request given up is answered late: not in time)
            if step.batch:
                busy = (now + (5.0 + 1.0 * len(step.batch)) / 1000.0, list(step.batch))
    return admitted, in_time, refused


def test_an_admitted_requests_deadline_is_met_under_a_flood_of_refusals() -> None:
    """Offered 1.5x what the replica can serve, on virtual time: the door refuses about a third
    and what it admits finishes in time (>= 99 %), with the margin its evidence sets. Without
    the margin the door's own arithmetic holds most of the promise (>= 95 %): it prices a
    request's batch as it will leave, with the company admitted until then. Priced as the queue
    stood when it came, the same door let 19 % be given up late: the batches it promised were
    smaller than the ones its requests rode, and the deadline-aware batcher cut those short."""
    admitted, in_time, refused = _flood(margin=True)
    assert refused > 0.2 * (admitted + refused)  # a flood: the door refuses
    assert in_time >= 0.99 * admitted
    assert in_time > 0.6 * 1000 * 20  # and serves most of what the replica can carry
    admitted_bare, in_time_bare, _ = _flood(margin=False)
    assert in_time_bare >= 0.95 * admitted_bare
    assert in_time_bare / admitted_bare < in_time / admitted  # the margin still earns its keep


def _trickle(refuse_first: bool) -> int:
    """A GPU-like function (20 ms a batch + 0.1 ms an instance) at its starting limit of 4,
    then 1.5 s of one request every 10 ms, each served alone at once; with ``refuse_first`` a
    request behind 12 others is refused at the door first. The limit at the end."""
    from slackwise_policies.aimd import AIMD
    from slackwise_policies.controller import Controller
    from slackwise_policies.latency import LatencyModel
    from slackwise_policies.modes import SLACKWISE
    from slackwise_policies.queue import QueuedRequest

    c: Controller[QueuedRequest] = Controller(
        name="f", preset=SLACKWISE, model=LatencyModel(a_ms=20.0, b_ms_per_item=0.1),
        aimd=AIMD(SLACKWISE.aimd, maximum=64), max_batch=64, container_concurrency=1, now=0.0,
        late="predict",
    )  # fmt: skip
    assert c.limit() == 4
    seq = 0

    def arrive(now: float, slo: float) -> object:
        nonlocal seq
        seq += 1
        request = QueuedRequest(deadline=now + slo, arrival=now, seq=seq)
        return c.admit(request, now, ready=1, lag_s=0.0)

    if refuse_first:
        for _ in range(12):
            assert arrive(0.0, 1.0) is None
        # three rounds of 4 ahead at 20 ms each: late at the limit's pace, where one batch of
        # 13 (20 ms) would be in time
        assert arrive(0.0, 0.05) is not None
    for tick in range(150):
        now = tick / 100.0
        arrive(now, 0.5)
        while (step := c.step(now, ready=1)).batch:
            size = len(step.batch)
            c.completed(step.batch, now=now, instances=size, round_trip_ms=20.0 + 0.1 * size,
                        compute_ms=20.0, cold=False, timeout_dispatch=False)  # fmt: skip
            c.released()
    return c.limit()


def test_a_refusal_the_limit_made_is_the_backlog_aimd_grows_the_limit_on() -> None:
    """Live, a door that refuses behind a queue of a few keeps batches from ever leaving bound
    at the limit, and AIMD's backlog rule saw no backlog: embed on the CPU at 120-160 a second
    held its limit at 4-6 while the door refused 5-14 %, and on a GPU the limit it started at
    made the adapter a fifth of the model's batched throughput. A refusal that batches at the
    function's maximum would have admitted is that backlog: the window counts as bound and
    the limit doubles; batches the arrivals size alone leave it where it is."""
    assert _trickle(refuse_first=False) == 4
    assert _trickle(refuse_first=True) == 8


def test_a_chains_first_stage_judges_the_whole_chain() -> None:
    """Nothing queued at the first stage, but the stages after it are expected to take most of
    the SLO: the first stage refuses (a later stage never does), where the same request alone
    is admitted."""
    from slackwise_policies.controller import Controller
    from slackwise_policies.latency import LatencyModel
    from slackwise_policies.modes import preset
    from slackwise_policies.queue import QueuedRequest

    def controller() -> Controller[QueuedRequest]:
        model = LatencyModel(a_ms=10.0, b_ms_per_item=1.0)
        return Controller(
            name="first", preset=preset("slackwise"), model=model, max_batch=8,
            container_concurrency=1, now=0.0, late="predict",
        )  # fmt: skip

    alone = QueuedRequest(deadline=0.1, arrival=0.0, seq=1)
    assert controller().admit(alone, 0.0, ready=1, lag_s=0.0) is None
    chained = QueuedRequest(deadline=0.1, arrival=0.0, seq=2)
    refusal = controller().admit(chained, 0.0, ready=1, lag_s=0.0, after_s=0.095)
    assert refusal is not None and refusal.late_s > 0.0
    later = QueuedRequest(deadline=0.1, arrival=0.0, seq=3)  # a later stage: lag None
    assert controller().admit(later, 0.0, ready=1, lag_s=None, after_s=0.095) is None


def test_the_chain_walker_prices_the_stages_after_the_first() -> None:
    from tests.test_chain_route import Upstream, client

    with client(Upstream()) as c:
        state = c.app.state.adapter  # type: ignore[attr-defined]
        chain = state.chains["ask"]  # tagger -> answer
        alone = chain.after_first_s(state.dispatchers)
        answer = state.dispatchers["answer"].controller
        assert alone == pytest.approx(answer.reader.estimate_ms(1) / 1000.0)


def test_a_sample_with_no_slo_left_moves_nothing() -> None:
    """A chain's stage entered past the chain's deadline has a negative budget: no evidence
    about the door (it used to drive the margin below zero through the cap)."""
    from slackwise_policies.admission import Lateness

    lateness = Lateness()
    lateness.finished(2.0, 1.0, -0.5, given_up=True)
    assert lateness.margin_s(2.0) == 0.0 and lateness.finished_count == 0


def test_a_refused_request_is_no_company_for_a_batch() -> None:
    """The rate a batch may wait for company by counts what the door admits: under a flood it
    refuses, the refused requests would otherwise make a lone admitted request wait for
    batch-mates that never come."""
    from slackwise_policies.controller import Controller
    from slackwise_policies.latency import LatencyModel
    from slackwise_policies.modes import preset
    from slackwise_policies.queue import QueuedRequest

    c: Controller[QueuedRequest] = Controller(
        name="f", preset=preset("slackwise"), model=LatencyModel(a_ms=5.0, b_ms_per_item=1.0),
        max_batch=8, container_concurrency=1, now=0.0, late="predict",
    )  # fmt: skip
    admitted = 0
    for seq in range(1, 2001):
        now = seq * 0.0005  # 2,000 a second for a second
        refusal = c.admit(QueuedRequest(deadline=now + 0.05, arrival=now, seq=seq), now,
                          ready=1, lag_s=0.0)  # fmt: skip
        admitted += refusal is None
    assert admitted < 200  # a flood: one replica at 8 a batch cannot take it
    assert c.arrivals.rate(1.0) < 2 * admitted


def test_behind_the_door_a_backlog_goes_in_batches_that_keep_up_not_one_at_a_time() -> None:
    """A single function that refuses at the door (``late: predict``) drains a backlog with the
    batching for throughput's floor, as GS-T does a chain's stage: while more is queued than
    the free slots take in one round, a head whose deadline only a batch smaller than the one
    that keeps up with the admitted rate could still meet goes behind the rest. Live, embed's
    late answers were such heads: after batches of 8-10 the head's slack shrank, the tail rule
    cut the batches to 1-2, each slot served one request per 60 ms instead of ten per 145, and
    the queue behind them aged past its deadlines. A short queue's head is served as before."""
    from slackwise_policies.controller import Controller
    from slackwise_policies.latency import LatencyModel
    from slackwise_policies.modes import preset
    from slackwise_policies.queue import QueuedRequest
    from slackwise_policies.scheduling import sustaining_batch

    def queued(late: str, keep: int = 120) -> tuple[Controller[QueuedRequest], float]:
        model = LatencyModel(a_ms=40.0, b_ms_per_item=4.0)  # P99 with no samples: 1.2 x
        c: Controller[QueuedRequest] = Controller(
            name="f", preset=preset("slackwise"), model=model, max_batch=32,
            container_concurrency=1, now=0.0, late=late,  # type: ignore[arg-type]
        )  # fmt: skip
        requests = [QueuedRequest(deadline=seq / 240.0 + 1.0, arrival=seq / 240.0, seq=seq)
                    for seq in range(120)]  # fmt: skip
        for r in requests:  # 240 a second for half a second, the door not asked (lag None)
            c.admit(r, r.arrival, ready=2, lag_s=None)
        for r in requests[keep:]:  # their clients went away
            r.cancelled = True
            c.withdraw()
        # the head has 50 ms left: more than its own batch of one takes (44 ms), less than that
        # batch's P99 (52.8 ms) and than the batch that keeps up with the rate takes
        return c, 1.0 - 0.050

    c, now = queued("predict")
    floor = sustaining_batch(c.model, c.arrivals.rate(now), 2, 32, backlog=c.queue.instances)
    assert floor > 1 and c.model.estimate_ms(floor) > 50.0
    step = c.step(now, ready=2)
    assert len(step.batch) > 1, step
    assert 0 not in [item.seq for item in step.batch]  # the head went behind the rest

    short, now = queued("predict", keep=3)  # the slots take the whole queue in one round
    assert [item.seq for item in short.step(now, ready=2).batch][:1] == [0]

    served, now = queued("serve")  # no door: GrandSLAM's prefix, the head first, as before
    assert [item.seq for item in served.step(now, ready=2).batch][:1] == [0]


def test_the_door_counts_refusals_made_while_a_slot_was_free() -> None:
    """The status tells a refusal behind a busy replica from one made while a slot sat free (the
    queue waiting for company, the refusal resting on the price of the batch it would ride)."""
    from slackwise_policies.controller import Controller
    from slackwise_policies.latency import LatencyModel
    from slackwise_policies.modes import preset
    from slackwise_policies.queue import QueuedRequest

    c: Controller[QueuedRequest] = Controller(
        name="f", preset=preset("slackwise"), model=LatencyModel(a_ms=40.0, b_ms_per_item=10.0),
        max_batch=8, container_concurrency=1, now=0.0, late="predict",
    )  # fmt: skip
    for seq in range(1, 4):  # queued, nothing in flight: the slot is free
        assert c.admit(QueuedRequest(deadline=1.0, arrival=0.0, seq=seq), 0.0, ready=1) is None
    tight = QueuedRequest(deadline=0.05, arrival=0.0, seq=4)  # 40 + 10 x 4 ms > 50 ms
    assert c.admit(tight, 0.0, ready=1) is not None
    status = c.door_status(0.0)
    assert status["refused"] == 1 and status["refused_with_free_slot"] == 1
    step = c.step(0.0, ready=1)  # a batch leaves: the one slot is busy
    assert step.batch and c.inflight == 1
    for seq in range(5, 8):
        c.admit(QueuedRequest(deadline=1.0, arrival=0.0, seq=seq), 0.0, ready=1)
    assert c.admit(QueuedRequest(deadline=0.05, arrival=0.0, seq=9), 0.0, ready=1) is not None
    status = c.door_status(0.0)
    assert status["refused"] == 2 and status["refused_with_free_slot"] == 1
    lag = c.admit(QueuedRequest(deadline=0.05, arrival=0.0, seq=10), 0.0, ready=1, lag_s=1.0)
    assert lag is not None and lag.lag_s > 0.0  # the loop's lag: not a refusal for the queue
    assert c.door_status(0.0)["refused"] == 2


def test_the_queues_pace_prices_only_what_the_free_slots_do_not_take_at_once() -> None:
    """A pace measured in a backlog (20 ms an instance: a stall of the host) and 6 queued: with
    every slot busy the request waits for the pace and is refused; with a slot free the 6 leave
    with the next batch, and only the batch it rides prices it."""

    def judge(free_slots: int):  # type: ignore[no-untyped-def]  # fmt: skip
        return at_the_door(
            0.0, 0.1, size=1, queued=6, queued_requests=6, batch_limit=8, slots=2, ready=2,
            estimate_ms=est, slo_s=0.1, drain_s_per_instance=0.02, free_slots=free_slots,
        )  # fmt: skip

    refused = judge(0)
    assert refused is not None and refused.late_s == pytest.approx(0.12 + 0.012 - 0.1)
    assert judge(1) is None  # leaves at once: 10 + 2 x 7 ms
    finish = expected_finish(0.0, size=1, queued=20, batch_limit=8, slots=2, estimate_ms=est,
                             drain_s_per_instance=0.02, free_slots=1)  # fmt: skip
    assert finish == pytest.approx((20 - 8) * 0.02 + 0.012)  # the rest waits at the pace


def test_lateness_its_batch_alone_caused_does_not_move_the_margin() -> None:
    """A request late even had it not waited (its batch's round trip outlasted its SLO: a stall
    of the host) is counted but says nothing of the queue ahead; one late because it waited
    raises the margin."""
    from slackwise_policies.admission import Lateness

    lateness = Lateness()
    lateness.finished(1.2, 1.0, 0.3, overran=True)
    assert lateness.margin_s(1.2) == 0.0
    assert (lateness.late_count, lateness.overran_count, lateness.finished_count) == (1, 1, 1)
    lateness.finished(1.3, 1.0, 0.3)
    assert lateness.margin_s(1.3) == pytest.approx(0.02 * 0.3 * 0.998)
    lateness.finished(1.4, 1.5, 0.3, overran=True)  # in time: overran means nothing then
    assert lateness.overran_count == 1


def test_the_controller_tells_a_batch_that_overran_from_a_wait_behind_the_queue() -> None:
    from slackwise_policies.controller import Controller
    from slackwise_policies.latency import LatencyModel
    from slackwise_policies.modes import preset
    from slackwise_policies.queue import QueuedRequest

    c: Controller[QueuedRequest] = Controller(
        name="f", preset=preset("slackwise"), model=LatencyModel(a_ms=20.0, b_ms_per_item=1.0),
        max_batch=8, container_concurrency=1, now=0.0, late="predict",
    )  # fmt: skip
    fresh = QueuedRequest(deadline=0.1, arrival=0.0, seq=1)
    waited = QueuedRequest(deadline=0.1, arrival=-0.05, seq=2)
    # a batch of 120 ms against a 100 ms SLO: late even with no wait at all
    c.completed([fresh], now=0.12, instances=1, round_trip_ms=120.0, compute_ms=120.0,
                cold=False, timeout_dispatch=False)  # fmt: skip
    assert c.lateness.overran_count == 1 and c.lateness.margin_s(0.12) == 0.0
    # a batch of 30 ms that left 80 ms after its member came: late for the wait
    c.completed([waited], now=0.11, instances=1, round_trip_ms=30.0, compute_ms=30.0,
                cold=False, timeout_dispatch=False)  # fmt: skip
    status = c.door_status(0.11)
    assert status["admitted_late"] == 2 and status["admitted_overran"] == 1
    assert c.lateness.margin_s(0.11) > 0.0
