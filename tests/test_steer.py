"""New connections steered to sockets the loop does not read, and refused there
(adapter/serving/steer.py, slackwise_policies/steer_share.py), on real sockets."""

from __future__ import annotations

import asyncio
import socket
import sys

import pytest

from adapter.serving.accept_trim import AcceptTrim
from adapter.serving.steer import Steer, program
from slackwise_policies.steer_share import SteerShare

linux_only = pytest.mark.skipif(sys.platform != "linux", reason="SO_ATTACH_REUSEPORT_CBPF")


def _group(count: int = 2) -> list[socket.socket]:
    socks: list[socket.socket] = []
    port = 0
    for _ in range(count):
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind(("127.0.0.1", port))
        port = sock.getsockname()[1]
        sock.listen(256)
        sock.setblocking(False)
        socks.append(sock)
    return socks


def _landed(socks: list[socket.socket]) -> int:
    count = 0
    for sock in socks:
        while True:
            try:
                conn, _ = sock.accept()
            except BlockingIOError:
                break
            conn.close()
            count += 1
    return count


def _connect_many(port: int, count: int) -> list[socket.socket]:
    return [socket.create_connection(("127.0.0.1", port)) for _ in range(count)]


@linux_only
def test_the_share_places_new_connections_on_the_shed_sockets_and_none_at_zero() -> None:
    loop_socks = _group()
    steer = Steer.open(loop_socks)
    if steer is None:
        pytest.skip("this kernel does not take a reuseport program")
    port = loop_socks[0].getsockname()[1]
    try:
        clients = _connect_many(port, 60)  # share 0: every one on the loop's sockets
        assert (_landed(loop_socks), _landed(steer.shed)) == (60, 0)
        assert steer.set_share(1.0) and steer.per_mille == 1000
        clients += _connect_many(port, 60)
        assert (_landed(loop_socks), _landed(steer.shed)) == (0, 60)
        assert steer.set_share(0.5)
        clients += _connect_many(port, 200)
        on_loop, on_shed = _landed(loop_socks), _landed(steer.shed)
        assert on_loop + on_shed == 200 and 50 < on_shed < 150  # about half, by chance
        for client in clients:
            client.close()
    finally:
        steer.close()
        for sock in loop_socks:
            sock.close()


@linux_only
def test_a_steered_predict_is_refused_with_retry_after_and_a_status_read_answered() -> None:
    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        loop_socks = _group()
        steer = Steer.open(loop_socks)
        if steer is None:
            pytest.skip("this kernel does not take a reuseport program")
        trim = AcceptTrim(loop, [], after_s=0.01, status=_status)
        trim.watch(steer.shed)
        steer.set_share(1.0)
        port = loop_socks[0].getsockname()[1]
        try:
            predict = await loop.run_in_executor(None, _ask, port, _PREDICT)
            assert predict.startswith(b"HTTP/1.1 503") and b"retry-after: 1\r\n" in predict
            assert b"refused at the socket" in predict
            probe = await loop.run_in_executor(None, _ask, port, b"GET /healthz HTTP/1.1\r\n\r\n")
            assert probe.startswith(b"HTTP/1.1 200")  # a probe is never refused
            assert (trim.steered, trim.refused, trim.answered) == (1, 1, 1)
            assert _landed(loop_socks) == 0
        finally:
            trim.close()
            steer.close()
            for sock in loop_socks:
                sock.close()

    asyncio.run(scenario())


_PREDICT = (
    b"POST /v1/models/digits:predict HTTP/1.1\r\nHost: x\r\nContent-Type: application/json"
    b'\r\nContent-Length: 18\r\n\r\n{"instances": [1]}'
)


def _status(data: bytes) -> bytes | None:
    if data.startswith(b"GET /healthz "):
        return b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}"
    return None


def _ask(port: int, request: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as conn:
        conn.sendall(request)
        chunks = []
        while chunk := conn.recv(65536):
            chunks.append(chunk)
        return b"".join(chunks)


def test_the_share_moves_in_steps_and_a_program_is_attached_only_when_it_moves() -> None:
    steer = Steer([], [])
    attached: list[int] = []

    def attach(per_mille: int) -> None:  # no socket: what would be attached
        attached.append(per_mille)
        steer.per_mille = per_mille

    steer._attach = attach  # type: ignore[method-assign]
    assert steer.set_share(0.31) and attached == [300]
    assert not steer.set_share(0.32)  # within the same step
    assert steer.set_share(1.7) and attached == [300, 1000]  # at most all of them
    assert steer.set_share(0.0) and attached == [300, 1000, 0]


def test_a_program_names_a_shed_socket_only_within_the_group() -> None:
    assert len(program(4, 4, 0)) == 10 * 8  # ten instructions of 8 bytes
    with pytest.raises(ValueError, match="per_mille"):
        program(4, 4, 1001)
    with pytest.raises(ValueError, match="a shed socket"):
        program(4, 0, 10)


def test_the_share_leaves_the_doors_twice_what_they_admit_and_lets_go_after() -> None:
    share = SteerShare(tau_s=0.5, seen=2.0)
    now, value = 0.0, 0.0
    for _ in range(600):  # 6 s at ten times what the door admits (100 a second)
        now += 0.01
        steered = round(10 * value)  # of the 10 that come each 10 ms
        value = share.observe(now, {"embed": (1, 9 - steered)}, steered)
    assert 0.75 < value < 0.85  # about 80 %: the door still sees twice what it admits
    ended = now
    while value > 0.0 and now < ended + 10.0:  # the flood is over: 1,000 a second, all of
        now += 0.01  # them admitted but those steered to the socket
        steered = round(10 * value)
        value = share.observe(now, {"embed": (10 - steered, 0)}, steered)
    assert value == 0.0 and now - ended < 1.0  # let go at once: the door admits all it sees
    at_twice = SteerShare()
    for i in range(200):  # twice the capacity: nothing steered, the door refuses half
        at_twice.observe(i * 0.01, {"embed": (1, 1)})
    assert at_twice.share == 0.0
    assert SteerShare().observe(5.0, {}) == 0.0  # nothing yet
    with pytest.raises(ValueError, match="tau_s"):
        SteerShare(tau_s=0.0)
    with pytest.raises(ValueError, match="seen"):
        SteerShare(seen=0.5)
    with pytest.raises(ValueError, match="counts"):
        SteerShare().observe(1.0, {"embed": (-1, 0)})


def test_a_flood_on_one_function_steers_nothing_while_another_has_room() -> None:
    """A steered connection is refused before anything says which function it asks for: while
    digits admits what reaches it, embed's flood goes through the doors as before."""
    share = SteerShare()
    now = 0.0
    for _ in range(300):
        now += 0.01
        value = share.observe(now, {"embed": (1, 9), "digits": (2, 0)})
    assert value == 0.0
    for _ in range(300):  # digits goes quiet: its room says nothing any more
        now += 0.01
        value = share.observe(now, {"embed": (1, 9), "digits": (0, 0)})
    assert value > 0.6
