"""A disturbance in the simulator (simulator.disturbance): service slowed or stopped for a window,
read from the config as the live experiment reads it, and the owned count's evidence rule
answering it where the model alone does not."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from simulator.config import parse_sim_config
from simulator.disturbance import finish_s
from simulator.engine import Simulation
from simulator.scalers import FixedScaler
from simulator.service import ServiceCurve
from simulator.swayam_scalers import OwnedScaler
from slackwise_config import ConfigError
from slackwise_config.model import Disturbance
from slackwise_policies.advisor_settings import AdvisorSettings
from slackwise_policies.slack import stage_policy

SLOW = Disturbance(kind="slow", start_s=10.0, duration_s=10.0, factor=4.0)
PAUSE = Disturbance(kind="pause", start_s=10.0, duration_s=5.0)


def test_a_batch_is_slowed_only_for_the_part_of_it_inside_the_window() -> None:
    assert finish_s(None, 3.0, 0.5) == 3.5
    assert finish_s(SLOW, 3.0, 0.5) == 3.5  # before
    assert finish_s(SLOW, 20.0, 0.5) == 20.5  # after
    assert math.isclose(finish_s(SLOW, 12.0, 0.5), 14.0)  # inside: four times as long
    # half a second before the window, one second of work: half at full speed, half at a quarter
    assert math.isclose(finish_s(SLOW, 9.5, 1.0), 12.0)
    # started inside, runs past the end: 1 s of window does 0.25 s of work, the rest at full speed
    assert math.isclose(finish_s(SLOW, 19.0, 1.0), 20.75)


def test_a_repeated_disturbance_slows_every_window_and_only_them() -> None:
    again = Disturbance(kind="slow", start_s=10.0, duration_s=2.0, factor=2.0, repeat=3,
                        every_s=10.0)  # fmt: skip
    assert again.windows() == [(10.0, 12.0), (20.0, 22.0), (30.0, 32.0)]
    assert again.end_s == 32.0 and again.inside(21.0) and not again.inside(15.0)
    assert math.isclose(finish_s(again, 21.0, 0.5), 22.0)  # in the second window: twice
    assert math.isclose(finish_s(again, 15.0, 0.5), 15.5)  # between windows
    # from 11 s, 10 s of work: 0.5 in the first window's last second, 8 between, 1 in the
    # whole second window (2 s), the last 0.5 at full speed: 11 + 1 + 8 + 2 + 0.5
    assert math.isclose(finish_s(again, 11.0, 10.0), 22.5)
    with pytest.raises(ValueError, match="every_s"):
        Disturbance(kind="slow", start_s=0.0, duration_s=5.0, factor=2.0, repeat=2, every_s=5.0)


def test_a_pause_holds_every_batch_in_flight_until_it_ends() -> None:
    assert math.isclose(finish_s(PAUSE, 12.0, 0.1), 15.1)
    assert math.isclose(finish_s(PAUSE, 9.9, 0.3), 15.2)  # 0.1 s done before, 0.2 s after
    assert finish_s(PAUSE, 9.0, 0.5) == 9.5


def _curve(cold_s: float = 2.0) -> ServiceCurve:
    sizes = (1, 2, 4, 8)
    medians = tuple(10.0 + 2.0 * n for n in sizes)
    return ServiceCurve(
        name="f", sizes=sizes, medians_ms=medians, p95s_ms=medians,
        prior_a_ms=10.0, prior_b_ms=2.0, cold_start_s=cold_s,
    )  # fmt: skip


def _config(**overrides: Any) -> Any:
    doc: dict[str, Any] = {
        "seed": 3,
        "service": "deterministic",
        "warmup_fraction": 0,
        "adapter": {"max_wait_ms": 0},
        "platform": {"scaling": "kpa"},
        "functions": {"f": {"max_batch": 8}},
        "apps": {"app": {"stages": ["f"], "slo_ms": 60}},
    }
    doc.update(overrides)
    return parse_sim_config(doc, "test.yaml")


def test_the_config_takes_the_live_experiments_keys_and_refuses_what_it_cannot_apply() -> None:
    config = _config(disturbance={"kind": "slow", "start_s": 10, "duration_s": 10, "factor": 4})
    assert config.disturbance == SLOW
    with pytest.raises(ConfigError, match=r"disturbance\.kind.*no cores"):
        _config(disturbance={"kind": "cpu", "start_s": 10, "duration_s": 10})
    with pytest.raises(ConfigError, match=r"disturbance\.kind.*not by input"):
        _config(disturbance={"kind": "input", "start_s": 10, "duration_s": 10, "factor": 4})
    with pytest.raises(ConfigError, match=r"disturbance\.factor.*whole number >= 2"):
        _config(disturbance={"kind": "input", "start_s": 10, "duration_s": 10, "factor": 1.5})
    with pytest.raises(ConfigError, match=r"disturbance\.factor.*above 1"):
        _config(disturbance={"kind": "slow", "start_s": 10, "duration_s": 10, "factor": 1})
    with pytest.raises(ConfigError, match=r"disturbance\.duration_s.*within"):
        _config(trace={"name": "nasa", "duration_s": 60},
                disturbance={"kind": "pause", "start_s": 50, "duration_s": 20})  # fmt: skip
    again = {"kind": "slow", "start_s": 10, "duration_s": 10, "factor": 4, "repeat": 3}
    assert _config(disturbance={**again, "every_s": 60}).disturbance.windows()[-1] == (130, 140)
    with pytest.raises(ConfigError, match=r"disturbance\.every_s.*above duration_s"):
        _config(disturbance={**again, "every_s": 10})
    with pytest.raises(ConfigError, match=r"disturbance\.duration_s.*within"):
        _config(trace={"name": "nasa", "duration_s": 100},
                disturbance={**again, "every_s": 45})  # fmt: skip


def _steady(rate: float, end: float) -> list[float]:
    return [float(t) for t in np.arange(0.0, end, 1.0 / rate)]


def _latencies(config: Any, scaler: Any, arrivals: list[float]) -> np.ndarray:
    sim = Simulation(config, stage_policy("GS"), {"f": _curve()}, requests=len(arrivals),
                     scaler=scaler, arrivals=arrivals)  # fmt: skip
    sim.run()
    latencies, _ = sim.latencies_by_arrival()
    return latencies


def test_a_fixed_fleet_answers_slower_inside_the_window_only() -> None:
    arrivals = _steady(50.0, 30.0)
    times = np.asarray(arrivals)
    inside = (times >= 11.0) & (times < 20.0)
    before = times < 10.0
    plain = _latencies(_config(), FixedScaler({"f": 2}), arrivals)
    slow = {"kind": "slow", "start_s": 10, "duration_s": 10, "factor": 4}
    slowed = _latencies(_config(disturbance=slow), FixedScaler({"f": 2}), arrivals)
    assert np.allclose(plain[before], slowed[before])
    assert np.median(slowed[inside]) >= 3.5 * np.median(plain[inside])
    assert np.median(slowed[times >= 25.0]) == pytest.approx(np.median(plain[times >= 25.0]))


def _owned(evidence: bool) -> OwnedScaler:
    settings = AdvisorSettings(enabled=True, default_setup_s=2.0, min_scale_in_gap_s=10.0,
                               keep_alive=False, evidence=evidence)  # fmt: skip
    return OwnedScaler(settings, slos_ms={"f": 60.0}, percentiles={"f": 99.0},
                       container_concurrency={"f": 1}, max_scale={"f": 0},
                       initial={"f": 1})  # fmt: skip


def _episode(kind: dict[str, Any], rate: float, end: float, window: tuple[float, float]) -> Any:
    """Owned counts with and without the evidence rule: per run, the count before the window,
    when it first rose above that in the window, its peak, and the misses inside / after it."""
    arrivals = _steady(rate, end)
    times = np.asarray(arrivals)
    inside = (times >= window[0]) & (times < window[1])
    after = times >= window[1]
    runs = {}
    for evidence in (True, False):
        scaler = _owned(evidence)
        late = _latencies(_config(disturbance=kind), scaler, arrivals) > 60.0
        counts = [(t, n) for t, _, n in scaler.counts]
        before = max(n for t, n in counts if t < window[0])
        risen = [t for t, n in counts if t >= window[0] and n > before]
        runs[evidence] = (before, risen[0] if risen else math.inf, max(n for _, n in counts),
                          float(np.mean(late[inside])), float(np.mean(late[after])))  # fmt: skip
    return runs[True], runs[False]


def test_a_stall_raises_the_count_from_the_queue_before_anything_is_answered() -> None:
    # every replica stopped for 5 s: nothing finishes, so the model sees nothing change; the
    # requests queued past their deadline are the evidence
    with_rule, without = _episode({"kind": "pause", "start_s": 15, "duration_s": 5}, 120.0, 40.0,
                                  (15.0, 20.0))  # fmt: skip
    assert with_rule[0] == without[0] == 2
    assert with_rule[1] <= 15.0 + 3.0, with_rule  # within the evidence window, not at the end
    assert without[1] >= 20.0, without  # the model alone: once the stall's answers come back
    assert with_rule[4] < without[4], (with_rule, without)  # the backlog clears sooner
    # and the stall's own long batches do not make the model ask for the maximum after it
    assert with_rule[2] <= without[2] + 1, (with_rule, without)


def test_a_slowdown_is_answered_without_overshooting_what_the_model_alone_asks() -> None:
    # every replica three times slower for 15 s: the model sees the slow batches come back and
    # rises with them; the evidence rule must add no more than it helps
    with_rule, without = _episode({"kind": "slow", "start_s": 15, "duration_s": 15, "factor": 3},
                                  120.0, 40.0, (15.0, 30.0))  # fmt: skip
    assert with_rule[1] <= 15.0 + 2.0, with_rule  # risen within a setup time
    assert with_rule[3] <= without[3] + 0.01, (with_rule, without)
    assert with_rule[2] <= 1.5 * without[2], (with_rule, without)
