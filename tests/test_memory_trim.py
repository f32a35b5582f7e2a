"""A burst's freed heap is handed back: glibc's malloc_trim, called every period."""

from __future__ import annotations

import asyncio
import sys

import pytest

from adapter.serving.memory import MemoryTrim, malloc_trim
from slackwise_core.clock import VirtualClock


def test_the_trim_runs_every_period_and_stops() -> None:
    calls: list[float] = []
    clock = VirtualClock()

    async def main() -> None:
        loop = asyncio.get_running_loop()
        trim = MemoryTrim(period_s=5.0, trim=lambda: calls.append(loop.time()) or 1)
        trim.start()
        await asyncio.sleep(12.0)
        await trim.stop()
        await asyncio.sleep(20.0)
        assert trim.calls == 2

    clock.run(main())
    assert len(calls) == 2 and calls[1] - calls[0] == pytest.approx(5.0)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_trim")
def test_glibcs_malloc_trim_is_found_and_callable() -> None:
    trim = malloc_trim()
    assert trim is not None and trim() in (0, 1)


def test_without_the_call_nothing_runs() -> None:
    clock = VirtualClock()

    async def main() -> None:
        trim = MemoryTrim(trim=None)
        trim.trim = None  # as on a C library without malloc_trim
        trim.start()
        await trim.stop()
        assert trim.calls == 0

    clock.run(main())
