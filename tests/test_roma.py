"""ROMA's policies (slackwise_policies.roma) by hand, and its simulated evaluation
(simulator.roma)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from simulator.roma import SYSTEMS, parse_roma_config, run_roma
from slackwise_cli.main import main
from slackwise_config import ConfigError
from slackwise_policies.roma import (
    CoreController,
    GpuCandidate,
    NodeCores,
    RuleController,
    gpu_batch,
    gpu_choice,
    load_floor,
    pi_gains,
    response_signal,
    round_robin,
    supervise,
)

ROOT = Path(__file__).resolve().parents[1]


def test_pi_gains_place_both_closed_loop_poles_at_q() -> None:
    k, b, q = 2.0, 0.2, 0.5
    gain, zero = pi_gains(k, b, q)
    assert zero == pytest.approx(0.7 / 1.1)  # ((2 - b) q - b) / (q - 2b + 1)
    assert gain == pytest.approx(4 * (zero - 1) * (b - 1) / (k * (b - zero) ** 2))
    with pytest.raises(ValueError, match="no finite K"):
        pi_gains(1.0, 0.5, 0.5)  # a = b
    with pytest.raises(ValueError, match="k > 0"):
        pi_gains(0.0, 0.2, 0.5)


def test_the_controller_integrates_what_was_granted_not_what_it_asked() -> None:
    c = CoreController(gain=1.0, zero=0.0, u_min=0.5, u_max=6.0, u=1.0)
    assert c.next_allocation(0.2, 0.1) == pytest.approx(2.0)  # e = +1: one core more
    c.granted(1.2)  # the supervisor cut it
    assert c.next_allocation(0.2, 0.1) == pytest.approx(2.2)  # from 1.2, not from 2.0
    c.granted(2.2)
    assert c.next_allocation(None, 0.1) == pytest.approx(3.2)  # no completions: same error
    c.granted(6.0)
    assert c.next_allocation(1.0, 0.1) == 6.0  # bounded above
    c.granted(0.0)
    assert c.u == 0.5  # and below


def test_the_feed_forward_floor_answers_a_step_in_the_period_it_happens() -> None:
    assert load_floor(40.0, 0.01, 0.5) == pytest.approx(0.8)  # 0.4 core busy at half use
    for bad in ((1.0, 0.01, 0.0), (1.0, 0.01, 1.5), (-1.0, 0.01, 0.5)):
        with pytest.raises(ValueError):
            load_floor(*bad)
    pi = CoreController(gain=0.6, zero=0.11, u_min=0.25, u_max=2.0, u=0.25)
    ff = CoreController(gain=0.6, zero=0.11, u_min=0.25, u_max=2.0, u=0.25)
    # the load steps x4: the last second's mean is still at the set point, the arrivals are not
    floor = load_floor(40.0, 0.01, 0.5)
    assert pi.next_allocation(0.03, 0.03) == pytest.approx(0.25)  # nothing to correct yet
    assert ff.next_allocation(0.03, 0.03, floor=floor) == pytest.approx(0.8)
    ff.granted(0.8)
    # above the floor the PI term still acts, from what was granted
    assert ff.next_allocation(0.06, 0.03, floor=floor) == pytest.approx(0.8 + 0.6)
    assert ff.next_allocation(0.03, 0.03, floor=5.0) == 2.0  # bounded above as before


def test_the_supervisor_scales_demands_only_when_the_node_is_contended() -> None:
    assert supervise([2.0, 4.0], 6.0) == [2.0, 4.0]
    assert supervise([4.0, 8.0], 6.0) == pytest.approx([2.0, 4.0])  # eta = 0.5
    assert supervise([1.0, 2.0], 6.0, gpu_cores=3.0) == [1.0, 2.0]  # eta = 1
    assert supervise([1.0, 1.0], 6.0, gamma=1.0) == pytest.approx([3.0, 3.0])  # all used
    assert supervise([1.0, 1.0], 6.0, gamma=0.5) == pytest.approx([2.0, 2.0])


def test_rules_step_one_core_at_most_every_period() -> None:
    r = RuleController(u_min=0.5, u_max=6.0, u=1.0)
    assert r.next_allocation(0.0, 0.9, 1.0) == 2.0  # >= 0.8 SLA
    assert r.next_allocation(5.0, 0.9, 1.0) == 2.0  # within the 15 s period
    assert r.next_allocation(15.0, 0.1, 1.0) == 1.0  # <= 0.2 SLA
    assert r.next_allocation(30.0, 0.5, 1.0) == 1.0  # in between: hold


def gpu(ms: float) -> object:
    return lambda n: ms * (1 + 0.1 * (n - 1)) / 1000.0


def test_a_free_gpu_serves_the_most_deficient_model() -> None:
    now = 10.0
    calm = GpuCandidate([9.99], 0.01, sla_s=0.1, gpu_s=gpu(5))  # type: ignore[arg-type]
    # behind: its queued requests have waited 0.3 s against a 0.5 s SLA (set point 0.4)
    behind = GpuCandidate([9.7, 9.8], 0.45, sla_s=0.5, gpu_s=gpu(5))  # type: ignore[arg-type]
    empty = GpuCandidate([], 9.0, sla_s=0.1, gpu_s=gpu(5))  # type: ignore[arg-type]
    assert gpu_choice([calm, behind, empty], now, alpha=0.8, beta=0.5) == 1
    # beta = 1: only the queue counts; both fine, the longer queue wins the tie at zero
    assert gpu_choice([calm, behind], now, alpha=0.8, beta=1.0) == 1
    assert gpu_choice([empty], now, alpha=0.8, beta=0.5) is None


def test_a_gpu_batch_is_as_large_as_the_heads_slack_allows() -> None:
    c = GpuCandidate([0.0] * 20, None, sla_s=0.02, gpu_s=lambda n: 0.002 * n)
    assert gpu_batch(c, 0.0, max_batch=32) == 10  # 10 x 2 ms = the 20 ms left
    assert gpu_batch(c, 0.0, max_batch=4) == 4
    late = GpuCandidate([0.0] * 20, None, sla_s=0.02, gpu_s=lambda n: 0.002 * n)
    assert gpu_batch(late, 0.05, max_batch=32) == 20  # late: as many as fit


def small(**changes: object) -> dict[str, object]:
    roma: dict[str, object] = {
        "workers": 1, "cores": 2, "gpus": 1, "duration_s": 20, "step_s": 10,
        "apps": {
            "a": {"profile": "imagenet", "sla_s": 0.05, "workload": [40, 120]},
            "b": {"profile": "qa", "sla_s": 0.06, "workload": [40, 80]},
        },
    }  # fmt: skip
    roma.update(changes)
    return {"roma": roma}


def test_every_system_runs_and_counts_as_the_paper() -> None:
    doc = run_roma(parse_roma_config(small(), "small.yaml"))
    rows = doc["systems"]
    assert list(rows) == list(SYSTEMS)
    assert rows["rr_max"]["core_seconds"] == pytest.approx(2 * 20, rel=1e-3)  # every core
    assert rows["rr_min"]["core_seconds"] == pytest.approx(1 * 20, rel=1e-3)  # one per worker
    assert len({r["arrived"] for r in rows.values()}) == 1  # the same arrivals for every system
    for r in rows.values():
        assert 0 <= r["violations"] <= 2 * 20
        assert 0.0 <= r["gpu_share"] <= 1.0
        assert r["p50_ms"] <= r["p99_ms"] <= r["max_ms"]
        assert r["arrived"] - 50 <= r["requests"] <= r["arrived"]


def test_too_few_cores_and_no_gpu_break_the_sla() -> None:
    doc = run_roma(parse_roma_config(small(gpus=0), "small.yaml"), ("rr_min", "rr_max"))
    starved, full = doc["systems"]["rr_min"], doc["systems"]["rr_max"]
    assert starved["gpu_share"] == full["gpu_share"] == 0.0
    assert starved["violations"] > full["violations"]
    assert starved["mean_ms"] > full["mean_ms"]


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"alpha": 1.5}, "roma.alpha"),
        ({"apps": {"a": {"profile": "imagenet", "sla_s": 0, "workload": [1]}}}, "sla_s"),
        ({"apps": {"a": {"profile": "imagenet", "sla_s": 1, "workload": "fast"}}}, "workload"),
        ({"cpus": 3}, "roma.cpus"),
        ({"ff_utilization": 0}, "roma.ff_utilization"),
        ({"ff_utilization": 1.5}, "roma.ff_utilization"),
        ({"threads": 0}, "roma.threads"),
        ({"cpu_period_ms": 0.1}, "roma.cpu_period_ms"),
    ],
)
def test_bad_roma_configs_name_the_key(change: dict[str, object], named: str) -> None:
    with pytest.raises(ConfigError, match=named.replace(".", r"\.")):
        parse_roma_config(small(**change), "bad.yaml")


def test_the_cli_writes_the_systems(tmp_path: Path) -> None:
    import yaml

    config = tmp_path / "roma.yaml"
    config.write_text(yaml.safe_dump(small()), encoding="utf-8")
    out = tmp_path / "out.json"
    assert main(["simulate", "-c", str(config), "--json", str(out),
                 "--policies", "roma,rr_rules"]) == 0  # fmt: skip
    doc = json.loads(out.read_text())
    assert set(doc["systems"]) == {"roma", "rr_rules"}
    for row in doc["systems"].values():
        assert {"violations", "violation_pct", "core_seconds", "p50_ms", "p99_ms",
                "max_ms"} <= set(row)  # fmt: skip
    assert main(["simulate", "-c", str(config), "--policies", "nope"]) == 2


@pytest.mark.slow
def test_live_systems_set_real_quotas_and_count_every_request(tmp_path: Path) -> None:
    """Two digits functions on the local platform, 4 s of load, two live systems: each
    request is answered, RR+max holds every core for the whole run, ROMA's controllers
    fewer."""
    import yaml

    config = tmp_path / "live.yaml"
    config.write_text(yaml.safe_dump({"roma": {
        "live": True, "workers": 1, "cores": 2, "gpus": 0, "step_s": 2, "duration_s": 4,
        "alpha": 0.5, "u_min": 0.25,
        "apps": {
            "a": {"profile": "digits", "sla_s": 0.05, "workload": [20, 40]},
            "b": {"profile": "digits", "sla_s": 0.05, "workload": [40, 20]},
        },
    }}), encoding="utf-8")  # fmt: skip
    out = tmp_path / "out.json"
    assert main(["experiment", "-c", str(config), "--json", str(out),
                 "--modes", "roma,roma_ff,rr_max"]) == 0  # fmt: skip
    doc = json.loads(out.read_text())
    assert doc["live"] is True and set(doc["systems"]) == {"roma", "roma_ff", "rr_max"}
    for row in doc["systems"].values():
        assert row["failed"] == 0 and row["requests"] == row["arrived"] > 100
        assert set(row["work_ms"]) == {"a", "b"} and all(w > 0 for w in row["work_ms"].values())
    assert doc["systems"]["rr_max"]["core_seconds"] == pytest.approx(2 * 4)
    assert doc["systems"]["roma"]["core_seconds"] < 2 * 4  # light load: below a core each


@pytest.mark.slow
def test_live_with_a_gpu_executable_dispatches_between_it_and_the_cpu_replicas(
    tmp_path: Path,
) -> None:
    """ROMA's deployment shape with one GPU executable (one process holding the apps' models,
    run on the CPU here: ``gpu_device: cpu`` takes the same path as ``cuda``): requests go to
    both it and the CPU replicas, each is answered once, the supervisor keeps its cores."""
    import yaml

    config = tmp_path / "gpu.yaml"
    config.write_text(yaml.safe_dump({"roma": {
        "live": True, "workers": 1, "cores": 2, "gpus": 1, "gpu_device": "cpu",
        "gpu_cores": 1, "step_s": 2, "duration_s": 4, "alpha": 0.5, "u_min": 0.25,
        "threads": 1,
        "apps": {
            "a": {"profile": "digits", "sla_s": 0.05, "workload": [60, 120]},
            "b": {"profile": "digits", "sla_s": 0.05, "workload": [120, 60]},
        },
    }}), encoding="utf-8")  # fmt: skip
    out = tmp_path / "out.json"
    assert main(["experiment", "-c", str(config), "--json", str(out),
                 "--modes", "roma_batched"]) == 0  # fmt: skip
    doc = json.loads(out.read_text())
    assert doc["gpus"] == 1 and doc["gpu_device"] == "cpu"
    row = doc["systems"]["roma_batched"]
    # every request answered: a failure is only ever a refusal at the door. How many are
    # refused is the machine's: with a 50 ms SLA on two cores that also run the test, a stall
    # (the GPU executable loading while the first requests arrive) once made it refuse 701 of
    # 719 after 6.6 s answers, where it refuses none on a quiet run
    assert row["failed"] == row["refused"]
    assert row["requests"] + row["refused"] == row["arrived"] > 500
    assert 0.0 < row["gpu_share"] <= 1.0
    # one core of two is kept for the GPU executable: the CPU replicas never get more than one
    assert row["core_seconds"] <= 1.0 * 4 + 1e-6


def test_a_gpu_device_that_is_not_one_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"roma\.gpu_device: device must be"):
        parse_roma_config({"roma": {"gpu_device": "tpu", "apps": {
            "a": {"profile": "digits", "sla_s": 0.05, "workload": [1]}}}}, "t")  # fmt: skip


def test_response_signal_is_the_mean_or_a_longer_wait() -> None:
    assert response_signal([0.01, 0.03], None) == pytest.approx(0.02)
    assert response_signal([0.01, 0.03], 0.5) == 0.5  # a starved executable still shows
    assert response_signal([0.01, 0.03], 0.001) == pytest.approx(0.02)
    assert response_signal([], 0.2) == 0.2 and response_signal([], None) is None


def test_node_cores_scales_the_asks_to_the_node_and_integrates_the_grant() -> None:
    cts = [CoreController(1.0, 0.0, 0.1, 4.0, 2.0) for _ in range(2)]
    node = NodeCores(cts, cores=4.0, gpu_cores=1.0)
    # both far above their set points ask for 3 more cores each: 10 asked, 3 available
    granted = node.step([0.4, 0.4], [0.1, 0.1])
    assert granted == pytest.approx([1.5, 1.5])
    assert [ct.u for ct in cts] == pytest.approx([1.5, 1.5])  # anti-windup: the grant, not the ask
    # both on their set points ask to stay; the second's floor (its arrivals) raises its ask
    granted = node.step([0.1, 0.1], [0.1, 0.1], floors=[0.0, 2.0])
    assert granted == pytest.approx([1.5 * 3 / 3.5, 2.0 * 3 / 3.5])
    # nothing completed and nothing waiting: the last error (none) is kept, so is the grant
    assert node.step([None, None], [0.1, 0.1]) == pytest.approx(granted)


def test_round_robin_takes_the_next_waiting_queue_from_its_turn() -> None:
    assert round_robin([True, False, True], 1) == 2
    assert round_robin([True, False, False], 1) == 0  # wraps
    assert round_robin([False, False], 0) is None
