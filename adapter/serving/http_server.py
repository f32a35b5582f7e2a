"""The adapter's own HTTP/1.1 server: predicts answered from callbacks, the rest through ASGI.

``slackwise serve`` runs this instead of uvicorn. Every client request is parsed by ``httptools``
(the parser uvicorn uses) in an ``asyncio.Protocol``. A function predict
(``POST /v1/models/{fn}:predict``) is admitted into its function's queue straight from the
parser's callback and answered from the request future's done-callback: no task, no coroutine and
no ASGI messages per request, which is where uvicorn and Starlette spent most of the adapter's
CPU at high load. Every other request (apps, status, metrics, health) goes to the Starlette app
through a minimal ASGI bridge, in a task, as uvicorn would run it. Each connection is a
:class:`adapter.serving.http_connection.Connection`; this module listens, runs the app's
lifespan around the server's life, and drains politely on the way out.

HTTP/1.1 keep-alive and pipelining are honoured (answers leave in request order); a client that
disconnects withdraws its queued requests; bodies over ``adapter.max_body_bytes`` are refused
with 413 as soon as they are seen; a malformed request gets 400 and the connection is closed.
The app's lifespan (dispatchers, platform, records) runs around the server's life.
"""

from __future__ import annotations

import asyncio
import gc
import signal
import socket
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from adapter.serving.accept_trim import AcceptTrim
from adapter.serving.http_connection import Connection
from adapter.serving.http_shared import Server
from adapter.serving.listen import bind_early
from adapter.serving.steer import Steer
from slackwise_policies.steer_share import SteerShare

if TYPE_CHECKING:
    from starlette.applications import Starlette

__all__ = ["serve"]


async def serve(
    app: Starlette,
    host: str,
    port: int,
    *,
    ready: Callable[[int], None] | None = None,
    stop: asyncio.Event | None = None,
) -> None:
    """Run the app's lifespan and serve it on ``host:port`` until SIGINT/SIGTERM or ``stop``.

    ``ready`` is called with the bound port once the server listens."""
    loop = asyncio.get_running_loop()
    stop = stop or asyncio.Event()
    early = bind_early(host, port)  # before the lifespan's replicas take ports of their own
    try:
        await _serve(app, loop, stop, ready, early or (host, port))
    finally:
        for sock in early:
            sock.close()


async def _serve(
    app: Starlette,
    loop: asyncio.AbstractEventLoop,
    stop: asyncio.Event,
    ready: Callable[[int], None] | None,
    where: list[socket.socket] | tuple[str, int],
) -> None:
    """:func:`serve` on ``where``: sockets bound already (one port, :mod:`.listen`), or the
    host and port to bind."""
    async with app.router.lifespan_context(app):
        server = Server(app, loop)
        # the kernel's queue of connections not yet accepted, over all the sockets: as deep
        # as Linux lets one socket's be by default (``somaxconn``, 4096); past it a new
        # connection's handshake waits for the client to try again
        backlog = max(16, 4096 // len(where)) if isinstance(where, list) else 2048
        listeners = (
            [
                await loop.create_server(lambda: Connection(server), sock=sock, backlog=backlog)
                for sock in where
            ]
            if isinstance(where, list)
            else [await loop.create_server(lambda: Connection(server), *where, backlog=2048)]
        )
        # signal handlers belong to the main thread; a server run elsewhere stops by ``stop``
        signals = (
            (signal.SIGINT, signal.SIGTERM)
            if threading.current_thread() is threading.main_thread()
            else ()
        )
        for sig in signals:
            loop.add_signal_handler(sig, stop.set)
        # what the app built to start (its routes, models' metadata, the platform) lives as
        # long as the server: left out of the collector's full scans, which otherwise walk it
        # all for every cycle a connection leaves behind
        gc.freeze()
        sockets = [sock for listener in listeners for sock in listener.sockets]
        server.unparsed.backlog.socks = sockets
        trim, steer, steering = None, None, None
        if isinstance(where, list):  # the sockets are ours: the queue's oldest can be refused
            trim = AcceptTrim(loop, where, server.trim_after_s, server.unparsed.status_bytes)
            server.unparsed.backlog.socks = where
            server.unparsed.backlog.trim = trim
            steer = Steer.open(where)
            if steer is not None:
                trim.watch(steer.shed)
                steering = loop.create_task(_steer(server, steer, trim))
        bound = int(sockets[0].getsockname()[1])
        if ready is not None:
            ready(bound)
        try:
            await stop.wait()
        finally:
            # keep listening through the drain: a request that comes now hears 503 with
            # Retry-After (a load balancer moves on), not a refused connection
            server.draining = True
            for sig in signals:
                loop.remove_signal_handler(sig)
    # the lifespan's exit answered every queued request; let the answers leave, then close
    for listener in listeners:
        listener.close()
    await asyncio.sleep(0)
    for conn in list(server.connections):
        if conn.transport is not None:
            conn.transport.close()
    for listener in listeners:
        await listener.wait_closed()
    if steering is not None:
        steering.cancel()
    if trim is not None:
        trim.close()
    if steer is not None:
        steer.close()


#: seconds between two readings of the doors' counts while connections are steered or the
#: doors refuse, and while neither (:class:`SteerShare`)
STEER_EVERY_S = (0.01, 0.05)


async def _steer(server: Server, steer: Steer, trim: AcceptTrim) -> None:
    """Keep the share of new connections refused at the socket at what the doors cannot admit
    (:mod:`adapter.serving.steer`), from the predicts admitted and refused since the last
    reading."""
    share = SteerShare()
    state = server.state
    before: dict[str, tuple[int, int]] = {}
    elsewhere = 0
    while True:
        counts = {name: (d.door.admitted, d.door.refused) for name, d in state.dispatchers.items()}
        # refused at the socket for the doors: the drop-head's and the shed rule's refusals are
        # the loop's own saturation, which the drop-head already refuses cheaply (steering
        # there took the loop's choice and served less: digits at three times its capacity)
        refused = trim.steered
        doors = {
            name: (a - before.get(name, (0, 0))[0], r - before.get(name, (0, 0))[1])
            for name, (a, r) in counts.items()
        }
        value = (
            0.0 if server.draining else share.observe(state.clock.now(), doors, refused - elsewhere)
        )
        steer.set_share(value)
        quiet = value == 0.0 and refused == elsewhere and not any(r for _, r in doors.values())
        before, elsewhere = counts, refused
        await asyncio.sleep(STEER_EVERY_S[1 if quiet else 0])
