"""Mode presets: how the adapter orders queues, batches and tunes batch sizes.

Plain frozen data the adapter reads once at start-up:

* ``slackwise``: queues ordered by deadline (GrandSLAM §4.3 request reordering), deadline-aware
  :func:`adapter.policies.batching.decide` (Algorithm 1 prefix plus the MLProxy dispatch
  timeout), and a cold-aware AIMD that judges what the batch size controls: the batches' own
  service times against the SLO, and misses of requests that were dispatched in time (a request
  that waited past its slack in the queue says the function is short of capacity, not that
  batches are too big; shrinking them then only cuts throughput and deepens the queue).
* ``mlproxy``: the MLProxy baseline (SEAMS'22) as its paper has it: FIFO queues, batches closed
  only by the limit or the dispatch timeout (Eq. 1-2 with the windowed P95), AIMD every 30 s
  from a max batch of 1 (Algorithm 2) with +1 / ×0.8 on P95 above 80 % of the SLO or a ratio of
  batches dispatched on their timeout above ``TO_thresh``, cold starts judged like any other
  sample.

The paper leaves ``TO_thresh`` to the user. MLProxy's preset uses 0.9 (nearly every request left
on a timeout, so the limit is larger than the arrival rate can fill); slackwise's shrinks the
limit once half the batches leave on a timeout, and on more than 1 % of misses.

These presets are the one source of AIMD defaults: a config's ``adapter.aimd`` keys override
them (:meth:`ModePreset.with_aimd`), live and in the simulator alike.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any, Literal

from adapter.policies.aimd import AIMD

__all__ = ["MLPROXY", "PRESETS", "SLACKWISE", "ModePreset", "preset"]

QueueOrder = Literal["deadline", "arrival"]
#: what AIMD judges: the requests' response times (MLProxy), or the batches' own service times
AIMDSignal = Literal["response", "service"]


@dataclass(frozen=True, kw_only=True)
class ModePreset:
    """One serving mode: queue order, batching rule and AIMD settings."""

    name: str
    order: QueueOrder
    deadline_aware: bool
    #: AIMD's starting and smallest batch limit (within the function's maximum)
    aimd_initial: int = 4
    aimd_minimum: int = 1
    aimd_period_s: float = 30.0
    aimd_add: float = 1.0
    aimd_mult: float = 0.8
    miss_threshold: float | None = None
    p95_fraction: float = 0.8
    timeout_ratio_threshold: float | None = 0.9
    cold_aware: bool = False
    cold_dominated: float = 0.5
    aimd_signal: AIMDSignal = "response"
    #: the limit's growth when batches are bound by it while a backlog waits, judged every
    #: ``aimd_backlog_period_s`` (None: MLProxy's additive steps only; adapter.policies.aimd)
    aimd_backlog_mult: float | None = None
    aimd_backlog_period_s: float = 1.0
    #: the timeout ratio over batches (MLProxy's Algorithm 2) rather than requests
    aimd_timeouts_per_batch: bool = False
    #: wait for company only when it pays (adapter.policies.batching rule 6); MLProxy waits until
    #: its
    #: dispatch timeout whatever the rate
    wait_pays: bool = False
    #: a request the evidence says would finish late, when the function does not say
    #: (``functions.X.late``): refused at the door (slackwise) or served anyway (MLProxy's)
    late: str = "serve"

    def with_aimd(self, overrides: Mapping[str, float]) -> ModePreset:
        """This mode with a config's AIMD overrides (``initial``, ``mult``, ``period_s``...: the
        keys of ``adapter.aimd``); MLProxy's baseline keeps its published settings."""
        if self.name == MLPROXY_NAME:
            return self
        unknown = sorted(set(overrides) - set(_AIMD_FIELDS))
        if unknown:
            raise ValueError(
                f"unknown AIMD setting {unknown[0]!r}; known: {', '.join(_AIMD_FIELDS)}"
            )
        changes: dict[str, Any] = {_AIMD_FIELDS[k]: v for k, v in overrides.items()}
        return replace(self, **changes)

    def aimd_for(self, max_batch: int) -> AIMD:
        """A fresh :class:`AIMD` for a function whose batches hold at most ``max_batch``."""
        return self.aimd(
            initial=min(self.aimd_initial, max_batch),
            minimum=min(self.aimd_minimum, max_batch),
            maximum=max_batch,
        )

    def aimd(self, *, initial: float, maximum: int, minimum: int = 1) -> AIMD:
        """A fresh :class:`AIMD` with this mode's settings."""
        return AIMD(
            initial=initial,
            minimum=minimum,
            maximum=maximum,
            add=self.aimd_add,
            mult=self.aimd_mult,
            period_s=self.aimd_period_s,
            miss_threshold=self.miss_threshold,
            p95_fraction=self.p95_fraction,
            timeout_ratio_threshold=self.timeout_ratio_threshold,
            cold_aware=self.cold_aware,
            cold_dominated=self.cold_dominated,
            backlog_mult=self.aimd_backlog_mult,
            backlog_period_s=min(self.aimd_backlog_period_s, self.aimd_period_s),
            timeouts_per_batch=self.aimd_timeouts_per_batch,
        )


MLPROXY_NAME = "mlproxy"
#: ``adapter.aimd`` keys → preset fields
_AIMD_FIELDS: Mapping[str, str] = MappingProxyType(
    {
        "initial": "aimd_initial",
        "minimum": "aimd_minimum",
        "add": "aimd_add",
        "mult": "aimd_mult",
        "period_s": "aimd_period_s",
        "miss_threshold": "miss_threshold",
        "p95_fraction": "p95_fraction",
        "timeout_ratio_threshold": "timeout_ratio_threshold",
        "backlog_mult": "aimd_backlog_mult",
    }
)

SLACKWISE = ModePreset(
    name="slackwise",
    order="deadline",
    deadline_aware=True,
    miss_threshold=0.01,
    timeout_ratio_threshold=0.5,
    cold_aware=True,
    aimd_signal="service",
    aimd_backlog_mult=2.0,
    wait_pays=True,
    late="predict",
)
#: MLProxy as its paper has it: Algorithm 2 starts at Max_BS 1, its timeout ratio is over batches
MLPROXY = ModePreset(
    name=MLPROXY_NAME,
    order="arrival",
    deadline_aware=False,
    aimd_initial=1,
    aimd_timeouts_per_batch=True,
)
PRESETS: Mapping[str, ModePreset] = MappingProxyType({p.name: p for p in (SLACKWISE, MLPROXY)})


def preset(name: str) -> ModePreset:
    """The preset called ``name``; a ValueError names the known ones otherwise."""
    try:
        return PRESETS[name]
    except KeyError:
        raise ValueError(f"mode must be one of {sorted(PRESETS)}, got {name!r}") from None
