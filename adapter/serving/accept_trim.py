"""Drop-head for the kernel's accept queue: the oldest waiting connections refused at the
socket, before the event loop makes them connections.

Under a flood of new connections (a client that opens one per request) the adapter's core fills
with the work each connection costs before anything is decided about it: the loop accepts it,
makes a transport and a protocol object, reads it, decides, writes, closes. Measured on this
project's two-core VM (``docs/reliability.md``, "A connection per request"): about 100 µs of the
adapter's core a connection, refused or not. At twice the capacity that is all of the core; the
kernel's accept queue, 4,096 deep, then stands full, every connection waits in it longer than its
SLO (a few hundred milliseconds), and the door, seeing that wait, refuses everything: digits
served 20 % of its capacity at 2x with a connection per request, and 0 % from 3x, where the
bound its own costs set is about half of it.

A queue that stands is served first in, first out by the kernel, so every connection in it is
late. :class:`AcceptTrim` keeps it short instead: when the queue's wait (:class:`AcceptQueue`:
its length over the pace the loop accepts at) passes ``after_s``, the oldest connections past
what the loop accepts in ``after_s`` are accepted here, with plain socket calls, and answered at
once: a canned 503 with ``Retry-After`` to a predict (or anything else), a status or health read
its document (a probe is never refused), then closed. That costs the syscalls and little else
(42 µs a connection measured here, against about 100 through the loop), so the refusals no
longer eat the core the answers need, and what the loop accepts has waited at most about
``after_s``: it is still in time. A refused connection waited ``after_s`` and the time to the
next reading of the queue, not the queue's whole depth. A connection whose request has not come
yet (its client is slow to be scheduled) is held, its socket watched by the loop, and answered
the same way when the request comes; one that sends nothing is closed after ``HOLD_S``.
"""

from __future__ import annotations

import asyncio
import math
import socket
from collections.abc import Callable, Sequence

from adapter.serving.http_limits import STATUS_READS, shed_answer

__all__ = ["HOLD_S", "STEERED_ANSWER", "AcceptTrim", "excess"]

#: seconds a connection taken before its request came is held for it, then closed
HOLD_S = 1.0
#: the most bytes read from a refused connection: a request head and a small body
_READ_BYTES = 65536
#: connections taken from a steered socket each time it is readable (the rest the next turn)
_ACCEPTS_A_TURN = 64
_STEERED_BODY = (
    b'{"error":"the adapter is overloaded (its doors refuse every request now); refused at '
    b'the socket"}'
)
#: the answer to a request on a steered connection (:mod:`adapter.serving.steer`)
STEERED_ANSWER = (
    b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nretry-after: 1\r\n"
    b"content-length: %d\r\nconnection: close\r\n\r\n%s" % (len(_STEERED_BODY), _STEERED_BODY)
)


def excess(queued: Sequence[int], keep: float) -> list[int]:
    """How many of each listening socket's waiting connections to refuse so that about ``keep``
    wait in all, each socket keeping its share of them (pure). Rounded up, so that while
    ``keep`` is positive no socket is left with nothing when it had some: the kernel balances
    connections over the sockets, and each keeps the newest of its own."""
    total = sum(queued)
    if total <= keep:
        return [0] * len(queued)
    share = max(keep, 0.0) / total
    return [max(0, q - math.ceil(q * share)) for q in queued]


class AcceptTrim:
    """Refuse the oldest connections waiting on the listening ``socks`` (see the module).

    ``status`` answers a status or health read (its whole answer, or None for one that is
    not)."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        socks: Sequence[socket.socket],
        after_s: float,
        status: Callable[[bytes], bytes | None],
    ) -> None:
        self.loop = loop
        self.socks = socks
        #: the wait in the accept queue past which its oldest connections are refused
        self.after_s = after_s
        self.status = status
        #: connections refused here, and status reads answered here, in all
        self.refused = 0
        self.answered = 0
        #: predicts refused on the steered sockets (:meth:`watch`), in all (in ``refused`` too)
        self.steered = 0
        #: taken before their request came: answered when it does (or closed after
        #: ``HOLD_S``), by descriptor
        self._held: dict[int, tuple[socket.socket, float]] = {}
        self._watched: list[socket.socket] = []

    def trim(self, queued: Sequence[int], keep: float, wait_s: float) -> int:
        """Accept and answer the oldest of the ``queued[i]`` connections waiting on socket
        ``i`` (they waited about ``wait_s``), all but about ``keep`` in all; how many were
        taken."""
        taken = 0
        for sock, count in zip(self.socks, excess(queued, keep), strict=False):
            for _ in range(count):
                try:
                    conn, _ = sock.accept()
                except OSError:  # none left (another took it), or out of descriptors
                    break
                taken += 1
                conn.setblocking(False)
                self._answer(conn, wait_s)
        return taken

    def watch(self, socks: Sequence[socket.socket]) -> None:
        """Answer every connection that comes on ``socks`` as the queue's oldest are answered:
        sockets the loop does not listen on, where the kernel places the share of new
        connections the adapter refuses at the socket (:mod:`adapter.serving.steer`)."""
        for sock in socks:
            self.loop.add_reader(sock.fileno(), self._accept_all, sock)
            self._watched.append(sock)

    def _accept_all(self, sock: socket.socket) -> None:
        for _ in range(_ACCEPTS_A_TURN):
            try:
                conn, _ = sock.accept()
            except OSError:  # none left, or out of descriptors (the next turn tries again)
                return
            conn.setblocking(False)
            self._answer(conn, None)

    def _answer(self, conn: socket.socket, wait_s: float | None) -> None:
        """Answer ``conn``'s request (held until it comes): a status read its document, anything
        else 503 with ``Retry-After`` for a wait of ``wait_s`` in the queue (None: steered)."""
        try:
            data = conn.recv(_READ_BYTES)
        except BlockingIOError:  # connected, request not sent yet: answered when it comes
            self._hold(conn, wait_s)
            return
        except OSError:
            conn.close()
            return
        answer = self.status(data) if data.startswith(STATUS_READS) else None
        if answer is not None:
            self.answered += 1
        elif data:
            answer = STEERED_ANSWER if wait_s is None else shed_answer(wait_s)
            self.refused += 1
            if wait_s is None:
                self.steered += 1
        try:
            if answer is not None:
                conn.send(answer)
        except OSError:
            pass
        finally:
            conn.close()

    def _hold(self, conn: socket.socket, wait_s: float | None) -> None:
        fd = conn.fileno()
        if not self._held:
            self.loop.call_later(HOLD_S, self._sweep)
        self._held[fd] = (conn, self.loop.time())
        self.loop.add_reader(fd, self._readable, fd, wait_s)

    def _readable(self, fd: int, wait_s: float | None) -> None:
        held = self._held.pop(fd, None)
        self.loop.remove_reader(fd)
        if held is not None:
            self._answer(held[0], wait_s)

    def _sweep(self) -> None:
        """Close what was held ``HOLD_S`` with no request (a client that connected and went)."""
        now = self.loop.time()
        for fd, (conn, since) in list(self._held.items()):
            if now - since >= HOLD_S:
                del self._held[fd]
                self.loop.remove_reader(fd)
                conn.close()
        if self._held:
            self.loop.call_later(HOLD_S, self._sweep)

    def close(self) -> None:
        """Stop watching the steered sockets; close every connection still held."""
        for sock in self._watched:
            self.loop.remove_reader(sock.fileno())
        self._watched.clear()
        for fd, (conn, _) in self._held.items():
            self.loop.remove_reader(fd)
            conn.close()
        self._held.clear()
