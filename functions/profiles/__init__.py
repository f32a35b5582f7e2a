"""The measured batch-latency profiles shipped with the package, one tree per device.

``cpu/<kind>.json`` is written by ``slackwise profile`` on this machine; ``gpu/<kind>.json`` by
``python -m simulator.gpu_profiles`` from H100 curves. Both are package data, found with
:mod:`importlib.resources`, so an installed (non-editable) package reads the same files.
"""

from __future__ import annotations

from importlib.resources import files
from importlib.resources.abc import Traversable
from typing import Literal

__all__ = ["DEVICES", "Device", "packaged"]

Device = Literal["cpu", "gpu"]
DEVICES: tuple[Device, ...] = ("cpu", "gpu")


def packaged(kind: str, device: Device = "cpu") -> Traversable:
    """The shipped profile of ``kind`` on ``device`` (it may not exist: check ``is_file()``)."""
    return files(__name__).joinpath(device, f"{kind}.json")
