"""The local platform's activator: slots handed out packed onto the oldest replicas."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from knative.local.activator import Activator


@dataclass(eq=False)
class Slot:
    name: str
    in_flight: int = 0


def test_work_is_packed_onto_the_oldest_replicas_so_spare_ones_stay_idle() -> None:
    async def main() -> list[str]:
        activator: Activator[Slot] = Activator("f", container_concurrency=2, queue_depth=10)
        first, second, third = Slot("a"), Slot("b"), Slot("c")
        for slot in (first, second, third):
            activator.add(slot)
        taken = [await activator.acquire(1.0) for _ in range(3)]
        activator.release(taken[0])
        taken.append(await activator.acquire(1.0))
        assert third.in_flight == 0  # never needed: idle, and free to go
        return [s.name for s in taken]

    assert asyncio.run(main()) == ["a", "a", "b", "a"]
