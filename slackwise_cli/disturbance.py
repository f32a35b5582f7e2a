"""A named disturbance, applied identically to every mode of a live experiment
(``experiment.disturbance``), and the summary split inside and outside its window.

``cpu``: ``cores`` busy processes run beside the platform, the adapter and the replayer for the
window (a noisy neighbour on a shared node). ``pause``: the function's ready replicas are
stopped (SIGSTOP) for the window and continued after (a stalled node or a long collection pause).
``slow``: every ready replica of the function, also one that becomes ready during the window (not
while it starts: its service is what is slowed, as the simulator slows it), is throttled to
``1 / factor`` of its CPU time, the way a container's CPU limit is enforced (CFS bandwidth control
stops a cgroup for the rest of each period once its quota is used): in each 100 ms period it runs
``100 / factor`` ms and is stopped for the rest, by a thread that does nothing else (so the event
loop's load does not stretch the periods). ``input``: the replayer sends the model's larger
inputs for the window (``loadtests.input_step``). Times count from when the replayer starts.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable
from typing import Any

from slackwise_config.model import Disturbance

__all__ = ["PERIOD_S", "Throttle", "disturb", "window_split"]

_BURNER = "while True:\n    pass\n"
#: a throttled replica's period: CFS bandwidth control's default cfs_period_us
PERIOD_S = 0.1
#: how often the throttle learns of replicas started or removed
_REFRESH_S = 0.5


def _signal(pids: list[int], sig: signal.Signals) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)


class Throttle:
    """Replicas run ``1 / factor`` of each period and are stopped for the rest (see the module
    docstring), until :meth:`close`, which continues every one it stopped."""

    def __init__(self, factor: float, period_s: float = PERIOD_S) -> None:
        if not factor > 1.0:
            raise ValueError(f"a throttle needs a factor above 1, got {factor:g}")
        self.run_s = period_s / factor
        self.stop_s = period_s - self.run_s
        #: the replicas to throttle, replaced whole (an atomic swap) by the event loop
        self.pids: list[int] = []
        self._done = threading.Event()
        self._seen: set[int] = set()
        self._thread = threading.Thread(target=self._loop, name="throttle", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _loop(self) -> None:
        while not self._done.is_set():
            pids = self.pids
            # one that left the list (draining, removed) runs on, not left stopped
            _signal(sorted(self._seen - set(pids)), signal.SIGCONT)
            self._seen = set(pids)
            _signal(pids, signal.SIGCONT)
            if self._done.wait(self.run_s):
                break
            _signal(pids, signal.SIGSTOP)
            self._done.wait(self.stop_s)

    def close(self) -> None:
        self._done.set()
        if self._thread.is_alive():
            self._thread.join()
        _signal(sorted(self._seen | set(self.pids)), signal.SIGCONT)


async def disturb(d: Disturbance, replica_pids: Callable[[], list[int]]) -> None:
    """Sleep until each window, disturb through it, undo (also when cancelled). An ``input``
    step is the replayer's to apply (it sends the larger bodies), so nothing is done here."""
    if d.kind == "input":
        return
    loop = asyncio.get_running_loop()
    began = loop.time()
    for start, _ in d.windows():
        await asyncio.sleep(max(0.0, began + start - loop.time()))
        await _window(d, replica_pids)


async def _window(d: Disturbance, replica_pids: Callable[[], list[int]]) -> None:
    """One window of ``d``: disturb for ``duration_s``, then undo (also when cancelled)."""
    burners: list[asyncio.subprocess.Process] = []
    paused: list[int] = []
    throttle = Throttle(d.factor) if d.kind == "slow" else None
    try:
        if d.kind == "cpu":
            for _ in range(d.cores):
                burners.append(await asyncio.create_subprocess_exec(sys.executable, "-c", _BURNER))
        elif throttle is not None:
            loop = asyncio.get_running_loop()
            end = loop.time() + d.duration_s
            throttle.pids = replica_pids()
            throttle.start()
            while (left := end - loop.time()) > 0:
                await asyncio.sleep(min(_REFRESH_S, left))
                throttle.pids = replica_pids()
        else:
            for pid in replica_pids():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGSTOP)
                    paused.append(pid)
        if throttle is None:
            await asyncio.sleep(d.duration_s)
    finally:
        if throttle is not None:
            throttle.close()
        for proc in burners:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()
        for pid in paused:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)


def window_split(
    records: list[dict[str, Any]], timeline: list[dict[str, float]], d: Disturbance, slo_ms: float
) -> dict[str, float]:
    """SLO misses (%) and replica-seconds inside the window and outside it, by when each request
    was sent and each one-second sample of ready replicas was taken."""

    def missed(r: dict[str, Any]) -> bool:
        return bool(r["status"] != 200 or r["latency"] * 1000.0 > slo_ms)

    inside = [r for r in records if d.inside(float(r.get("sent", -1.0)))]
    outside = [r for r in records if not d.inside(float(r.get("sent", -1.0)))]

    def pct(rows: list[dict[str, Any]]) -> float:
        return round(100.0 * sum(map(missed, rows)) / len(rows), 3) if rows else float("nan")

    in_rs = sum(s["ready"] for s in timeline if d.inside(s["t"]))
    all_rs = sum(s["ready"] for s in timeline)
    return {
        "inside_violation_pct": pct(inside),
        "outside_violation_pct": pct(outside),
        "inside_requests": float(len(inside)),
        "inside_replica_s": float(in_rs),
        "outside_replica_s": float(all_rs - in_rs),
    }
