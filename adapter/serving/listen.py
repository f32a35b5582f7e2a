"""The adapter's listening sockets, taken before anything else starts, several to one port.

``slackwise serve`` starts the app's lifespan (the embedded local platform, its gateway and the
first replicas, each on a port the kernel picks) before it serves. Binding the adapter's own
port only after that let one of those ports be the one the adapter was told to use (a port in
the kernel's ephemeral range; seen in a test as "address already in use"), and a port that is
taken was reported only after the platform had started. :func:`bind_early` binds it first; the
server listens on the same sockets when the lifespan is up (until then a connection is refused,
as before).

**Why several, and why few.** The event loop's libuv accepts one connection per listening
socket per turn of the loop (libuv/libuv#3696, 2022: accepting in a loop mostly costs a failed
``accept``), so ``LISTENERS`` sockets sharing the port (``SO_REUSEPORT`` on Linux, where the
kernel balances connections over them) are how many new connections one turn takes in. That is
a bound on what the loop takes on, and it is the right place for one: every connection the loop
accepts costs it about 100 µs (a transport, a protocol object, a read, a decision, a write, a
close) whether it is answered or refused. With 128 sockets the loop took in nearly every
connection of a flood and spent its core refusing them (digits at twice its capacity with a
connection per request: 20 % of it served); what it does not take in now waits in the kernel's
queue, whose oldest are refused at the socket for about 40 µs each once they would wait longer
than their SLO allows (:mod:`adapter.serving.accept_trim`). Tried by hand at 9,000 new
connections a second (two runs each, digits, the generator on a core of its own): 4 sockets
answered 2,055 and 2,235 a second within the SLO, 8 2,468 and 1,343, 16 1,039 and 1,107; the
before and after is measured in ``docs/reliability.md`` ("Drop-head at the accept queue").
Four take in up to 4 a turn: at light load a turn is a fraction of a millisecond, so that is
thousands a second before any queue stands.

The port is checked free first with
a socket of its own (a group of ``SO_REUSEPORT`` sockets would otherwise let a second adapter
of the same user join it silently); only processes of the same user can join the group
afterwards, as Linux enforces.
"""

from __future__ import annotations

import socket
import sys

__all__ = ["LISTENERS", "bind_early"]

#: listening sockets on the adapter's port where the kernel balances connections over them: the
#: connections one turn of the loop accepts (the rest wait in the kernel's queue, whose oldest
#: are refused at the socket once they would be late: :mod:`adapter.serving.accept_trim`)
LISTENERS = 4


def bind_early(host: str, port: int, count: int = LISTENERS) -> list[socket.socket]:
    """Sockets bound to ``host:port`` (not yet listening): ``count`` sharing the port where the
    kernel balances connections over them, else one; empty when ``host`` names more than one
    address (the server then binds them all itself, later). Raises ``OSError`` when the address
    is taken."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    addresses = {(family, proto, address) for family, _, proto, _, address in infos}
    if len(addresses) != 1:
        return []
    ((family, proto, address),) = addresses
    shared = count > 1 and sys.platform == "linux" and hasattr(socket, "SO_REUSEPORT")
    first = _bound(family, proto, address, shared=False)
    if not shared:
        return [first]
    if address[1] == 0:  # the kernel picked the port: the group shares the one it picked
        address = (address[0], first.getsockname()[1], *address[2:])
    first.close()  # the port was free; now the group that shares it
    sockets: list[socket.socket] = []
    try:
        for _ in range(count):
            sockets.append(_bound(family, proto, address, shared=True))
    except OSError:
        for sock in sockets:
            sock.close()
        raise
    return sockets


def _bound(family: int, proto: int, address: tuple[object, ...], *, shared: bool) -> socket.socket:
    # with its protocol (TCP), so the loop sets TCP_NODELAY on the connections it accepts
    sock = socket.socket(family, socket.SOCK_STREAM, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as asyncio's server does
        if shared:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind(address)
    except OSError:
        sock.close()
        raise
    return sock
