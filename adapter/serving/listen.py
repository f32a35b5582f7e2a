"""The adapter's listening address, taken before anything else starts.

``slackwise serve`` starts the app's lifespan (the embedded local platform, its gateway and the
first replicas, each on a port the kernel picks) before it serves. Binding the adapter's own
port only after that let one of those ports be the one the adapter was told to use (a port in
the kernel's ephemeral range; seen in a test as "address already in use"), and a port that is
taken was reported only after the platform had started. :func:`bind_early` binds it first; the
server listens on the same socket when the lifespan is up (until then a connection is refused,
as before).
"""

from __future__ import annotations

import socket

__all__ = ["bind_early"]


def bind_early(host: str, port: int) -> socket.socket | None:
    """A socket bound to ``host:port`` (not yet listening), or None when ``host`` names more
    than one address (the server then binds them all itself, later). Raises ``OSError`` when the
    address is taken."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    addresses = {(family, proto, address) for family, _, proto, _, address in infos}
    if len(addresses) != 1:
        return None
    ((family, proto, address),) = addresses
    # with its protocol (TCP), so asyncio sets TCP_NODELAY on the connections it accepts
    sock = socket.socket(family, socket.SOCK_STREAM, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as asyncio's server does
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind(address)
    except OSError:
        sock.close()
        raise
    return sock
