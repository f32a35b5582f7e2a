"""A function's compute device in the config (``functions.X.device``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from slackwise_config.reader import Reader

__all__ = ["device_setting"]


def device_setting(r: Reader, data: Mapping[str, Any], path: str, variant: str) -> str:
    """``cpu``, ``cuda`` or ``cuda:N``; by default ``cuda`` for ``variant: gpu`` (a GPU reserved
    is a GPU used: the function refuses to start without one), else ``cpu``."""
    from functions.device import parse_device

    default = "cuda" if variant == "gpu" else "cpu"
    raw = data.get("device", default)
    try:
        device = parse_device(raw)
    except ValueError as exc:
        raise r.fail(f"{path}.device", str(exc)) from None
    if variant == "cpu" and device != "cpu":
        raise r.fail(f"{path}.device", f"{device!r} needs variant: gpu (which reserves the GPU)")
    return device
