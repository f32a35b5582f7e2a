"""The ceiling with a batch's fill and its service time's spread: hand-worked lateness, the
rate's response to the tail, the room and the allowance, and simulations above it fail."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from simulator.bounds import throughput_ceiling
from simulator.config import parse_sim_config
from simulator.engine import Simulation
from simulator.service import ServiceCurve
from simulator.tail_bound import TailStage, late_shares, stage_rate, tail_ceiling
from slackwise_policies.slack import stage_policy


def _stage(a_ms: float, b_ms: float, *, sigma: float = 0.0, room_ms: float = 25.0,
           slots: int = 2, allowance: float = 0.01, max_batch: int = 16) -> TailStage:  # fmt: skip
    medians = (0.0, *(a_ms + b_ms * n for n in range(1, max_batch + 1)))
    return TailStage(medians, (0.0,) + (sigma,) * max_batch, slots, room_ms, allowance)


def test_a_pair_waits_for_its_second_member_an_exponential_time() -> None:
    # 8 + 2n ms, room 25: a batch of 2 (12 ms) leaves 13 ms for its second member to arrive;
    # the first member is late when the gap exceeds that, exp(-rate x 0.013), one of two members
    stage = _stage(8.0, 2.0)
    for rate in (50.0, 200.0, 800.0):
        late = late_shares(stage, rate)
        assert late[0] == 0.0  # alone, 10 ms within 25: no one to wait for
        assert late[1] == pytest.approx(math.exp(-rate * 0.013) / 2.0, rel=1e-9)
        assert late[15] == 1.0  # 40 ms: every member of a batch of 16 is late


def test_lateness_of_a_batch_of_three_sums_the_two_waits() -> None:
    # batch of 3 (14 ms), 11 ms spare: the first waits a Gamma(2), the second an exponential
    stage, rate = _stage(8.0, 2.0), 300.0
    x = rate * 0.011
    expected = (math.exp(-x) * (1.0 + x) + math.exp(-x)) / 3.0
    assert late_shares(stage, rate)[2] == pytest.approx(expected, rel=1e-9)


def test_with_room_to_spare_the_rate_is_the_largest_batchs_pace() -> None:
    # room 1 s: nothing waits too long; 2 slots x 16 / 40 ms = 800 a second, to the grid's step
    rate = stage_rate(_stage(8.0, 2.0, room_ms=1000.0))
    assert 800.0 * (1 - 0.003) <= rate <= 800.0


def test_a_wider_tail_or_a_tighter_room_lowers_the_rate() -> None:
    rates = [stage_rate(_stage(8.0, 2.0, sigma=s, room_ms=30.0)) for s in (0.0, 0.1, 0.2, 0.4)]
    assert rates == sorted(rates, reverse=True) and rates[-1] < 0.8 * rates[0]
    rooms = [stage_rate(_stage(8.0, 2.0, room_ms=r)) for r in (60.0, 40.0, 30.0, 25.0)]
    assert rooms == sorted(rooms, reverse=True)


def test_the_allowance_buys_batches_that_are_sometimes_late() -> None:
    strict = stage_rate(_stage(8.0, 2.0, sigma=0.2, room_ms=30.0, allowance=0.0))
    loose = stage_rate(_stage(8.0, 2.0, sigma=0.2, room_ms=30.0, allowance=0.05))
    assert loose > strict


def test_the_rate_is_under_the_fill_free_ceiling_and_spends_the_allowance_only_above() -> None:
    # the deterministic ceiling's batch 8 (24 ms) on 2 slots: 666.7 a second; the fill costs
    # the first members of a batch of 8 up to 7 arrivals' time with 1 ms to spare
    stage = _stage(8.0, 2.0, room_ms=25.0, allowance=0.0)
    assert stage_rate(stage) < 0.8 * 666.67
    late = late_shares(stage, stage_rate(stage))
    assert np.all((late >= 0.0) & (late <= 1.0))


def _curve(name: str, a_ms: float, b_ms: float, spread: float) -> ServiceCurve:
    sizes = (1, 2, 4, 8, 16)
    medians = tuple(a_ms + b_ms * n for n in sizes)
    return ServiceCurve(name=name, sizes=sizes, medians_ms=medians,
                        p95s_ms=tuple(m * spread for m in medians),
                        prior_a_ms=a_ms, prior_b_ms=b_ms, cold_start_s=1.0)  # fmt: skip


def _config(apps: dict[str, Any], **functions: Any) -> Any:
    doc = {"seed": 3, "requests": 8000, "adapter": {"max_wait_ms": 0},
           "functions": functions, "apps": apps}  # fmt: skip
    return parse_sim_config(doc, "tail.yaml")


def test_a_workload_is_bound_by_the_function_whose_share_reaches_its_rate_first() -> None:
    apps = {"a": {"stages": ["f", "g"], "slo_ms": 40}, "b": {"stages": ["g"], "slo_ms": 40}}
    config = _config(apps, f={"nodes": 2, "max_batch": 16}, g={"nodes": 4, "max_batch": 16})
    curves = {"f": _curve("f", 8.0, 2.0, 1.3), "g": _curve("g", 4.0, 1.0, 1.3)}
    bound = tail_ceiling(config, curves)
    f_rate, g_rate = bound.functions["f"][0], bound.functions["g"][0]
    assert bound.rate_rps == pytest.approx(min(f_rate / 0.5, g_rate / 1.0))
    assert bound.binding == ("f" if f_rate / 0.5 < g_rate else "g")


def test_no_policy_holds_the_sla_above_the_bound_where_it_is_under_the_ceiling() -> None:
    # a tight room and a wide tail: the bound is well under the fill-free ceiling, and every
    # policy that runs above it misses more than the SLA allows
    config = _config({"a": {"stages": ["f"], "slo_ms": 30}}, f={"nodes": 2, "max_batch": 16})
    curves = {"f": _curve("f", 8.0, 2.0, 1.4)}
    ceiling = throughput_ceiling(config, curves).rate_rps
    bound = tail_ceiling(config, curves).rate_rps
    assert bound < 0.8 * ceiling
    for policy in ("GS", "GS-T", "ED-DYN", "EDF-DYN"):
        above = Simulation(config, stage_policy(policy), curves, rate_rps=1.1 * bound).run()
        assert above.violation_pct > 1.0, policy
