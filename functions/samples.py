"""Real sample request instances for any model kind, without loading the model's weights.

``sample_instances("imagenet", 8)`` gives eight instances in the JSON form the function
accepts, ready for ``{"instances": [...]}``; load generators and the profiler make their
requests from these.
"""

from __future__ import annotations

from typing import Any

from functions.registry import create_model


def sample_instances(kind: str, n: int) -> list[Any]:
    """``n`` sample instances for ``kind`` (raises ``UnknownModel`` for an unknown kind)."""
    if n < 0:
        raise ValueError(f"n must be non-negative, got {n}")
    return create_model(kind).sample_instances(n)


def sample_request(kind: str, n: int) -> dict[str, list[Any]]:
    """A V1 request body with ``n`` sample instances."""
    return {"instances": sample_instances(kind, n)}
