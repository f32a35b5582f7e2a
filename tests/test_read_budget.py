"""Client reads get a bounded share of each loop turn (adapter.serving.read_budget): past the
budget a read waits in line, the line is worked oldest first, and once congested the reads that
waited too long are refused and the rest worked newest first. Time and the loop are fakes: the
budget is about real CPU time, which a test cannot spend on cue."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from adapter.serving import read_budget
from adapter.serving.read_budget import ReadBudget


class _Loop:
    def __init__(self) -> None:
        self.soon: list[Callable[[], Any]] = []

    def call_soon(self, callback: Callable[[], Any]) -> None:
        self.soon.append(callback)

    def turn(self) -> None:
        """The end of a turn: what was scheduled during it runs (and may schedule more)."""
        todo, self.soon = self.soon, []
        for callback in todo:
            callback()


class _Conn:
    def __init__(self, name: str, log: list[tuple[str, str, float]]) -> None:
        self.name, self.log = name, log

    def resume(self, waited_s: float) -> None:
        self.log.append(("served", self.name, round(waited_s, 6)))

    def refuse(self, waited_s: float) -> None:
        self.log.append(("refused", self.name, round(waited_s, 6)))


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    now = [100.0]
    monkeypatch.setattr(read_budget.time, "perf_counter", lambda: now[0])
    return now


def test_reads_past_the_budget_wait_in_line_and_are_served_oldest_first(clock: list[float]) -> None:
    loop = _Loop()
    budget = ReadBudget(loop, budget_s=0.002, max_wait_s=0.010)  # type: ignore[arg-type]
    log: list[tuple[str, str, float]] = []
    assert not budget.over()  # the turn's first read starts its clock
    clock[0] += 0.001
    assert not budget.over()
    clock[0] += 0.002  # 3 ms of client work this turn: the rest waits
    assert budget.over()
    for name in "abc":
        budget.defer(_Conn(name, log))
    assert budget.waiting == 3 and log == []
    clock[0] += 0.001
    loop.turn()  # the turn is over: the next one starts with the line, oldest first
    assert [entry[1] for entry in log] == ["a", "b", "c"]
    assert all(kind == "served" for kind, _, _ in log)
    assert budget.waiting == 0 and budget.deferred == 3 and budget.refused == 0


def test_a_new_turn_serves_the_line_only_within_its_budget(clock: list[float]) -> None:
    loop = _Loop()
    budget = ReadBudget(loop, budget_s=0.002, max_wait_s=0.010)  # type: ignore[arg-type]
    log: list[tuple[str, str, float]] = []
    budget.over()
    clock[0] += 0.003
    conns = [_Conn(str(i), log) for i in range(5)]
    for conn in conns:
        budget.defer(conn)

    class Slow(_Conn):
        def resume(self, waited_s: float) -> None:
            super().resume(waited_s)
            clock[0] += 0.0015  # each read handled costs 1.5 ms

    slow = [Slow(str(i), log) for i in range(5, 8)]
    for conn in slow:
        budget.defer(conn)
    loop.turn()  # 0-4 cost nothing; then 5 and 6 spend the 2 ms; 7 waits for the next turn
    assert [entry[1] for entry in log] == ["0", "1", "2", "3", "4", "5", "6"]
    assert budget.waiting == 1
    loop.turn()
    assert log[-1][1] == "7" and budget.waiting == 0


class _Slow(_Conn):
    """A read that costs 1.5 ms of the loop to handle."""

    def __init__(self, name: str, log: list[tuple[str, str, float]], clock: list[float]) -> None:
        super().__init__(name, log)
        self.clock = clock

    def resume(self, waited_s: float) -> None:
        super().resume(waited_s)
        self.clock[0] += 0.0015


def _stand(budget: ReadBudget, loop: _Loop, clock: list[float], carried: list[Any]) -> None:
    """Leave ``carried`` in line, found too old at the end of one turn: the next turn that
    finds the line no shorter (what came in since at least what that turn served) is
    congested, one that finds it shorter is a burst draining.

    Four slow reads ahead of them, held 12 ms into a 15 ms turn, spend the budget of the two
    turns after it: the first finds the line within its turn (15 ms) and serves two, the second
    (3 ms long) finds it 12 ms past the turn's start, 2 ms over a 10 ms ``max_wait_s``, and
    serves the other two. The clock stands 3 ms past the start of the next turn."""
    ahead = [_Slow(f"x{i}", [], clock) for i in range(4)]
    budget.over()
    clock[0] += 0.003
    for conn in [*ahead, *carried]:
        budget.defer(conn)
    clock[0] += 0.012
    loop.turn()
    loop.turn()
    assert budget.waiting == len(carried) and budget.refused == 0


def test_a_congested_line_refuses_what_waited_too_long_and_serves_the_newest_first(
    clock: list[float],
) -> None:
    """A line found too old that then fills as fast as it drains is congested: what waited
    past ``max_wait_s`` beyond the turn is refused, the rest worked newest first."""
    loop = _Loop()
    budget = ReadBudget(loop, budget_s=0.002, max_wait_s=0.010)  # type: ignore[arg-type]
    log: list[tuple[str, str, float]] = []
    _stand(budget, loop, clock, [_Conn("old1", log), _Conn("old2", log)])
    clock[0] += 0.002
    for name in ("new1", "new2"):  # two in, where the last turn served two: no shorter
        budget.defer(_Conn(name, log))
    loop.turn()
    assert log == [
        ("refused", "old1", 0.020),
        ("refused", "old2", 0.020),
        ("served", "new2", 0.0),
        ("served", "new1", 0.0),
    ]
    assert budget.refused == 2


def test_a_burst_behind_one_slow_turn_drains_and_none_of_it_is_refused(clock: list[float]) -> None:
    """The same line found too old, with nothing coming in after it, is a burst (requests read
    together behind one slow parse, or while another process had the core): it drains turn by
    turn, oldest first, and each request keeps the rest of its SLO (CI, on a shared core: the
    15 small requests beside a 2,000-instance body were refused at first sight, 11 ms in line
    against a 500 ms SLO)."""
    loop = _Loop()
    budget = ReadBudget(loop, budget_s=0.002, max_wait_s=0.010)  # type: ignore[arg-type]
    log: list[tuple[str, str, float]] = []
    _stand(budget, loop, clock, [_Slow(name, log, clock) for name in "abcd"])
    clock[0] += 0.004
    loop.turn()  # still too old, but shorter than the last turn found it: two served
    assert [(kind, name) for kind, name, _ in log] == [("served", "a"), ("served", "b")]
    loop.turn()
    assert [name for _, name, _ in log] == ["a", "b", "c", "d"]
    assert budget.waiting == 0 and budget.refused == 0


def test_a_congested_line_refuses_within_its_share_of_a_turn_and_the_rest_in_later_turns(
    clock: list[float],
) -> None:
    """Refusing a flood is owed work, but done at once it makes the turn as long as the flood:
    the replicas' answers and the dispatch they pump wait behind it and the admitted requests
    finish late. So a turn refuses for at most ``refuse_s`` (here 1 ms, at 0.4 ms a refusal:
    three), the newest still get the read budget, and the next turn goes on with the oldest
    even when no client read comes to start it."""
    loop = _Loop()
    budget = ReadBudget(loop, budget_s=0.002, max_wait_s=0.010, refuse_s=0.001)  # type: ignore[arg-type]
    log: list[tuple[str, str, float]] = []

    class Costly(_Conn):
        def refuse(self, waited_s: float) -> None:
            super().refuse(waited_s)
            clock[0] += 0.0004

    _stand(budget, loop, clock, [Costly(f"old{i}", log) for i in range(7)])
    clock[0] += 0.002
    for name in ("new0", "new1"):  # as many in as the last turn served: congested
        budget.defer(_Conn(name, log))
    loop.turn()
    assert [(kind, name) for kind, name, _ in log] == [
        ("refused", "old0"), ("refused", "old1"), ("refused", "old2"),
        ("served", "new1"), ("served", "new0"),
    ]  # fmt: skip
    assert budget.waiting == 4 and loop.soon  # the rest is due in the next turn
    loop.turn()
    assert [name for _, name, _ in log[5:]] == ["old3", "old4", "old5"]
    loop.turn()
    assert [name for _, name, _ in log[8:]] == ["old6"]
    assert budget.waiting == 0 and budget.refused == 7
    loop.turn()
    assert not loop.soon  # an empty line schedules nothing


def test_a_read_held_for_a_long_turn_is_not_congestion(clock: list[float]) -> None:
    """A read held for the next turn waits that turn whatever the line: with turns of 15 ms (a
    flood of new connections) a read held 12 ms was refused by a fixed 10 ms rule, and so was
    nearly every read held at all. The line is too old when its oldest read has waited
    ``max_wait_s`` more than a turn takes: the turn just ended, timed from its first client
    read, or the loop's measured lateness, whichever is longer."""
    loop = _Loop()
    lateness = [0.0]
    budget = ReadBudget(  # type: ignore[arg-type]
        loop, budget_s=0.002, max_wait_s=0.010, turn_s=lambda: lateness[0]
    )
    log: list[tuple[str, str, float]] = []
    budget.over()
    clock[0] += 0.003
    budget.defer(_Conn("held", log))
    clock[0] += 0.012  # held 12 ms of a 15 ms turn
    loop.turn()
    assert log == [("served", "held", 0.012)]
    # a line carried past a turn, 12 ms beyond its start, and as many in as were served:
    # congested while turns are short (the first test), served while the loop runs 15 ms late
    lateness[0] = 0.015
    loop.turn()
    _stand(budget, loop, clock, [_Conn("a", log), _Conn("b", log)])
    clock[0] += 0.002
    for name in ("c", "d"):
        budget.defer(_Conn(name, log))
    loop.turn()
    assert [(kind, name) for kind, name, _ in log[1:]] == [
        ("served", "a"), ("served", "b"), ("served", "c"), ("served", "d"),
    ]  # fmt: skip
    assert budget.refused == 0


def test_once_congested_what_the_newest_first_pass_cannot_reach_is_refused_at_once(
    clock: list[float],
) -> None:
    """While the line fills faster than a turn drains it, a read the newest-first pass does not
    reach has newer reads ahead of it in every later turn: it would only wait out ``max_wait_s``
    for the same refusal (keep-alive digits at twice its capacity: refusals' P99 31-36 ms). So
    it is refused in the turn that could not serve it; and a turn whose reads all fit ends the
    congestion, after which a held read waits its ``max_wait_s`` again."""
    loop = _Loop()
    budget = ReadBudget(loop, budget_s=0.002, max_wait_s=0.010, refuse_s=0.005)  # type: ignore[arg-type]
    log: list[tuple[str, str, float]] = []

    def kinds(since: int) -> list[tuple[str, str]]:
        return [(kind, name) for kind, name, _ in log[since:]]

    _stand(budget, loop, clock, [_Conn("old", log)])
    for i in range(4):  # four in where two were served: congested
        budget.defer(_Slow(f"new{i}", log, clock))
    loop.turn()  # two reads fit the budget (1.5 ms each), newest first
    assert kinds(0) == [
        ("refused", "old"), ("served", "new3"), ("served", "new2"),
        ("refused", "new0"), ("refused", "new1"),
    ]  # fmt: skip
    assert log[3][2] == pytest.approx(0.003)  # refused after 3 ms in line, not after max_wait
    assert budget.waiting == 0 and budget.refused == 3
    clock[0] += 0.003  # still congested: the next turn's leftovers are refused at once too
    for i in range(4):
        budget.defer(_Slow(f"b{i}", log, clock))
    loop.turn()
    assert kinds(5) == [("served", "b3"), ("served", "b2"), ("refused", "b0"), ("refused", "b1")]
    loop.turn()  # a turn that read everything within its budget: the congestion is over
    budget.over()
    clock[0] += 0.003
    for i in range(4):
        budget.defer(_Slow(f"c{i}", log, clock))
    loop.turn()
    assert kinds(9) == [("served", "c0"), ("served", "c1")]  # oldest first again
    assert budget.waiting == 2  # and the rest waits for the next turn
