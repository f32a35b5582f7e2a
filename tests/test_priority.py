"""A starting replica yields the CPU: its niceness while it starts, every thread's after
(knative.local.priority), with real processes; and replicas take turns to load
(``platform.max_starting``, knative.local.fleet)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from knative.local.priority import can_restore, niceness, restore, starting
from slackwise_config import ConfigError, parse_config

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


@pytest.mark.parametrize("value", [-1, 20, "ten", True])
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
