"""``adapter.gpu``: ROMA's GPU side in front of the functions (off unless ``url`` is set).

One GPU executable (``python -m functions.serve --model imagenet --model embed --device cuda:0
--port 9100``: a process holding several functions' models on one GPU) at ``url``. Whenever it
is free, the adapter gives it a batch of the function whose response times are furthest above
``alpha`` × its SLO (Algorithm 1; ``round_robin`` takes the functions in turn), taken off the
head of that function's queue; the rest of each queue goes to the function's CPU replicas as
before (:mod:`adapter.serving.gpu_route`)::

    adapter:
      gpu:
        url: http://127.0.0.1:9100
        functions: [imagenet, embed]   # served there under their model kinds
        policy: roma_batched           # roma (one request a turn) | roma_batched | round_robin
        alpha: 0.5
        beta: 0.5
        max_batch: 32
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from slackwise_config.reader import Reader, choice, fraction, name_list

__all__ = ["GPU_POLICIES", "GpuSettings", "check_gpu", "gpu_settings"]

GPU_POLICIES = ("roma", "roma_batched", "round_robin")


#: the largest batch ROMA's GPU executable takes unless configured (live and simulated)
GPU_MAX_BATCH = 32


@dataclass(frozen=True)
class GpuSettings:
    """ROMA's GPU executable in front of the CPU replicas (see the module docstring)."""

    url: str | None = None
    functions: tuple[str, ...] = ()
    policy: str = "roma_batched"
    alpha: float = 0.5
    beta: float = 0.5
    max_batch: int = GPU_MAX_BATCH


def gpu_settings(r: Reader, raw: Any, path: str = "adapter.gpu") -> GpuSettings:
    data = r.mapping(raw, path)
    r.only(data, path, {f.name for f in fields(GpuSettings)})
    d = GpuSettings()
    url = data.get("url")
    web = isinstance(url, str) and url.startswith(("http://", "https://"))
    if url is not None and not web:
        raise r.fail(f"{path}.url", f"must be an http(s) URL, got {url!r}")
    listed = name_list(r, data, "functions", path)
    if url is not None and not listed:
        raise r.fail(f"{path}.functions", "name the functions the GPU executable serves")
    beta = r.number(data, "beta", path, d.beta, low=0.0)
    if beta > 1:
        raise r.fail(f"{path}.beta", f"must be within [0, 1], got {beta:g}")
    return GpuSettings(
        url=None if url is None else url.rstrip("/"),
        functions=listed,
        policy=choice(r, data, "policy", path, GPU_POLICIES, d.policy),
        alpha=fraction(r, data, "alpha", path, d.alpha),
        beta=beta,
        max_batch=r.integer(data, "max_batch", path, d.max_batch, low=1),
    )


def check_gpu(r: Reader, settings: GpuSettings, functions: Mapping[str, Any]) -> None:
    """Every function sent to the GPU executable exists and is reached by the platform (a
    fixed endpoint is somebody else's process)."""
    for name in settings.functions:
        if name not in functions:
            raise r.fail("adapter.gpu.functions", f"no function named {name!r}")
        if functions[name].upstream.url:
            raise r.fail(
                "adapter.gpu.functions", f"{name!r} runs at a fixed endpoint (upstream.url)"
            )
