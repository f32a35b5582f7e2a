"""How a function's batches are formed, beyond the stage policy and the mode: one frozen object,
built once from the config (``adapter.serving.wiring``, and the simulator's stations from theirs)
and taken whole by the controller, so every default is written here and only here.

* ``max_wait_s``: the longest the oldest member may wait for company (None: until its dispatch
  timeout, MLProxy's design; 0: work-conserving), :func:`adapter.policies.batching.decide` rule 7.
* ``wait_utilization``: waiting for company pays only while one replica's slots could not keep
  up with batches of the size at hand at this busy fraction (rule 6).
* ``path_margin_ms``: the floor of the path's own latency kept off a batch's dispatch timeout
  (the client's legs, which nobody in the adapter can time).
* ``estimate_alpha``: how fast the batch sizes in use (a chain's stage estimates) follow change.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DEFAULT_BATCHING", "BatchingSettings"]


@dataclass(frozen=True, kw_only=True)
class BatchingSettings:
    """See the module docstring."""

    max_wait_s: float | None = None
    wait_utilization: float = 0.7
    path_margin_ms: float = 1.0
    estimate_alpha: float = 0.05

    def __post_init__(self) -> None:
        if self.max_wait_s is not None and not self.max_wait_s >= 0:
            raise ValueError(f"max_wait_s must be >= 0 or None, got {self.max_wait_s!r}")
        if not 0.0 < self.wait_utilization <= 1.0:
            raise ValueError(f"wait_utilization must be in (0, 1], got {self.wait_utilization!r}")
        if not self.path_margin_ms >= 0:
            raise ValueError(f"path_margin_ms must be >= 0, got {self.path_margin_ms!r}")
        if not 0.0 < self.estimate_alpha <= 1.0:
            raise ValueError(f"estimate_alpha must be in (0, 1], got {self.estimate_alpha!r}")


#: the defaults, for callers that take a single value from them
DEFAULT_BATCHING = BatchingSettings()
