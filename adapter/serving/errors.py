"""What can go wrong with a request in the adapter, and the HTTP status each is answered with.

::

    AdapterError                 every error a client can get back, with a reason
    ├── BadRequest               400: not JSON, no instances, bad header, ...
    ├── PayloadTooLarge          413: body over the configured limit
    ├── UnknownTarget            404: no such function or app
    ├── Overloaded               503: the function's queue is full
    ├── DeadlinePruned           503: the deadline passed before dispatch and the function prunes
    ├── UpstreamRejected         the function's own 4xx (its reason relayed)
    ├── UpstreamFailed           502: the function or platform failed the batch
    ├── UpstreamTimeout          504: no answer within the function's timeout
    └── ShuttingDown             503: the adapter is stopping

The one table :data:`STATUS` maps classes to statuses; handlers never choose a status themselves.
"""

from __future__ import annotations


class AdapterError(Exception):
    """A request failed; ``reason`` is sent to the client."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason

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
    DeadlinePruned: 503,
    UpstreamRejected: 400,
    UpstreamFailed: 502,
    UpstreamTimeout: 504,
    ShuttingDown: 503,
    StageOutputUnusable: 422,
}
