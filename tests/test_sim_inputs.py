"""Input sizes in the simulator: the mix an app draws from, what a class costs a function, and
GrandSLAM's ETC per input size (a request priced by its own class's estimates)."""

from __future__ import annotations

from statistics import mean
from typing import Any

import pytest

from simulator.config import parse_sim_config
from simulator.engine import Simulation
from simulator.inputs import InputSizes
from simulator.request import SimRequest
from simulator.service import ServiceCurve
from slackwise_config import ConfigError
from slackwise_policies.slack import stage_policy


def _curve(name: str, a_ms: float = 8.0, b_ms: float = 2.0) -> ServiceCurve:
    sizes = (1, 2, 4, 8)
    medians = tuple(a_ms + b_ms * n for n in sizes)
    return ServiceCurve(name=name, sizes=sizes, medians_ms=medians, p95s_ms=medians,
                        prior_a_ms=a_ms, prior_b_ms=b_ms, cold_start_s=1.0)  # fmt: skip


def _config(etc_by_input: bool = False, **apps: Any) -> Any:
    doc: dict[str, Any] = {
        "seed": 5,
        "requests": 400,
        "rate_rps": 20,
        "service": "deterministic",
        "adapter": {"max_wait_ms": 0, "etc_by_input": etc_by_input},
        "functions": {
            "img": {"nodes": 4, "max_batch": 8, "input_cost": {"large": 3.0}},
            "txt": {"nodes": 4, "max_batch": 8},
        },
        "apps": apps
        or {
            "query": {
                "stages": ["img", "txt"],
                "slo_ms": 200,
                "inputs": {"small": 3, "large": 1},
            },
        },
    }
    return parse_sim_config(doc, "inputs.yaml")


def _request(app: int, input_class: str) -> SimRequest:
    req = SimRequest(app, 0, 0.0, 1.0)
    req.input_class = input_class
    return req


def test_an_app_draws_its_classes_by_weight_and_one_without_a_mix_draws_none() -> None:
    config = _config(
        query={"stages": ["img", "txt"], "slo_ms": 200, "inputs": {"small": 3, "large": 1}},
        plain={"stages": ["txt"], "slo_ms": 100},
    )
    sizes = InputSizes(config, seed=1)
    drawn = [sizes.pick(0) for _ in range(8000)]
    assert set(drawn) == {"small", "large"}
    assert drawn.count("large") / len(drawn) == pytest.approx(0.25, abs=0.02)
    assert {sizes.pick(1) for _ in range(100)} == {""}


def test_a_functions_mean_cost_is_over_the_requests_it_serves() -> None:
    # img serves query only: 3/4 small (1) + 1/4 large (3) = 1.5; txt costs 1 for every class
    config = _config(
        query={"stages": ["img", "txt"], "slo_ms": 200, "inputs": {"small": 3, "large": 1}},
        plain={"stages": ["txt"], "slo_ms": 100, "weight": 2},
    )
    assert InputSizes(config, seed=1).mean_cost == {"img": 1.5, "txt": 1.0}


def test_with_etc_per_input_a_request_is_priced_by_its_own_class() -> None:
    estimates = [30.0, 10.0]
    priced = InputSizes(_config(etc_by_input=True), seed=1)
    assert priced.estimates(_request(0, "large"), estimates) == [60.0, 10.0]  # 30 x 3 / 1.5
    assert priced.estimates(_request(0, "small"), estimates) == [20.0, 10.0]  # 30 x 1 / 1.5
    plain = InputSizes(_config(etc_by_input=False), seed=1)
    assert plain.estimates(_request(0, "large"), estimates) is estimates  # the mix, as before


def test_a_batch_costs_the_mean_of_its_members() -> None:
    sizes = InputSizes(_config(), seed=1)
    batch = [_request(0, "large"), _request(0, "small"), _request(0, "small"), _request(0, "large")]
    assert sizes.batch_cost("img", batch, 4) == pytest.approx(2.0)
    assert sizes.batch_cost("img", batch, 1) == pytest.approx(3.0)  # only the first one goes
    assert sizes.batch_cost("txt", batch, 4) == 1.0  # no costs given: the profile's inputs


def test_large_inputs_take_longer_and_etc_per_input_gives_them_more_of_the_costly_stage() -> None:
    curves = {"img": _curve("img", 20.0, 2.0), "txt": _curve("txt", 8.0, 1.0)}
    runs = {}
    for by_input in (False, True):
        sim = Simulation(_config(etc_by_input=by_input), stage_policy("GS"), curves)
        deadlines: dict[str, list[float]] = {"small": [], "large": []}

        def spy(
            req: SimRequest, app: Any, now: float, seen: Any = deadlines, enter: Any = sim._enter
        ) -> Any:
            station = enter(req, app, now)
            if req.stage == 0:
                seen[req.input_class].append(req.deadline - req.started)
            return station

        sim._enter = spy  # type: ignore[method-assign]
        result = sim.run()
        runs[by_input] = (result, deadlines)
    result, deadlines = runs[True]
    assert result.requests == 400 and deadlines["small"] and deadlines["large"]
    # the first stage's budget: the class does not move it without ETC per input; with it, a
    # large image (3x at img against a mix of 1.5x) gets a larger share of the SLO there
    plain = runs[False][1]
    assert mean(plain["large"]) == pytest.approx(mean(plain["small"]), rel=0.05)
    assert mean(deadlines["large"]) > 1.15 * mean(deadlines["small"])


def test_under_gs_t_a_request_priced_by_its_own_class_keeps_every_stages_floor() -> None:
    # a tight SLO: the floor img needs (its batch and the one ahead on the next slot to free)
    # is more than a small image's share of it by Eq. 4, priced at its own cost
    config = _config(etc_by_input=True, query={"stages": ["img", "txt"], "slo_ms": 100,
                                               "inputs": {"small": 3, "large": 1}})  # fmt: skip
    curves = {"img": _curve("img", 20.0, 2.0), "txt": _curve("txt", 8.0, 1.0)}
    sim = Simulation(config, stage_policy("GS-T"), curves)
    sim.run()
    app = sim.apps[0]
    assert app.split is not None
    floor = app.split.plan.floor_ms("img")
    assert floor > 0.0
    for input_class in ("small", "large"):
        budgets = app.estimates_for(_request(0, input_class), sim._inputs)
        assert budgets[0] >= floor - 1e-9, input_class
        assert sum(budgets) == pytest.approx(100.0)
    # the floor was binding: a small image's own Eq. 4 share is under it
    own = sim._inputs.estimates(_request(0, "small"), app.eq4)
    assert 100.0 * own[0] / sum(own) < floor


@pytest.mark.parametrize(("input_class", "expected_ms"), [("small", 22.0 + 9.0),
                                                          ("large", 3 * 22.0 + 9.0)])  # fmt: skip
def test_a_lone_request_takes_its_class_cost_times_the_profile(
    input_class: str, expected_ms: float
) -> None:
    curves = {"img": _curve("img", 20.0, 2.0), "txt": _curve("txt", 8.0, 1.0)}
    app = {"stages": ["img", "txt"], "slo_ms": 200, "inputs": {input_class: 1}}
    config = _config(query=app)
    one = Simulation(config, stage_policy("GS"), curves, requests=1, arrivals=[0.5]).run()
    assert one.p50_ms == pytest.approx(expected_ms)


@pytest.mark.parametrize(
    ("patch", "named"),
    [
        ({"functions": {"f": {"input_cost": {"large": -1}}}}, "functions.f.input_cost.large"),
        ({"functions": {"f": {"input_cost": ["large"]}}}, "functions.f.input_cost"),
        ({"apps": {"a": {"stages": ["f"], "inputs": {"big": "x"}}}}, "apps.a.inputs.big"),
        ({"adapter": {"etc_by_input": "yes"}}, "adapter.etc_by_input"),
    ],
)
def test_bad_input_size_keys_name_themselves(patch: dict[str, Any], named: str) -> None:
    doc: dict[str, Any] = {"functions": {"f": {}}, "apps": {"a": {"stages": ["f"]}}}
    doc.update(patch)
    with pytest.raises(ConfigError, match=named.replace(".", r"\.")):
        parse_sim_config(doc, "bad.yaml")
