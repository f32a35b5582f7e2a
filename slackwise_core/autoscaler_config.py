"""Knative's ``config-autoscaler`` map: :class:`AutoscalerConfig`, its keys with the defaults and
value ranges of Knative Serving 1.23 (see ``shared/knative/configmaps/autoscaler.yaml``); errors
name the key and the value, as Knative's webhook does."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from slackwise_core.scaling_values import (
    CLASSES,
    KPA_CLASS,
    TARGET_MIN,
    ScalingConfigError,
    check_above_one,
    check_range,
    check_whole_seconds,
    check_window,
    convert_value,
)

__all__ = ["AutoscalerConfig"]


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
        if self.pod_autoscaler_class not in CLASSES:
            raise ScalingConfigError(
                f"pod-autoscaler-class: {self.pod_autoscaler_class!r} is not one of "
                f"{', '.join(CLASSES)}"
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
