"""The live advisor loop and the simulator's scalers are one advisor: fed the same arrivals,
measured cold starts and outcomes, they decide the same count at every tick.

Both run :class:`slackwise_policies.advisor_driver.AdvisorDriver`; what this checks is that each
side hands it the same facts (the count in force, the time, which function), so a simulated
result speaks for the live adapter. The live side is the real
:class:`adapter.serving.advisor_loop.Autoscaling` writing to a platform that holds what it is
told; the simulated side is the scaler :class:`simulator.engine.Simulation` drives.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from adapter.serving.advisor_loop import Autoscaling
from functions.headers import PLATFORM_WAIT_MS
from knative.local.events import ReplicaCounts
from simulator.scalers import FunctionState, KpaScaler
from simulator.swayam_scalers import AdvisorScaler, OwnedScaler
from slackwise_config import Config, parse_config
from slackwise_policies.advisor_config import DEFAULT_PERCENTILE
from slackwise_policies.latency import LatencyModel


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def now(self) -> float:
        return self.t

    async def sleep(self, seconds: float) -> None:
        self.t += seconds


class Platform:
    """Holds what the advisor writes; its KPA wants ``kpa`` replicas above any floor."""

    def __init__(self, kpa: int = 0) -> None:
        self.kpa = kpa
        self.count: int | None = None
        self.floor: int | None = None

    def url(self, function: str) -> str:
        return "http://upstream.test"

    def replicas(self, function: str) -> ReplicaCounts:
        desired = self.count if self.count is not None else max(self.kpa, self.floor or 0)
        return ReplicaCounts(0, 0, 0, desired, 0)

    def request_headers(self, function: str) -> dict[str, str]:
        return {}

    async def set_min_scale(self, function: str, replicas: int | None) -> None:
        self.floor = replicas

    async def set_scale(
        self, function: str, replicas: int | None, *, owner: str = "", lease_s: float | None = None
    ) -> None:
        self.count = replicas


def config(capacity: str) -> Config:
    return parse_config(
        {
            "functions": {
                "embed": {
                    "model": "embed",
                    "slo_ms": 300,
                    "max_batch": 8,
                    "annotations": {"autoscaling.knative.dev/max-scale": "6"},
                },
            },
            "adapter": {
                "advisor": {
                    "enabled": True,
                    "capacity": capacity,
                    "min_scale_in_gap_s": 15,
                    "default_setup_s": 4,
                }
            },
        }
    )


#: (from s, to s, requests a second, of 8 outcomes a second how many missed): a surge the
#: model sizes for, then a slowdown it cannot see (a third of the requests late: the evidence
#: raises its floor), then silence
SCENARIO = [(0, 20, 40.0, 0), (20, 35, 260.0, 0), (35, 50, 90.0, 3), (50, 110, 0.0, 0)]


def scenario() -> list[tuple[float, str, Any]]:
    """Events in time order: arrivals, one measured cold start, outcomes, ticks."""
    events: list[tuple[float, str, Any]] = [(3.0, "cold", 2.5)]
    for start, end, rate, missed in SCENARIO:
        for second in range(start, end):
            events += [(second + i / rate, "arrived", 1) for i in range(int(rate))]
            if rate:
                events += [(second + 0.1 * i, "missed" if i < missed else "in time", None)
                           for i in range(1, 9)]  # fmt: skip
            events.append((second + 1.0, "tick", None))
    return sorted(events, key=lambda e: (e[0], e[1] == "tick"))


def live_counts(capacity: str, kpa: int) -> list[int]:
    cfg = config(capacity)
    clock, platform = Clock(), Platform(kpa)
    live = Autoscaling(
        settings=cfg.adapter.advisor,
        functions=cfg.functions,
        slos={"embed": 300.0},
        models={"embed": LatencyModel.from_prior(20.0, 5.0)},
        limits={"embed": lambda: 8},
        view=platform,
        clock=clock,
    )
    out = []
    for t, kind, value in scenario():
        clock.t = t
        if kind == "arrived":
            live.arrived("embed", t, value)
        elif kind == "cold":
            held = {PLATFORM_WAIT_MS: str(value * 1000)}
            live.answered("embed", held, t, waited_cold=True, round_trip_ms=0, batch_ms=0)
        elif kind == "missed":
            live.missed("embed", t)
        elif kind == "in time":
            live.outcome("embed", t)
        else:
            asyncio.run(live.tick())
            held = platform.count if capacity == "own" else platform.floor
            out.append(held or 0)
    return out


def simulated_counts(capacity: str, kpa: int) -> list[int]:
    cfg = config(capacity)
    fn = cfg.functions["embed"]
    shared: dict[str, Any] = dict(
        slos_ms={"embed": 300.0},
        percentiles={"embed": DEFAULT_PERCENTILE},
        container_concurrency={"embed": fn.container_concurrency},
        max_scale={"embed": fn.scaling.max_scale},
    )
    scaler: OwnedScaler | AdvisorScaler
    if capacity == "own":
        scaler = OwnedScaler(cfg.adapter.advisor, initial={"embed": 0}, **shared)
    else:
        kpa_scaler = KpaScaler({"embed": fn.scaling}, initial={"embed": kpa})
        scaler = AdvisorScaler(kpa_scaler, cfg.adapter.advisor, **shared)
    scaler.bind("embed", LatencyModel.from_prior(20.0, 5.0), lambda: 8)
    scaler.initial("embed")
    out = []
    idle = FunctionState(ready=0, starting=0, inflight=0, queued=0)
    for t, kind, value in scenario():
        if kind == "arrived":
            scaler.arrived(t, "embed", value)
        elif kind == "cold":
            scaler.cold_start(t, "embed", value)
        elif kind in ("missed", "in time"):
            scaler.outcome(t, "embed", kind == "missed")  # no urgent tick: the live loop
            # here runs no task of its own, so only its ticks decide
        else:
            count = scaler.decide(t, "embed", idle)
            out.append(count if capacity == "own" else scaler.functions["embed"].pinned or 0)
    return out


@pytest.mark.parametrize("capacity", ["own", "floor"])
def test_live_and_simulated_advisors_decide_the_same_counts(capacity: str) -> None:
    live, simulated = live_counts(capacity, 0), simulated_counts(capacity, 0)
    assert live == simulated
    assert max(live) >= 3  # the surge was scaled for, and the silence scaled in
    assert live[-1] < max(live)
