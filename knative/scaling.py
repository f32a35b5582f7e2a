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

from knative.durations import parse_duration

GROUP = "autoscaling.knative.dev"
KPA_CLASS = "kpa.autoscaling.knative.dev"
WINDOW_MIN_S = 6.0
WINDOW_MAX_S = 3600.0
METRICS = ("concurrency", "rps")


class ScalingConfigError(ValueError):
    """A scaling setting out of Knative's range; the message names key and value."""


@dataclass(frozen=True, kw_only=True)
class AutoscalerConfig:
    """The ``config-autoscaler`` keys that matter to the KPA, in seconds where they are times."""

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
    initial_scale: int = 1
    allow_zero_initial_scale: bool = False
    min_scale: int = 0
    max_scale: int = 0
    scale_down_delay_s: float = 0.0
    max_scale_limit: int = 0
    tick_interval_s: float = 2.0

    def __post_init__(self) -> None:
        _range(
            "container-concurrency-target-percentage",
            self.container_concurrency_target_percentage,
            1.0,
            100.0,
        )
        _range(
            "container-concurrency-target-default",
            self.container_concurrency_target_default,
            0.01,
            math.inf,
        )
        _range(
            "requests-per-second-target-default",
            self.requests_per_second_target_default,
            0.01,
            math.inf,
        )
        if self.target_burst_capacity < 0 and self.target_burst_capacity != -1:
            raise ScalingConfigError(
                "target-burst-capacity must be -1 or non-negative, "
                f"got {self.target_burst_capacity}"
            )
        _window("stable-window", self.stable_window_s)
        _range("panic-window-percentage", self.panic_window_percentage, 1.0, 100.0)
        _range("panic-threshold-percentage", self.panic_threshold_percentage, 110.0, 1000.0)
        _range("max-scale-up-rate", self.max_scale_up_rate, 1.0 + 1e-9, math.inf)
        _range("max-scale-down-rate", self.max_scale_down_rate, 1.0 + 1e-9, math.inf)
        _range(
            "scale-to-zero-grace-period", self.scale_to_zero_grace_period_s, WINDOW_MIN_S, math.inf
        )
        _range(
            "scale-to-zero-pod-retention-period",
            self.scale_to_zero_pod_retention_period_s,
            0.0,
            WINDOW_MAX_S,
        )
        _range("scale-down-delay", self.scale_down_delay_s, 0.0, WINDOW_MAX_S)
        _range("tick-interval", self.tick_interval_s, 0.1, 60.0)
        _range("min-scale", self.min_scale, 0, math.inf)
        _range("max-scale", self.max_scale, 0, math.inf)
        _range("max-scale-limit", self.max_scale_limit, 0, math.inf)
        if self.initial_scale < 0 or (
            self.initial_scale == 0 and not self.allow_zero_initial_scale
        ):
            raise ScalingConfigError(
                f"initial-scale must be at least 1 (0 needs allow-zero-initial-scale), "
                f"got {self.initial_scale}"
            )

    @classmethod
    def from_config_map(cls, data: Mapping[str, Any]) -> AutoscalerConfig:
        """Read the config map's ``data`` (string values, Knative's key names)."""
        kwargs: dict[str, Any] = {}
        known = {f.name for f in fields(cls)}
        for key, raw in data.items():
            if key.startswith("_"):
                continue
            attr = key.replace("-", "_")
            is_time = attr + "_s" in known
            if is_time:
                attr += "_s"
            if attr not in known:
                raise ScalingConfigError(f"unknown config-autoscaler key {key!r}")
            kind = next(f.type for f in fields(cls) if f.name == attr)
            kwargs[attr] = _convert(key, raw, str(kind), is_time)
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

    @property
    def target_value(self) -> float:
        """The per-replica value the KPA aims at: target × utilization."""
        return self.target * self.target_utilization


def _range(key: str, value: float, low: float, high: float) -> None:
    if not (low <= value <= high):
        raise ScalingConfigError(f"{key} must be within [{low:g}, {high:g}], got {value!r}")


def _window(key: str, seconds: float) -> None:
    if not (WINDOW_MIN_S <= seconds <= WINDOW_MAX_S):
        raise ScalingConfigError(f"{key} must be between 6s and 1h, got {seconds:g}s")
    if seconds != int(seconds):
        raise ScalingConfigError(f"{key} must be a whole number of seconds, got {seconds:g}s")


def _convert(key: str, raw: Any, kind: str, is_time: bool) -> Any:
    text = str(raw).strip()
    try:
        if is_time:
            return parse_duration(text)
        if kind == "bool":
            if text.lower() not in ("true", "false"):
                raise ValueError("expected true or false")
            return text.lower() == "true"
        if kind == "int":
            return int(text)
        return float(text)
    except ValueError as exc:
        raise ScalingConfigError(f"{key}: bad value {raw!r} ({exc})") from None


def _annotation(annotations: Mapping[str, str], name: str) -> str | None:
    value = annotations.get(f"{GROUP}/{name}")
    if value is None:
        return None
    if not isinstance(value, str):
        raise ScalingConfigError(
            f"{GROUP}/{name}: annotation values must be strings, got {value!r}"
        )
    return value


def _number(annotations: Mapping[str, str], name: str) -> float | None:
    raw = _annotation(annotations, name)
    if raw is None:
        return None
    try:
        return float(raw)
    except ValueError:
        raise ScalingConfigError(f"{GROUP}/{name}: {raw!r} is not a number") from None


def _integer(annotations: Mapping[str, str], name: str) -> int | None:
    raw = _annotation(annotations, name)
    if raw is None:
        return None
    try:
        return int(raw)
    except ValueError:
        raise ScalingConfigError(f"{GROUP}/{name}: {raw!r} is not an integer") from None


def _duration(annotations: Mapping[str, str], name: str) -> float | None:
    raw = _annotation(annotations, name)
    if raw is None:
        return None
    try:
        return parse_duration(raw)
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
    """Merge a revision's annotations with the config map, checking Knative's value rules."""
    cfg = config or AutoscalerConfig()
    for key in annotations:
        if key.startswith(GROUP + "/") and key[len(GROUP) + 1 :] not in ANNOTATIONS:
            raise ScalingConfigError(f"unknown autoscaling annotation {key!r}")
    cls = _annotation(annotations, "class") or KPA_CLASS
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

    target = _number(annotations, "target")
    if target is not None and target < 0.01:
        raise ScalingConfigError(f"{GROUP}/target must be at least 0.01, got {target:g}")
    if metric == "rps":
        target = target if target is not None else cfg.requests_per_second_target_default
    else:
        if target is None:
            target = (
                float(container_concurrency)
                if container_concurrency > 0
                else cfg.container_concurrency_target_default
            )
        if container_concurrency > 0:
            target = min(target, float(container_concurrency))

    utilization = _number(annotations, "target-utilization-percentage")
    if utilization is None:
        utilization = cfg.container_concurrency_target_percentage
    _range(f"{GROUP}/target-utilization-percentage", utilization, 1.0, 100.0)
    if metric == "rps":
        utilization = 100.0  # Knative applies utilization to concurrency targets only

    window = _duration(annotations, "window")
    if window is None:
        window = cfg.stable_window_s
    _window(f"{GROUP}/window", window)
    panic_pct = _number(annotations, "panic-window-percentage")
    if panic_pct is None:
        panic_pct = cfg.panic_window_percentage
    _range(f"{GROUP}/panic-window-percentage", panic_pct, 1.0, 100.0)
    panic_threshold = _number(annotations, "panic-threshold-percentage")
    if panic_threshold is None:
        panic_threshold = cfg.panic_threshold_percentage
    _range(f"{GROUP}/panic-threshold-percentage", panic_threshold, 110.0, 1000.0)

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
    initial = _integer(annotations, "initial-scale")
    initial = cfg.initial_scale if initial is None else initial
    if initial < 0 or (initial == 0 and not cfg.allow_zero_initial_scale):
        raise ScalingConfigError(
            f"{GROUP}/initial-scale must be at least 1 unless allow-zero-initial-scale is set, "
            f"got {initial}"
        )
    delay = _duration(annotations, "scale-down-delay")
    delay = cfg.scale_down_delay_s if delay is None else delay
    _range(f"{GROUP}/scale-down-delay", delay, 0.0, WINDOW_MAX_S)
    retention = _duration(annotations, "scale-to-zero-pod-retention-period")
    retention = cfg.scale_to_zero_pod_retention_period_s if retention is None else retention
    _range(f"{GROUP}/scale-to-zero-pod-retention-period", retention, 0.0, WINDOW_MAX_S)

    return ScalingSpec(
        metric=metric,
        target=target,
        target_utilization=utilization / 100.0,
        stable_window_s=window,
        panic_window_s=max(1.0, window * panic_pct / 100.0),
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
    )
