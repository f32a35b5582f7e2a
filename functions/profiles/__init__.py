"""The measured batch-latency profiles shipped with the package, one tree per device.

``cpu/<kind>.json`` is written by ``slackwise profile`` on this machine; ``gpu/<kind>.json``
by ``python -m simulator.gpu_profiles`` from H100 curves, except ``gpu/embed.json``, measured by
``slackwise profile embed --device cuda`` on an H200 (``gpu/h200/``: what that run measured);
``memory.json`` (each kind's resident set, loaded and after a batch) by
``benchmarks/function_memory.py``. All are package data, found with :mod:`importlib.resources`,
so an installed (non-editable) package reads the same files.
"""

from __future__ import annotations

import json
from importlib.resources import files
from importlib.resources.abc import Traversable
from typing import Literal

__all__ = ["DEVICES", "Device", "memory_mib", "packaged"]

Device = Literal["cpu", "gpu"]
DEVICES: tuple[Device, ...] = ("cpu", "gpu")


def packaged(kind: str, device: Device = "cpu") -> Traversable:
    """The shipped profile of ``kind`` on ``device`` (it may not exist: check ``is_file()``)."""
    return files(__name__).joinpath(device, f"{kind}.json")


def memory_mib(kind: str) -> float | None:
    """The measured peak resident set of a ``kind`` function process in MiB (after a batch),
    or None when it has not been measured."""
    table = files(__name__).joinpath("memory.json")
    if not table.is_file():
        return None
    entry = json.loads(table.read_text(encoding="utf-8")).get("kinds", {}).get(kind)
    return float(entry["after_batch_mib"]) if entry else None
