"""The virtual clock's event loop: timers jump, threads are waited for in real time."""

from __future__ import annotations

import asyncio
import time

from slackwise_core.clock import VirtualClock


def test_sleeps_cost_no_wall_time() -> None:
    clock = VirtualClock(start=100.0)

    async def scenario() -> float:
        await asyncio.sleep(3600.0)
        return clock.now()

    started = time.monotonic()
    assert clock.run(scenario()) == 3700.0
    assert time.monotonic() - started < 5.0


def test_virtual_time_stands_still_while_a_thread_works() -> None:
    clock = VirtualClock(start=0.0)
    seen: list[float] = []

    async def ticker() -> None:
        while True:
            await asyncio.sleep(1.0)
            seen.append(clock.now())

    async def scenario() -> tuple[float, float]:
        task = asyncio.create_task(ticker())
        await asyncio.sleep(0.5)
        before = clock.now()
        await asyncio.to_thread(time.sleep, 0.2)  # real work in a worker thread
        after = clock.now()
        task.cancel()
        return before, after

    before, after = clock.run(scenario())
    assert before == after == 0.5  # no timer fired while the thread ran
    assert seen == []
