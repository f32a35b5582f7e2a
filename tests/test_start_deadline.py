"""A start's deadline does not count the time the kernel kept it waiting for a CPU
(knative.local.start_deadline): on a virtual clock, and the kernel's count with real processes."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from knative.local.start_deadline import MAX_STARVED, StartDeadline, run_delay_s
from tests.busy_loops import busy_loop


class _Waited:
    """How long each thread of a replica has waited for a CPU, set by the test (``value``: the
    main thread's, the only one unless ``threads`` says more)."""

    def __init__(self, value: float | None = 0.0) -> None:
        self.threads: dict[int, float] | None = None if value is None else {1: value}

    @property
    def value(self) -> float:
        assert self.threads is not None
        return self.threads[1]

    @value.setter
    def value(self, seconds: float) -> None:
        assert self.threads is not None
        self.threads[1] = seconds

    def __call__(self) -> dict[int, float] | None:
        return None if self.threads is None else dict(self.threads)


def test_a_start_that_never_waited_for_a_cpu_has_the_plain_timeout() -> None:
    waited = _Waited(3.0)  # what it had waited before the clock started does not count
    deadline = StartDeadline(100.0, 120.0, waited)
    assert not deadline.passed(220.0)
    assert deadline.passed(220.1)
    assert deadline.reason() == "not ready within 120 s"


def test_the_time_a_start_waited_for_a_cpu_moves_its_deadline() -> None:
    waited = _Waited(0.0)
    deadline = StartDeadline(0.0, 120.0, waited)
    waited.value = 100.0  # a yielding start beside busy replicas: runnable, not running
    assert not deadline.passed(150.0)
    assert not deadline.passed(219.9)
    assert deadline.passed(220.1)
    assert deadline.reason() == "not ready within 120 s and the 100.0 s it waited for a CPU"


def test_waits_on_threads_in_turn_add_up() -> None:
    """The main thread waits while it imports, then the loading thread while it loads: both
    move the deadline (the most of any one thread missed the first)."""
    waited = _Waited(0.5)
    deadline = StartDeadline(0.0, 6.0, waited)
    waited.value = 6.8  # importing: 6.3 s runnable, not running
    assert not deadline.passed(5.0)
    assert waited.threads is not None
    waited.threads[2] = 40.0  # the loading thread, begun after the clock started
    waited.value = 7.0  # the main thread answers "loading" now and then
    assert not deadline.passed(50.0)
    assert deadline.starved_s == pytest.approx(46.3)
    assert deadline.passed(52.4)


def test_threads_waiting_at_once_count_once() -> None:
    waited = _Waited(0.0)
    deadline = StartDeadline(0.0, 10.0, waited)
    assert waited.threads is not None
    waited.threads.update({1: 4.0, 2: 5.0, 3: 5.0})  # all runnable over the same 5 s
    assert not deadline.passed(12.0)
    assert deadline.starved_s == pytest.approx(5.0)
    del waited.threads[3]  # a thread that ended keeps what it waited
    waited.threads[2] = 7.0
    assert not deadline.passed(16.9)
    assert deadline.starved_s == pytest.approx(7.0)
    assert deadline.passed(17.1)


def test_the_deadline_moves_at_most_max_starved_timeouts() -> None:
    waited = _Waited(0.0)
    deadline = StartDeadline(0.0, 10.0, waited)
    waited.value = 1e6  # starved for ever: the start still ends
    assert not deadline.passed(10.0 + MAX_STARVED * 10.0)
    assert deadline.passed(10.1 + MAX_STARVED * 10.0)


def test_where_the_kernel_does_not_say_the_timeout_is_plain() -> None:
    deadline = StartDeadline(0.0, 5.0, _Waited(None))
    assert not deadline.passed(5.0)
    assert deadline.passed(5.01)
    assert deadline.reason() == "not ready within 5 s"


def test_the_kernel_counts_the_wait_of_a_start_that_yields_and_not_of_one_that_sleeps() -> None:
    if run_delay_s(os.getpid()) is None:
        pytest.skip("the kernel keeps no schedstat here")
    if 0 not in os.sched_getaffinity(0):
        pytest.skip("CPU 0 is not this process's")
    sleeping = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(30)"], start_new_session=True
    )
    serving, yielding = busy_loop(None), busy_loop(10)
    try:
        time.sleep(0.5)  # started, the sleeper asleep
        before = run_delay_s(yielding.pid), run_delay_s(sleeping.pid)
        time.sleep(1.5)
        after = run_delay_s(yielding.pid), run_delay_s(sleeping.pid)
        assert None not in before and None not in after
        yielded = after[0] - before[0]  # type: ignore[operator]
        slept = after[1] - before[1]  # type: ignore[operator]
        assert yielded > 0.5, yielded  # runnable nearly all of the 1.5 s, running little of it
        assert slept < 0.2, slept  # asleep: it waits for no CPU (a wake-up or two at most)
    finally:
        for child in (sleeping, serving, yielding):
            child.kill()
            child.wait()
    assert run_delay_s(yielding.pid) is None  # gone
