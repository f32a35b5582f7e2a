"""Mode presets: how the adapter orders queues, batches and tunes batch sizes.

Plain frozen data the adapter reads once at start-up:

* ``slackwise``: queues ordered by deadline (GrandSLAM §4.3 request reordering), deadline-aware
  :func:`slackwise_policies.batching.decide` (Algorithm 1 prefix plus the MLProxy dispatch
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

AIMD's settings are one type, :class:`slackwise_policies.aimd.AIMDSettings`, whose defaults are
MLProxy's Algorithm 2; slackwise's preset names what it changes. A config's ``adapter.aimd``
keys are that type's fields and override the mode's (:meth:`ModePreset.with_aimd`), live and in
the simulator alike.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from types import MappingProxyType
from typing import Any, Literal, get_args

from slackwise_policies.admission import Late
from slackwise_policies.aimd import AIMD, AIMDSettings
from slackwise_policies.settings_error import SettingsError

__all__ = [
    "MLPROXY",
    "MODES",
    "PRESETS",
    "SLACKWISE",
    "ModeName",
    "ModePreset",
    "aimd_settings",
    "preset",
]

QueueOrder = Literal["deadline", "arrival"]
#: what AIMD judges: the requests' response times (MLProxy), or the batches' own service times
AIMDSignal = Literal["response", "service"]


#: the modes a deployment can run (``adapter.mode``)
ModeName = Literal["slackwise", "mlproxy"]


@dataclass(frozen=True, kw_only=True)
class ModePreset:
    """One serving mode: queue order, batching rule and AIMD settings."""

    name: ModeName
    order: QueueOrder
    deadline_aware: bool
    aimd: AIMDSettings = field(default_factory=AIMDSettings)
    aimd_signal: AIMDSignal = "response"
    #: wait for company only when it pays (slackwise_policies.batching rule 6); MLProxy waits until
    #: its dispatch timeout whatever the rate
    wait_pays: bool = False
    #: a request the evidence says would finish late, when the function does not say
    #: (``functions.X.late``): refused at the door (slackwise) or served anyway (MLProxy's)
    late: Late = "serve"

    def with_aimd(self, overrides: Mapping[str, Any]) -> ModePreset:
        """This mode with a config's AIMD overrides (any field of :class:`AIMDSettings`, the
        keys of ``adapter.aimd``); MLProxy's baseline keeps its published settings. A key that
        is not a field, or a value out of range, is a :class:`SettingsError` naming it."""
        if self.name == "mlproxy" or not overrides:
            return self
        return replace(self, aimd=aimd_settings(self.aimd, overrides))

    def aimd_for(self, max_batch: int) -> AIMD:
        """A fresh :class:`AIMD` for a function whose batches hold at most ``max_batch``."""
        return AIMD(self.aimd, maximum=max_batch)


def aimd_settings(base: AIMDSettings, overrides: Mapping[str, Any]) -> AIMDSettings:
    """``base`` with ``overrides`` (field names) replaced, checked as the type checks itself."""
    known = [f.name for f in fields(AIMDSettings)]
    unknown = sorted(set(overrides) - set(known))
    if unknown:
        raise SettingsError(unknown[0], f"is not an AIMD setting; known: {', '.join(known)}")
    return replace(base, **overrides)


SLACKWISE = ModePreset(
    name="slackwise",
    order="deadline",
    deadline_aware=True,
    aimd=AIMDSettings(
        initial=4,
        miss_threshold=0.01,
        timeout_ratio_threshold=0.5,
        cold_aware=True,
        backlog_mult=2.0,
        timeouts_per_batch=False,
    ),
    aimd_signal="service",
    wait_pays=True,
    late="predict",
)
#: MLProxy as its paper has it: :class:`AIMDSettings`' defaults are its Algorithm 2
MLPROXY = ModePreset(name="mlproxy", order="arrival", deadline_aware=False)
PRESETS: Mapping[str, ModePreset] = MappingProxyType({p.name: p for p in (SLACKWISE, MLPROXY)})
MODES: tuple[ModeName, ...] = get_args(ModeName)


def preset(name: str) -> ModePreset:
    """The preset called ``name``; a ValueError names the known ones otherwise."""
    try:
        return PRESETS[name]
    except KeyError:
        raise SettingsError("mode", f"must be one of {', '.join(MODES)}, got {name!r}") from None
