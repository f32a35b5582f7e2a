"""Health and function status on a port of their own, answered by a thread of their own.

On the adapter's port, a probe waits for the loop's turn that reads its socket, and under a flood
one turn reads thousands of sockets: the status route's P99 grows with the offered load
(docs/reliability.md). With ``adapter.probe_port`` set, a second listener serves ``GET /healthz``
and ``GET /v1/models/{name}`` from a thread that never touches the loop. The thread needs the GIL
only for the microseconds an answer takes, and CPython hands it over within its switch interval
(5 ms) however busy the loop is.

The thread reads nothing the loop mutates: the loop publishes every function's status document
every ``period_s`` (:meth:`ProbePort.publish`, one reference swap), and the thread answers from the
last one published, with its age in ``X-Snapshot-Age-Ms``: a snapshot that grows old is itself the
sign of a loop that is behind. Every answer closes its connection. Only ``GET`` and ``HEAD`` of
those paths are served (405 otherwise, 404 for another path, 400 for what is not HTTP, 431 for a
head over 8 KiB, 408 for one not complete within 2 s); a request whose ``Host`` is not loopback or
the adapter's own host is refused with 403 (DNS rebinding).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import socket
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from knative.local.guard import LOOPBACK_HOSTS, host_name

__all__ = ["ProbePort", "answer_for"]

logger = logging.getLogger(__name__)

MAX_HEAD_BYTES = 8192
HEAD_TIMEOUT_S = 2.0
_REASONS = {
    200: "OK",
    400: "Bad Request",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    408: "Request Timeout",
    431: "Request Header Fields Too Large",
}

#: one status document per path, as published by the loop: (status code, JSON document)
Snapshot = dict[str, tuple[int, dict[str, Any]]]


def _response(status: int, body: dict[str, Any], age_ms: float | None, head_only: bool) -> bytes:
    data = json.dumps(body, separators=(",", ":")).encode()
    lines = [
        f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}",
        "content-type: application/json",
        f"content-length: {len(data)}",
        "connection: close",
    ]
    if age_ms is not None:
        lines.append(f"x-snapshot-age-ms: {age_ms:.1f}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (b"" if head_only else data)


def answer_for(
    head: bytes, snapshot: Snapshot, age_ms: float | None, hosts: Iterable[str] = ()
) -> bytes:
    """The whole response to the request head ``head`` (pure: the thread's one decision)."""
    try:
        text = head.decode("latin-1")
        request_line, *header_lines = text.split("\r\n")
        method, target, version = request_line.split(" ")
        if not version.startswith("HTTP/1."):
            raise ValueError(version)
    except ValueError:
        return _response(400, {"error": "not an HTTP/1.x request"}, None, False)
    host = ""
    for line in header_lines:
        name, _, value = line.partition(":")
        if name.strip().lower() == "host":
            host = value
    allowed = LOOPBACK_HOSTS | {h.lower() for h in hosts}
    if host_name(host) not in allowed:
        return _response(
            403, {"error": f"Host {host.strip()!r} is not this adapter's"}, None, False
        )
    if method not in ("GET", "HEAD"):
        return _response(405, {"error": f"{method} is not served here; GET only"}, None, False)
    path = target.split("?", 1)[0]
    found = snapshot.get(path)
    if found is None:
        return _response(404, {"error": f"{path!r} is not a probe path"}, age_ms, method == "HEAD")
    status, body = found
    return _response(status, body, age_ms, method == "HEAD")


class ProbePort:
    """The probe listener and its thread (see the module docstring)."""

    def __init__(
        self,
        host: str,
        port: int,
        documents: Callable[[], Snapshot],
        *,
        period_s: float = 0.1,
        hosts: Iterable[str] = (),
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.host = host
        self.requested_port = port
        self.documents = documents
        self.period_s = period_s
        self.hosts = tuple(hosts)
        self.clock = clock
        self.answered = 0
        self._snapshot: tuple[Snapshot, float] = ({}, clock())
        self._sock: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._task: asyncio.Task[None] | None = None

    @property
    def port(self) -> int:
        """The port listened on (the requested one, or the one picked for port 0)."""
        assert self._sock is not None, "not started"
        return int(self._sock.getsockname()[1])

    def publish(self) -> None:
        """Take every document now and make it the one the thread answers from."""
        self._snapshot = (self.documents(), self.clock())

    def start(self) -> None:
        """Bind, publish once, and start the thread and the loop's publishing task."""
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, self.requested_port))
        sock.listen(128)
        sock.settimeout(0.2)  # the thread looks at its stop flag this often
        self._sock = sock
        self.publish()
        self._thread = threading.Thread(target=self._serve, name="probe-port", daemon=True)
        self._thread.start()
        self._task = asyncio.get_running_loop().create_task(self._publishing(), name="probes")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        self._stop.set()
        if self._thread is not None:
            await asyncio.to_thread(self._thread.join, 2.0)
        if self._sock is not None:
            self._sock.close()

    async def _publishing(self) -> None:
        while True:
            await asyncio.sleep(self.period_s)
            try:
                self.publish()
            except Exception:  # a document that fails must not stop the probes
                logger.exception("probe documents failed; the last snapshot stays")

    def _serve(self) -> None:
        assert self._sock is not None
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return  # closed
            with conn:
                self._one(conn)

    def _one(self, conn: socket.socket) -> None:
        conn.settimeout(HEAD_TIMEOUT_S)
        head = b""
        try:
            while b"\r\n\r\n" not in head:
                chunk = conn.recv(4096)
                if not chunk:
                    return
                head += chunk
                if len(head) > MAX_HEAD_BYTES:
                    conn.sendall(_response(431, {"error": "request head over 8 KiB"}, None, False))
                    return
            snapshot, at = self._snapshot
            age_ms = 1000.0 * (self.clock() - at)
            conn.sendall(answer_for(head.split(b"\r\n\r\n", 1)[0], snapshot, age_ms, self.hosts))
            self.answered += 1
        except TimeoutError:
            with contextlib.suppress(OSError):
                conn.sendall(
                    _response(408, {"error": "request head not complete in 2 s"}, None, False)
                )
        except OSError:
            return  # the client went away
