"""Knative's value rules for config-autoscaler keys and autoscaling.knative.dev annotations."""

from __future__ import annotations

import re
from typing import Any

import pytest
import yaml

from knative.cluster.crd_schema import knative_dir
from slackwise_core.durations import parse_duration
from slackwise_core.knative_scaling import AutoscalerConfig, resolve_spec
from slackwise_core.scaling_values import ScalingConfigError

G = "autoscaling.knative.dev/"
_CONFIG_MAP = "configmaps/autoscaler.yaml"


def _config_map() -> dict[str, Any]:
    path = knative_dir() / _CONFIG_MAP
    if not path.is_file():
        pytest.skip(f"Knative's {_CONFIG_MAP} is not at {path} (set SLACKWISE_KNATIVE_DIR)")
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert isinstance(doc, dict)
    return doc


def _seconds(raw: str) -> str:
    """A duration as the config object reports it ("7200s" for "2h")."""
    try:
        return f"{parse_duration(raw):g}s"
    except ValueError:
        return raw


def annotated(**annotations: str) -> dict[str, str]:
    return {G + k.replace("_", "-"): v for k, v in annotations.items()}


# -- the config map ----------------------------------------------------------------------------


def test_defaults_equal_the_documented_example() -> None:
    data = _config_map()["data"]
    example = yaml.safe_load(data["_example"])
    assert isinstance(example, dict) and len(example) >= 20
    assert all(isinstance(v, str) for v in example.values())  # config maps hold strings
    assert AutoscalerConfig.from_config_map(example) == AutoscalerConfig()
    assert AutoscalerConfig.from_config_map(data) == AutoscalerConfig()  # _example is skipped


def test_config_map_values_are_parsed() -> None:
    cfg = AutoscalerConfig.from_config_map(
        {
            "stable-window": "2m",
            "scale-to-zero-grace-period": "45s",
            "enable-scale-to-zero": "False",
            "max-scale-up-rate": "3.5",
            "min-scale": "1",
            "max-scale": "5",
            "max-scale-limit": "10",
            "container-concurrency-target-percentage": "0.5",
        }
    )
    assert cfg.stable_window_s == 120.0
    assert cfg.scale_to_zero_grace_period_s == 45.0
    assert cfg.enable_scale_to_zero is False
    assert cfg.max_scale_up_rate == 3.5
    assert (cfg.min_scale, cfg.max_scale, cfg.max_scale_limit) == (1, 5, 10)
    assert cfg.container_concurrency_target_fraction == 0.5  # a fraction, as Knative reads it


def test_utilization_up_to_one_is_a_fraction() -> None:
    assert (
        AutoscalerConfig(
            container_concurrency_target_percentage=1
        ).container_concurrency_target_fraction
        == 1.0
    )
    assert (
        AutoscalerConfig(
            container_concurrency_target_percentage=70
        ).container_concurrency_target_fraction
        == 0.7
    )


@pytest.mark.parametrize(
    ("key", "raw"),
    [
        ("stable-window", "5s"),
        ("stable-window", "61.5s"),
        ("stable-window", "2h"),
        ("stable-window", "soon"),
        ("panic-window-percentage", "0"),
        ("panic-window-percentage", "101"),
        ("panic-threshold-percentage", "100"),
        ("container-concurrency-target-percentage", "0"),
        ("container-concurrency-target-percentage", "101"),
        ("container-concurrency-target-default", "0.001"),
        ("requests-per-second-target-default", "0.001"),
        ("target-burst-capacity", "-2"),
        ("max-scale-up-rate", "1"),
        ("max-scale-down-rate", "0.5"),
        ("scale-to-zero-grace-period", "0s"),
        ("scale-to-zero-pod-retention-period", "-1s"),
        ("scale-down-delay", "1.5s"),
        ("scale-down-delay", "-3s"),
        ("initial-scale", "0"),
        ("initial-scale", "-1"),
        ("min-scale", "-1"),
        ("max-scale", "-1"),
        ("max-scale-limit", "-1"),
        ("activator-capacity", "0.5"),
        ("pod-autoscaler-class", "vpa.autoscaling.knative.dev"),
        ("enable-scale-to-zero", "yes"),
        ("min-scale", "1.5"),
    ],
)
def test_config_map_range_rules(key: str, raw: str) -> None:
    with pytest.raises(ScalingConfigError, match=key) as info:
        AutoscalerConfig.from_config_map({key: raw})
    message = str(info.value)
    assert raw in message or raw.rstrip("s") in message or _seconds(raw) in message


def test_config_map_cross_rules() -> None:
    with pytest.raises(ScalingConfigError, match=r"min-scale=3 .*max-scale=2"):
        AutoscalerConfig.from_config_map({"min-scale": "3", "max-scale": "2"})
    with pytest.raises(ScalingConfigError, match=r"max-scale .*\b0\b"):
        AutoscalerConfig.from_config_map({"max-scale-limit": "5"})  # unlimited is over the limit
    with pytest.raises(ScalingConfigError, match=r"max-scale .*\b6\b"):
        AutoscalerConfig.from_config_map({"max-scale-limit": "5", "max-scale": "6"})
    assert AutoscalerConfig.from_config_map(
        {"initial-scale": "0", "allow-zero-initial-scale": "true"}
    )


def test_unknown_config_map_key() -> None:
    with pytest.raises(ScalingConfigError, match="'stable-windows'"):
        AutoscalerConfig.from_config_map({"stable-windows": "60s"})


# -- annotations -------------------------------------------------------------------------------


def test_defaults_without_annotations() -> None:
    s = resolve_spec({})
    assert (s.metric, s.target, s.target_utilization) == ("concurrency", 100.0, 0.7)
    assert (s.stable_window_s, s.panic_window_s, s.panic_threshold) == (60.0, 6.0, 2.0)
    assert (s.min_scale, s.max_scale, s.initial_scale) == (0, 0, 1)
    assert (s.max_scale_up_rate, s.max_scale_down_rate) == (1000.0, 2.0)
    assert (s.scale_to_zero_grace_period_s, s.scale_to_zero_pod_retention_s) == (30.0, 0.0)
    assert s.enable_scale_to_zero and s.scale_down_delay_s == 0.0
    assert (s.activation_scale, s.aggregation) == (1, "linear")


def test_annotations_override_the_config_map() -> None:
    s = resolve_spec(
        annotated(
            metric="rps",
            target="50",
            target_utilization_percentage="80",
            window="2m",
            panic_window_percentage="20",
            panic_threshold_percentage="300",
            min_scale="1",
            max_scale="4",
            initial_scale="2",
            scale_down_delay="15s",
            scale_to_zero_pod_retention_period="1m30s",
            activation_scale="2",
        )
    )
    assert (s.metric, s.target, s.target_utilization) == ("rps", 50.0, 0.8)
    assert (s.stable_window_s, s.panic_window_s, s.panic_threshold) == (120.0, 24.0, 3.0)
    assert (s.min_scale, s.max_scale, s.initial_scale, s.activation_scale) == (1, 4, 2, 2)
    assert (s.scale_down_delay_s, s.scale_to_zero_pod_retention_s) == (15.0, 90.0)


def test_legacy_camel_case_names() -> None:
    s = resolve_spec({G + "minScale": "2", G + "maxScale": "3", G + "initialScale": "2"})
    assert (s.min_scale, s.max_scale, s.initial_scale) == (2, 3, 2)
    both = resolve_spec({G + "min-scale": "1", G + "minScale": "2"})
    assert both.min_scale == 1  # the kebab-case name wins, as in Knative


@pytest.mark.parametrize(
    ("window", "percentage", "panic_s"),
    [
        ("60s", "10", 6.0),
        ("15s", "10", 2.0),
        ("25s", "10", 3.0),
        ("6s", "1", 1.0),
        ("1h", "100", 3600.0),
    ],
)
def test_panic_window_rounds_to_whole_seconds(window: str, percentage: str, panic_s: float) -> None:
    s = resolve_spec(annotated(window=window, panic_window_percentage=percentage))
    assert s.panic_window_s == panic_s


@pytest.mark.parametrize(
    ("name", "raw"),
    [
        ("window", "5s"),
        ("window", "6500ms"),
        ("window", "61m"),
        ("window", "sixty"),
        ("panic-window-percentage", "0"),
        ("panic-window-percentage", "101"),
        ("panic-threshold-percentage", "100"),
        ("panic-threshold-percentage", "1001"),
        ("target", "0.001"),
        ("target", "ten"),
        ("target-utilization-percentage", "0.5"),
        ("target-utilization-percentage", "101"),
        ("target-burst-capacity", "-2"),
        ("min-scale", "-1"),
        ("min-scale", "one"),
        ("max-scale", "-1"),
        ("initial-scale", "0"),
        ("initial-scale", "-1"),
        ("scale-down-delay", "1h1s"),
        ("scale-down-delay", "2.5s"),
        ("scale-to-zero-pod-retention-period", "-5s"),
        ("scale-to-zero-pod-retention-period", "2h"),
        ("activation-scale", "1"),
        ("class", "vpa.autoscaling.knative.dev"),
        ("metric", "cpu"),
        ("metric-aggregation-algorithm", "median"),
    ],
)
def test_annotation_range_rules(name: str, raw: str) -> None:
    with pytest.raises(ScalingConfigError, match=G + name) as info:
        resolve_spec({G + name: raw})
    assert raw in str(info.value)


def test_min_greater_than_max() -> None:
    with pytest.raises(ScalingConfigError, match=r"min-scale=5 .*max-scale=3"):
        resolve_spec(annotated(min_scale="5", max_scale="3"))


def test_activation_scale_within_min_and_max() -> None:
    with pytest.raises(ScalingConfigError, match=r"activation-scale=5 .*max-scale=3"):
        resolve_spec(annotated(max_scale="3", activation_scale="5"))
    with pytest.raises(ScalingConfigError, match=r"activation-scale=2 .*min-scale=3"):
        resolve_spec(annotated(min_scale="3", activation_scale="2"))


def test_initial_scale_zero_needs_the_cluster_flag() -> None:
    with pytest.raises(ScalingConfigError, match=G + "initial-scale.* 0"):
        resolve_spec(annotated(initial_scale="0"))
    allow = AutoscalerConfig(allow_zero_initial_scale=True)
    assert resolve_spec(annotated(initial_scale="0"), config=allow).initial_scale == 0


def test_max_scale_limit() -> None:
    cfg = AutoscalerConfig(max_scale_limit=10, max_scale=10)
    assert resolve_spec(annotated(max_scale="10"), config=cfg).max_scale == 10
    assert resolve_spec({}, config=cfg).max_scale == 10
    for raw in ("11", "0"):
        with pytest.raises(ScalingConfigError, match=f"max-scale.*got {raw}"):
            resolve_spec(annotated(max_scale=raw), config=cfg)


def test_unknown_annotation() -> None:
    with pytest.raises(ScalingConfigError, match=f"'{G}max-scales'"):
        resolve_spec({G + "max-scales": "3"})
    assert resolve_spec({"example.com/other": "x"}).min_scale == 0  # other groups are ignored


def test_non_string_annotation_value() -> None:
    with pytest.raises(ScalingConfigError, match=f"{G}min-scale.*3"):
        resolve_spec({G + "min-scale": 3})  # type: ignore[dict-item]


def test_negative_container_concurrency() -> None:
    with pytest.raises(ScalingConfigError, match=r"containerConcurrency.*-1"):
        resolve_spec({}, container_concurrency=-1)


HPA = {G + "class": "hpa.autoscaling.knative.dev"}


def test_the_hpa_class_resolves_for_a_cluster() -> None:
    spec = resolve_spec({**HPA, G + "metric": "memory", G + "target": "512", G + "min-scale": "2",
                         G + "max-scale": "6"})  # fmt: skip
    assert spec.autoscaler_class == "hpa.autoscaling.knative.dev"
    assert (spec.metric, spec.target, spec.min_scale, spec.max_scale) == ("memory", 512.0, 2, 6)
    assert spec.initial_scale >= 2 and not spec.enable_scale_to_zero
    plain = resolve_spec(HPA)  # cpu at 80 % by default, one replica at least
    assert (plain.metric, plain.target, plain.min_scale) == ("cpu", 80.0, 1)


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        ({G + "metric": "concurrency"}, "not one of cpu, memory for the HPA"),
        ({G + "min-scale": "0"}, "cannot scale to zero"),
        ({G + "target": "150"}, "utilization in [1, 100]"),
        ({G + "max-scale": "-1"}, "max-scale"),
    ],
)
def test_the_hpa_class_has_its_own_rules(extra: dict[str, str], says: str) -> None:
    with pytest.raises(ScalingConfigError, match=re.escape(says)):
        resolve_spec({**HPA, **extra})


def test_what_emulates_the_kpa_refuses_the_hpa_class_by_name() -> None:
    from knative.local.platform import LocalPlatform
    from slackwise_config import parse_config
    from slackwise_core.knative_scaling import require_kpa

    config = parse_config({"functions": {"digits": {"model": "digits", "annotations": HPA}}})
    require_kpa(parse_config({"functions": {"digits": {"model": "digits"}}})
                .functions["digits"].scaling, "fine")  # fmt: skip
    with pytest.raises(ScalingConfigError, match=r"functions\.digits\.annotations: .*cluster only"):
        LocalPlatform(config)
