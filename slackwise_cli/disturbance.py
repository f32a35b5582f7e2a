"""A named disturbance, applied identically to every mode of a live experiment
(``experiment.disturbance``), and the summary split inside and outside its window.

``cpu``: ``cores`` busy processes run beside the platform, the adapter and the replayer for the
window (a noisy neighbour on a shared node). ``pause``: the function's ready replicas are
stopped (SIGSTOP) for the window and continued after (a stalled node or a long collection pause).
Times count from when the replayer starts.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import Callable
from typing import Any

from slackwise_core.config.model import Disturbance

__all__ = ["disturb", "window_split"]

_BURNER = "while True:\n    pass\n"


async def disturb(d: Disturbance, replica_pids: Callable[[], list[int]]) -> None:
    """Sleep until the window, disturb through it, undo (also when cancelled)."""
    await asyncio.sleep(d.start_s)
    burners: list[asyncio.subprocess.Process] = []
    paused: list[int] = []
    try:
        if d.kind == "cpu":
            for _ in range(d.cores):
                burners.append(await asyncio.create_subprocess_exec(sys.executable, "-c", _BURNER))
        else:
            for pid in replica_pids():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGSTOP)
                    paused.append(pid)
        await asyncio.sleep(d.duration_s)
    finally:
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

    inside = [r for r in records if d.start_s <= float(r.get("sent", -1.0)) < d.end_s]
    outside = [r for r in records if not d.start_s <= float(r.get("sent", -1.0)) < d.end_s]

    def pct(rows: list[dict[str, Any]]) -> float:
        return round(100.0 * sum(map(missed, rows)) / len(rows), 3) if rows else float("nan")

    in_rs = sum(s["ready"] for s in timeline if d.start_s <= s["t"] < d.end_s)
    all_rs = sum(s["ready"] for s in timeline)
    return {
        "inside_violation_pct": pct(inside),
        "outside_violation_pct": pct(outside),
        "inside_requests": float(len(inside)),
        "inside_replica_s": float(in_rs),
        "outside_replica_s": float(all_rs - in_rs),
    }
