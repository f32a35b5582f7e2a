"""The slots that pay: batches beside each other on replicas that share a core finish no sooner
(slackwise_policies/parallelism.py). Pure, on made-up times."""

from __future__ import annotations

import pytest

from slackwise_policies.controller import Controller
from slackwise_policies.latency import LatencyModel
from slackwise_policies.modes import preset
from slackwise_policies.parallelism import Parallelism
from slackwise_policies.queue import QueuedRequest


def feed(p: Parallelism, slowdown: float, batches: int = 60) -> None:
    """Alternate batches alone (one in flight) and pairs sent together, each taking
    ``1 + slowdown·others`` times its 100 ms."""
    t = 0.0
    for i in range(batches):
        if i % 2:
            p.dispatched(t)
            p.answered(t + 0.1, 0.1, 1.0)
            t += 0.2
        else:
            took = 0.1 * (1.0 + slowdown)
            p.dispatched(t)
            p.dispatched(t)
            p.answered(t + took, took, 1.0 + slowdown)
            p.answered(t + took, took, 1.0 + slowdown)
            t += took + 0.1


def test_the_batches_beside_a_batch_are_counted_over_its_run() -> None:
    p = Parallelism()
    p.dispatched(0.0)
    p.dispatched(0.05)
    assert p.answered(0.1, 0.1, None) == pytest.approx(0.5)  # the other was out half its run
    assert p.answered(0.15, 0.1, None) == pytest.approx(0.5)  # the first ended halfway through
    p.dispatched(1.0)
    assert p.answered(1.1, 0.1, None) == 0.0
    assert p.slowdown is None  # no ratios: nothing learnt


@pytest.mark.parametrize(
    ("slowdown", "slots", "used"),
    [(0.0, 2, 2), (0.0, 8, 8), (1.0, 2, 1), (1.0, 4, 1), (0.5, 4, 3), (0.1, 4, 4)],
)
def test_slots_are_used_as_far_as_each_adds_to_the_pace(
    slowdown: float, slots: int, used: int
) -> None:
    """Independent slots all pay; on one shared core (each more batch in flight slows every
    batch by its own time) one does; halfway, the second slot adds a third of one slot's pace,
    the third a sixth, the fourth a tenth, under the 15 % asked."""
    p = Parallelism()
    feed(p, slowdown)
    assert p.slowdown == pytest.approx(slowdown, abs=1e-6)
    assert p.slots(slots) == used


def test_without_batches_beside_each_other_every_slot_is_used() -> None:
    p = Parallelism()
    for i in range(50):
        p.dispatched(i * 0.2)
        p.answered(i * 0.2 + 0.1, 0.1, 1.0 + 0.3 * (i % 3))  # noisy, but always alone
    assert p.slowdown is None and p.slots(3) == 3


def test_a_cap_fades_once_its_evidence_is_forgotten_and_every_slot_is_tried_again() -> None:
    p = Parallelism()
    feed(p, 1.0)
    assert p.slots(2) == 1
    t = 100.0
    for _ in range(2000):  # one at a time now: the batches beside others fade
        p.dispatched(t)
        p.answered(t + 0.1, 0.1, 1.0)
        t += 0.2
    assert p.slowdown is None and p.slots(2) == 2


def test_the_controller_holds_one_batch_at_a_time_where_a_second_does_not_pay() -> None:
    """Two ready replicas on one core: once a batch beside another is seen to take twice as
    long, the controller sends the next batch only when the one in flight is answered, and the
    door prices its queue on one slot."""
    c: Controller[QueuedRequest] = Controller(
        name="f", preset=preset("slackwise"), model=LatencyModel(a_ms=50.0, b_ms_per_item=0.0),
        max_batch=1, container_concurrency=1, now=0.0,
    )  # fmt: skip
    feed(c.parallel, 1.0)
    assert c.slots(2) == 1
    for seq in range(3):
        c.admit(QueuedRequest(deadline=100.0, arrival=50.0, seq=seq), 50.0, ready=2)
    assert c.step(50.0, ready=2).batch
    assert c.step(50.0, ready=2).busy  # the second slot waits
    c.parallel = Parallelism()  # independent slots
    assert c.step(50.0, ready=2).batch


def test_a_stall_of_every_replica_is_not_read_as_sharing() -> None:
    """Batches in flight together through a stall of every replica come back fifty times slower:
    more than sharing a core explains, so no sample, and every slot stays in use."""
    p = Parallelism()
    t = 0.0
    for i in range(60):
        p.dispatched(t)
        if i % 2:
            p.answered(t + 0.1, 0.1, 1.0)
        else:
            p.dispatched(t)
            p.answered(t + 5.0, 5.0, 50.0)
            p.answered(t + 5.0, 5.0, 50.0)
        t += 6.0
    assert p.slowdown is None and p.slots(2) == 2


def test_the_price_is_one_until_sharing_is_known() -> None:
    p = Parallelism()
    assert p.price(2, now=0.0) == 1.0
    feed(p, 0.0)  # independent slots: known, and nothing to add
    assert p.known == pytest.approx(0.0, abs=1e-6)
    assert p.price(2, now=30.0) == pytest.approx(1.0)


def test_a_faded_cap_still_prices_the_slots_by_the_sharing_last_seen() -> None:
    """On one shared core, after a calm of batches alone (the cap fades, every slot is tried
    again), the window's batches had no company: two slots at once cost each batch twice its
    window's price; one slot costs it that price; never less."""
    p = Parallelism()
    feed(p, 1.0)
    t = 100.0
    for _ in range(2000):
        p.dispatched(t)
        p.answered(t + 0.1, 0.1, 1.0)
        t += 0.2
    assert p.slowdown is None and p.slots(2) == 2  # tried again
    assert p.known == pytest.approx(1.0, abs=0.05)
    assert p.price(2, now=t) == pytest.approx(2.0, abs=0.1)
    assert p.price(1, now=t) == 1.0
    assert p.price(2, now=t + 60.0) == 1.0  # nothing in the window: nothing to scale


def test_the_door_admits_for_the_pace_that_shared_slots_keep() -> None:
    """The same queue and the same window of batches alone: the door that knows the two slots
    share a core promises one slot's pace (a request that waits behind the queue for longer
    than its SLO allows is refused), the one that does not, two."""

    def door(known: float | None) -> int:
        c: Controller[QueuedRequest] = Controller(
            name="f", preset=preset("slackwise"), model=LatencyModel(a_ms=50.0, b_ms_per_item=0.0),
            max_batch=1, container_concurrency=1, now=0.0, late="predict",
        )  # fmt: skip
        for i in range(40):  # a window of batches alone, 50 ms each
            t = i * 0.1
            c.parallel.dispatched(t)
            c.parallel.answered(t + 0.05, 0.05, 1.0)
            c.model.observe(t + 0.05, 1, 50.0, 50.0, cold=False)
        c.parallel.known = known
        admitted = 0
        for seq in range(40):  # arriving at once, 300 ms each
            item = QueuedRequest(deadline=4.3, arrival=4.0, seq=seq)
            admitted += c.admit(item, 4.0, ready=2) is None
        return admitted

    shared, independent = door(1.0), door(None)
    assert shared < independent
    assert shared == pytest.approx(independent / 2, abs=2)
