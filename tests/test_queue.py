"""The request queue: deadline order, hopeless requests behind the savable ones, FIFO."""

from __future__ import annotations

import asyncio

from adapter.serving.pending import Pending
from slackwise_policies.queue import RequestQueue


def pending(loop: asyncio.AbstractEventLoop, seq: int, deadline: float) -> Pending:
    return Pending(
        id=f"r{seq}", function="f", instances=[seq], arrival=0.0, deadline=deadline, seq=seq,
        future=loop.create_future(),
    )  # fmt: skip


def test_deadline_order_and_demotion_of_hopeless_requests() -> None:
    loop = asyncio.new_event_loop()
    try:
        q = RequestQueue("deadline")
        for seq, deadline in enumerate([5.0, 1.0, 3.0, 2.0, 4.0]):
            q.push(pending(loop, seq, deadline))
        assert [p.deadline for p in q.items] == [1.0, 2.0, 3.0, 4.0, 5.0]
        moved = q.demote(lambda p: p.deadline < 2.5)  # these two can no longer make it
        assert moved == 2
        assert [p.deadline for p in q.items] == [3.0, 4.0, 5.0, 1.0, 2.0]
        assert all(p.hopeless for p in q.items[3:]) and not q.items[0].hopeless
        q.push(pending(loop, 9, 3.5))
        assert [p.deadline for p in q.items] == [3.0, 3.5, 4.0, 5.0, 1.0, 2.0]
        assert [p.deadline for p in q.pop(5)] == [3.0, 3.5, 4.0, 5.0, 1.0]
        assert len(q) == 1
        q.items[0].future.cancel()
        assert q.drop_cancelled() == 0 and len(q) == 1  # not looked for until noted
        q.note_cancelled()
        assert q.drop_cancelled() == 1 and len(q) == 0
    finally:
        loop.close()


def test_fifo_keeps_arrival_order_and_never_demotes() -> None:
    loop = asyncio.new_event_loop()
    try:
        q = RequestQueue("arrival")
        for seq, deadline in enumerate([5.0, 1.0, 3.0]):
            q.push(pending(loop, seq, deadline))
        assert q.demote(lambda p: True) == 0
        assert [p.seq for p in q.items] == [0, 1, 2]
        late = q.take_late(2.0)
        assert [p.seq for p in late] == [1]
        assert [p.seq for p in q.items] == [0, 2]
        first = q.pop(1)
        q.push_front(first)
        assert [p.seq for p in q.items] == [0, 2]
    finally:
        loop.close()


def test_only_the_hopeless_run_at_the_head_moves_and_the_view_reads_like_a_list() -> None:
    loop = asyncio.new_event_loop()
    try:
        q = RequestQueue("deadline")
        for seq, deadline in enumerate([1.0, 2.0, 3.0, 4.0, 5.0]):
            q.push(pending(loop, seq, deadline))
        # 1 and 2 head the queue and are hopeless; 4 is "hopeless" too but behind a savable one
        assert q.demote(lambda p: p.deadline in (1.0, 2.0, 4.0)) == 2
        view = q.items
        expected = [3.0, 4.0, 5.0, 1.0, 2.0]
        assert len(view) == 5 and [p.deadline for p in view] == expected
        assert [view[i].deadline for i in range(-5, 5)] == expected * 2
        assert [p.deadline for p in view[1:4]] == expected[1:4]
        try:
            view[5]
        except IndexError:
            pass
        else:
            raise AssertionError("index 5 of a 5-long queue must raise IndexError")
    finally:
        loop.close()
