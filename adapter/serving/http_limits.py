"""What the adapter's own HTTP server refuses, and when: its limits, its timeouts, and the answer
it sends unparsed when its loop runs too late to admit anything (:mod:`adapter.serving.http_server`
enforces them; ``docs/reliability.md`` lists them beside the other servers')."""

from __future__ import annotations

__all__ = [
    "BODY_TIMEOUT_S", "DRAIN_RETRY_S", "HEAD_TIMEOUT_S", "IDLE_TIMEOUT_S", "MAX_HEADERS",
    "MAX_HEADER_BYTES", "MAX_URL_BYTES", "PREDICTS", "Refuse", "shed_answer",
]  # fmt: skip

#: what one request may send before it is refused (nginx's and uvicorn's orders of magnitude)
MAX_URL_BYTES = 8 * 1024
MAX_HEADER_BYTES = 64 * 1024
MAX_HEADERS = 100
#: seconds to send a request's head, then its body (408 after), and to stay idle between
#: requests on a keep-alive connection (closed after)
HEAD_TIMEOUT_S = 10.0
BODY_TIMEOUT_S = 30.0
IDLE_TIMEOUT_S = 30.0
#: Retry-After of the answers while the server drains on its way out
DRAIN_RETRY_S = 5


class Refuse(Exception):
    """Raised from a parser callback: answer ``status`` with ``reason`` and close."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


#: how a predict request's first bytes start (function and app predicts, V2 infer)
PREDICTS = (b"POST /v1/models/", b"POST /v1/apps/", b"POST /v2/models/")


def shed_answer(lag_s: float) -> bytes:
    """503 + Retry-After + Connection: close, for a predict refused before it was parsed."""
    body = (b'{"error":"the adapter is overloaded (its loop runs %d ms late); refused at the '
            b'door"}' % (1000.0 * lag_s))  # fmt: skip
    return (b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n"
            b"retry-after: 1\r\ncontent-length: %d\r\nconnection: close\r\n\r\n%s"
            % (len(body), body))  # fmt: skip
