"""GrandSLAM's Algorithm 1 as the paper writes it, for its baselines as the paper defines them.

The paper's dynamic batching (§4.3, Algorithm 1): the queue sorted by slack is traversed from
the lowest slack, and the batch grows while every member's expected completion stays within its
stage slack (``now + E(n) ≤`` each member's stage deadline). Nothing else: no waiting for
company, no dispatch timeout, no late requests moved behind the ones that can still be saved,
no batch of late requests. When even the head cannot make its deadline alone, the largest batch
"under the SLA" is empty; it then goes alone (a batch is never empty, and the paper's loop must
execute it to make progress).

The project's own :func:`slackwise_policies.batching.decide` adds those rules (they are why its
ED-DYN and EDF-DYN cannot stall the way the paper saw its own stall); the ``-paper`` policies of
:mod:`slackwise_policies.slack` run this instead, so both families can be measured.

Algorithm 1 plans the whole queue into consecutive windows, each one's budget reduced by the
latency of the windows before it (``Slack_q``): the windows run one after another on one
instance. Here a function's replicas share one queue, so the first window is what the first free
slot takes; the next slot's window is planned again from the queue that is left (on another
replica it does not wait for the first). Pure: the time is an argument.
"""

from __future__ import annotations

from collections.abc import Sequence

from slackwise_policies.batching import BatchDecision, LatencyEstimator
from slackwise_policies.queue import Queued

__all__ = ["algorithm_1"]


def algorithm_1(
    now: float, queue: Sequence[Queued], model: LatencyEstimator, *, limit: int
) -> BatchDecision:
    """The largest slack-ordered prefix of ``queue`` whose members all meet their stage deadline
    at ``now`` within ``limit`` instances, dispatched at once (the head alone when none fits)."""
    if limit < 1:
        raise ValueError(f"limit must be >= 1, got {limit!r}")
    if not queue:
        return BatchDecision(take=0, instances=0, wake_at=None, reason="empty")
    head = queue[0]
    if head.size > limit:
        return BatchDecision(take=1, instances=head.size, wake_at=None, reason="oversized")
    take, total, earliest = 0, 0, float("inf")
    for item in queue:
        grown = total + item.size
        if grown > limit:
            break
        due = min(earliest, item.deadline)
        if now > due - model.estimate_ms(grown) / 1000.0:
            break  # one more would break a member's stage slack
        take, total, earliest = take + 1, grown, due
    if take == 0:
        return BatchDecision(take=1, instances=head.size, wake_at=None, reason="late")
    return BatchDecision(take=take, instances=total, wake_at=None, reason="closed")
