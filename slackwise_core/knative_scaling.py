"""Knative autoscaling settings: the ``config-autoscaler`` map and per-revision annotations.

:class:`AutoscalerConfig` (:mod:`slackwise_core.autoscaler_config`) holds the config map's keys
(defaults and value ranges of Knative Serving 1.23, see
``shared/knative/configmaps/autoscaler.yaml``). :func:`resolve_spec` merges it with one function's
``autoscaling.knative.dev/*`` annotations into the frozen :class:`ScalingSpec` the KPA runs on (or,
for the HPA class, a cluster's HPA). Every error names the key and the bad value, as Knative's
webhook does.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields, replace
from typing import TypeVar

from slackwise_core.autoscaler_config import AutoscalerConfig as AutoscalerConfig
from slackwise_core.durations import parse_duration
from slackwise_core.scaling_values import (
    AGGREGATIONS,
    CLASSES,
    GROUP,
    HPA_CLASS,
    HPA_METRICS,
    KPA_CLASS,
    METRICS,
    RPS_TARGET_UTILIZATION_PERCENTAGE,
    TARGET_MIN,
    WINDOW_MAX_S,
    ScalingConfigError,
    check_duration_range,
    check_range,
    check_whole_seconds,
    check_window,
)


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
    #: the revision's pod autoscaler: the KPA, or the HPA (on a cluster only: the local
    #: platform and the simulator emulate the KPA and refuse it, see :func:`require_kpa`)
    autoscaler_class: str = KPA_CLASS

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


_T = TypeVar("_T")


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


def _parsed(annotations: Mapping[str, str], name: str, parse: Callable[[str], _T]) -> _T | None:
    """The annotation ``name`` read by ``parse`` (None when absent); its ValueError, keyed."""
    raw = _annotation(annotations, name)
    if raw is None:
        return None
    try:
        return parse(raw)
    except ValueError as exc:
        raise ScalingConfigError(f"{GROUP}/{name}: {exc}") from None


def _finite(raw: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"{raw!r} is not a number") from None
    if not math.isfinite(value):
        raise ValueError(f"{raw!r} is not a finite number")
    return value


def _whole(raw: str) -> int:
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"{raw!r} is not an integer") from None


def _number(annotations: Mapping[str, str], name: str) -> float | None:
    return _parsed(annotations, name, _finite)


def _integer(annotations: Mapping[str, str], name: str) -> int | None:
    return _parsed(annotations, name, _whole)


def _duration(annotations: Mapping[str, str], name: str) -> tuple[float, str] | None:
    return _parsed(annotations, name, lambda raw: (parse_duration(raw), raw))


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
    are refused rather than ignored. The class is the KPA or the HPA (CPU or memory); the HPA
    passes through to a cluster, and what runs the KPA itself refuses it (:func:`require_kpa`).
    """
    cfg = config or AutoscalerConfig()
    known = set(ANNOTATIONS) | set(_ALIASES.values())
    for key in annotations:
        if key.startswith(GROUP + "/") and key[len(GROUP) + 1 :] not in known:
            raise ScalingConfigError(f"unknown autoscaling annotation {key!r}")
    cls = _annotation(annotations, "class") or cfg.pod_autoscaler_class
    if cls not in CLASSES:
        raise ScalingConfigError(f"{GROUP}/class: {cls!r} is not one of {', '.join(CLASSES)}")
    if cls == HPA_CLASS:
        return _hpa_spec(annotations, container_concurrency, cfg)
    metric, aggregation = _kpa_metric(annotations, container_concurrency)
    target, fraction = _target(annotations, metric, container_concurrency, cfg)
    window, panic_pct, panic_threshold = _windows(annotations, cfg)
    min_scale, max_scale, activation, initial = _bounds(annotations, cfg)
    delay, retention = _delays(annotations, cfg)
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


def _kpa_metric(annotations: Mapping[str, str], container_concurrency: int) -> tuple[str, str]:
    """The KPA's metric and its aggregation algorithm."""
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

    return metric, aggregation


def _target(
    annotations: Mapping[str, str], metric: str, container_concurrency: int, cfg: AutoscalerConfig
) -> tuple[float, float]:
    """The per-replica target and the utilization it is scaled by (burst capacity checked)."""
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
    return target, fraction


def _windows(annotations: Mapping[str, str], cfg: AutoscalerConfig) -> tuple[float, float, float]:
    """The stable window (s), the panic window (% of it) and the panic threshold (%)."""
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
    return window, panic_pct, panic_threshold


def _bounds(
    annotations: Mapping[str, str], cfg: AutoscalerConfig
) -> tuple[int, int, int | None, int]:
    """min-scale, max-scale, activation-scale (or None) and initial-scale, checked together."""
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
    return min_scale, max_scale, activation, initial


def _delays(annotations: Mapping[str, str], cfg: AutoscalerConfig) -> tuple[float, float]:
    """The scale-down delay and the scale-to-zero pod retention (s)."""
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
    return delay, retention


def _hpa_spec(
    annotations: Mapping[str, str], container_concurrency: int, cfg: AutoscalerConfig
) -> ScalingSpec:
    """An HPA-class revision: its metric (cpu or memory), target and bounds, checked as Knative's
    webhook does (the HPA never scales to zero: min-scale at least 1); the KPA's windows and
    panic settings do not apply to it and keep the config map's values."""
    metric = _annotation(annotations, "metric") or "cpu"
    if metric not in HPA_METRICS:
        raise ScalingConfigError(
            f"{GROUP}/metric: {metric!r} is not one of {', '.join(HPA_METRICS)} for the HPA class"
        )
    kpa = resolve_spec(
        {k: v for k, v in annotations.items() if k.split("/", 1)[-1] not in ("class", "metric")},
        container_concurrency=container_concurrency,
        config=AutoscalerConfig(
            **{
                **{f.name: getattr(cfg, f.name) for f in fields(cfg)},
                "pod_autoscaler_class": KPA_CLASS,
            }
        ),
    )
    min_scale = _integer(annotations, "min-scale")
    min_scale = max(1, cfg.min_scale) if min_scale is None else min_scale
    if min_scale < 1:
        raise ScalingConfigError(
            f"{GROUP}/min-scale must be at least 1 for the HPA class (it cannot scale to zero), "
            f"got {min_scale}"
        )
    target = _number(annotations, "target")
    if target is not None and not 1.0 <= target <= (100.0 if metric == "cpu" else math.inf):
        what = "a utilization in [1, 100] %" if metric == "cpu" else "at least 1 MiB"
        raise ScalingConfigError(
            f"{GROUP}/target for the HPA's {metric} must be {what}, got {target!r}"
        )
    return replace(
        kpa,
        autoscaler_class=HPA_CLASS,
        metric=metric,
        target=target if target is not None else 80.0,
        min_scale=min_scale,
        initial_scale=max(kpa.initial_scale, min_scale),
        enable_scale_to_zero=False,
    )


def require_kpa(spec: ScalingSpec, where: str) -> None:
    """Refuse a spec the KPA cannot run (``where`` names the function and what emulates it)."""
    if spec.autoscaler_class != KPA_CLASS:
        raise ScalingConfigError(
            f"{where}: {GROUP}/class {spec.autoscaler_class!r} runs on a cluster only; the local "
            f"platform and the simulator emulate the KPA ({KPA_CLASS}). Deploy it with "
            "'slackwise manifests' or 'slackwise deploy', and serve with --platform knative"
        )
