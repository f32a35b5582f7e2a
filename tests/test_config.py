"""Config loading: frozen objects, and errors that name the file, the key and the value."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from slackwise_config import ConfigError, HpaSettings, load_config, parse_config


def base(**fn: Any) -> dict[str, Any]:
    return {"functions": {"digits": {"model": "digits", **fn}}}


def test_defaults_follow_knative() -> None:
    config = parse_config(base())
    fn = config.functions["digits"]
    assert fn.container_concurrency == 1
    assert fn.scaling.target == 1.0  # containerConcurrency caps the default target of 100
    assert fn.scaling.target_utilization == 0.7
    assert fn.scaling.stable_window_s == 60.0
    assert fn.scaling.panic_window_s == 6.0
    assert fn.scaling.scale_to_zero_grace_period_s == 30.0
    with pytest.raises(dataclasses.FrozenInstanceError):
        fn.threads = 4  # type: ignore[misc]


def test_annotations_override_the_config_map() -> None:
    config = parse_config(
        {
            "platform": {"autoscaler": {"stable-window": "30s", "max-scale-up-rate": "4"}},
            "functions": {
                "digits": {
                    "model": "digits",
                    "container_concurrency": 0,
                    "annotations": {
                        "autoscaling.knative.dev/window": "12s",
                        "autoscaling.knative.dev/target": "8",
                        "autoscaling.knative.dev/min-scale": "1",
                    },
                }
            },
            "apps": {"a": {"stages": ["digits"], "slo_ms": 50}},
        }
    )
    spec = config.functions["digits"].scaling
    assert (spec.stable_window_s, spec.target, spec.min_scale) == (12.0, 8.0, 1)
    assert spec.max_scale_up_rate == 4.0
    assert config.apps["a"].stages == ("digits",)
    assert config.apps["a"].percentile == 95.0


@pytest.mark.parametrize(
    ("raw", "needles"),
    [
        (base(container_concurrency=-1), ["functions.digits.container_concurrency", "-1"]),
        (base(container_concurrency="two"), ["container_concurrency", "'two'"]),
        (base(model="gpt"), ["functions.digits.model", "'gpt'"]),
        (base(variant="tpu"), ["functions.digits.variant", "'tpu'"]),
        (base(timeout_s=900), ["functions.digits.timeout_s", "900"]),
        (base(threads=0), ["functions.digits.threads", "0"]),
        (base(colour="red"), ["functions.digits.colour", "unknown key"]),
        (base(annotations={"autoscaling.knative.dev/min-scale": 1}), ["min-scale", "quote"]),
        (
            base(annotations={"autoscaling.knative.dev/window": "3s"}),
            ["functions.digits.annotations", "window", "3s"],
        ),
        (
            base(
                annotations={
                    "autoscaling.knative.dev/min-scale": "5",
                    "autoscaling.knative.dev/max-scale": "2",
                }
            ),
            ["min-scale=5", "max-scale=2"],
        ),
        ({"functions": {}}, ["functions", "at least one"]),
        ({"functions": {"Bad_Name": {"model": "digits"}}}, ["functions.Bad_Name", "DNS"]),
        (
            {**base(), "platform": {"autoscaler": {"stable-window": "forever"}}},
            ["platform.autoscaler", "stable-window", "forever"],
        ),
        ({**base(), "platform": {"port": 70000}}, ["platform.port", "70000"]),
        ({**base(), "platform": {"cpu_period_ms": 0.5}}, ["platform.cpu_period_ms", "0.5"]),
        ({**base(), "platform": {"cpu_period_ms": 5000}}, ["platform.cpu_period_ms", "<= 1000"]),
        (
            {**base(), "apps": {"a": {"stages": ["nope"], "slo_ms": 5}}},
            ["apps.a.stages[0]", "nope"],
        ),
        ({**base(), "apps": {"a": {"stages": ["digits"], "slo_ms": -5}}}, ["apps.a.slo_ms", "-5"]),
        ({**base(), "surprise": 1}, ["surprise", "unknown key"]),
        (["not", "a", "mapping"], ["top level", "mapping"]),
    ],
)
def test_errors_name_the_key_and_the_value(raw: Any, needles: list[str]) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(raw, "exp.yaml")
    message = str(info.value)
    assert message.startswith("exp.yaml: ")
    for needle in needles:
        assert needle in message, (needle, message)


def test_load_config_reports_bad_yaml_with_the_path(tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text("functions: [unclosed\n")
    with pytest.raises(ConfigError, match=r"broken\.yaml: not valid YAML"):
        load_config(path)


def test_shipped_config_loads() -> None:
    config = load_config(Path(__file__).parent.parent / "experiments" / "local.yaml")
    assert set(config.functions) >= {"digits", "embed"}
    assert config.functions["digits"].scaling.initial_scale == 0


def test_the_readme_config_reference_is_valid() -> None:
    import yaml

    readme = (Path(__file__).parent.parent / "README.md").read_text()
    section = readme.split("## Configuration", 1)[1]
    block = section.split("```yaml", 1)[1].split("```", 1)[0]
    config = parse_config(yaml.safe_load(block), "README.md")
    assert config.functions["digits"].slo_ms == 100
    assert config.experiment is not None and config.experiment.trace == "twitter"


def test_aimd_overrides_leave_the_rest_to_the_mode() -> None:
    from slackwise_policies.modes import MLPROXY, SLACKWISE

    config = parse_config(
        {
            "functions": {"d": {"model": "digits", "slo_ms": 100}},
            "adapter": {"aimd": {"initial": 2, "period_s": 5}},
        }
    )
    assert config.adapter.aimd == {"initial": 2, "period_s": 5.0}
    tuned = SLACKWISE.with_aimd(config.adapter.aimd)
    assert (tuned.aimd.initial, tuned.aimd.period_s) == (2, 5.0)
    assert tuned.aimd.miss_threshold == SLACKWISE.aimd.miss_threshold
    assert MLPROXY.with_aimd({"period_s": 5.0}) is MLPROXY


@pytest.mark.parametrize(
    ("hpa", "needle"),
    [
        (
            {"min_replicas": 4, "max_replicas": 3},
            "adapter.hpa.max_replicas: must be >= min_replicas (4), got 3",
        ),
        ({"min_replicas": 0}, "adapter.hpa.min_replicas: must be >= 1, got 0"),
        ({"target_cpu_percent": 0}, "adapter.hpa.target_cpu_percent: must be >= 1, got 0"),
        (
            {"target_cpu_percent": "70%"},
            "adapter.hpa.target_cpu_percent: must be an integer, got '70%'",
        ),
        ({"max": 4}, "adapter.hpa.max: unknown key"),
    ],
)
def test_bad_adapter_hpa_settings_name_the_key_and_the_value(
    hpa: dict[str, Any], needle: str
) -> None:
    assert parse_config(base()).adapter.hpa == HpaSettings(2, 10, 70)  # the defaults
    raw = {**base(), "adapter": {"hpa": hpa}}
    with pytest.raises(ConfigError) as info:
        parse_config(raw, "bad.yaml")
    assert f"bad.yaml: {needle}" in str(info.value)


@pytest.mark.parametrize(
    ("raw", "where"),
    [
        (base(slo_ms=0), "exp.yaml: functions.digits.slo_ms: must be positive, got 0"),
        (
            {**base(), "apps": {"a": {"stages": ["digits"], "slo_ms": 0}}},
            "exp.yaml: apps.a.slo_ms: must be positive, got 0",
        ),
        (
            {**base(), "experiment": {"function": "digits", "trace": "twitter", "max_rps": -2}},
            "exp.yaml: experiment.max_rps: must be positive, got -2",
        ),
    ],
)
def test_a_number_that_must_be_positive_is_refused_at_its_key(raw: Any, where: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(raw, "exp.yaml")
    assert str(info.value) == where


def test_a_top_level_key_is_named_without_a_leading_dot() -> None:
    from simulator.config import parse_sim_config

    doc = {
        "rate_rps": 0,
        "functions": {"f": {"max_batch": 8}},
        "apps": {"app": {"stages": ["f"], "slo_ms": 60}},
    }
    with pytest.raises(ConfigError) as info:
        parse_sim_config(doc, "sim.yaml")
    assert str(info.value) == "sim.yaml: rate_rps: must be positive, got 0"
