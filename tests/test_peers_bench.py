"""The peer benchmark's own rules: which configurations it sweeps and what passes."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _module(name: str) -> ModuleType:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))


def test_every_system_is_swept_on_one_and_two_processes() -> None:
    systems = _module("peer_systems")
    for model in systems.MODELS:
        setups = systems.candidates(model, list(systems.SYSTEMS))
        for name in systems.SYSTEMS:
            counts = {
                s.get("processes") or s.get("workers") or s.get("replicas")
                for s in setups
                if s.system == name
            }
            assert counts == {1, 2}, (model, name, counts)


def test_the_batching_peers_get_the_cap_and_half_of_it_with_waits_from_the_slo() -> None:
    systems = _module("peer_systems")
    setups = systems.candidates("embed", ["ray", "bentoml"])
    cap, slo = systems.MAX_BATCH["embed"], systems.MODELS["embed"]
    ray = {(s.get("max_batch"), s.get("wait_ms")) for s in setups if s.system == "ray"}
    assert ray == {(cap // 2, slo / 20), (cap, slo / 5)}
    bento = {(s.get("max_batch"), s.get("max_latency_ms")) for s in setups if s.system == "bentoml"}
    assert bento == {(cap // 2, slo / 2), (cap, slo)}
    assert len(setups) == 8  # two settings x two process counts x two systems


def test_a_second_slackwise_replica_is_the_shipped_config_with_two(tmp_path: Path) -> None:
    systems = _module("peer_systems")
    shipped = systems._slackwise_config("digits", 1, tmp_path)
    assert shipped == ROOT / "experiments" / "peers" / "digits.yaml"
    two = systems._slackwise_config("digits", 2, tmp_path).read_text(encoding="utf-8")
    assert 'min-scale: "2"' in two and 'max-scale: "2"' in two and 'initial-scale: "2"' in two
    assert '"1"' not in two


@pytest.mark.parametrize(
    ("change", "passed"),
    [
        ({}, True),
        ({"p95_ms": 50.1}, False),  # P95 over the SLO
        ({"p99_ms": 100.1}, False),  # P99 over twice the SLO
        ({"p99_ms": 100.0}, True),
        ({"error_ratio": 0.001}, False),  # 0.1 % failed
        ({"client_dropped": 3}, False),  # the generator could not send everything
    ],
)
def test_the_pass_rule(change: dict[str, float], passed: bool) -> None:
    sweep = _module_with_systems("peer_sweep")
    result = {"p95_ms": 40.0, "p99_ms": 90.0, "error_ratio": 0.0, "client_dropped": 0}
    assert sweep.passes({**result, **change}, 50.0) is passed


def test_median_and_range_take_a_system_that_never_passed_as_zero() -> None:
    sweep = _module_with_systems("peer_sweep")
    assert sweep.median_and_range([300.0, 0.0, 320.0]) == {
        "median": 300.0,
        "low": 0.0,
        "high": 320.0,
    }
    assert sweep.median_and_range([]) == {"median": None, "low": None, "high": None}


def _module_with_systems(name: str) -> ModuleType:
    _module("peer_systems")  # peer_sweep imports it by its plain name
    return _module(name)
