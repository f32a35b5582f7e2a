"""The adapter's listening sockets (adapter.serving.listen): several share its port where the
kernel balances connections over them, because the event loop accepts one connection per
listening socket per turn; the port is still checked free first."""

from __future__ import annotations

import errno
import socket
import sys

import pytest

from adapter.serving.listen import LISTENERS, bind_early

shared_ports = pytest.mark.skipif(
    sys.platform != "linux" or not hasattr(socket, "SO_REUSEPORT"),
    reason="the kernel balances connections over sockets sharing a port on Linux",
)


@shared_ports
def test_several_sockets_share_the_port_and_each_gets_connections() -> None:
    sockets = bind_early("127.0.0.1", 0)
    clients: list[socket.socket] = []
    try:
        assert len(sockets) == LISTENERS > 1
        assert len({sock.getsockname()[1] for sock in sockets}) == 1
        for sock in sockets:
            sock.listen(64)
            sock.setblocking(False)
        port = sockets[0].getsockname()[1]
        clients = [socket.create_connection(("127.0.0.1", port)) for _ in range(4 * LISTENERS)]
        holding = 0
        for sock in sockets:
            try:
                sock.accept()[0].close()
                holding += 1
            except BlockingIOError:
                pass
        # spread by the kernel: one turn that accepts one from each socket takes dozens
        assert holding > LISTENERS // 4, holding
    finally:
        for sock in [*clients, *sockets]:
            sock.close()


@shared_ports
def test_a_port_held_by_a_socket_that_shares_ports_is_taken() -> None:
    """A second adapter of the same user would join a group of sharing sockets silently and
    take half the traffic: the port is checked with a socket that does not share first."""
    with socket.socket() as holder:
        holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        holder.bind(("127.0.0.1", 0))
        holder.listen(8)
        with pytest.raises(OSError) as taken:
            bind_early("127.0.0.1", holder.getsockname()[1])
        assert taken.value.errno == errno.EADDRINUSE


def test_one_socket_when_asked_for_one() -> None:
    sockets = bind_early("127.0.0.1", 0, count=1)
    try:
        assert len(sockets) == 1
        assert not sockets[0].getsockopt(socket.SOL_SOCKET, getattr(socket, "SO_REUSEPORT", 15))
    finally:
        for sock in sockets:
            sock.close()
