"""Knative's autoscaling vocabulary and value checks: the annotation group, metric names, window
and target bounds, and converting a config-map or annotation string to a checked value (errors
name the key and the value, as Knative's webhook does)."""

from __future__ import annotations

import math
from typing import Any

from slackwise_core.durations import parse_duration
from slackwise_core.errors import CoreError

GROUP = "autoscaling.knative.dev"
KPA_CLASS = "kpa.autoscaling.knative.dev"
#: Kubernetes' HPA through Knative (the ``hpa`` extension): scales on CPU or memory, never to 0
HPA_CLASS = "hpa.autoscaling.knative.dev"
CLASSES = (KPA_CLASS, HPA_CLASS)
HPA_METRICS = ("cpu", "memory")
#: the revision annotations that bound its replica count
MIN_SCALE = f"{GROUP}/min-scale"
MAX_SCALE = f"{GROUP}/max-scale"
WINDOW_MIN_S = 6.0
WINDOW_MAX_S = 3600.0
TARGET_MIN = 0.01
METRICS = ("concurrency", "rps")
AGGREGATIONS = ("linear", "weighted-exponential")
#: Knative's utilization for rps targets: fixed, not a config-map key (only the annotation)
RPS_TARGET_UTILIZATION_PERCENTAGE = 70.0


class ScalingConfigError(CoreError, ValueError):
    """A scaling setting out of Knative's range; the message names key and value."""


def check_range(key: str, value: float, low: float, high: float) -> None:
    if not (low <= value <= high):
        bounds = f"at least {low:g}" if math.isinf(high) else f"within [{low:g}, {high:g}]"
        raise ScalingConfigError(f"{key} must be {bounds}, got {value!r}")


def check_duration_range(key: str, seconds: float, raw: str, high: float) -> None:
    if not (0.0 <= seconds <= high):
        raise ScalingConfigError(f"{key} must be within [0s, {high:g}s], got {raw!r}")


def check_above_one(key: str, value: float) -> None:
    if not value > 1.0:
        raise ScalingConfigError(f"{key} must be greater than 1, got {value!r}")


def check_whole_seconds(key: str, seconds: float, raw: str) -> None:
    if seconds != int(seconds):
        raise ScalingConfigError(f"{key} must be a whole number of seconds, got {raw!r}")


def check_window(key: str, seconds: float, raw: str) -> None:
    if not (WINDOW_MIN_S <= seconds <= WINDOW_MAX_S):
        raise ScalingConfigError(f"{key} must be between 6s and 1h, got {raw!r}")
    check_whole_seconds(key, seconds, raw)


#: strconv.ParseBool's spellings, as Knative's config-map parser accepts them
BOOL_WORDS = {
    **dict.fromkeys(("1", "t", "T", "TRUE", "true", "True"), True),
    **dict.fromkeys(("0", "f", "F", "FALSE", "false", "False"), False),
}


def convert_value(key: str, raw: Any, kind: str, is_time: bool) -> Any:
    text = str(raw).strip()
    try:
        if is_time:
            return parse_duration(text)
        if kind == "bool":
            if text not in BOOL_WORDS:
                raise ValueError("expected true or false")
            return BOOL_WORDS[text]
        if kind == "int":
            return int(text)
        if kind == "str":
            return text
        return float(text)
    except ValueError as exc:
        raise ScalingConfigError(f"{key}: bad value {raw!r} ({exc})") from None


#: Knative's older camelCase spellings; the kebab-case name wins when both are given
