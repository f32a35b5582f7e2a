"""A lean HTTP/1.1 client for the hot hop: keep-alive connections to one origin, nothing else.

The adapter and the platform send every batch over this (and the load generators may): it lives
on the floor every package stands on. one request at a time per connection,
pooled per origin, ``Content-Length`` or chunked answers, TCP_NODELAY on every socket. It exists
because a general client (httpx over httpcore, anyio and h11) spent about 0.7 ms of CPU per call
here, most of the adapter's per-request cost; this one is an ``asyncio.Protocol`` that writes the
request in one piece and parses the answer's head once.

Failures are :class:`Http1Error` subclasses: :class:`Http1Timeout` (no complete answer within the
request's timeout; the connection is dropped) and :class:`Http1ConnectionError` (could not
connect, or the peer closed mid-answer). A request that finds a pooled connection closed by the
server before any byte of the answer arrived is sent once more on a fresh connection (servers
close idle keep-alive connections; predict calls are safe to repeat).
"""

from __future__ import annotations

import asyncio
import json
import socket
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast
from urllib.parse import urlsplit

from slackwise_core.errors import CoreError

__all__ = [
    "Http1ConnectionError",
    "Http1Error",
    "Http1Pool",
    "Http1Response",
    "Http1Timeout",
    "Origin",
]

_MAX_HEAD = 64 * 1024


class Http1Error(CoreError):
    """The request got no usable answer."""


class Http1Timeout(Http1Error):
    """No complete answer within the timeout."""


class Http1ConnectionError(Http1Error):
    """Could not connect, or the connection broke before the answer was complete."""


@dataclass(frozen=True, slots=True)
class Http1Response:
    """An answer: status, headers (names lower-cased; the last of repeated ones), body."""

    status_code: int
    headers: Mapping[str, str]
    content: bytes

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", "replace")

    def json(self) -> Any:
        return json.loads(self.content)


@dataclass(frozen=True, slots=True)
class Origin:
    """Where requests go: ``http://host:port`` (only plain HTTP)."""

    host: str
    port: int

    @classmethod
    def parse(cls, url: str) -> tuple[Origin, str]:
        """The origin of an ``http://`` URL and its path prefix (without a trailing slash)."""
        parts = urlsplit(url)
        if parts.scheme != "http" or not parts.hostname:
            raise ValueError(f"not a plain http:// URL: {url!r}")
        return cls(parts.hostname, parts.port or 80), parts.path.rstrip("/")


class _Connection(asyncio.Protocol):
    """One keep-alive connection; one request in flight at a time."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.reusable = True
        self._buffer = bytearray()
        self._waiter: asyncio.Future[Http1Response] | None = None
        self._head: tuple[int, dict[str, str], int] | None = None  # status, headers, body start
        self.received = False

    # -- asyncio.Protocol ----------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses; both have what is used here
        self.transport = cast(asyncio.Transport, transport)
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        self.received = True
        self._buffer += data
        if self._waiter is None:
            self._fail(Http1ConnectionError("the server sent bytes nobody asked for"))
            return
        try:
            answer = self._parse()
        except Http1ConnectionError as exc:
            self._fail(exc)
            return
        if answer is not None:
            waiter, self._waiter = self._waiter, None
            self._head = None
            if not waiter.done():
                waiter.set_result(answer)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if exc is None and self._waiter is not None and self._head is not None:
            status, headers, start = self._head
            if "content-length" not in headers and "transfer-encoding" not in headers:
                # an answer delimited by the end of the connection (HTTP/1.0 style)
                waiter, self._waiter = self._waiter, None
                if not waiter.done():
                    waiter.set_result(Http1Response(status, headers, bytes(self._buffer[start:])))
                return
        self._fail(Http1ConnectionError(f"connection closed ({exc or 'by the server'})"))

    # -- requests ------------------------------------------------------------------------------

    def send(self, data: bytes, loop: asyncio.AbstractEventLoop) -> asyncio.Future[Http1Response]:
        assert self.transport is not None
        self._waiter = loop.create_future()
        self._buffer.clear()
        self._head = None
        self.received = False
        self.transport.write(data)
        return self._waiter

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    def _fail(self, exc: Exception) -> None:
        self.reusable = False
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_exception(exc)
        if self.transport is not None and not self.closed:
            self.close()

    def _parse(self) -> Http1Response | None:
        buf = self._buffer
        if self._head is None:
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                if len(buf) > _MAX_HEAD:
                    raise Http1ConnectionError("answer head too large")
                return None
            lines = bytes(buf[:end]).decode("latin-1").split("\r\n")
            try:
                status = int(lines[0].split(" ", 2)[1])
            except (IndexError, ValueError):
                raise Http1ConnectionError(f"not an HTTP status line: {lines[0]!r}") from None
            headers: dict[str, str] = {}
            for line in lines[1:]:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
            self._head = (status, headers, end + 4)
        status, headers, start = self._head
        if headers.get("connection", "").lower() == "close":
            self.reusable = False
        length = headers.get("content-length")
        if length is not None:
            try:
                size = int(length)
            except ValueError:
                raise Http1ConnectionError(f"bad content-length {length!r}") from None
            if len(buf) - start < size:
                return None
            body = bytes(buf[start : start + size])
        elif "chunked" in headers.get("transfer-encoding", "").lower():
            chunked = _dechunk(buf, start)
            if chunked is None:
                return None
            body = chunked
        elif status in (204, 304) or 100 <= status < 200:
            body = b""
        else:
            return None  # the body ends with the connection (connection_lost completes it)
        return Http1Response(status, headers, body)


def _dechunk(buf: bytearray, pos: int) -> bytes | None:
    """The body of a complete chunked answer starting at ``pos``, or None if incomplete."""
    parts: list[bytes] = []
    while True:
        line_end = buf.find(b"\r\n", pos)
        if line_end < 0:
            return None
        try:
            size = int(bytes(buf[pos:line_end]).split(b";", 1)[0], 16)
        except ValueError:
            raise Http1ConnectionError("bad chunk size") from None
        pos = line_end + 2
        if size == 0:
            return b"".join(parts) if buf.find(b"\r\n", pos) >= 0 else None
        if len(buf) < pos + size + 2:
            return None
        parts.append(bytes(buf[pos : pos + size]))
        pos += size + 2


class Http1Pool:
    """Keep-alive connections to one origin; at most ``max_idle`` are kept between requests."""

    def __init__(self, origin: Origin, *, max_idle: int = 64) -> None:
        self.origin = origin
        self.max_idle = max_idle
        self._idle: deque[_Connection] = deque()
        self._host_header = f"Host: {origin.host}:{origin.port}\r\n".encode("latin-1")
        self._closed = False

    async def _connect(self, loop: asyncio.AbstractEventLoop) -> _Connection:
        try:
            _, protocol = await loop.create_connection(
                _Connection, self.origin.host, self.origin.port
            )
        except OSError as exc:
            raise Http1ConnectionError(
                f"cannot connect to {self.origin.host}:{self.origin.port}: {exc}"
            ) from None
        return protocol

    def _encode(
        self, method: str, path: str, body: bytes, headers: Mapping[str, str] | None
    ) -> bytes:
        head = [f"{method} {path} HTTP/1.1\r\n".encode("latin-1")]
        if not headers or not any(k.lower() == "host" for k in headers):
            head.append(self._host_header)
        if headers:
            head.append("".join(f"{k}: {v}\r\n" for k, v in headers.items()).encode("latin-1"))
        head.append(f"Content-Length: {len(body)}\r\n\r\n".encode("latin-1"))
        head.append(body)
        return b"".join(head)

    async def request(
        self,
        method: str,
        path: str,
        *,
        body: bytes = b"",
        headers: Mapping[str, str] | None = None,
        timeout_s: float = 60.0,
    ) -> Http1Response:
        """Send one request and return its answer; raises :class:`Http1Error`."""
        if self._closed:
            raise Http1ConnectionError("the pool is closed")
        loop = asyncio.get_running_loop()
        data = self._encode(method, path, body, headers)
        deadline = loop.time() + timeout_s
        for attempt in (0, 1):
            conn = None
            while self._idle:
                candidate = self._idle.pop()
                if not candidate.closed:
                    conn = candidate
                    break
            reused = conn is not None
            if conn is None:
                conn = await self._connect(loop)
            waiter = conn.send(data, loop)
            timer = loop.call_at(deadline, _expire, conn, waiter, timeout_s)
            try:
                answer = await waiter
            except Http1ConnectionError:
                if reused and not conn.received and attempt == 0:
                    continue  # the server had closed this idle connection: try a fresh one
                raise
            except asyncio.CancelledError:
                conn.close()
                raise
            finally:
                timer.cancel()
            if conn.reusable and not conn.closed and len(self._idle) < self.max_idle:
                self._idle.append(conn)
            else:
                conn.close()
            return answer
        raise AssertionError("unreachable")  # pragma: no cover

    async def post(
        self,
        path: str,
        body: bytes,
        *,
        headers: Mapping[str, str] | None = None,
        timeout_s: float = 60.0,
    ) -> Http1Response:
        return await self.request("POST", path, body=body, headers=headers, timeout_s=timeout_s)

    def close(self) -> None:
        """Close every idle connection; requests in flight finish on theirs."""
        self._closed = True
        while self._idle:
            self._idle.pop().close()


def _expire(conn: _Connection, waiter: asyncio.Future[Http1Response], timeout_s: float) -> None:
    if not waiter.done():
        waiter.set_exception(Http1Timeout(f"no complete answer within {timeout_s:g} s"))
    conn.reusable = False
    conn.close()
