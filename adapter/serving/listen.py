"""The adapter's listening sockets, taken before anything else starts, several to one port.

``slackwise serve`` starts the app's lifespan (the embedded local platform, its gateway and the
first replicas, each on a port the kernel picks) before it serves. Binding the adapter's own
port only after that let one of those ports be the one the adapter was told to use (a port in
the kernel's ephemeral range; seen in a test as "address already in use"), and a port that is
taken was reported only after the platform had started. :func:`bind_early` binds it first; the
server listens on the same sockets when the lifespan is up (until then a connection is refused,
as before).

**Why several.** The event loop's libuv accepts one connection per listening socket per turn
of the loop (libuv/libuv#3696, 2022: accepting in a loop mostly costs a failed ``accept``). A
turn of the adapter's loop under a flood is a few milliseconds long (its read budget, its
refusals, the replicas' answers), so one socket accepted a few hundred connections a second: a
client that opens a connection per request waited in the kernel's accept queue, hundreds deep,
while a third of the adapter's core sat idle, and the door, seeing that wait, refused nearly
everything (digits at 3x its capacity with a connection per request: 5 % of it served, a
refusal's P99 332 ms). Where the kernel balances connections over sockets that share a port
(``SO_REUSEPORT`` on Linux), :data:`LISTENERS` sockets accept that many connections a turn
(with 32 the accept queue still stood 100-150 deep, 35 ms, at 3,600 new connections a second;
with 128, 5-15 ms). Past what the core can accept and refuse at all (digits at about 3x its
capacity with new connections) the queues, 4,096 deep in all, fill and a connection waits
about a second to be read, where with one socket it waited in its handshake
(``docs/reliability.md``, "A connection per request"). The port is checked free first with
a socket of its own (a group of ``SO_REUSEPORT`` sockets would otherwise let a second adapter
of the same user join it silently); only processes of the same user can join the group
afterwards, as Linux enforces.
"""

from __future__ import annotations

import socket
import sys

__all__ = ["LISTENERS", "bind_early"]

#: listening sockets on the adapter's port where the kernel balances connections over them: the
#: connections one turn of the loop can accept (a turn under a flood is 5-20 ms, so 128 of them
#: accept more new connections a second than one core can answer)
LISTENERS = 128


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
