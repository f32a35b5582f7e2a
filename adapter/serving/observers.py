"""What a function's dispatcher tells others, and how another route takes from its queue.

* :class:`Observer`: told of each arrival and each answered request (ROMA's core controllers,
  :mod:`adapter.serving.cores`; its GPU route, :mod:`adapter.serving.gpu_route`).
* :class:`Offload`: another route for the function's requests (ROMA's GPU executable), offered
  the queue on every arrival before the replicas' slots are; it takes batches with
  :meth:`adapter.serving.dispatcher.Dispatcher.take` and sends them with ``send_via``.
* :func:`log_tuned`: the AIMD decision log line.
"""

from __future__ import annotations

import logging
from typing import Protocol

from slackwise_policies.aimd import AIMDDecision
from slackwise_policies.batching import BatchDecision

__all__ = ["ELSEWHERE", "Observer", "Offload", "log_tuned"]

#: AIMD's limit changes, on a channel of their own (``slackwise.aimd``) to turn up or down apart
decisions_log = logging.getLogger("slackwise.aimd")

#: the decision a batch taken by another route is sent under
ELSEWHERE = BatchDecision(take=0, instances=0, wake_at=None, reason="busy")


class Observer(Protocol):
    """Told of each arrival (instances) and each answered request (its response time, s)."""

    def arrived(self, function: str, count: int) -> None: ...

    def answered(self, function: str, response_s: float) -> None: ...


class Offload(Protocol):
    """Another route for a function's queue, offered the queue on every arrival."""

    def offer(self) -> None: ...


def log_tuned(function: str, update: AIMDDecision) -> None:
    s = update.stats
    decisions_log.info(
        "%s: AIMD %s %d -> %d (samples %d, judged %d, miss %.3f, p95 %.1f ms, "
        "timeout %.2f, cold %.2f%s)",
        function,
        update.action,
        update.old_limit,
        update.new_limit,
        s.samples,
        s.judged,
        s.miss_ratio,
        s.p95_ms,
        s.timeout_ratio,
        s.cold_ratio,
        f"; {', '.join(update.violations)}" if update.violations else "",
    )
