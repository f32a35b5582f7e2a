"""A connection per request from raw sockets: the flood's ``--fresh-connections`` open loop.

Opened through asyncio, a connection costs a task, a coroutine, a transport and a protocol: the
generator's core saturated at about 3,500 new connections a second, so the overload benchmark's
3x and 10x cells with a connection per request were offered about 1.8x, and the generator's own
lag (P99 290 ms) stood in its latencies. Here each request is a non-blocking socket in one
epoll set: connect, write the request once the socket is writable, read the answer once it is
readable (a status line, the headers the benchmark reads and a ``Content-Length`` body), close.
The same core then keeps up with 5,600 a second at a lag P99 under 2 ms (the loopback handshake
is paid on the generator's core too). Latency is measured from the scheduled time and from when
the request left, which for a connection of its own is when the client began to connect: the
handshake, and a connection the kernel's full accept queue made the client try again, are the
user's wait too. The outcomes are :class:`loadtests.flood.OpenLoop`'s.
"""

from __future__ import annotations

import errno
import select
import socket
import time
from collections.abc import Callable

from loadtests.flood import Outcome, Recorder, Request

__all__ = ["FreshLoop"]

#: the most an answer may be before it is taken as broken (the adapter's are far smaller)
_MAX_ANSWER = 1 << 20


class _Exchange:
    """One request on its own connection."""

    __slots__ = ("buf", "out", "request", "sock")

    def __init__(self, sock: socket.socket, request: Request, data: bytes) -> None:
        self.sock = sock
        self.request = request
        self.out = data  # what is left to write
        self.buf = b""  # the answer read so far


def _header(head: bytes, name: bytes) -> bytes | None:
    """The value of header ``name`` (lower case, with its colon) in ``head`` (lower-cased)."""
    at = head.find(b"\r\n" + name)
    if at < 0:
        return None
    start = at + 2 + len(name)
    end = head.find(b"\r\n", start)
    return head[start : end if end >= 0 else len(head)].strip()


class FreshLoop(Recorder):
    """Sends ``schedule`` (seconds from the start) to ``host:port``, each of the ``requests``
    (whole HTTP requests) in turn on a connection of its own."""

    def _setup(self) -> None:
        family, _, proto, _, address = socket.getaddrinfo(
            self.host, self.port, type=socket.SOCK_STREAM
        )[0]
        self.family, self.proto, self.address = family, proto, address
        self._poll = select.epoll()
        self._open: dict[int, _Exchange] = {}
        self.start = time.monotonic()

    def now(self) -> float:
        return time.monotonic()

    def run(self, schedule: list[float], on_measuring: Callable[[], object]) -> Outcome:
        """Every send of ``schedule``, then until each is answered, failed or timed out."""
        self.start = time.monotonic()
        announced, swept = False, 0.0
        i, n = 0, len(schedule)
        try:
            while i < n or self._open:
                now = time.monotonic() - self.start
                if not announced and now >= self.warmup_s:
                    on_measuring()
                    announced = True
                while (
                    i < n
                    and schedule[i] <= now + 0.001
                    and (announced or schedule[i] < self.warmup_s)
                ):
                    self._send(schedule[i], now)
                    i += 1
                if now - swept >= 0.1:
                    self._sweep(now)
                    swept = now
                wait = 0.01 if i >= n else min(0.01, max(0.0, schedule[i] - now))
                for fd, events in self._poll.poll(wait):
                    exchange = self._open.get(fd)
                    if exchange is not None:
                        self._ready(fd, exchange, events)
            if not announced:
                on_measuring()
        finally:
            for fd in list(self._open):
                self._close(fd)
            self._poll.close()
        return self.outcome

    def _send(self, at: float, now: float) -> None:
        counted = at >= self.warmup_s
        if len(self._open) >= self.max_in_flight:
            self.outcome.dropped += int(counted)  # every client waits: not sent
            return
        request = Request(at, counted, now - at, time.monotonic())
        if counted:
            self.outcome.sent_at.append(now)
        data = self.requests[self._next % len(self.requests)]
        self._next += 1
        sock = socket.socket(self.family, socket.SOCK_STREAM, self.proto)
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        code = sock.connect_ex(self.address)
        if code not in (0, errno.EINPROGRESS):
            sock.close()
            self.failed(request, "Http1ConnectError")
            return
        fd = sock.fileno()
        self._open[fd] = _Exchange(sock, request, data)
        self._poll.register(fd, select.EPOLLOUT)

    def _ready(self, fd: int, exchange: _Exchange, events: int) -> None:
        if exchange.out:
            self._write(fd, exchange)
            return
        try:
            data = exchange.sock.recv(65536)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if data:
            exchange.buf += data
            if not self._answered(exchange, closed=False):
                if len(exchange.buf) <= _MAX_ANSWER:
                    return
                self.failed(exchange.request, "BadResponse")
        elif not self._answered(exchange, closed=True):
            self.failed(exchange.request, "Http1ConnectionError")
        self._close(fd)

    def _write(self, fd: int, exchange: _Exchange) -> None:
        sock = exchange.sock
        if sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR):
            self.failed(exchange.request, "Http1ConnectError")
            self._close(fd)
            return
        try:
            sent = sock.send(exchange.out)
        except BlockingIOError:
            return
        except OSError:
            self.failed(exchange.request, "Http1ConnectionError")
            self._close(fd)
            return
        exchange.out = exchange.out[sent:]
        if not exchange.out:
            self._poll.modify(fd, select.EPOLLIN)

    def _answered(self, exchange: _Exchange, *, closed: bool) -> bool:
        """Records the answer in ``exchange.buf`` if it is whole (or ``closed`` ends it)."""
        buf = exchange.buf
        end = buf.find(b"\r\n\r\n")
        if end < 0 or not buf.startswith(b"HTTP/1.") or not buf[9:12].isdigit():
            return False
        head = buf[:end].lower()
        length = _header(head, b"content-length:")
        if length is not None and length.isdigit():
            if len(buf) < end + 4 + int(length):
                return False
            body = buf[end + 4 : end + 4 + int(length)]
        elif closed:
            body = buf[end + 4 :]
        else:
            return False
        batch = _header(head, b"x-batch-size:") or b""
        status = int(buf[9:12])
        self.answered(exchange.request, status, b"\r\nretry-after:" in head, batch, [body])
        if self.timings and status == 200 and exchange.request.counted:
            timing = _header(head, b"server-timing:")
            if timing:
                self.timing(batch, timing)
        return True

    def _sweep(self, now: float) -> None:
        """Time out every request that waited ``timeout_s`` since it was due."""
        for fd, exchange in list(self._open.items()):
            if now - exchange.request.at > self.timeout_s:
                self.failed(exchange.request, "Http1Timeout")
                self._close(fd)

    def _close(self, fd: int) -> None:
        exchange = self._open.pop(fd, None)
        if exchange is not None:
            self._poll.unregister(fd)
            exchange.sock.close()
