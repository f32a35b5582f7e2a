"""What the adapter's own HTTP server refuses, and when: its limits, its timeouts, and the answer
it sends unparsed when its loop runs too late to admit anything (:mod:`adapter.serving.http_server`
enforces them; ``docs/reliability.md`` lists them beside the other servers')."""

from __future__ import annotations

import math
import socket
import struct
from collections.abc import Sequence
from typing import Any, Protocol

from adapter.serving.errors import ServingError

__all__ = [
    "BODY_STALL_S",
    "BODY_TIMEOUT_S",
    "DRAIN_RETRY_S",
    "HEAD_TIMEOUT_S",
    "IDLE_TIMEOUT_S",
    "MAX_HEADERS",
    "MAX_HEADER_BYTES",
    "MAX_URL_BYTES",
    "PREDICTS",
    "STATUS_READS",
    "AcceptQueue",
    "Refuse",
    "shed_answer",
    "whole_request",
]

#: what one request may send before it is refused (nginx's and uvicorn's orders of magnitude)
MAX_URL_BYTES = 8 * 1024
MAX_HEADER_BYTES = 64 * 1024
MAX_HEADERS = 100
#: seconds to send a request's head, then its body (408 after), and to stay idle between
#: requests on a keep-alive connection (closed after)
HEAD_TIMEOUT_S = 10.0
BODY_TIMEOUT_S = 30.0
#: seconds a body may stall (no byte at all) before 408: a body that stops for longer is one
#: whose client has stopped sending (a Content-Length longer than the body, then silence), not
#: a slow network: TCP resends a lost segment after 1 s (RFC 6298's initial timeout) and once
#: more 2 s later, so 3 s lets one loss and its first retry through; and every SLO the adapter
#: serves is shorter than that, so the request would be late before it was read anyway
BODY_STALL_S = 3.0
IDLE_TIMEOUT_S = 30.0
#: Retry-After of the answers while the server drains on its way out
DRAIN_RETRY_S = 5


class Refuse(ServingError):
    """Raised from a parser callback: answer ``status`` with ``reason`` and close."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


#: how a predict request's first bytes start (function and app predicts, V2 infer)
PREDICTS = (b"POST /v1/models/", b"POST /v1/apps/", b"POST /v2/models/")
#: how a status or health read starts: answered in the turn it is read, never held in line
#: behind a flood of predicts (its answer is a dict lookup, and a probe that waits is a
#: probe that fails)
STATUS_READS = (b"GET /v1/models/", b"GET /v1/apps/", b"GET /healthz", b"GET /v2/health")


def shed_answer(lag_s: float, *, close: bool = True) -> bytes:
    """503 + Retry-After (+ Connection: close), for a predict refused before it was parsed."""
    body = (
        b'{"error":"the adapter is overloaded (a new request waits about %d ms before it '
        b'is read); refused at the door"}' % (1000.0 * lag_s)
    )
    return (
        b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n"
        b"retry-after: 1\r\ncontent-length: %d\r\n%s\r\n%s"
        % (len(body), b"connection: close\r\n" if close else b"", body)
    )


#: request heads that a refusal unparsed cannot answer while keeping the connection: the client
#: closes after it, sends its body in chunks, or waits to be told to send it
_NOT_PLAIN = (b"\r\nconnection: close", b"\r\ntransfer-encoding:", b"\r\nexpect:")


def whole_request(data: bytes) -> bytes | None:
    """The target of the one whole HTTP/1.1 request that ``data`` is, with nothing after it
    (its ``Content-Length`` body complete, no chunked body, no ``Connection: close``, no
    ``Expect``), or None. An answer written without parsing then leaves the connection at a
    request boundary, so it can stay open: a refusal under overload costs the client no new
    connection, and the adapter no accept."""
    end = data.find(b"\r\n\r\n")
    if end < 0:
        return None
    line_end = data.find(b"\r\n")
    parts = data[:line_end].split(b" ")
    if len(parts) != 3 or parts[2] != b"HTTP/1.1":
        return None
    head = data[line_end:end].lower()
    if any(marker in head for marker in _NOT_PLAIN):
        return None
    at = head.find(b"\r\ncontent-length:")
    if at < 0:
        length = 0
    else:
        stop = head.find(b"\r\n", at + 2)
        value = head[at + 17 : stop if stop >= 0 else len(head)].strip()
        if not value.isdigit():
            return None
        length = int(value)
    return parts[1] if len(data) == end + 4 + length else None


class Trim(Protocol):
    """Refuses the oldest connections of a standing accept queue
    (:class:`adapter.serving.accept_trim.AcceptTrim`)."""

    after_s: float

    def trim(self, queued: Sequence[int], keep: float, wait_s: float) -> int: ...


class AcceptQueue:
    """How long a new connection waits in the kernel's accept queue before the adapter reads it:
    the queue's length (Linux reports it for a listening socket in ``TCP_INFO``) over the rate
    the adapter accepts at *while connections wait* (Little's law: a rate measured over idle
    time is the arrivals', not the adapter's, and would make one waiting connection at light
    load look like seconds of wait). Under a flood of connections this wait is invisible to
    every queue the adapter keeps, and it is what makes an admitted request late; the shed rule
    adds it to the loop's lag. Measured at most every ``every_s``; 0 until the adapter has been
    seen accepting from a queue that waited, and where the platform does not say. A pace is
    evidence for ``stale_s`` only: one measured while the loop was saturated (a flood) is far
    slower than the same loop's once the flood has passed, and kept, it would read the few
    connections a healthy burst leaves waiting as a long wait and shed requests the adapter
    has room for (seen: 0.8 % of requests refused at a quarter of the capacity, after an
    overload)."""

    def __init__(
        self, socks: Sequence[Any] = (), *, every_s: float = 0.01, stale_s: float = 1.0
    ) -> None:
        #: the listening sockets (several share a port: :mod:`adapter.serving.listen`)
        self.socks = socks
        self.every_s = every_s
        self.stale_s = stale_s
        self.accepted = 0
        self._then = (-1.0, 0, 0)  # time, accepted count, queue length at the last reading
        self._rate = 0.0
        self._rate_at = -math.inf  # when the pace was last measured
        self._wait_s = 0.0
        #: refuses the oldest waiting connections once the wait passes its ``after_s``
        #: (:mod:`adapter.serving.accept_trim`); None: the queue is only read
        self.trim: Trim | None = None

    def wait_s(self, now: float) -> float:
        last, _, _ = self._then
        if now - last < self.every_s:
            return self._wait_s
        # each socket is read: a sample scaled up turned the two or three a burst leaves
        # waiting at light load into a wait long enough to shed
        queued = [_queued(sock) for sock in self.socks]
        wait = self.observe(now, sum(queued))
        trim = self.trim
        if trim is not None and wait > trim.after_s and self._rate > 0.0:
            # the queue stands: its oldest are refused at the socket, the rest are in time
            taken = trim.trim(queued, self._rate * trim.after_s, wait)
            left = max(0, sum(queued) - taken)
            self._then = (now, self.accepted, left)
            self._wait_s = left / self._rate
        return self._wait_s

    def observe(self, now: float, queued: int) -> float:
        """One reading: ``queued`` connections wait at ``now``; the wait it implies (pure)."""
        last, count, waiting = self._then
        self._then = (now, self.accepted, queued)
        if last < 0:
            return 0.0
        if now - self._rate_at > self.stale_s:
            self._rate = 0.0  # an old pace says nothing about the loop now
        if waiting > 0 and now - last <= 20 * self.every_s:
            # connections waited at the last reading, a moment ago: the accepts since are the
            # adapter's pace (over a longer gap they would be mostly idle time's)
            rate = (self.accepted - count) / max(now - last, 1e-6)
            self._rate = rate if self._rate == 0.0 else 0.7 * self._rate + 0.3 * rate
            self._rate_at = now
        self._wait_s = queued / self._rate if queued and self._rate > 0 else 0.0
        return self._wait_s


def _queued(sock: Any) -> int:
    """Connections waiting to be accepted on listening ``sock`` (``tcpi_unacked``), or 0."""
    if not hasattr(socket, "TCP_INFO"):
        return 0
    try:
        info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 104)
    except OSError:
        return 0
    return int(struct.unpack_from("I", info, 24)[0]) if len(info) >= 28 else 0
