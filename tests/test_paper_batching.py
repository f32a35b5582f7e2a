"""GrandSLAM's baselines as the paper defines them: Algorithm 1 as written (the largest
slack-ordered prefix whose members all meet their stage deadlines, dispatched at once), and none
of this project's additions (no waiting for company, no dispatch timeout, no late requests moved
behind the savable ones)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from slackwise_policies.latency import LatencyModel
from slackwise_policies.paper_batching import algorithm_1
from slackwise_policies.queue import RequestQueue
from slackwise_policies.scheduling import next_batch
from slackwise_policies.slack import PAPER_SUFFIX, POLICIES, VARIANTS, stage_policy


@dataclass
class Req:
    deadline: float
    arrival: float = 0.0
    size: int = 1
    seq: int = 0
    cancelled: bool = False
    hopeless: bool = False


#: E(n) = 10 + 5 n ms
MODEL = LatencyModel.from_prior(10.0, 5.0)


def test_the_batch_grows_while_every_member_meets_its_stage_slack() -> None:
    # E(1..4) = 15, 20, 25, 30 ms; at t=0 the deadlines admit three (the fourth member's 26 ms
    # is short of E(4) = 30 ms and the earlier ones hold for E(3) = 25 ms)
    queue = [Req(0.030), Req(0.040), Req(0.050), Req(0.026), Req(0.5)]
    d = algorithm_1(0.0, queue, MODEL, limit=64)
    assert (d.take, d.instances, d.wake_at) == (3, 3, None)


def test_it_never_waits_for_company() -> None:
    # a lone request with plenty of slack leaves at once (the project's rule would wait)
    d = algorithm_1(0.0, [Req(10.0)], MODEL, limit=64)
    assert d.take == 1 and d.wake_at is None
    assert algorithm_1(0.0, [Req(10.0)] * 70, MODEL, limit=64).take == 64  # the limit caps it


def test_a_head_that_cannot_make_it_goes_alone_and_late_ones_are_not_grouped() -> None:
    queue = [Req(0.001), Req(0.002), Req(1.0)]  # the first two are already hopeless
    d = algorithm_1(0.0, queue, MODEL, limit=64)
    assert d.take == 1 and d.reason == "late"


def test_late_requests_keep_their_place_as_in_the_paper() -> None:
    q: RequestQueue[Req] = RequestQueue("deadline")
    for i, deadline in enumerate((0.001, 0.002, 1.0)):
        q.push(Req(deadline, seq=i))
    d = next_batch(0.0, q, MODEL, batching="dynamic", deadline_aware=True, limit=64,
                   late_limit=64, free_slots=1, cold=False, inflight=0,
                   as_in_paper=True)  # fmt: skip
    assert d.take == 1 and q.items[0].deadline == 0.001  # the late head goes first
    ours: RequestQueue[Req] = RequestQueue("deadline")
    for i, deadline in enumerate((0.001, 0.002, 1.0)):
        ours.push(Req(deadline, seq=i))
    next_batch(0.0, ours, MODEL, batching="dynamic", deadline_aware=True, limit=64,
               late_limit=64, free_slots=1, cold=False, inflight=0)  # fmt: skip
    assert ours.items[0].deadline == 1.0  # ours moves the hopeless behind the savable one


def test_both_families_run_by_default_and_each_has_the_papers_eight() -> None:
    paper = [n for n in POLICIES if n.endswith(PAPER_SUFFIX)]
    ours = [n for n in POLICIES if n.startswith("ED") and not n.endswith(PAPER_SUFFIX)]
    assert sorted(paper) == sorted(f"{n}{PAPER_SUFFIX}" for n in ours) and len(paper) == 8
    assert all(POLICIES[n].paper for n in paper) and not any(POLICIES[n].paper for n in ours)
    assert stage_policy("ed-dyn-PAPER").paper and "GS-paper" in VARIANTS


@pytest.mark.parametrize("bad", [0, -1])
def test_a_bad_limit_is_refused(bad: int) -> None:
    with pytest.raises(ValueError, match="limit"):
        algorithm_1(0.0, [Req(1.0)], MODEL, limit=bad)
