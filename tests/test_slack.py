"""Stage slack (slackwise_policies.slack) and the shared scheduling step
(slackwise_policies.scheduling)."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any, Literal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from slackwise_policies.queue import RequestQueue
from slackwise_policies.scheduling import next_batch
from slackwise_policies.slack import (
    POLICIES,
    marginal_budgets,
    proportional_budgets,
    stage_deadline,
    stage_policy,
)

estimates = st.lists(st.floats(0.1, 5000.0), min_size=1, max_size=6)
times = st.floats(0.0, 1e5)
budgets_s = st.floats(0.001, 100.0)


# -- budgets --------------------------------------------------------------------------------


def test_marginal_budgets_give_the_spare_time_where_batching_pays() -> None:
    # 10 and 90 ms stages, 500 ms: each its latency, the 400 ms spare by gain x latency
    # (0.5 x 10 = 5 against 0 x 90): all of it to the small stage where batching pays
    assert marginal_budgets(0.5, [10.0, 90.0], [0.5, 0.0]) == pytest.approx([0.41, 0.09])
    # equal gains: the spare follows the latencies, as Eq. 4 does
    assert marginal_budgets(0.5, [10.0, 90.0], [0.3, 0.3]) == pytest.approx([0.05, 0.45])
    # no spare time, or no gain anywhere: Eq. 4
    assert marginal_budgets(0.05, [10.0, 90.0], [1.0, 0.0]) == pytest.approx([0.005, 0.045])
    assert marginal_budgets(0.5, [10.0, 90.0], [0.0, 0.0]) == pytest.approx([0.05, 0.45])
    with pytest.raises(ValueError, match="one gain per stage"):
        marginal_budgets(0.5, [10.0, 90.0], [1.0])
    # the marginal division needs the gains, and forwards like GS
    with pytest.raises(ValueError, match="gain"):
        stage_deadline("marginal", stage=0, now=0.0, arrival=0.0, deadline=0.5,
                       estimates_ms=[10.0, 90.0], forward=True)  # fmt: skip
    due = stage_deadline("marginal", stage=0, now=0.0, arrival=0.0, deadline=0.5,
                         estimates_ms=[10.0, 90.0], forward=True, gains=[0.5, 0.0])  # fmt: skip
    assert due == pytest.approx(0.41)
    assert stage_policy("GS-M").division == "marginal"


def test_budgets_follow_eq_4_on_a_hand_worked_chain() -> None:
    # stages of 10, 30 and 60 ms share an SLA of 500 ms as 50, 150, 300
    assert proportional_budgets(0.5, [10.0, 30.0, 60.0]) == pytest.approx([0.05, 0.15, 0.3])
    assert proportional_budgets(0.3, [0.0, 0.0, 0.0]) == pytest.approx([0.1, 0.1, 0.1])


@given(remaining=st.floats(-10.0, 100.0), est=estimates)
def test_budgets_sum_to_the_remaining_time(remaining: float, est: list[float]) -> None:
    budgets = proportional_budgets(remaining, est)
    assert len(budgets) == len(est)
    assert math.isclose(sum(budgets), remaining, rel_tol=1e-9, abs_tol=1e-9)


@given(remaining=budgets_s, est=estimates)
def test_a_slower_stage_never_gets_a_smaller_budget(remaining: float, est: list[float]) -> None:
    budgets = proportional_budgets(remaining, est)
    pairs = sorted(zip(est, budgets, strict=True))
    for (e1, b1), (e2, b2) in itertools.pairwise(pairs):
        if e2 > e1:
            assert b2 >= b1 - 1e-12


def test_bad_estimates_are_refused() -> None:
    with pytest.raises(ValueError, match="at least one stage"):
        proportional_budgets(1.0, [])
    with pytest.raises(ValueError, match=">= 0"):
        proportional_budgets(1.0, [1.0, -2.0])
    with pytest.raises(ValueError, match="stage must be in"):
        stage_deadline("proportional", stage=3, now=0, arrival=0, deadline=1,
                       estimates_ms=[1.0, 2.0], forward=True)  # fmt: skip


# -- stage deadlines ------------------------------------------------------------------------


def walk(
    name: str, est: list[float], arrival: float, slo: float, spent: list[float]
) -> list[float]:
    """Stage deadlines of a request whose stage k takes ``spent[k]`` seconds."""
    policy = stage_policy(name)
    deadline = arrival + slo
    now, out = arrival, []
    for k in range(len(est)):
        due = policy.stage_deadline(
            stage=k, now=now, arrival=arrival, deadline=deadline, estimates_ms=est
        )
        out.append(due)
        now += spent[k]
    return out


@given(est=estimates, arrival=times, slo=budgets_s, data=st.data())
def test_deadlines_never_pass_the_sla_and_never_move_earlier_for_a_later_entry(
    est: list[float], arrival: float, slo: float, data: st.DataObject
) -> None:
    deadline = arrival + slo
    for name in ("GS", "ED-DYN", "EDF-DYN"):
        policy = stage_policy(name)
        stage = data.draw(st.integers(0, len(est) - 1))
        early = data.draw(st.floats(arrival, deadline))
        late = data.draw(st.floats(early, deadline))
        at_early, at_late = (
            policy.stage_deadline(
                stage=stage, now=t, arrival=arrival, deadline=deadline, estimates_ms=est
            )
            for t in (early, late)
        )
        assert early <= at_early <= deadline and late <= at_late <= deadline
        assert at_late >= at_early - 1e-9 * max(1.0, abs(deadline))
        if policy.forward and stage == len(est) - 1:
            assert at_early == deadline


@given(est=estimates, arrival=times, slo=budgets_s, data=st.data())
def test_forwarding_never_shortens_the_stage_of_a_request_on_schedule(
    est: list[float], arrival: float, slo: float, data: st.DataObject
) -> None:
    # a request entering stage k no later than its on-schedule time (the sum of the earlier
    # stages' budgets after arrival) gets at least the stage's own budget from GS, and the stages
    # after it keep at least their own budgets too
    deadline = arrival + slo
    budgets = proportional_budgets(slo, est)
    stage = data.draw(st.integers(0, len(est) - 1))
    on_schedule = arrival + sum(budgets[:stage])
    entry = data.draw(st.floats(arrival, max(arrival, on_schedule)))
    gs = stage_policy("GS")
    forwarded = gs.stage_deadline(
        stage=stage, now=entry, arrival=arrival, deadline=deadline, estimates_ms=est
    )
    static = stage_deadline("proportional", stage=stage, now=entry, arrival=arrival,
                            deadline=deadline, estimates_ms=est, forward=False)  # fmt: skip
    tol = 1e-9 * max(1.0, abs(deadline))
    assert forwarded >= static - tol
    assert deadline - forwarded >= sum(budgets[stage + 1 :]) - tol


def test_slack_forwarding_on_a_hand_worked_chain() -> None:
    # 3 stages of 10, 30, 60 ms with 500 ms: budgets 50, 150, 300. Stage 0 done after 20 ms
    # leaves 30 ms unused; the remaining 480 ms are split 30:60 -> stage 1 gets 160 ms
    est = [10.0, 30.0, 60.0]
    assert walk("GS", est, 0.0, 0.5, [0.02, 0.1, 0.0]) == pytest.approx([0.05, 0.18, 0.5])
    # without forwarding the 30 ms are lost: each stage has its own 50/150/300 ms from entry
    static = [
        stage_deadline("proportional", stage=k, now=t, arrival=0.0, deadline=0.5,
                       estimates_ms=est, forward=False)
        for k, t in enumerate([0.0, 0.02, 0.12])
    ]  # fmt: skip
    assert static == pytest.approx([0.05, 0.17, 0.42])
    # equal division: 1/3 of the SLA each from entry
    assert walk("ED-DYN", est, 0.0, 0.6, [0.02, 0.1, 0.0]) == pytest.approx([0.2, 0.22, 0.32])
    # EDF: the end-to-end deadline at every stage
    assert walk("EDF-DYN", est, 1.0, 0.5, [0.02, 0.1, 0.0]) == pytest.approx([1.5, 1.5, 1.5])


def test_the_policies_are_the_papers_and_their_batching() -> None:
    ours = ["ED-NB", "ED-30", "ED-50", "ED-DYN", "EDF-NB", "EDF-30", "EDF-50", "EDF-DYN"]
    assert list(POLICIES) == ["FIFO-NB", *ours, *(f"{n}-paper" for n in ours), "GS"]
    assert stage_policy("fifo-nb").order == "arrival"
    assert stage_policy("ED-30").batch_limit(8) == 30
    assert stage_policy("EDF-NB").batch_limit(8) == 1
    assert stage_policy("GS").batch_limit(8) == 8 and stage_policy("GS").deadline_aware
    assert not stage_policy("EDF-50").deadline_aware
    assert stage_policy("gs-q").queue_aware and not stage_policy("GS").queue_aware
    with pytest.raises(ValueError, match="GS"):
        stage_policy("grandslam")


# -- the scheduling step --------------------------------------------------------------------


class Flat:
    """Every batch of n takes 10 + n ms (tail included)."""

    def estimate_ms(self, n: int) -> float:
        return 10.0 + n

    def p95_ms(self, n: int, now: float) -> float:
        return 10.0 + n


@dataclass(slots=True)
class Queued:
    deadline: float
    arrival: float
    seq: int
    size: int = 1
    hopeless: bool = False
    cancelled: bool = False


def queue_of(
    deadlines: list[float], order: Literal["deadline", "arrival"] = "deadline"
) -> RequestQueue[Queued]:
    q: RequestQueue[Queued] = RequestQueue(order)
    for i, d in enumerate(deadlines):
        q.push(Queued(deadline=d, arrival=0.0, seq=i))
    return q


def step(q: RequestQueue[Queued], **kw: Any) -> tuple[int, str]:
    args: dict[str, Any] = {
        "batching": "dynamic", "deadline_aware": True, "limit": 8, "late_limit": 8,
        "free_slots": 1, "cold": False, "inflight": 0,
    }  # fmt: skip
    args.update(kw)
    d = next_batch(0.0, q, Flat(), **args)
    return d.take, d.reason


def test_no_batching_sends_one_request_at_a_time() -> None:
    assert step(queue_of([1.0] * 5), batching="none", deadline_aware=False) == (1, "static")


def test_static_batching_waits_to_fill_its_size_while_the_head_can_wait() -> None:
    # five queued of thirty, a second to go: wait for the batch to fill
    assert step(queue_of([1.0] * 5), batching="static", limit=30) == (0, "wait")
    assert step(queue_of([1.0] * 40), batching="static", limit=30) == (30, "static")
    assert step(queue_of([1.0] * 30), batching="static", limit=30) == (30, "static")
    # the head's deadline leaves no time to wait for a full batch: what is queued goes now
    q = queue_of([0.01] + [1.0] * 4)
    assert next_batch(0.0, q, Flat(), batching="static", deadline_aware=False, limit=30,
                      late_limit=30, free_slots=1, cold=False, inflight=0).take == 5  # fmt: skip
    waiting = next_batch(0.0, queue_of([1.0] * 5), Flat(), batching="static",
                         deadline_aware=False, limit=30, late_limit=30, free_slots=1,
                         cold=False, inflight=0)  # fmt: skip
    assert waiting.wake_at is not None and 0.0 < waiting.wake_at < 1.0


def test_a_full_static_batch_at_the_last_stage_breaks_the_deadlines_dynamic_batching_meets() -> (
    None
):  # fmt: skip
    """GrandSLAM Fig. 12: at the last stage, 60 queued with 45 ms left each and a batch costing
    10 ms + 1 ms per request. A static batch of 50 leaves full and finishes at 60 ms: all 50
    miss. Dynamic batching sends the largest prefix that still makes it (35: 45 ms), and the
    rest follow in the next batch."""
    deadlines = [0.045] * 60
    static = next_batch(0.0, queue_of(deadlines), Flat(), batching="static",
                        deadline_aware=False, limit=50, late_limit=50, free_slots=1,
                        cold=False, inflight=0)  # fmt: skip
    assert (static.take, static.reason) == (50, "static")
    assert 0.0 + Flat().estimate_ms(static.take) / 1000 > 0.045  # every member misses
    dynamic = next_batch(0.0, queue_of(deadlines), Flat(), batching="dynamic",
                         deadline_aware=True, limit=50, late_limit=50, free_slots=1,
                         cold=False, inflight=0)  # fmt: skip
    assert dynamic.take == 35 and dynamic.reason == "closed"
    assert Flat().estimate_ms(dynamic.take) / 1000 <= 0.045  # every member makes it


def test_dynamic_batching_waits_for_company_while_the_deadline_allows() -> None:
    assert step(queue_of([1.0] * 3)) == (0, "wait")
    # the deadline only allows waiting until 0.5 - 14 ms... it is still far: wait
    assert step(queue_of([0.0115, 1.0])) == (1, "closed")  # the second would break the first


def test_no_free_slot_means_busy_and_a_cold_function_is_woken_by_its_head() -> None:
    assert step(queue_of([1.0] * 3), free_slots=0, inflight=2) == (0, "busy")
    assert step(queue_of([1.0] * 3), cold=True) == (1, "activate")


def test_hopeless_requests_go_behind_the_ones_that_can_still_make_it() -> None:
    q = queue_of([0.005, 0.2, 0.3])  # the first cannot make it (10 ms for a batch of one)
    take, reason = step(q)
    assert [round(x.deadline, 3) for x in q.items] == [0.2, 0.3, 0.005]
    assert (take, reason) == (0, "wait")


def test_the_last_stage_gets_the_end_to_end_deadline_exactly() -> None:
    # found by Hypothesis: now + (deadline - now) is one ulp short of the deadline here
    due = stage_policy("GS").stage_deadline(
        stage=0, now=1.850379739008539, arrival=0.0, deadline=10.459395176926423,
        estimates_ms=[1.0],
    )  # fmt: skip
    assert due == 10.459395176926423
