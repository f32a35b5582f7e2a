"""Memory given back after a burst: the C allocator's free pages returned to the system.

A flood of requests leaves the adapter's heap larger than its working set: CPython returns an
arena only when every object in it is gone, and glibc's allocator keeps freed chunks for reuse.
The set of live objects shrinks back when the flood ends (queues are bounded by time), but the
resident size does not, and a pod whose memory only ever grows is one its limit will kill.
:class:`MemoryTrim` asks glibc's ``malloc_trim`` to hand free pages back, every ``period_s``,
when the heap may have shrunk: cheap (milliseconds at most) and a no-op where the C library has
no such call (musl, macOS).
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import logging
from collections.abc import Callable

from adapter.serving.background import cancel_and_wait

__all__ = ["MemoryTrim", "malloc_trim"]

logger = logging.getLogger(__name__)


def malloc_trim() -> Callable[[], int] | None:
    """glibc's ``malloc_trim(0)``, or None where the C library does not have it."""
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        libc = ctypes.CDLL(name)
        trim = libc.malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int

    def call() -> int:
        return int(trim(0))

    return call


class MemoryTrim:
    """Calls ``malloc_trim`` every ``period_s`` on the running loop (see the module docstring)."""

    def __init__(self, *, period_s: float = 5.0, trim: Callable[[], int] | None = None) -> None:
        self.period_s = period_s
        self.trim = trim if trim is not None else malloc_trim()
        self.calls = 0
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self.trim is not None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="memory-trim")

    async def stop(self) -> None:
        await cancel_and_wait(self._task)

    async def _run(self) -> None:
        assert self.trim is not None
        while True:
            await asyncio.sleep(self.period_s)
            self.trim()
            self.calls += 1
