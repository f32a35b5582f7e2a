"""Several owners of one function's replica count on Knative (one adapter each, by frontend id).

Each owner records its share in an annotation of its own on the serving revisions,
``scale.slackwise.dev/<owner>: "<count>@<epoch seconds the lease ends>"``. The revision runs the
largest live share, as min-scale and max-scale set together; a share whose lease ran out is
removed by the next owner that writes, so an adapter that dies stops counting without anyone
having to notice it died. Pure: the annotations in, the patch out.
"""

from __future__ import annotations

from collections.abc import Mapping

from slackwise_core.scaling_values import MAX_SCALE, MIN_SCALE

__all__ = ["MAX_SCALE", "MIN_SCALE", "SCALE_SHARE", "scale_annotations", "share_of"]

#: the annotation prefix of an owner's share
SCALE_SHARE = "scale.slackwise.dev/"
#: when a share without a lease ends (never, in practice)
_FOREVER = 1e12


def share_of(raw: str, now: float) -> int | None:
    """An owner's count from its annotation, or None when its lease has run out (or the value
    is not one of ours)."""
    count, _, until = raw.partition("@")
    try:
        value, deadline = int(count), float(until or _FOREVER)
    except ValueError:
        return None
    return value if deadline > now and value >= 0 else None


def scale_annotations(
    current: Mapping[str, str],
    defaults: Mapping[str, str],
    *,
    owner: str,
    replicas: int | None,
    lease_s: float | None,
    now: float,
) -> dict[str, str | None]:
    """The annotation patch (None removes a key) that records ``owner``'s share (``replicas``;
    None withdraws it) on a revision annotated ``current``, drops lapsed shares, and sets
    min/max-scale to the largest live share, or back to the template's ``defaults`` when none
    is left."""
    key = SCALE_SHARE + (owner or "default")
    values: dict[str, str | None] = {key: None}
    live: list[int] = []
    if replicas is not None:
        until = now + lease_s if lease_s is not None else _FOREVER
        values[key] = f"{replicas}@{until:.0f}"
        live.append(replicas)
    for other, raw in current.items():
        if not other.startswith(SCALE_SHARE) or other == key:
            continue
        share = share_of(str(raw), now)
        if share is None:
            values[other] = None  # lapsed: its owner stopped renewing
        else:
            live.append(share)
    if live:
        values[MIN_SCALE] = str(max(live))
        values[MAX_SCALE] = str(max(max(live), 1))
    else:
        low, high = defaults.get(MIN_SCALE), defaults.get(MAX_SCALE)
        values[MIN_SCALE] = None if low is None else str(low)
        values[MAX_SCALE] = None if high is None else str(high)
    return values
