"""What can go wrong in the adapter, and the HTTP status each request error is answered with.

::

    ServingError                 the root: everything the serving package raises
    ├── PlatformUnreachable      the platform cannot be reached at start (a CLI line)
    ├── RecordsUnwritable        the per-request records file cannot be written (a CLI line)
    ├── Refuse                   the HTTP server's own refusal from a parser callback, with the
    │                            status it is answered with (http_limits)
    ├── SendFailed, SendTimeout  no answer came back from upstream (become Upstream* below)
    └── AdapterError             every error a client can get back, with a reason
        ├── BadRequest           400: not JSON, no instances, bad header, ...
        ├── PayloadTooLarge      413: body over the configured limit
        ├── UnknownTarget        404: no such function or app
        ├── Overloaded           503: the queue is full, or refused while scaling from zero
        ├── Refused              429: refused at the door, it would finish late
        ├── DeadlinePruned       503: the deadline passed before dispatch and the function prunes
        ├── UpstreamRejected     the function's own 4xx (its reason relayed)
        ├── UpstreamFailed       502: the function or platform failed the batch
        ├── UpstreamTimeout      504: no answer within the function's timeout
        └── ShuttingDown         503: the adapter is stopping

The one table :data:`STATUS` maps classes to statuses; handlers never choose a status themselves.
Every answer for load (429, 503) carries ``Retry-After``.
"""

from __future__ import annotations

import math

from slackwise_policies.admission import DoorRefusal


class ServingError(Exception):
    """Anything the adapter's serving package raises; the subclass says what."""


class AdapterError(ServingError):
    """A request failed; ``reason`` is sent to the client, and ``retry_after_s`` (when set) as
    ``Retry-After`` in whole seconds: every refusal for load says when to come back."""

    def __init__(self, reason: str, *, retry_after_s: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retry_after_s = retry_after_s

    def headers(self) -> list[tuple[bytes, bytes]]:
        """The answer's headers: JSON, and ``Retry-After`` for a refusal."""
        headers = [(b"content-type", b"application/json")]
        if self.retry_after_s is not None:
            seconds = max(1, math.ceil(self.retry_after_s))
            headers.append((b"retry-after", str(seconds).encode("latin-1")))
        return headers

    @property
    def status(self) -> int:
        return STATUS[type(self)]


class BadRequest(AdapterError):
    pass


class PayloadTooLarge(AdapterError):
    pass


class UnknownTarget(AdapterError):
    pass


class Overloaded(AdapterError):
    pass


class Refused(AdapterError):
    """Refused at the door: it would finish late (429, with Retry-After)."""


class DeadlinePruned(AdapterError):
    pass


class UpstreamRejected(AdapterError):
    """The function refused this request's input; ``upstream_status`` is what it answered."""

    def __init__(self, reason: str, upstream_status: int) -> None:
        super().__init__(reason)
        self.upstream_status = upstream_status

    @property
    def status(self) -> int:
        return self.upstream_status


class UpstreamFailed(AdapterError):
    pass


class UpstreamTimeout(AdapterError):
    pass


class ShuttingDown(AdapterError):
    pass


class StageOutputUnusable(AdapterError):
    """A stage of a chain answered, but its prediction cannot feed the next stage (no face in
    the image, an empty transcript): the request is well-formed, its content is not usable."""


STATUS: dict[type[AdapterError], int] = {
    AdapterError: 500,
    BadRequest: 400,
    PayloadTooLarge: 413,
    UnknownTarget: 404,
    Overloaded: 503,
    Refused: 429,
    DeadlinePruned: 503,
    UpstreamRejected: 400,
    UpstreamFailed: 502,
    UpstreamTimeout: 504,
    ShuttingDown: 503,
    StageOutputUnusable: 422,
}


def refusal_error(function: str, refusal: DoorRefusal) -> AdapterError:
    """The answer to a request refused at the door: 429, or 503 while no replica is ready (the
    function scales from zero), with Retry-After either way."""
    reason = f"{function}: {refusal.reason}; refused at the door (late: predict)"
    if refusal.warming:
        return Overloaded(
            f"{reason} while it scales from zero", retry_after_s=refusal.retry_after_s
        )
    return Refused(reason, retry_after_s=refusal.retry_after_s)
