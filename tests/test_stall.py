"""A batch whose answer waited out a stall of the adapter's own loop teaches the controller
nothing about the function (adapter.serving.batch_sender), and the loop-lag timer tells how long
the loop was away (adapter.serving.loop_lag)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import orjson

from adapter.serving.batch_sender import STALL_S
from adapter.serving.dispatcher import Dispatcher
from adapter.serving.loop_lag import LoopLag
from adapter.serving.metrics import AdapterMetrics
from adapter.serving.pending import Pending
from adapter.serving.records import RecordWriter
from adapter.serving.wiring import latency_prior
from slackwise_core.clock import Clock, MonotonicClock, VirtualClock
from slackwise_core.http1 import Http1Response
from slackwise_policies.batching import BatchDecision
from slackwise_policies.modes import SLACKWISE
from tests.test_adapter import FakeView, config


class _Lag:
    """A loop that was away ``stall_s`` at a stretch during every flight."""

    def __init__(self, stall_s: float) -> None:
        self.stall_s = stall_s

    def lag_s(self) -> float:
        return 0.0

    def recent_s(self) -> float:
        return 0.0

    def stalled_s(self, since: float) -> float:
        return self.stall_s


class _Replicas:
    async def post(self, function: str, body: bytes, headers: Any, timeout_s: float) -> Any:
        raise AssertionError("the test answers batches itself")

    async def aclose(self) -> None:
        return None


def _taught(
    stall_s: float, round_trip_ms: float, clock: Clock | None = None
) -> tuple[int, int, int]:
    """(warm, cold) samples the latency model holds after one batch of four answered in
    ``round_trip_ms`` while the loop was away ``stall_s``, and how many of its members the door
    counted as finished (its lateness evidence)."""
    fn = config().functions["echo"]

    async def main() -> tuple[int, int, int]:
        dispatcher = Dispatcher(
            function=fn,
            preset=SLACKWISE,
            aimd=SLACKWISE.aimd_for(fn.max_batch),
            model=latency_prior(fn.model),
            view=FakeView(1),
            upstream=_Replicas(),
            clock=clock or MonotonicClock(),
            metrics=AdapterMetrics(),
            records=RecordWriter(None),
            max_queue=100,
            epoch=0.0,
            lag=_Lag(stall_s),
        )
        loop = asyncio.get_running_loop()
        batch = [
            Pending(
                id=f"r{i}",
                function="echo",
                instances=[i],
                arrival=0.0,
                deadline=1e9,
                seq=i,
                future=loop.create_future(),
            )
            for i in range(4)
        ]
        body = orjson.dumps({"predictions": [[i] for i in range(4)]})
        decision = BatchDecision(take=4, instances=4, wake_at=None, reason="full")
        sent = time.monotonic()
        response = Http1Response(200, {}, body)
        done = sent + round_trip_ms / 1000.0
        dispatcher.sender.answer(batch, response, sent, done, 4, False, decision)
        assert all(p.future.done() and not p.future.exception() for p in batch)
        model = dispatcher.model
        return model.warm_samples, model.cold_samples, dispatcher.controller.lateness.finished_count

    if isinstance(clock, VirtualClock):
        return clock.run(main())
    return asyncio.run(main())


def test_a_batch_answered_after_a_stall_of_the_loop_teaches_nothing() -> None:
    # the loop was away 180 ms; the batch of four took 125 ms by the adapter's clock: the model
    # learns nothing, the door still counts its four members
    assert _taught(stall_s=0.18, round_trip_ms=125.0) == (0, 0, 4)
    # no stall: the same round trip is the function's, and is learnt
    assert _taught(stall_s=0.0, round_trip_ms=125.0) == (1, 0, 4)
    # a late turn that is a small part of a long round trip is not a stall of that batch
    assert _taught(stall_s=0.06, round_trip_ms=200.0) == (1, 0, 4)
    # nor is a wake-up under STALL_S late, however short the round trip
    assert _taught(stall_s=STALL_S / 2, round_trip_ms=5.0) == (1, 0, 4)


def test_a_virtual_clock_round_trip_is_not_judged_by_the_real_loop() -> None:
    assert _taught(stall_s=0.18, round_trip_ms=125.0, clock=VirtualClock()) == (1, 0, 4)


def test_the_loop_lag_timer_tells_how_long_the_loop_was_away() -> None:
    """Held 100 ms, the loop's timer is overdue by about that while held (an answer read in the
    same turn sees it) and has said so once it woke."""

    async def main() -> tuple[float, float]:
        lag = LoopLag(period_s=0.005)
        lag.start()
        await asyncio.sleep(0.02)
        since = time.monotonic()
        time.sleep(0.1)  # the loop is held: the timer's wake-up is overdue
        overdue = lag.stalled_s(since)
        await asyncio.sleep(0.02)  # it woke up late
        after = lag.stalled_s(since)
        await lag.stop()
        return overdue, after

    overdue, after = asyncio.run(main())
    assert overdue >= 0.09
    assert after >= 0.09
