"""Request pruning: answer at once, with an error, a request that cannot meet its deadline.

Swayam (Middleware'17 §3.3, Algorithm 1 lines 4–6) lets the provider *prune* a request that has
exceeded its response-time threshold, when the client's SLA allows it: the client is not billed
for a late answer anyway, and a tardy request still queued delays the ones behind it (§5.2 shows
pruning restores compliance after a burst). Swayam prunes only requests already late
(``mode="late"``). ``mode="predicted"`` also prunes a request whose *expected* finish, from its
place in the queue, is past its deadline: the client hears at once instead of at the deadline.

The expected finish of a request with ``position`` instances ahead of it in the queue, batches of
``batch_limit`` instances and ``slots`` batches in flight at a time (ready replicas ×
containerConcurrency) is ``now + wait + (rounds + 1)·batch_ms``, where ``rounds =
⌊⌊position / batch_limit⌋ / slots⌋`` is the number of full rounds of batches before its own, and
``wait`` the time until a slot frees (0 when one is free). ``batch_ms`` is the caller's estimate
of one batch (the latency model's mean for a full batch, or its P95 for a cautious estimate).

Off by default (:attr:`PruningConfig.enabled`): most clients prefer a late answer to none (the
Swayam production team's observation); the adapter turns it on per function or app. Pure.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

__all__ = ["Mode", "PruneDecision", "PruneReason", "PruningConfig", "expected_finish", "judge"]

Mode = Literal["late", "predicted"]
PruneReason = Literal["disabled", "on-time", "late", "predicted-late"]
_MODES: tuple[Mode, ...] = ("late", "predicted")


@dataclass(frozen=True, kw_only=True, slots=True)
class PruningConfig:
    """``enabled`` turns pruning on; ``mode`` picks Swayam's rule (``"late"``: the deadline has
    passed) or the predictive one; ``grace_ms`` is how far past its deadline a request may be
    (or be expected to finish) before it is pruned."""

    enabled: bool = False
    mode: Mode = "late"
    grace_ms: float = 0.0

    def __post_init__(self) -> None:
        if not isinstance(self.enabled, bool):
            raise ValueError(f"enabled must be true or false, got {self.enabled!r}")
        if self.mode not in _MODES:
            raise ValueError(f"mode must be one of {', '.join(_MODES)}, got {self.mode!r}")
        if not (math.isfinite(self.grace_ms) and self.grace_ms >= 0.0):
            raise ValueError(f"grace_ms must be a finite number >= 0, got {self.grace_ms!r}")


@dataclass(frozen=True, slots=True)
class PruneDecision:
    """Whether to answer the request now with an error, its expected finish (monotonic s;
    ``None`` unless predicted) and why."""

    prune: bool
    expected_finish: float | None
    reason: PruneReason


def expected_finish(
    now: float,
    *,
    position: int,
    batch_limit: int,
    slots: int,
    batch_ms: float,
    slot_free_in_ms: float = 0.0,
) -> float:
    """When a request with ``position`` instances ahead of it should finish (monotonic s)."""
    if position < 0:
        raise ValueError(f"position must be >= 0, got {position!r}")
    if batch_limit < 1:
        raise ValueError(f"batch_limit must be >= 1, got {batch_limit!r}")
    if slots < 1:
        raise ValueError(f"slots must be >= 1, got {slots!r}")
    if not (math.isfinite(batch_ms) and batch_ms >= 0.0):
        raise ValueError(f"batch_ms must be a finite number >= 0, got {batch_ms!r}")
    if not (math.isfinite(slot_free_in_ms) and slot_free_in_ms >= 0.0):
        raise ValueError(f"slot_free_in_ms must be a finite number >= 0, got {slot_free_in_ms!r}")
    rounds = (position // batch_limit) // slots
    return now + (slot_free_in_ms + (rounds + 1) * batch_ms) / 1000.0


def judge(
    now: float,
    deadline: float,
    config: PruningConfig,
    *,
    position: int = 0,
    batch_limit: int = 1,
    slots: int = 1,
    batch_ms: float = 0.0,
    slot_free_in_ms: float = 0.0,
) -> PruneDecision:
    """Prune a request due at ``deadline`` (monotonic s) at ``now``? See the module docstring."""
    if not config.enabled:
        return PruneDecision(False, None, "disabled")
    grace = config.grace_ms / 1000.0
    if now > deadline + grace:
        return PruneDecision(True, None, "late")
    if config.mode == "late":
        return PruneDecision(False, None, "on-time")
    finish = expected_finish(
        now,
        position=position,
        batch_limit=batch_limit,
        slots=slots,
        batch_ms=batch_ms,
        slot_free_in_ms=slot_free_in_ms,
    )
    if finish > deadline + grace:
        return PruneDecision(True, finish, "predicted-late")
    return PruneDecision(False, finish, "on-time")
