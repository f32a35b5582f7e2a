"""The live ``slow`` disturbance (slackwise_cli.disturbance.Throttle) on a real process: it runs
a fraction of each period, is stopped for the rest, and is left running when the window ends."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from slackwise_cli.disturbance import Throttle

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def test_a_throttled_process_gets_a_fraction_of_the_cpu_and_runs_again_after() -> None:
    busy = subprocess.Popen([sys.executable, "-c", "while True:\n    pass\n"])
    try:
        time.sleep(0.3)
        throttle = Throttle(4.0)
        throttle.pids = [busy.pid]
        start, began = _cpu_s(busy.pid), time.monotonic()
        throttle.start()
        time.sleep(2.0)
        used = (_cpu_s(busy.pid) - start) / (time.monotonic() - began)
        throttle.close()
        # a quarter of each period at most (a loaded machine gives it less, never more)
        assert used < 0.45, used
        time.sleep(0.2)
        assert _state(busy.pid) != "T"  # continued, not left stopped
        start = _cpu_s(busy.pid)
        time.sleep(0.5)
        assert _cpu_s(busy.pid) > start
    finally:
        busy.kill()
        busy.wait()


def test_a_throttle_needs_a_factor_above_one() -> None:
    with pytest.raises(ValueError, match="above 1"):
        Throttle(1.0)
