"""The fewest replicas that meet a target, given a check that holds from some count on: from a
lower bound, gallop up (1, 2, 4... more), then bisect. Shared by the percentile model's and the
replay model's searches (:mod:`slackwise_policies.percentile`, :mod:`slackwise_policies.replay`)."""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["fewest_meeting"]


def fewest_meeting(meets: Callable[[int], bool], low: int, max_replicas: int) -> int:
    """The smallest count in ``[low, max_replicas]`` for which ``meets`` holds, assuming that
    once it holds it holds for every larger count; ``max_replicas`` when none up to it does."""
    if low >= max_replicas:
        return max_replicas
    if meets(low):
        return low
    step, high = 1, low + 1
    while high < max_replicas and not meets(high):
        low, step = high, step * 2
        high = min(max_replicas, low + step)
    if high >= max_replicas and not meets(max_replicas):
        return max_replicas
    while high - low > 1:  # meets(high) and not meets(low)
        mid = (low + high) // 2
        if meets(mid):
            high = mid
        else:
            low = mid
    return high
