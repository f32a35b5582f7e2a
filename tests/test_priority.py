"""A starting replica yields the CPU: its niceness while it starts, every thread's after
(knative.local.priority), with real processes; and replicas take turns to load
(``platform.max_starting``, knative.local.fleet)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from knative.local.priority import (
    AUTO_STEP,
    auto_step,
    autogroups,
    can_restore,
    group_nice,
    lower,
    niceness,
    restore,
    starting,
)
from slackwise_config import ConfigError, parse_config
from tests.busy_loops import busy_loop

#: a child that makes three threads after it starts, as a model's thread pools are made during
#: the load, and then waits
_CHILD = (
    "import threading, time\n"
    "for _ in range(3):\n"
    "    threading.Thread(target=time.sleep, args=(30,), daemon=True).start()\n"
    "print('up', flush=True)\n"
    "time.sleep(30)\n"
)


def _nice_of_threads(pid: int) -> list[int]:
    tids = [int(t.name) for t in Path(f"/proc/{pid}/task").iterdir()]
    return [os.getpriority(os.PRIO_PROCESS, tid) for tid in tids]


def test_the_starting_niceness_is_above_the_platforms_and_zero_turns_it_off() -> None:
    base = niceness()
    assert starting(0) == base
    if can_restore(base):
        assert starting(10) == min(19, base + 10)
    else:  # a replica must not serve at the lower priority: start it at ours
        assert starting(10) == base
    with pytest.raises(ValueError, match="starting_nice"):
        starting(20)
    with pytest.raises(ValueError, match="starting_nice"):
        starting(-1)


def test_every_thread_goes_back_to_the_platforms_niceness_when_ready() -> None:
    base = niceness()
    if not can_restore(base):
        pytest.skip("this process may not lower a niceness (not root, RLIMIT_NICE)")
    nice = starting(10)
    assert nice > base
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD],
        stdout=subprocess.PIPE,
        preexec_fn=lambda: os.setpriority(os.PRIO_PROCESS, 0, nice),
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == b"up"
        before = _nice_of_threads(child.pid)
        assert len(before) == 4 and set(before) == {nice}  # the threads inherit the start's
        assert restore(child.pid, base) == 4
        assert set(_nice_of_threads(child.pid)) == {base}
        assert restore(child.pid, base) == 0  # nothing left to change
    finally:
        child.kill()
        child.wait()
        if child.stdout is not None:
            child.stdout.close()
    assert restore(child.pid, base) == 0  # a process that has gone is skipped


def test_a_replica_in_a_session_of_its_own_is_lowered_and_restored_whole() -> None:
    """:func:`lower` sets the thread and the session of a replica leading a session of its own;
    :func:`restore` sets both back to the platform's thread niceness, which is what a replica
    that never yielded serves at. It does not read this process's own session: a process in
    init's session (a CI runner, a container's first process) is in the kernel's root group and
    shows none, and its replicas must still come back from the yield."""
    base = niceness()
    if not can_restore(base):
        pytest.skip("this process may not lower a niceness (not root, RLIMIT_NICE)")
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD], stdout=subprocess.PIPE, start_new_session=True
    )
    try:
        assert child.stdout is not None
        lower(child.pid, base + 10)
        assert child.stdout.readline().strip() == b"up"
        assert set(_nice_of_threads(child.pid)) == {base + 10}  # made after: they inherit it
        sessions = autogroups()
        assert group_nice(child.pid) == (base + 10 if sessions else None)
        assert restore(child.pid, base) == 4 + (1 if sessions else 0)
        assert set(_nice_of_threads(child.pid)) == {base}
        assert group_nice(child.pid) == (base if sessions else None)
    finally:
        child.kill()
        child.wait()
        if child.stdout is not None:
            child.stdout.close()


def _cpu_ticks(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


def test_a_replica_in_a_session_of_its_own_yields_through_its_session() -> None:
    """Where the kernel shares a CPU between sessions first, a starting replica's niceness must
    be its session's: with it, a yielding busy loop gets a small share of a CPU beside an equal
    one (a tenth by the weights), and its session says the niceness it started at."""
    if not autogroups():
        pytest.skip("the kernel does not group tasks by session here")
    if 0 not in os.sched_getaffinity(0):
        pytest.skip("CPU 0 is not this process's")
    serving, yielding = busy_loop(None), busy_loop(10)
    try:
        time.sleep(0.3)
        assert group_nice(yielding.pid) == 10
        assert group_nice(serving.pid) == 0  # a new session's
        before = _cpu_ticks(serving.pid), _cpu_ticks(yielding.pid)
        time.sleep(1.5)
        served = _cpu_ticks(serving.pid) - before[0]
        yielded = _cpu_ticks(yielding.pid) - before[1]
        assert served > 0
        assert yielded < 0.35 * served, (served, yielded)  # equal would be about 1.0
        if can_restore():
            assert restore(yielding.pid) >= 1  # its session, and its thread
            assert group_nice(yielding.pid) == niceness()
    finally:
        for child in (serving, yielding):
            child.kill()
            child.wait()


def test_auto_yields_only_when_the_ready_replicas_hold_every_cpu() -> None:
    assert auto_step(cpus=1, ready_threads=1) == AUTO_STEP  # one core, one serving: no relief
    assert auto_step(cpus=2, ready_threads=2) == AUTO_STEP
    assert auto_step(cpus=2, ready_threads=3) == AUTO_STEP
    assert auto_step(cpus=2, ready_threads=1) == 0  # a CPU to spare: it brings relief
    assert auto_step(cpus=1, ready_threads=0) == 0  # from zero: nobody to yield to


def test_starting_nice_reads_auto_by_default_off_and_a_step() -> None:
    fns = {"d": {"model": "digits"}}
    assert parse_config({"functions": fns}).platform.starting_nice == "auto"
    raw = {"platform": {"starting_nice": 0}, "functions": fns}
    assert parse_config(raw).platform.starting_nice == 0
    raw = {"platform": {"starting_nice": "auto"}, "functions": fns}
    assert parse_config(raw).platform.starting_nice == "auto"
    raw = {"platform": {"starting_nice": 5}, "functions": fns}
    assert parse_config(raw).platform.starting_nice == 5


@pytest.mark.parametrize("value", [-1, 20, "ten", True, None, 1.5])
def test_a_bad_starting_nice_is_named(value: object) -> None:
    raw = {"platform": {"starting_nice": value}, "functions": {"d": {"model": "digits"}}}
    with pytest.raises(ConfigError, match=r"platform\.starting_nice"):
        parse_config(raw)


@pytest.mark.parametrize("value", [0, -1, "two", 1.5, True])
def test_a_bad_max_starting_is_named(value: object) -> None:
    raw = {"platform": {"max_starting": value}, "functions": {"d": {"model": "digits"}}}
    with pytest.raises(ConfigError, match=r"platform\.max_starting: must be none, auto or"):
        parse_config(raw)


def test_max_starting_reads_none_auto_and_a_count() -> None:
    fns = {"d": {"model": "digits"}}
    assert parse_config({"functions": fns}).platform.max_starting is None
    off = {"platform": {"max_starting": "none"}, "functions": fns}
    assert parse_config(off).platform.max_starting is None
    auto = {"platform": {"max_starting": "auto"}, "functions": fns}
    assert parse_config(auto).platform.max_starting == max(1, (os.cpu_count() or 1) // 2)
    two = {"platform": {"max_starting": 2}, "functions": fns}
    assert parse_config(two).platform.max_starting == 2
