"""Repeated experiments (slackwise_cli.repeats) and the disturbance split
(slackwise_cli.disturbance): medians and ranges from several runs, rotated mode order, misses
inside and outside a window."""

from __future__ import annotations

import dataclasses
import math

import pytest

from slackwise_cli.disturbance import window_split
from slackwise_cli.experiment_command import parse_disturbance
from slackwise_cli.repeats import order, summarize_repeats
from slackwise_cli.results import ExperimentResult, ModeSummary
from slackwise_config.model import Disturbance


def summary(violations: float, replica_s: float) -> ModeSummary:
    return ModeSummary(
        requests=100, errors=0, violation_pct=violations, p50_ms=10.0, p95_ms=20.0, p99_ms=30.0,
        replica_seconds=replica_s, mean_batch=2.0, cold_starts=1, warm_violation_pct=violations,
    )  # fmt: skip


def result(seed: int, rows: dict[str, ModeSummary]) -> ExperimentResult:
    return ExperimentResult(
        function="embed", slo_ms=300.0, trace="twitter", max_rps=60.0, step_s=1.0,
        duration_s=60.0, start_s=0.0, seed=seed, modes=rows,
    )  # fmt: skip


def test_each_repeat_rotates_the_order_of_the_modes() -> None:
    modes = ("direct", "mlproxy", "slackwise")
    assert [order(modes, k) for k in range(4)] == [
        modes, ("mlproxy", "slackwise", "direct"), ("slackwise", "direct", "mlproxy"), modes,
    ]  # fmt: skip


def test_medians_and_ranges_over_the_repeats() -> None:
    runs = [
        result(1, {"slackwise": summary(10.0, 60.0), "kpa": summary(20.0, 120.0)}),
        result(2, {"slackwise": summary(2.0, 70.0), "kpa": summary(25.0, 110.0)}),
        result(3, {"slackwise": summary(4.0, 50.0), "kpa": summary(90.0, 118.0)}),
    ]
    doc = summarize_repeats(runs)
    assert doc["repeats"] == 3 and doc["seeds"] == [1, 2, 3] and len(doc["runs"]) == 3
    assert doc["modes"]["slackwise"]["violation_pct"] == 4.0
    assert doc["ranges"]["slackwise"]["violation_pct"] == [2.0, 10.0]
    assert doc["modes"]["kpa"]["replica_seconds"] == 118.0
    assert doc["ranges"]["kpa"]["replica_seconds"] == [110.0, 120.0]


def test_each_runs_timeline_is_kept_with_its_run_and_not_as_a_median() -> None:
    def with_timeline(desired: float) -> ModeSummary:
        return dataclasses.replace(
            summary(1.0, 60.0), timeline=[{"t": 0.0, "ready": 1.0, "desired": desired}]
        )

    doc = summarize_repeats([result(1, {"slackwise": with_timeline(2.0)}),
                             result(2, {"slackwise": with_timeline(3.0)})])  # fmt: skip
    assert "timeline" not in doc["modes"]["slackwise"]
    assert [r["modes"]["slackwise"]["timeline"][0]["desired"] for r in doc["runs"]] == [2.0, 3.0]


def test_misses_and_replica_seconds_inside_and_outside_the_window() -> None:
    d = Disturbance(kind="cpu", start_s=10.0, duration_s=10.0, cores=1)
    records = [
        {"sent": 1.0, "status": 200, "latency": 0.1},
        {"sent": 12.0, "status": 200, "latency": 0.5},  # inside, late
        {"sent": 15.0, "status": 429, "latency": 0.001},  # inside, refused
        {"sent": 18.0, "status": 200, "latency": 0.1},  # inside, in time
        {"sent": 25.0, "status": 200, "latency": 0.1},
    ]
    timeline = [{"t": float(t), "ready": 2.0 if 10 <= t < 20 else 1.0} for t in range(30)]
    split = window_split(records, timeline, d, slo_ms=300.0)
    assert math.isclose(split["inside_violation_pct"], 66.667)
    assert split["outside_violation_pct"] == 0.0 and split["inside_requests"] == 3
    assert (split["inside_replica_s"], split["outside_replica_s"]) == (20.0, 20.0)


def test_the_disturbance_flag_names_what_is_wrong() -> None:
    assert parse_disturbance("cpu:20:20:1", 60.0) == Disturbance(
        kind="cpu", start_s=20.0, duration_s=20.0, cores=1
    )
    assert parse_disturbance("pause:5:3", 60.0).cores == 1
    assert parse_disturbance("slow:20:10:4", 60.0) == Disturbance(
        kind="slow", start_s=20.0, duration_s=10.0, factor=4.0
    )
    assert parse_disturbance("slow:20:10", 60.0).factor == 2.0
    for bad, says in (
        ("gpu:1:2", "KIND"),
        ("cpu:a:2", "numbers"),
        ("cpu:1:0", "DURATION_S"),
        ("slow:1:2:1", "above 1"),
        ("cpu:1:2:1.5", "whole number"),
    ):
        with pytest.raises(SystemExit, match=says):
            parse_disturbance(bad, 60.0)
