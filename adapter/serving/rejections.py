"""What a batch's non-200 answer means for its members, and when a failed send is worth a retry.

Pure: the dispatcher passes the answer, the members' sizes and deadlines, and the time.

* **One bad instance, named** (400 with ``instances[i]: reason``, as our functions and KServe's
  V1 server say it): that member fails, the others go back to the queue.
* **Refused without a name** (any 4xx from a server that does not say which instance, e.g. a
  standard KServe or Triton server refusing a whole request): the batch is **split** in two and
  each half sent again, recursively, so the bad member ends up alone and fails alone, and every
  good member is answered. A batch of one is answered with the refusal.
* **The model failed on the batch** (500 from the function: a model error on an input that
  passed validation): split the same way, so one poisoned member fails alone (502 with the
  function's reason) and its batch partners are answered.
* **The way in failed** (502, 503, 504 from the activator, the queue-proxy or an ingress; a
  connection refused or reset): the same batch is sent again after a short backoff, at most
  ``attempts`` times, and only while the backoff plus the batch's expected time still ends
  before its earliest deadline. Otherwise every member hears the failure.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

import orjson

from adapter.serving.upstream import SendFailed
from slackwise_core.clock import Clock
from slackwise_core.http1 import Http1Response

__all__ = [
    "RETRYABLE",
    "Rejection",
    "halves",
    "read_rejection",
    "retry_delay",
    "send_with_retries",
]

logger = logging.getLogger(__name__)

#: statuses that say the path to the function failed, not the function's judgement of the input
RETRYABLE = frozenset({502, 503, 504})
_BAD_INSTANCE = re.compile(r"^instances\[(\d+)\]: (.*)$", re.DOTALL)


@dataclass(frozen=True, slots=True)
class Rejection:
    """A non-200 answer: its status, the reason given, the instance it names (if any) and the
    reason without that name."""

    status: int
    reason: str
    index: int | None = None
    detail: str = ""


def read_rejection(status: int, content: bytes) -> Rejection:
    """The reason from a JSON ``{"error": ...}`` body (KServe V1 and ours), else the text."""
    try:
        data = orjson.loads(content)
        reason = str(data.get("error") or data.get("detail") or data)
    except (ValueError, AttributeError):
        reason = content[:500].decode("utf-8", "replace")
    match = _BAD_INSTANCE.match(reason) if status == 400 else None
    if match is not None:
        return Rejection(status, reason, int(match.group(1)), match.group(2))
    return Rejection(status, reason)


def halves(sizes: Sequence[int]) -> tuple[int, int]:
    """How many members go in the first half so the two halves hold about as many instances
    each (both non-empty; the sizes of at least two members)."""
    if len(sizes) < 2:
        raise ValueError("a batch of one member cannot be split")
    total = sum(sizes)
    running, best, cut = 0, total, 1
    for i, size in enumerate(sizes[:-1], start=1):
        running += size
        gap = abs(total - 2 * running)
        if gap < best:
            best, cut = gap, i
    return cut, len(sizes) - cut


def retry_delay(
    attempt: int,
    *,
    now: float,
    earliest_deadline: float,
    expected_s: float,
    attempts: int = 2,
    base_s: float = 0.05,
) -> float | None:
    """Seconds to wait before retry number ``attempt`` (1, 2, ...), or None when no retry is
    left or it could not finish before ``earliest_deadline`` (backoff doubles from ``base_s``)."""
    if attempt > attempts:
        return None
    delay: float = base_s * 2.0 ** (attempt - 1)
    if now + delay + expected_s > earliest_deadline:
        return None
    return delay


async def send_with_retries(
    post: Callable[[], Awaitable[Http1Response]],
    *,
    clock: Clock,
    earliest_deadline: float,
    expected_s: float,
    label: str,
) -> Http1Response:
    """``post()``, again after a backoff while it fails on the way in (a 502/503/504 answer, a
    :class:`SendFailed`) and :func:`retry_delay` allows; the last answer, or the last
    SendFailed raised. A timeout is not retried: the batch's time is spent."""
    attempt = 0
    while True:
        try:
            response = await post()
        except SendFailed as exc:
            failure: SendFailed | None = exc
        else:
            if response.status_code not in RETRYABLE:
                return response
            failure = None
        attempt += 1
        delay = retry_delay(
            attempt, now=clock.now(), earliest_deadline=earliest_deadline, expected_s=expected_s
        )
        if delay is None:
            if failure is not None:
                raise failure
            return response
        what = failure if failure is not None else f"answered {response.status_code}"
        logger.info("%s: %s; retry %d in %.0f ms", label, what, attempt, delay * 1000.0)
        await clock.sleep(delay)
