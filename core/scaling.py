"""Knative autoscaling settings: the ``config-autoscaler`` map and per-revision annotations.

:class:`AutoscalerConfig` holds the config map's keys (defaults and value ranges of Knative
Serving 1.23, see ``shared/knative/configmaps/autoscaler.yaml``). :func:`resolve_spec` merges it
with one function's ``autoscaling.knative.dev/*`` annotations into the frozen :class:`ScalingSpec`
the KPA runs on. Every error names the key and the bad value, as Knative's webhook does.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from core.durations import parse_duration
from core.scaling_values import (
    AGGREGATIONS,
    GROUP,
    KPA_CLASS,
    METRICS,
    RPS_TARGET_UTILIZATION_PERCENTAGE,
    TARGET_MIN,
    WINDOW_MAX_S,
    ScalingConfigError,
    check_above_one,
    check_duration_range,
    check_range,
    check_whole_seconds,
    check_window,
    convert_value,
)


@dataclass(frozen=True, kw_only=True)
class AutoscalerConfig:
    """The ``config-autoscaler`` keys that matter to the KPA, in seconds where they are times.

    ``container_concurrency_target_percentage`` is a percentage in (1, 100] or, as Knative
    accepts for backwards compatibility, a fraction in (0, 1] (so ``1`` means 100 %).
    ``tick_interval_s`` is ours: Knative's KPA always ticks every 2 s, a fixed constant there.
    """

    container_concurrency_target_percentage: float = 70.0
    container_concurrency_target_default: float = 100.0
    requests_per_second_target_default: float = 200.0
    target_burst_capacity: float = 211.0
    stable_window_s: float = 60.0
    panic_window_percentage: float = 10.0
    panic_threshold_percentage: float = 200.0
    max_scale_up_rate: float = 1000.0
    max_scale_down_rate: float = 2.0
    enable_scale_to_zero: bool = True
    scale_to_zero_grace_period_s: float = 30.0
    scale_to_zero_pod_retention_period_s: float = 0.0
    pod_autoscaler_class: str = KPA_CLASS
    activator_capacity: float = 100.0
    initial_scale: int = 1
    allow_zero_initial_scale: bool = False
    min_scale: int = 0
    max_scale: int = 0
    scale_down_delay_s: float = 0.0
    max_scale_limit: int = 0
    tick_interval_s: float = 2.0

    def __post_init__(self) -> None:
        pct = self.container_concurrency_target_percentage
        if not (0.0 < pct <= 100.0):
            raise ScalingConfigError(
                f"container-concurrency-target-percentage must be within (0, 100], got {pct!r}"
            )
        target = (
            self.container_concurrency_target_fraction * self.container_concurrency_target_default
        )
        if target < TARGET_MIN:
            raise ScalingConfigError(
                "container-concurrency-target-default × container-concurrency-target-percentage "
                f"must be at least {TARGET_MIN:g}, got "
                f"{self.container_concurrency_target_default!r} × {pct!r}"
            )
        check_range(
            "requests-per-second-target-default",
            self.requests_per_second_target_default,
            TARGET_MIN,
            math.inf,
        )
        if self.target_burst_capacity < 0 and self.target_burst_capacity != -1:
            raise ScalingConfigError(
                "target-burst-capacity must be -1 or non-negative, "
                f"got {self.target_burst_capacity!r}"
            )
        check_window("stable-window", self.stable_window_s, f"{self.stable_window_s:g}s")
        check_range("panic-window-percentage", self.panic_window_percentage, 1.0, 100.0)
        # Knative checks this range in the annotation webhook only; we check the map too.
        check_range("panic-threshold-percentage", self.panic_threshold_percentage, 110.0, 1000.0)
        check_above_one("max-scale-up-rate", self.max_scale_up_rate)
        check_above_one("max-scale-down-rate", self.max_scale_down_rate)
        if not self.scale_to_zero_grace_period_s > 0:
            raise ScalingConfigError(
                f"scale-to-zero-grace-period must be positive, "
                f"got {self.scale_to_zero_grace_period_s:g}s"
            )
        check_range(
            "scale-to-zero-pod-retention-period",
            self.scale_to_zero_pod_retention_period_s,
            0.0,
            math.inf,
        )
        check_range("scale-down-delay", self.scale_down_delay_s, 0.0, math.inf)
        check_whole_seconds(
            "scale-down-delay", self.scale_down_delay_s, f"{self.scale_down_delay_s:g}s"
        )
        if self.pod_autoscaler_class != KPA_CLASS:
            raise ScalingConfigError(
                f"pod-autoscaler-class: the local platform runs the KPA only ({KPA_CLASS}), "
                f"got {self.pod_autoscaler_class!r}"
            )
        check_range("activator-capacity", self.activator_capacity, 1.0, math.inf)
        check_range("tick-interval", self.tick_interval_s, 0.1, 60.0)
        check_range("min-scale", self.min_scale, 0, math.inf)
        check_range("max-scale-limit", self.max_scale_limit, 0, math.inf)
        if self.max_scale_limit > 0:
            check_range("max-scale", self.max_scale, 1, self.max_scale_limit)
        else:
            check_range("max-scale", self.max_scale, 0, math.inf)
        if self.max_scale > 0 and self.min_scale > self.max_scale:
            raise ScalingConfigError(
                f"min-scale={self.min_scale} is greater than max-scale={self.max_scale}"
            )
        if self.initial_scale < 0 or (
            self.initial_scale == 0 and not self.allow_zero_initial_scale
        ):
            raise ScalingConfigError(
                f"initial-scale must be at least 1 (0 needs allow-zero-initial-scale), "
                f"got {self.initial_scale}"
            )

    @property
    def container_concurrency_target_fraction(self) -> float:
        """The utilization as a fraction: values up to 1 are fractions already (Knative)."""
        pct = self.container_concurrency_target_percentage
        return pct / 100.0 if pct > 1.0 else pct

    @classmethod
    def from_config_map(cls, data: Mapping[str, Any]) -> AutoscalerConfig:
        """Read the config map's ``data`` (string values, Knative's key names)."""
        kwargs: dict[str, Any] = {}
        types = {f.name: str(f.type) for f in fields(cls)}
        for key, raw in data.items():
            if key.startswith("_"):
                continue
            attr = key.replace("-", "_")
            is_time = attr + "_s" in types
            if is_time:
                attr += "_s"
            if attr not in types:
                raise ScalingConfigError(f"unknown config-autoscaler key {key!r}")
            kwargs[attr] = convert_value(key, raw, types[attr], is_time)
        return cls(**kwargs)


@dataclass(frozen=True, kw_only=True)
class ScalingSpec:
    """What the KPA needs for one revision, after annotations override the config map."""

    metric: str
    target: float
    target_utilization: float
    stable_window_s: float
    panic_window_s: float
    panic_threshold: float
    max_scale_up_rate: float
    max_scale_down_rate: float
    min_scale: int
    max_scale: int
    initial_scale: int
    scale_down_delay_s: float
    enable_scale_to_zero: bool
    scale_to_zero_grace_period_s: float
    scale_to_zero_pod_retention_s: float
    tick_interval_s: float
    activation_scale: int = 1
    aggregation: str = "linear"

    @property
    def target_value(self) -> float:
        """The per-replica value the KPA aims at: target × utilization, at least 0.01."""
        return max(TARGET_MIN, self.target * self.target_utilization)


_ALIASES = {
    "initial-scale": "initialScale",
    "max-scale": "maxScale",
    "min-scale": "minScale",
    "metric-aggregation-algorithm": "metricAggregationAlgorithm",
    "panic-threshold-percentage": "panicThresholdPercentage",
    "panic-window-percentage": "panicWindowPercentage",
    "scale-down-delay": "scaleDownDelay",
    "scale-to-zero-pod-retention-period": "scaleToZeroPodRetentionPeriod",
    "target-burst-capacity": "targetBurstCapacity",
    "target-utilization-percentage": "targetUtilizationPercentage",
}


def _annotation(annotations: Mapping[str, str], name: str) -> str | None:
    key = f"{GROUP}/{name}"
    value = annotations.get(key)
    if value is None and name in _ALIASES:
        key = f"{GROUP}/{_ALIASES[name]}"
        value = annotations.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise ScalingConfigError(f"{key}: annotation values must be strings, got {value!r}")
    return value


def _number(annotations: Mapping[str, str], name: str) -> float | None:
    raw = _annotation(annotations, name)
    if raw is None:
        return None
    try:
        value = float(raw)
    except ValueError:
        raise ScalingConfigError(f"{GROUP}/{name}: {raw!r} is not a number") from None
    if not math.isfinite(value):
        raise ScalingConfigError(f"{GROUP}/{name}: {raw!r} is not a finite number")
    return value


def _integer(annotations: Mapping[str, str], name: str) -> int | None:
    raw = _annotation(annotations, name)
    if raw is None:
        return None
    try:
        return int(raw)
    except ValueError:
        raise ScalingConfigError(f"{GROUP}/{name}: {raw!r} is not an integer") from None


def _duration(annotations: Mapping[str, str], name: str) -> tuple[float, str] | None:
    raw = _annotation(annotations, name)
    if raw is None:
        return None
    try:
        return parse_duration(raw), raw
    except ValueError as exc:
        raise ScalingConfigError(f"{GROUP}/{name}: {exc}") from None


#: the annotation names :func:`resolve_spec` understands (others under the group are refused)
ANNOTATIONS = (
    "class",
    "metric",
    "target",
    "target-utilization-percentage",
    "window",
    "panic-window-percentage",
    "panic-threshold-percentage",
    "min-scale",
    "max-scale",
    "initial-scale",
    "scale-down-delay",
    "scale-to-zero-pod-retention-period",
    "activation-scale",
    "target-burst-capacity",
    "metric-aggregation-algorithm",
)


def resolve_spec(
    annotations: Mapping[str, str],
    *,
    container_concurrency: int = 0,
    config: AutoscalerConfig | None = None,
) -> ScalingSpec:
    """Merge a revision's annotations with the config map, checking Knative's value rules.

    Stricter than Knative on purpose: annotations under the group that the KPA does not know
    are refused rather than ignored, and only the KPA class is accepted.
    """
    cfg = config or AutoscalerConfig()
    known = set(ANNOTATIONS) | set(_ALIASES.values())
    for key in annotations:
        if key.startswith(GROUP + "/") and key[len(GROUP) + 1 :] not in known:
            raise ScalingConfigError(f"unknown autoscaling annotation {key!r}")
    cls = _annotation(annotations, "class") or cfg.pod_autoscaler_class
    if cls != KPA_CLASS:
        raise ScalingConfigError(
            f"{GROUP}/class: the local platform runs the KPA only ({KPA_CLASS}), got {cls!r}"
        )
    metric = _annotation(annotations, "metric") or "concurrency"
    if metric not in METRICS:
        raise ScalingConfigError(
            f"{GROUP}/metric: {metric!r} is not one of {', '.join(METRICS)} for the KPA"
        )
    if container_concurrency < 0:
        raise ScalingConfigError(
            f"containerConcurrency must be non-negative, got {container_concurrency}"
        )
    aggregation = _annotation(annotations, "metric-aggregation-algorithm") or "linear"
    if aggregation == "weightedExponential":
        aggregation = "weighted-exponential"
    if aggregation not in AGGREGATIONS:
        raise ScalingConfigError(
            f"{GROUP}/metric-aggregation-algorithm: {aggregation!r} is not one of "
            f"{', '.join(AGGREGATIONS)}"
        )

    target = _number(annotations, "target")
    if target is not None and target < TARGET_MIN:
        raise ScalingConfigError(f"{GROUP}/target must be at least {TARGET_MIN:g}, got {target!r}")
    if metric == "rps":
        target = target if target is not None else cfg.requests_per_second_target_default
        fraction = RPS_TARGET_UTILIZATION_PERCENTAGE / 100.0
    else:
        if target is None:
            target = (
                float(container_concurrency)
                if container_concurrency > 0
                else cfg.container_concurrency_target_default
            )
        if container_concurrency > 0:
            target = min(target, float(container_concurrency))
        fraction = cfg.container_concurrency_target_fraction
    utilization = _number(annotations, "target-utilization-percentage")
    if utilization is not None:
        check_range(f"{GROUP}/target-utilization-percentage", utilization, 1.0, 100.0)
        fraction = utilization / 100.0

    burst = _number(annotations, "target-burst-capacity")
    if burst is not None and burst < 0 and burst != -1:
        raise ScalingConfigError(
            f"{GROUP}/target-burst-capacity must be -1 or non-negative, got {burst!r}"
        )

    window_raw = _duration(annotations, "window")
    window = cfg.stable_window_s
    if window_raw is not None:
        window = window_raw[0]
        check_window(f"{GROUP}/window", window, window_raw[1])
    panic_pct = _number(annotations, "panic-window-percentage")
    if panic_pct is None:
        panic_pct = cfg.panic_window_percentage
    check_range(f"{GROUP}/panic-window-percentage", panic_pct, 1.0, 100.0)
    panic_threshold = _number(annotations, "panic-threshold-percentage")
    if panic_threshold is None:
        panic_threshold = cfg.panic_threshold_percentage
    check_range(f"{GROUP}/panic-threshold-percentage", panic_threshold, 110.0, 1000.0)

    min_scale = _integer(annotations, "min-scale")
    min_scale = cfg.min_scale if min_scale is None else min_scale
    max_scale = _integer(annotations, "max-scale")
    max_scale = cfg.max_scale if max_scale is None else max_scale
    if min_scale < 0:
        raise ScalingConfigError(f"{GROUP}/min-scale must be non-negative, got {min_scale}")
    if max_scale < 0:
        raise ScalingConfigError(f"{GROUP}/max-scale must be non-negative, got {max_scale}")
    if cfg.max_scale_limit > 0 and (max_scale == 0 or max_scale > cfg.max_scale_limit):
        raise ScalingConfigError(
            f"{GROUP}/max-scale must be within [1, {cfg.max_scale_limit}] (max-scale-limit), "
            f"got {max_scale}"
        )
    if max_scale > 0 and min_scale > max_scale:
        raise ScalingConfigError(
            f"{GROUP}/min-scale={min_scale} is greater than {GROUP}/max-scale={max_scale}"
        )
    activation = _integer(annotations, "activation-scale")
    if activation is not None:
        if activation < 2:
            raise ScalingConfigError(
                f"{GROUP}/activation-scale must be greater than 1, got {activation}"
            )
        if activation < min_scale or (max_scale > 0 and activation > max_scale):
            raise ScalingConfigError(
                f"{GROUP}/activation-scale={activation} must lie within "
                f"min-scale={min_scale} and max-scale={max_scale}"
            )
    initial = _integer(annotations, "initial-scale")
    initial = cfg.initial_scale if initial is None else initial
    if initial < 0 or (initial == 0 and not cfg.allow_zero_initial_scale):
        raise ScalingConfigError(
            f"{GROUP}/initial-scale must be at least 1 unless allow-zero-initial-scale is set, "
            f"got {initial}"
        )
    delay_raw = _duration(annotations, "scale-down-delay")
    delay = cfg.scale_down_delay_s
    if delay_raw is not None:
        delay = delay_raw[0]
        check_duration_range(f"{GROUP}/scale-down-delay", delay, delay_raw[1], WINDOW_MAX_S)
        check_whole_seconds(f"{GROUP}/scale-down-delay", delay, delay_raw[1])
    retention_raw = _duration(annotations, "scale-to-zero-pod-retention-period")
    retention = cfg.scale_to_zero_pod_retention_period_s
    if retention_raw is not None:
        retention = retention_raw[0]
        check_duration_range(
            f"{GROUP}/scale-to-zero-pod-retention-period", retention, retention_raw[1], WINDOW_MAX_S
        )

    return ScalingSpec(
        metric=metric,
        target=target,
        target_utilization=fraction,
        stable_window_s=window,
        # Knative rounds the panic window to whole seconds (halves away from zero), at least 1 s
        panic_window_s=max(1.0, math.floor(window * panic_pct / 100.0 + 0.5)),
        panic_threshold=panic_threshold / 100.0,
        max_scale_up_rate=cfg.max_scale_up_rate,
        max_scale_down_rate=cfg.max_scale_down_rate,
        min_scale=min_scale,
        max_scale=max_scale,
        initial_scale=initial,
        scale_down_delay_s=delay,
        enable_scale_to_zero=cfg.enable_scale_to_zero,
        scale_to_zero_grace_period_s=cfg.scale_to_zero_grace_period_s,
        scale_to_zero_pod_retention_s=retention,
        tick_interval_s=cfg.tick_interval_s,
        activation_scale=activation or 1,
        aggregation=aggregation,
    )
