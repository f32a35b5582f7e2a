"""GS-T: the SLO split by what binds (slackwise_policies.throughput_split) and the batching for
throughput that goes with it (slackwise_policies.scheduling's ``sustain_slots``). Pure, on a
virtual clock."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

import pytest

from slackwise_policies.lagged_p95 import LaggedP95
from slackwise_policies.latency import LatencyModel
from slackwise_policies.queue import RequestQueue
from slackwise_policies.scheduling import (
    cheapest_batch,
    draining_batch,
    efficient_batch,
    next_batch,
    sustaining_batch,
)
from slackwise_policies.slack import proportional_budgets, stage_policy
from slackwise_policies.throughput_split import (
    HEADROOM,
    AppPath,
    StageFleet,
    ThroughputSplit,
    floor_split,
    highest_rate,
    least_budget_ms,
    queue_wait_ms,
)


def gpu(n: int) -> float:
    """A stage whose batches cost almost nothing more as they grow (5 ms + 0.01 ms each)."""
    return 5.0 + 0.01 * n


def cpu(n: int) -> float:
    """A stage whose batches save a part of the per-request work (6 ms + 3 ms each)."""
    return 6.0 + 3.0 * n


FLEETS = {
    "first": StageFleet(gpu, slots=1, max_batch=64),
    "middle": StageFleet(cpu, slots=2, max_batch=64),
    "last": StageFleet(gpu, slots=1, max_batch=64),
}
CHAIN = AppPath(("first", "middle", "last"), slo_ms=100.0)


def eq4(sizes: tuple[int, int, int]) -> list[float]:
    return [gpu(sizes[0]), cpu(sizes[1]), gpu(sizes[2])]


def fed(split: ThroughputSplit, app: str, rate: float, start: float, end: float) -> float:
    """Feed ``app`` arrivals at ``rate`` a second from ``start`` to ``end``; returns ``end``."""
    t = start
    while t < end:
        split.observe(app, t)
        t += 1.0 / rate
    return end


def test_least_budget_is_the_batch_that_carries_the_rate_with_its_wait_for_a_slot() -> None:
    fleet = FLEETS["middle"]
    # at no load: one request, and the batch ahead of it on the next slot to free
    assert least_budget_ms(fleet, 0.0) == pytest.approx(cpu(1) * 1.5)
    # 500 a second: batches of n carry 2 n / (6 + 3 n) ms; within 85 % the least is n = 15
    n = next(n for n in range(1, 65) if 500 * cpu(n) <= 0.85 * 2 * n * 1000)
    assert least_budget_ms(fleet, 500.0, utilisation=0.85) == pytest.approx(cpu(n) * 1.5)
    # by default the whole capacity: the least batch that keeps up, with the slot's wait
    n = next(n for n in range(1, 65) if 500 * cpu(n) <= 2 * n * 1000)
    assert least_budget_ms(fleet, 500.0) == pytest.approx(cpu(n) * 1.5)
    # more than the largest batch carries (2 x 64 / 198 ms = 646 a second): no budget does
    assert least_budget_ms(fleet, 700.0) == math.inf
    # without the queueing margin, the ceiling's question: the batch that carries it exactly
    exact = next(n for n in range(1, 65) if 500 * cpu(n) <= 2 * n * 1000)
    assert least_budget_ms(fleet, 500.0, utilisation=1.0, wait=0.0) == cpu(exact)
    budgets = [least_budget_ms(fleet, r) for r in range(0, 640, 20)]
    assert budgets == sorted(budgets)  # never less for more load


def test_what_a_batch_carries_is_judged_by_its_mean_and_its_budget_by_its_p95() -> None:
    """A function serving small and large inputs: its batches' P95 is twice their mean.
    Throughput is made of the mean, so the P95 alone would ask for larger batches than the
    rate needs, and their budget would take time the chain's other stages need."""

    def p95(n: int) -> float:
        return 2.0 * cpu(n)

    mixed = StageFleet(p95, slots=2, max_batch=64, mean_ms=cpu)
    n = next(n for n in range(1, 65) if 500 * cpu(n) <= 2 * n * 1000)
    assert least_budget_ms(mixed, 500.0) == pytest.approx(p95(n) * 1.5)
    by_p95 = StageFleet(p95, slots=2, max_batch=64)  # no mean: the estimate judges both
    assert least_budget_ms(by_p95, 500.0) == math.inf  # 2 x 64 / 396 ms: 323 a second at most
    assert least_budget_ms(by_p95, 250.0) > least_budget_ms(
        StageFleet(p95, slots=2, max_batch=64, mean_ms=cpu), 250.0
    )


def test_a_function_that_cannot_batch_is_given_the_wait_its_queue_brings() -> None:
    # one server busy half the time (M/M/1): a request waits with probability 0.5, and its
    # wait past t has probability 0.5 · exp(-t / (2 · 15 ms)): the P95 is ln(10) · 30 ms
    assert queue_wait_ms(1, 0.5, 15.0) == pytest.approx(math.log(10.0) * 30.0)
    assert queue_wait_ms(40, 0.5, 15.0) == 0.0  # forty servers half busy: nobody waits
    waits = [queue_wait_ms(40, busy, 15.0) for busy in (0.9, 0.95, 0.97, 0.99)]
    assert waits == sorted(waits) and waits[-1] > 7 * 15.0  # without bound as busy nears 1
    with pytest.raises(ValueError, match="busy"):
        queue_wait_ms(4, 1.0, 15.0)

    def alone(n: int) -> float:
        return 15.0 * n  # a batch costs its members apart: the batch cap is 1

    fleet = StageFleet(alone, slots=40, max_batch=1)
    assert least_budget_ms(fleet, 0.0) == pytest.approx(15.0 * (1 + 1 / 40))
    busy = 2600.0 * 15.0 / (40 * 1000.0)  # 0.975
    assert least_budget_ms(fleet, 2600.0) == pytest.approx(15.0 + queue_wait_ms(40, busy, 15.0))
    assert least_budget_ms(fleet, 2700.0) == math.inf  # more than forty servers carry
    # the ceiling's question (no wait) is the request's own time while the servers keep up
    assert least_budget_ms(fleet, 2600.0, wait=0.0) == 15.0


def test_the_split_gives_the_binding_function_the_budget() -> None:
    split = ThroughputSplit({"chain": CHAIN})
    now = fed(split, "chain", rate=580.0, start=0.0, end=30.0)
    split.recompute(now, FLEETS)
    sizes = (4, 4, 4)  # what the stages batch at while they keep up
    budgets = split.budgets_ms("chain", eq4(sizes))
    eq4_budgets = proportional_budgets(100.0, eq4(sizes))
    need = least_budget_ms(FLEETS["middle"], split.target_rps)
    # Eq. 4 prices the middle stage at the small batches it runs and gives it less than it
    # needs to carry 580 a second; the split gives it exactly that
    assert eq4_budgets[1] < need
    assert budgets[1] == pytest.approx(need)
    assert budgets[0] < eq4_budgets[0] and budgets[2] < eq4_budgets[2]
    # the time comes from the other stages in Eq. 4's proportions
    assert budgets[0] / budgets[2] == pytest.approx(eq4_budgets[0] / eq4_budgets[2])
    assert sum(budgets) == pytest.approx(100.0)
    assert split.target_rps == pytest.approx(min(split.rate_rps, HEADROOM * 580.0), rel=0.02)


def test_the_split_is_eq_4_when_no_function_binds() -> None:
    # a light load: every stage's least budget is under what Eq. 4 gives it
    split = ThroughputSplit({"chain": CHAIN})
    now = fed(split, "chain", rate=20.0, start=0.0, end=30.0)
    split.recompute(now, FLEETS)
    for sizes in ((1, 1, 1), (2, 3, 1), (8, 8, 8)):
        assert split.budgets_ms("chain", eq4(sizes)) == pytest.approx(
            proportional_budgets(100.0, eq4(sizes))
        )
    # before the first recompute, too
    fresh = ThroughputSplit({"chain": CHAIN})
    assert fresh.budgets_ms("chain", eq4((1, 1, 1))) == pytest.approx(
        proportional_budgets(100.0, eq4((1, 1, 1)))
    )


def test_a_chains_budgets_always_sum_to_its_slo() -> None:
    rng = random.Random(7)
    for _ in range(300):
        k = rng.randint(1, 5)
        slo = rng.uniform(1.0, 500.0)
        estimates = [rng.choice([0.0, rng.uniform(0.1, 200.0)]) for _ in range(k)]
        floors = [rng.choice([0.0, rng.uniform(0.0, 300.0)]) for _ in range(k)]
        budgets = floor_split(slo, estimates, floors)
        assert sum(budgets) == pytest.approx(slo)
        assert all(b >= 0.0 for b in budgets)
        if sum(floors) <= slo:  # every floor is kept when they fit
            assert all(b >= f - 1e-9 for b, f in zip(budgets, floors, strict=True))


def test_an_app_whose_share_changes_moves_its_split_within_a_recompute_period() -> None:
    # two apps share the last stage; only "heavy" goes through the CPU stage
    apps = {
        "heavy": AppPath(("first", "middle", "last"), 100.0),
        "light": AppPath(("first", "last"), 100.0),
    }
    split = ThroughputSplit(apps, period_s=1.0)
    now = fed(split, "heavy", rate=580.0, start=0.0, end=20.0)
    split.recompute(now, FLEETS)
    before = split.budgets_ms("heavy", eq4((4, 4, 4)))
    # the mix turns: "light" arrives, "heavy" fades
    now = fed(split, "light", rate=400.0, start=now, end=now + 40.0)
    fed(split, "heavy", rate=5.0, start=now - 2.0, end=now)
    assert not split.due(now - 40.0 + 0.5)  # not before a period has passed
    assert split.due(now)
    split.recompute(now, FLEETS)
    after = split.budgets_ms("heavy", eq4((4, 4, 4)))
    assert split.mix()["light"] > 0.9
    assert after[1] < before[1]  # the CPU stage no longer needs what carried 580 a second
    assert sum(after) == pytest.approx(100.0)


def test_the_highest_rate_is_where_the_chain_stops_fitting() -> None:
    rate = highest_rate(FLEETS, {"chain": CHAIN}, {"chain": 1.0})
    needs = [least_budget_ms(FLEETS[f], rate) for f in CHAIN.stages]
    assert sum(needs) <= CHAIN.slo_ms
    above = [least_budget_ms(FLEETS[f], rate * 1.02) for f in CHAIN.stages]
    assert sum(above) > CHAIN.slo_ms
    # an SLO no stage fits even alone: no rate
    tight = {"chain": AppPath(CHAIN.stages, 5.0)}
    assert highest_rate(FLEETS, tight, {"chain": 1.0}) == 0.0


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="utilisation"):
        least_budget_ms(FLEETS["middle"], 1.0, utilisation=0.0)
    with pytest.raises(ValueError, match="period_s"):
        ThroughputSplit({"chain": CHAIN}, period_s=0.0)
    with pytest.raises(ValueError, match="one estimate and one floor"):
        floor_split(10.0, [1.0], [1.0, 2.0])


def test_gs_t_is_a_proportional_policy_with_the_split_and_the_batching() -> None:
    policy = stage_policy("gs-t")
    assert policy.throughput_aware and policy.sustain and policy.division == "proportional"
    assert stage_policy("GS-T-split").sustain is False
    assert stage_policy("GS-TB").throughput_aware is False


# -- the batching for throughput ---------------------------------------------------------------


class PerRequest:
    """A batch of n takes 1 + 9 n ms: batching saves little."""

    def estimate_ms(self, n: int) -> float:
        return 1.0 + 9.0 * n

    def p95_ms(self, n: int, now: float) -> float:
        return self.estimate_ms(n)


class Amortised:
    """A batch of n takes 20 + 1 n ms: batching pays."""

    def estimate_ms(self, n: int) -> float:
        return 20.0 + n

    def p95_ms(self, n: int, now: float) -> float:
        return self.estimate_ms(n)


@dataclass(slots=True)
class Item:
    deadline: float
    arrival: float
    seq: int
    size: int = 1
    hopeless: bool = False
    cancelled: bool = False
    input_bytes: float = 0.0

    @property
    def due(self) -> float:
        return self.deadline


def queue_of(deadlines: list[float]) -> RequestQueue[Item]:
    q: RequestQueue[Item] = RequestQueue("deadline")
    for i, d in enumerate(deadlines):
        q.push(Item(deadline=d, arrival=0.0, seq=i))
    return q


def step(q: RequestQueue[Item], model: object, **kw: object) -> tuple[int, str]:
    args: dict[str, object] = {
        "batching": "dynamic", "deadline_aware": True, "limit": 64, "late_limit": 64,
        "free_slots": 1, "cold": False, "inflight": 1, "arrival_rate": 1000.0, "slots": 1,
    }  # fmt: skip
    args.update(kw)
    d = next_batch(0.0, q, model, **args)  # type: ignore[arg-type]
    return d.take, d.reason


def test_the_sustaining_batch_is_the_least_that_keeps_up() -> None:
    # 500 a second on one slot, 20 + n ms a batch, 95 % busy at most: 500 (20 + n) <= 950 n
    assert sustaining_batch(Amortised(), 500.0, 1, 64, backlog=1) == 23
    assert sustaining_batch(Amortised(), 500.0, 2, 64, backlog=1) == 8  # 500 (20 + n) <= 1900 n
    # more than the largest batch carries: no batch size saves it
    assert sustaining_batch(Amortised(), 1000.0, 1, 64, backlog=100) == 1
    # nothing keeps up at 200 a second per slot when every request costs 9 ms: batching
    # cannot save the function, so no request is given up for it
    assert sustaining_batch(PerRequest(), 200.0, 1, 64, backlog=100) == 1


def test_under_overload_the_requests_only_a_small_batch_could_serve_are_given_up() -> None:
    """500 a second on one slot that needs batches of 23 (43 ms) to keep up: five heads with
    30 ms left can still go in a batch of 10 (30 ms), but serving the heads in batches that
    small is what lets the backlog grow. With the batching for throughput they go behind, and
    a batch that keeps up leaves with the requests that have the time for it."""
    deadlines = [0.030] * 5 + [2.0] * 600
    plain = step(queue_of(deadlines), Amortised(), arrival_rate=500.0)
    assert plain == (10, "closed")  # as many as the heads' 30 ms allow
    q = queue_of(deadlines)
    take, _ = step(q, Amortised(), sustain_slots=1, arrival_rate=500.0)
    assert take >= 23
    assert all(item.deadline == 2.0 for item in q.items[:take])
    # at a load the slots carry with batches of one, nothing changes
    light = queue_of(deadlines)
    assert step(light, Amortised(), sustain_slots=1, arrival_rate=10.0) == (10, "closed")


def test_the_floor_keeps_up_with_the_rate_read_since_the_first_arrival() -> None:
    """A flood of 500 a second that started 50 ms ago reads as 25 a second over a one-second
    window; the floor keeps up with ``sustain_rate`` (the read since the first arrival), so the
    heads only a small batch could serve go behind as they do once the window has filled."""
    deadlines = [0.030] * 5 + [2.0] * 600
    window = step(queue_of(deadlines), Amortised(), sustain_slots=1, arrival_rate=25.0)
    assert window == (10, "closed")  # read as a trickle: the heads go in a batch of 10
    q = queue_of(deadlines)
    take, _ = step(q, Amortised(), sustain_slots=1, arrival_rate=25.0, sustain_rate=500.0)
    assert take >= 23
    assert all(item.deadline == 2.0 for item in q.items[:take])


class TailHeavy(Amortised):
    """A batch of n takes 20 + n ms on average and twice that at its P99 (after slow batches)."""

    def p99_ms(self, n: int, now: float) -> float:
        return 2.0 * self.estimate_ms(n)


def test_the_floor_is_judged_by_the_tail_the_membership_reads() -> None:
    """500 a second on one slot needs batches of 23 (43 ms on average, 86 at the P99). Heads
    with 60 ms left have time for the floor's mean, not its tail: judged by the tail, their
    batch could hold 10. Left at the front they made the batch that small; with the floor
    judged by the tail too, they go behind and the batch that keeps up leaves."""
    deadlines = [0.060] * 5 + [2.0] * 600
    q = queue_of(deadlines)
    take, _ = step(q, TailHeavy(), sustain_slots=1, arrival_rate=500.0, tail_membership=True)
    assert take >= 23
    assert all(item.deadline == 2.0 for item in q.items[:take])
    # judged by the mean, the heads have the floor's time: they lead, in a batch as large as
    # their deadline allows by the mean
    mean = queue_of(deadlines)
    assert step(mean, TailHeavy(), sustain_slots=1, arrival_rate=500.0) == (40, "closed")
    # without the batching for throughput, the tail decides the batch the heads can ride
    plain = queue_of(deadlines)
    assert step(plain, TailHeavy(), arrival_rate=500.0, tail_membership=True) == (10, "closed")


def test_a_batch_that_saves_nothing_goes_apart_while_slots_are_free() -> None:
    take, _ = step(queue_of([0.03] * 3), PerRequest(), free_slots=3, sustain_slots=3)
    assert take == 1  # 28 ms together against 10 ms each apart, with three slots free
    # with one slot left, or where batching pays, the batch stays whole
    assert step(queue_of([0.03] * 3), PerRequest(), free_slots=1, sustain_slots=3)[0] == 3
    assert step(queue_of([0.05] * 64), Amortised(), free_slots=3, sustain_slots=3)[0] == 30


def test_the_efficient_batch_is_where_the_fixed_cost_stops_paying() -> None:
    # 20 ms fixed, 1 ms an instance: past 200 the fixed cost is under a tenth of the members'
    assert efficient_batch(20.0, 1.0, 1000) == 200
    assert efficient_batch(20.0, 1.0, 64) == 64
    assert efficient_batch(1.0, 9.0, 64) == 2  # 1 + 9 n: one more instance saves under a tenth
    # a batch costs at least its members apart (a CPU model that batches super-linearly)
    assert efficient_batch(-1.0, 16.0, 64) == 1
    assert efficient_batch(0.0, 16.0, 64) == 1
    assert efficient_batch(5.0, 0.0, 64) == 64  # the cost does not grow with the batch


def test_the_cheapest_batch_follows_a_curve_that_bends() -> None:
    # cheapest per instance at 8 (4.8 ms), dearer past it: the least within a tenth of that
    qa = {1: 18.5, 2: 24.8, 4: 26.9, 8: 38.4, 16: 126.0, 32: 278.0, 64: 550.0}

    def curve(n: int) -> float:
        lower = max(k for k in qa if k <= n)
        upper = min((k for k in qa if k >= n), default=64)
        if upper == lower:
            return qa[lower]
        return qa[lower] + (qa[upper] - qa[lower]) * (n - lower) / (upper - lower)

    assert cheapest_batch(curve, 64) == 7  # 7: 5.2 ms an instance, within a tenth of 4.8
    assert cheapest_batch(curve, 4) == 4  # within 4 the cheapest is 4 itself
    assert cheapest_batch(PerRequest().estimate_ms, 64) == 2  # 1 + 9 n: 9.5 ms within 9.9
    assert cheapest_batch(Amortised().estimate_ms, 64) == 46  # 20 + n: 1.43 within 1.31 + 10 %


def _controller(policy: str, a_ms: float, b_ms: float) -> object:
    from slackwise_policies.controller import Controller
    from slackwise_policies.latency import LatencyModel
    from slackwise_policies.modes import preset

    return Controller(
        name="f", preset=preset("slackwise"), model=LatencyModel(a_ms=a_ms, b_ms_per_item=b_ms),
        max_batch=64, container_concurrency=1, now=0.0, stage_policy=stage_policy(policy),
    )  # fmt: skip


@pytest.mark.parametrize(
    ("policy", "a_ms", "ready", "largest"),
    [
        ("GS-T", -1.0, 1, 1),  # a batch costs what its members cost apart: one at a time
        ("GS-TB", -1.0, 2, 1),
        ("GS-T", 40.0, 2, 16),  # 40 + 16 n: worth 25 (40 / 1.6), and 16 are queued
        ("GS-T", 20.0, 2, 13),  # 20 + 16 n: worth 13, and two slots take the 16 at that size
        ("GS-T", 20.0, 1, 16),  # one slot: a backlog, and the cheapest per instance is the most
        ("GS", -1.0, 1, 16),  # GS batches what its deadlines allow
    ],
)
def test_batching_for_throughput_sends_no_batch_past_the_efficient_size(
    policy: str, a_ms: float, ready: int, largest: int
) -> None:
    """A queue of 16 with all the time in the world. GS sends it in one batch; with the
    batching for throughput a function whose batches cost what their members cost apart
    (imagenet on this CPU) sends them one at a time, and one whose fixed cost is small against
    its members' no larger a batch than is worth their wait, unless the slots free now could
    not take the queue at that size (a backlog: then the cheapest per instance)."""
    from slackwise_policies.queue import QueuedRequest

    c = _controller(policy, a_ms, 16.0)
    for seq in range(16):
        c.queue.push(QueuedRequest(deadline=100.0, arrival=0.0, seq=seq))  # type: ignore[attr-defined]
    c.limit = lambda: 64  # type: ignore[attr-defined]  # AIMD's limit out of the way
    step = c.step(0.0, ready=ready)  # type: ignore[attr-defined]
    assert step.batch is not None and len(step.batch) == largest


def test_when_no_batch_keeps_up_the_floor_is_the_batch_that_carries_the_most() -> None:
    """qa on this CPU (its profile: cheapest per instance at batch 8, dearer past it) on two
    slots carries at most about 400 requests a second. At 500 a burst's backlog must go in
    batches of 8: a floor of 1 (as first built) let the requests nearest their deadlines go a
    few at a time while every later one fell behind. The wrapped model the controller reads
    answers the same."""
    profile = {1: 18.5, 2: 24.9, 4: 26.6, 8: 38.6, 16: 126.9, 32: 279.0, 64: 550.0}
    model = LatencyModel.from_prior(5.0, 1.0, curve=True, prior_curve=profile)
    assert sustaining_batch(model, 250.0, 2, 64, backlog=1) == 4  # 250 · 26.6 <= 950 · 4 · 2
    # a backlog of 16 on two slots: one round of 8 (38.6 ms) against two of 4 (53.2)
    assert sustaining_batch(model, 500.0, 2, 64, backlog=16) == 8
    lagged = LaggedP95(model, every=8, max_age_s=1.0)
    assert sustaining_batch(lagged, 500.0, 2, 64, backlog=16) == 8
    assert sustaining_batch(model, 500.0, 2, 6, backlog=16) == 4  # within the limit: 4 beats 6
    # two queued: one round of two (24.9 ms) is sooner than one round of 8 (38.6)
    assert sustaining_batch(model, 500.0, 2, 64, backlog=2) == 1
    line = LatencyModel.from_prior(5.0, 1.0, curve=False)
    assert sustaining_batch(line, 5000.0, 2, 64, backlog=16) == 1  # no curve: no floor


#: imagenet over HTTP on this CPU (its profile's medians): the cheapest per instance is a batch
#: of 32 (14.8 ms an instance against 15.3 alone), thirty times as long as one alone
IMAGENET_HTTP = {1: 15.3, 2: 31.5, 4: 64.0, 8: 167.0, 16: 269.4, 32: 474.6, 64: 1287.6}


def test_under_a_backlog_the_batch_is_the_one_that_drains_it_soonest() -> None:
    """Every member of a batch waits for the whole of it, and the last of a backlog for every
    round before its own: a batch a few per cent cheaper per instance pays only when the
    backlog is deep enough. WL1 at 1000 nodes sent imagenet's backlog in batches of 32 (475 ms
    against img_query's 213 ms SLO), every member missed, and GS-T collapsed at 7,800 req/s
    (24 % missed) where ED-DYN missed 0.6 %."""
    model = LatencyModel.from_prior(5.0, 1.0, curve=True, prior_curve=IMAGENET_HTTP)
    assert draining_batch(model.estimate_ms, 400, 40, 64) == 1  # 10 rounds of 15.3 ms
    assert draining_batch(model.estimate_ms, 1280, 40, 64) == 32  # one of 475 against 32 of 15
    # no batch longer than the most time a queued request has left: none serves it in time
    assert draining_batch(model.estimate_ms, 1280, 40, 64, within_ms=213.0) == 1
    assert sustaining_batch(model, 2700.0, 40, 64, backlog=1280, within_ms=213.0) == 1
    # a function that batches well goes in its efficient batch as soon as two rounds queue
    qa = LatencyModel.from_prior(
        5.0, 1.0, curve=True, prior_curve={1: 18.5, 2: 24.9, 4: 26.6, 8: 38.6, 16: 126.9}
    )
    assert draining_batch(qa.estimate_ms, 16, 2, 16) == 8
    assert draining_batch(qa.estimate_ms, 16, 2, 16, within_ms=30.0) == 4  # 8 takes 38.6


def test_a_backlog_raises_the_batch_cap_only_to_a_batch_its_requests_have_time_for() -> None:
    """GS-T's stage under a backlog: its cap rises from the efficient batch to the one that
    drains the backlog soonest, never to one longer than any queued request has left."""
    from slackwise_policies.controller import Controller
    from slackwise_policies.modes import preset
    from slackwise_policies.queue import QueuedRequest

    def cap_after(deadline_s: float, queued: int) -> int:
        model = LatencyModel.from_prior(1.0, 14.0, curve=True, prior_curve=IMAGENET_HTTP)
        c: Controller[QueuedRequest] = Controller(
            name="imagenet", preset=preset("slackwise"), model=model, max_batch=64,
            container_concurrency=1, now=0.0, stage_policy=stage_policy("GS-T"),
        )  # fmt: skip
        for seq in range(queued):
            c.queue.push(QueuedRequest(deadline=deadline_s, arrival=0.0, seq=seq))
        c.step(0.0, ready=40)
        return c.batch_cap()

    assert cap_after(100.0, 1280) == 32  # all the time in the world: one round of 32 is soonest
    assert cap_after(0.213, 1280) == 1  # 213 ms left: a batch of 32 would serve none in time
    assert cap_after(100.0, 60) == 1  # a backlog of a round and a half: one at a time
