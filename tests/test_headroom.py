"""Headroom from evidence (slackwise_policies.headroom) on the virtual clock: calm service holds no
spare, a volatile one holds one that goes after it calms, never above max-scale, and the live
loop and the simulator's owned count decide the same."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from adapter.serving.advisor_loop import Autoscaling
from knative.local.events import ReplicaCounts
from simulator.scalers import FunctionState
from simulator.swayam_scalers import OwnedScaler
from slackwise_config import ConfigError, parse_config
from slackwise_policies.advisor_settings import AdvisorSettings
from slackwise_policies.function_autoscaler import FunctionAutoscaler, function_autoscaler
from slackwise_policies.headroom import Headroom, HeadroomConfig, parse_headroom
from slackwise_policies.latency import LatencyModel

SLO_MS = 300.0
RATE = 30  # requests per second
A_MS, B_MS = 20.0, 5.0  # a batch of n takes 20 + 5 n ms


def _settings(headroom: float | str = "auto") -> AdvisorSettings:
    return AdvisorSettings(enabled=True, capacity="own", keep_alive=False, headroom=headroom)


def _autoscaler(headroom: float | str = "auto", max_scale: int = 0) -> FunctionAutoscaler:
    return function_autoscaler(
        "embed", _settings(headroom), slo_ms=SLO_MS, percentile=95.0,
        model=LatencyModel.from_prior(A_MS, B_MS), limit=lambda: 8, container_concurrency=1,
        max_scale=max_scale, now=0.0,
    )  # fmt: skip


def _second(
    t: float, model: LatencyModel, slow: float, arrived: Any, outcome: Any, rate: int = RATE
) -> None:
    """One second of ``rate`` arrivals served in batches of three at ``slow`` × the usual
    service time, all in time."""
    for i in range(rate):
        now = t + i / rate
        arrived(now)
        if i % 3 == 2:
            ms = slow * (A_MS + 3 * B_MS)
            model.observe(now, 3, ms, ms, cold=False)
        outcome(now)


def _run(auto: FunctionAutoscaler, slow_from: float, slow_to: float, until: float) -> list[int]:
    """The counts decided once a second, the service ``3x`` slower within the window."""
    counts, count, t = [], 1, 0.0
    while t < until:
        slow = 3.0 if slow_from <= t < slow_to else 1.0
        _second(t, auto.model, slow, lambda now: auto.arrived(now, 1),
                lambda now: auto.outcome(now, False))  # fmt: skip
        t += 1.0
        count = auto.decide(t, count, current=count)
        counts.append(count)
    return counts


def test_a_calm_service_holds_no_spare() -> None:
    auto, lean = _autoscaler(), _autoscaler(headroom=0)
    assert _run(auto, 1e9, 1e9, 200.0) == _run(lean, 1e9, 1e9, 200.0)
    assert auto.last is not None and auto.last.headroom == 1.0 and auto.last.spare == 0
    assert auto.status()["headroom"] is None and lean.status()["headroom"] == "off"


def test_a_volatile_service_holds_a_spare_that_goes_after_it_calms() -> None:
    auto, lean = _autoscaler(headroom=1.0), _autoscaler(headroom=0)
    counts, lean_counts = _run(auto, 60, 80, 520.0), _run(lean, 60, 80, 520.0)
    assert lean_counts[50] == counts[50] == 1  # calm: one replica, both
    # settled after the swing (remembered 300 s from its last reading, at about 80 s):
    # the spare stands where the lean count has let its replicas go
    settled = range(130, 190)
    assert all(counts[i] > lean_counts[i] for i in settled), (counts[120:200], lean_counts)
    status = auto.status()
    assert status["headroom"] is None  # gone by the end of the run
    # and it goes: 300 s of memory and the scale-in gap (60 s) after, the counts agree again
    assert counts[-1] == lean_counts[-1] == 1
    assert sum(counts) > sum(lean_counts)


def test_the_status_names_the_swing_and_the_spare() -> None:
    auto = _autoscaler(headroom=1.0)
    _run(auto, 60, 80, 150.0)
    status = auto.status()
    assert "service" in status["headroom"] and "x the rate" in status["headroom"]
    assert status["headroom_factor"] > 1.5 and status["spare"] >= 1


def test_the_spare_never_exceeds_max_scale() -> None:
    auto = _autoscaler(headroom=2.0, max_scale=2)
    counts = _run(auto, 60, 80, 200.0)
    assert max(counts) <= 2 and counts[150] == 2


def test_no_spare_on_top_while_the_swing_is_under_way() -> None:
    auto = _autoscaler()
    for t in range(60):
        auto.headroom_factor(float(t))  # calm readings
    h = auto.headroom
    assert h is not None
    h.observe(61.0, drift=3.0, recent_rate=30.0, recent_s=5.0, sized_rate=60.0)
    h.observe(62.0, drift=3.0, recent_rate=30.0, recent_s=5.0, sized_rate=60.0)
    h.observe(63.0, drift=3.0, recent_rate=30.0, recent_s=5.0, sized_rate=60.0)
    assert h.factor(64.0) == 1.0 and "under way" in (h.reason or "")
    assert h.factor(74.0) == pytest.approx(2.0)  # auto: half the swing of 3


def test_a_rate_swing_counts_only_beyond_the_burst_threshold_and_poisson_noise() -> None:
    h = Headroom(HeadroomConfig(scale=1.0, smooth=1))
    for t in range(20):
        h.observe(float(t), drift=None, recent_rate=10.0, recent_s=5.0, sized_rate=20.0)
    # 10 req/s sized for 20 (U = 2): 30 req/s over a 5 s setup is 150 requests against the
    # 100 the count was sized for, 5 sigma and 1.5x: the count could not absorb it
    h.observe(20.0, drift=None, recent_rate=30.0, recent_s=5.0, sized_rate=20.0)
    assert h.factor(40.0) == pytest.approx(1.5)
    assert h.reason is not None and "rate 1.50x" in h.reason
    within = Headroom(HeadroomConfig(smooth=1))
    for t in range(20):
        within.observe(float(t), drift=None, recent_rate=10.0, recent_s=5.0, sized_rate=20.0)
    within.observe(20.0, drift=None, recent_rate=19.0, recent_s=5.0, sized_rate=20.0)
    assert within.factor(40.0) == 1.0  # nearly doubled, within what U covers
    quiet = Headroom(HeadroomConfig(smooth=1))
    for t in range(20):
        quiet.observe(float(t), drift=None, recent_rate=1.0, recent_s=5.0, sized_rate=2.0)
    quiet.observe(20.0, drift=None, recent_rate=2.6, recent_s=5.0, sized_rate=2.0)
    assert quiet.factor(40.0) == 1.0 and quiet.reason is None  # 13 against 10: noise


def test_the_setting_scales_the_factor() -> None:
    def factor(scale: float) -> float:
        h = Headroom(HeadroomConfig(scale=scale, smooth=1))
        h.observe(0.0, drift=3.0, recent_rate=0.0, recent_s=5.0, sized_rate=0.0)
        return h.factor(20.0)

    assert factor(0.0) == 1.0 and factor(0.5) == pytest.approx(2.0)
    assert factor(0.75) == pytest.approx(2.5) and factor(2.0) == pytest.approx(3.0)  # at most
    assert parse_headroom("auto") == 0.5
    for bad in (-1, "lots", True, float("nan")):
        with pytest.raises(ValueError, match="headroom"):
            parse_headroom(bad)


@pytest.mark.parametrize("value", [-0.5, "much", True])
def test_a_bad_headroom_setting_is_named(value: object) -> None:
    raw = {
        "functions": {"embed": {"model": "embed"}},
        "adapter": {"advisor": {"enabled": True, "headroom": value}},
    }
    with pytest.raises(ConfigError, match=r"adapter\.advisor\.headroom"):
        parse_config(raw)


class _View:
    """A platform that runs whatever count was last written."""

    def __init__(self) -> None:
        self.count = 1

    def replicas(self, function: str) -> ReplicaCounts:
        return ReplicaCounts(self.count, 0, 0, self.count, 0)

    async def set_scale(
        self, function: str, replicas: int | None, *, owner: str = "", lease_s: float | None = None
    ) -> None:
        self.count = 1 if replicas is None else replicas


class _Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def now(self) -> float:
        return self.t

    async def sleep(self, seconds: float) -> None:
        self.t += seconds


def test_the_live_loop_and_the_simulator_decide_the_same() -> None:
    cfg = parse_config({"functions": {"embed": {"model": "embed", "slo_ms": SLO_MS,
                                                "max_batch": 8}},
                        "adapter": {"advisor": {"enabled": True, "capacity": "own",
                                                "keep_alive": False}}})  # fmt: skip
    settings = cfg.adapter.advisor
    live_model, sim_model = LatencyModel.from_prior(A_MS, B_MS), LatencyModel.from_prior(A_MS, B_MS)
    view, clock = _View(), _Clock()
    live = Autoscaling(
        settings=settings, functions=cfg.functions, slos={"embed": SLO_MS},
        models={"embed": live_model}, limits={"embed": lambda: 8}, view=view, clock=clock,
    )  # fmt: skip
    sim = OwnedScaler(
        settings, slos_ms={"embed": SLO_MS}, percentiles={"embed": 95.0},
        container_concurrency={"embed": 1}, max_scale={"embed": 0}, initial={"embed": 1},
    )  # fmt: skip
    sim.bind("embed", sim_model, lambda: 8)
    sim.initial("embed")
    live_counts, sim_counts = [], []
    for second in range(240):
        t = float(second)
        slow = 3.0 if 60 <= second < 80 else 1.0
        for model, arrived, outcome in (
            (live_model, lambda now: live.arrived("embed", now, 1),
             lambda now: live.outcome("embed", now)),
            (sim_model, lambda now: sim.arrived(now, "embed", 1),
             lambda now: sim.outcome(now, "embed", False)),
        ):  # fmt: skip
            _second(t, model, slow, arrived, outcome)
        clock.t = t + 1.0
        asyncio.run(live.tick())
        live_counts.append(view.count)
        sim_counts.append(sim.decide(t + 1.0, "embed", FunctionState(view.count, 0, 0, 0)))
    assert live_counts == sim_counts
    assert max(live_counts) >= 2  # the case is not trivial: the swing moved the count
    auto = live.functions["embed"]
    assert auto.last is not None and auto.last.headroom >= 1.0


def test_an_experiment_mode_names_the_headroom_it_runs_with() -> None:
    from slackwise_cli.experiment import adapter_flags
    from slackwise_config import parse_modes

    assert parse_modes("slackwise,slackwise-headroom-0,slackwise-headroom-2.5") == (
        "slackwise", "slackwise-headroom-0", "slackwise-headroom-2.5",
    )  # fmt: skip
    assert adapter_flags("slackwise-headroom-0.5")[-2:] == ["--headroom", "0.5"]
    for bad in ("slackwise-headroom-", "slackwise-headroom--1", "slackwise-headroom-x"):
        with pytest.raises(ValueError, match="slackwise-headroom-X"):
            parse_modes(bad)
