"""Busy loops pinned to CPU 0, each in a session of its own as the platform spawns a replica:
the neighbours the niceness and start-deadline tests measure against."""

from __future__ import annotations

import os
import subprocess
import sys

from knative.local.priority import set_group_nice

__all__ = ["busy_loop"]


def busy_loop(nice: int | None) -> subprocess.Popen[bytes]:
    """A busy loop on CPU 0 in a session of its own, it and its session at ``nice`` (None: left
    alone)."""

    def setup() -> None:
        os.sched_setaffinity(0, {0})
        if nice is not None:
            os.setpriority(os.PRIO_PROCESS, 0, nice)
            set_group_nice(nice)

    return subprocess.Popen(
        [sys.executable, "-c", "while True: pass"], start_new_session=True, preexec_fn=setup
    )
