"""How a function's batches are formed, beyond the stage policy and the mode: one frozen object,
built once from the config (``adapter.serving.wiring``, and the simulator's stations from theirs)
and taken whole by the controller, so every default is written here and only here.

* ``max_wait_ms``: the longest the oldest member may wait for company (None: until its dispatch
  timeout, MLProxy's design; 0: work-conserving), :func:`slackwise_policies.batching.decide` rule 7.
* ``wait_utilization``: waiting for company pays only while one replica's slots could not keep
  up with batches of the size at hand at this busy fraction (rule 6).
* ``path_margin_ms``: the floor of the path's own latency kept off a batch's dispatch timeout
  (the client's legs, which nobody in the adapter can time).
* ``estimate_alpha``: how fast the batch sizes in use (a chain's stage estimates) follow change.
* ``p95_every`` / ``p95_max_age_s``: the P95 the decisions read. 0 (the live adapter's default)
  reads the latency model's own after every batch; N > 0 reads one refreshed every N warm
  batches or ``p95_max_age_s``, whichever comes first (:class:`slackwise_policies.lagged_p95.
  LaggedP95`; the simulator's default is 32, since at millions of batches the model's sort after
  every batch is most of a run). Live and simulated loops given the same value send the same
  batches (tests/test_parity.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from slackwise_policies.settings_error import integer, number, within

__all__ = ["DEFAULT_BATCHING", "LIVE_KEYS", "SIMULATOR_P95_EVERY", "BatchingSettings"]


@dataclass(frozen=True, kw_only=True)
class BatchingSettings:
    """See the module docstring."""

    max_wait_ms: float | None = None
    wait_utilization: float = 0.7
    path_margin_ms: float = 1.0
    estimate_alpha: float = 0.05
    p95_every: int = 0
    p95_max_age_s: float = 0.25

    def __post_init__(self) -> None:
        if self.max_wait_ms is not None:
            number("max_wait_ms", self.max_wait_ms, allow_low=True)
        within("wait_utilization", self.wait_utilization, 0.0, 1.0, closed="(]")
        number("path_margin_ms", self.path_margin_ms, allow_low=True)
        within("estimate_alpha", self.estimate_alpha, 0.0, 1.0, closed="(]")
        integer("p95_every", self.p95_every, 0)
        number("p95_max_age_s", self.p95_max_age_s)

    @property
    def max_wait_s(self) -> float | None:
        """``max_wait_ms`` in seconds, the unit of the clocks that read it."""
        return None if self.max_wait_ms is None else self.max_wait_ms / 1000.0


#: the keys of ``adapter`` a deployment's YAML sets these from (the rest are the simulator's)
LIVE_KEYS = ("max_wait_ms", "wait_utilization", "path_margin_ms")


#: the defaults, for callers that take a single value from them
DEFAULT_BATCHING = BatchingSettings()
#: the simulator's refresh of the P95 its decisions read (see ``p95_every``)
SIMULATOR_P95_EVERY = 32
