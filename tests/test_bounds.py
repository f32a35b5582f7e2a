"""The throughput ceiling of a fixed fleet: hand-worked cases, and a simulation above it fails."""

from __future__ import annotations

from typing import Any

import pytest

from simulator.bounds import throughput_ceiling, waited_ceiling
from simulator.config import parse_sim_config
from simulator.engine import Simulation
from simulator.service import ServiceCurve
from slackwise_policies.slack import stage_policy


def _curve(name: str, a_ms: float, b_ms: float) -> ServiceCurve:
    sizes = (1, 2, 4, 8, 16)
    medians = tuple(a_ms + b_ms * n for n in sizes)
    return ServiceCurve(name=name, sizes=sizes, medians_ms=medians, p95s_ms=medians,
                        prior_a_ms=a_ms, prior_b_ms=b_ms, cold_start_s=1.0)  # fmt: skip


def _config(apps: dict[str, Any], **functions: Any) -> Any:
    doc = {"seed": 2, "requests": 6000, "service": "deterministic",
           "adapter": {"max_wait_ms": 0}, "functions": functions, "apps": apps}  # fmt: skip
    return parse_sim_config(doc, "ceiling.yaml")


def test_one_stage_the_largest_batch_that_fits_the_slo_sets_the_ceiling() -> None:
    # 8 + 2n ms: batches up to 8 fit 25 ms (24 ms); 2 nodes x 8 / 24 ms = 666.7 a second
    config = _config({"a": {"stages": ["f"], "slo_ms": 25}}, f={"nodes": 2, "max_batch": 16})
    ceiling = throughput_ceiling(config, {"f": _curve("f", 8.0, 2.0)})
    assert ceiling.binding == "f"
    rate, batch = ceiling.functions["f"]
    assert batch == 8 and rate == pytest.approx(2 * 8 * 1000.0 / 24.0)
    assert ceiling.rate_rps == pytest.approx(666.67, abs=0.01)


def test_a_stage_serving_two_apps_and_the_other_stages_minimum_time() -> None:
    # g serves both apps (each half the requests): 1 node, 4 + 1n; f: room 30 - g(1) = 25
    apps = {"a": {"stages": ["f", "g"], "slo_ms": 30}, "b": {"stages": ["g"], "slo_ms": 30}}
    config = _config(apps, f={"nodes": 1, "max_batch": 16}, g={"nodes": 1, "max_batch": 16})
    curves = {"f": _curve("f", 8.0, 2.0), "g": _curve("g", 4.0, 1.0)}
    ceiling = throughput_ceiling(config, curves)
    f_rate, f_batch = ceiling.functions["f"]
    assert f_batch == 8 and f_rate == pytest.approx(8 * 1000.0 / 24.0)  # 24 ms within 25
    g_rate, g_batch = ceiling.functions["g"]
    # g's room is the tighter of its apps: app a leaves 30 - f(1) = 20 ms: 4 + n <= 20, n = 16
    assert g_batch == 16 and g_rate == pytest.approx(16 * 1000.0 / 20.0)
    # f sees half of the requests, g all of them: f bounds at 666.7, g at 800
    assert ceiling.binding == "f"
    assert ceiling.rate_rps == pytest.approx(2 * 8 * 1000.0 / 24.0)


def test_the_wait_for_a_slot_lowers_the_ceiling_where_the_room_is_tight() -> None:
    # one stage, 8 + 2n ms, SLO 25 ms. Without the wait: batch 8 (24 ms), 666.7 a second on 2
    # nodes. With it, a batch and half a batch must fit: 1.5 (8 + 2n) <= 25 -> n <= 4 (16 ms,
    # 24 with the wait): 2 x 4 / 16 ms = 500 a second
    config = _config({"a": {"stages": ["f"], "slo_ms": 25}}, f={"nodes": 2, "max_batch": 16})
    curves = {"f": _curve("f", 8.0, 2.0)}
    assert throughput_ceiling(config, curves).rate_rps == pytest.approx(666.67, abs=0.01)
    assert waited_ceiling(config, curves) == pytest.approx(500.0, rel=0.01)
    # with room to spare (SLO 100 ms) the largest batch sets both: 2 x 16 / 40 ms = 800
    loose = _config({"a": {"stages": ["f"], "slo_ms": 100}}, f={"nodes": 2, "max_batch": 16})
    assert waited_ceiling(loose, curves) == pytest.approx(800.0, rel=0.01)


def test_input_costs_lower_the_ceiling_by_the_mean_cost() -> None:
    apps = {"a": {"stages": ["f"], "slo_ms": 25, "inputs": {"small": 1, "large": 1}}}
    config = _config(apps, f={"nodes": 2, "max_batch": 16, "input_cost": {"large": 3.0}})
    ceiling = throughput_ceiling(config, {"f": _curve("f", 8.0, 2.0)})
    assert ceiling.rate_rps == pytest.approx(666.67 / 2.0, abs=0.01)  # mean cost 2


def test_no_policy_holds_the_sla_well_above_the_ceiling() -> None:
    config = _config({"a": {"stages": ["f"], "slo_ms": 25}}, f={"nodes": 2, "max_batch": 16})
    curves = {"f": _curve("f", 8.0, 2.0)}
    ceiling = throughput_ceiling(config, curves).rate_rps
    for policy in ("GS", "ED-DYN", "EDF-DYN", "GS-paper"):
        above = Simulation(config, stage_policy(policy), curves, rate_rps=1.25 * ceiling).run()
        assert above.violation_pct > 1.0, policy
