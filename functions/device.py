"""Where a function computes: ``cpu``, ``cuda`` or ``cuda:N``, and the check that it can.

A function asked for a GPU it cannot use refuses to start with a message that says why
(:class:`DeviceUnavailable`): no silent CPU fallback, because a user who pays for a GPU and gets
CPU speed has a broken deployment, not a slow one. Which models can use a GPU is each model's
``devices``; the frameworks are asked directly: torch for the MiniLM functions (embed, qa),
onnxruntime's CUDA provider for imagenet. Everything else (scikit-learn, dlib, spaCy,
pocketsphinx) computes on the CPU only.
"""

from __future__ import annotations

import re

from functions.errors import FunctionsError

__all__ = ["DeviceUnavailable", "check_device", "onnx_providers", "parse_device", "torch_device"]

_DEVICE = re.compile(r"^(cpu|cuda)(?::(\d+))?$")


class DeviceUnavailable(FunctionsError, RuntimeError):
    """The function was asked for a device it cannot use; the message says why."""


def parse_device(text: str) -> str:
    """``cpu``, ``cuda`` or ``cuda:N`` (N ≥ 0); a ValueError names anything else."""
    match = _DEVICE.match(text.strip()) if isinstance(text, str) else None
    if match is None or (match[1] == "cpu" and match[2] is not None):
        raise ValueError(f"device must be cpu, cuda or cuda:N, got {text!r}")
    return text.strip()


def _index(device: str) -> int:
    _, _, index = device.partition(":")
    return int(index) if index else 0


def torch_device(device: str) -> str:
    """``device`` for torch after checking torch can use it (DeviceUnavailable otherwise)."""
    if device == "cpu":
        return device
    import torch

    if not torch.cuda.is_available():
        build = torch.version.cuda or "none (a CPU build of torch)"
        raise DeviceUnavailable(
            f"device {device!r} asked for, but torch sees no CUDA GPU (torch {torch.__version__}, "
            f"CUDA {build}); install the CUDA build and run where a GPU is visible, or set "
            "device: cpu"
        )
    count = torch.cuda.device_count()
    if _index(device) >= count:
        raise DeviceUnavailable(f"device {device!r} asked for, but torch sees {count} GPU(s)")
    return device


def onnx_providers(device: str) -> list[str | tuple[str, dict[str, str]]]:
    """onnxruntime's execution providers for ``device`` (DeviceUnavailable when the CUDA
    provider is missing: the CPU build of onnxruntime, or no GPU)."""
    if device == "cpu":
        return ["CPUExecutionProvider"]
    import onnxruntime

    available = onnxruntime.get_available_providers()
    if "CUDAExecutionProvider" not in available:
        raise DeviceUnavailable(
            f"device {device!r} asked for, but onnxruntime {onnxruntime.__version__} has no "
            f"CUDA provider (it has {', '.join(available)}); install onnxruntime-gpu, or set "
            "device: cpu"
        )
    return [("CUDAExecutionProvider", {"device_id": str(_index(device))})]


def check_device(kind: str, device: str, supported: tuple[str, ...]) -> None:
    """Refuse a GPU for a model whose framework computes on the CPU only."""
    family = device.partition(":")[0]
    if family not in supported:
        raise DeviceUnavailable(
            f"model {kind!r} computes on {', '.join(supported)} only; device {device!r} "
            "cannot be used"
        )
