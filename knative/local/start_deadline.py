"""When a starting replica has had its time: ``ready_timeout_s``, not counting the time the
kernel kept it waiting for a CPU.

A replica that loads its model on cores its neighbours keep busy progresses only as fast as the
scheduler lets it, and with ``platform.starting_nice`` (``auto``: when the ready replicas hold
every CPU) it is meant to: ten steps nicer, in its own session, it gets about a tenth of a
core a serving replica keeps busy (a twentieth where the adapter keeps it busy too: weights 110
against 1,024 each), so its wall time is ten to twenty times its load's CPU (embed under a
10x flood on one core: ready 80-83 s in, docs/advisor.md). Past the 120 s the platform gives a
start (a heavier model, a shorter timeout), it was killed and started again, each try spending
its seconds of CPU on the core it was meant to spare. So the deadline moves on by the
time the replica was runnable but not running, from the kernel's ``run_delay`` in each thread's
``/proc/<pid>/task/<tid>/schedstat``. A start runs on more than one thread, in phases: the main
thread imports the model's code, then a thread of its own loads (trains) it while the main one
answers "loading" and waits for a CPU a little at each poll. So between two looks the deadline
moves by the most any one thread waited (threads waiting at once count once), and the looks add
up: the phases on different threads add up (the most of any one thread, as this module first
took it, missed the main thread's wait while importing, and ``tests/test_platform.py``'s
yielding start timed out), at most
``max_starved`` times the timeout: a start that hangs (sleeps, deadlocks, waits on a lock) waits
for no CPU and times out as before, and one that spins beside busy neighbours times out too,
later. Where the kernel keeps no schedstat the deadline is the plain timeout.
The kernel adds a wait to ``run_delay`` when the thread next gets the CPU, so a start that gets
no slice at all for a while shows that wait only after (at nice 10 beside busy replicas slices
come often; at 19 beside several busy loops there may be none for seconds:
``tests/test_start_deadline.py`` measures at 10 for that reason).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

__all__ = ["StartDeadline", "run_delay_s", "thread_waits_s"]

#: the most the time a start waited for a CPU moves its deadline, in timeouts
MAX_STARVED = 10.0


def thread_waits_s(pid: int) -> dict[int, float] | None:
    """The seconds each thread of ``pid`` has waited runnable for a CPU (the second field of
    its ``schedstat``, in ns), by thread id; None where the kernel does not say."""
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return None
    waits: dict[int, float] = {}
    for task in tasks:
        try:
            waits[int(task.name)] = int((task / "schedstat").read_text().split()[1]) / 1e9
        except (OSError, ValueError, IndexError):
            continue  # a thread that ended meanwhile
    return waits or None


def run_delay_s(pid: int) -> float | None:
    """The most seconds any thread of ``pid`` has waited for a CPU; None where the kernel does
    not say."""
    waits = thread_waits_s(pid)
    return None if waits is None else max(waits.values())


class StartDeadline:
    """The ready deadline of a replica started at ``now`` (see the module). Time comes in as an
    argument; ``waited`` says how long each of the replica's threads has waited for a CPU so
    far, by thread id (None: unknown)."""

    def __init__(
        self,
        now: float,
        timeout_s: float,
        waited: Callable[[], Mapping[int, float] | None],
        *,
        max_starved: float = MAX_STARVED,
    ) -> None:
        self.timeout_s = timeout_s
        self._deadline = now + timeout_s
        self._waited = waited
        self._max_s = max_starved * timeout_s
        # what the threads had waited before the clock started does not count; a thread that
        # appears later counts from nothing (it began after)
        self._seen: dict[int, float] = dict(waited() or {})
        self._total_s = 0.0
        #: what the deadline moved by, at the last look
        self.starved_s = 0.0

    def passed(self, now: float) -> bool:
        """Has the start had its time at ``now``? Asked at every look: what the threads waited
        since the last look adds the most of any one of them."""
        waits = self._waited()
        if waits is not None:
            grown = [w - self._seen.get(tid, 0.0) for tid, w in waits.items()]
            self._total_s += max([0.0, *grown])
            self._seen.update(waits)
            self.starved_s = min(self._max_s, self._total_s)
        return now > self._deadline + self.starved_s

    def reason(self) -> str:
        """Why it failed, for the start's error."""
        if self.starved_s <= 0.0:
            return f"not ready within {self.timeout_s:g} s"
        return (
            f"not ready within {self.timeout_s:g} s and the {self.starved_s:.1f} s it waited "
            "for a CPU"
        )
