"""Drop-head at the kernel's accept queue (adapter/serving/accept_trim.py), on real sockets."""

from __future__ import annotations

import asyncio
import socket
import sys
import time

import pytest

from adapter.serving.accept_trim import AcceptTrim, excess
from adapter.serving.http_limits import AcceptQueue

linux_only = pytest.mark.skipif(sys.platform != "linux", reason="TCP_INFO on a listening socket")


def _predict(i: int) -> bytes:
    body = b'{"instances": [%d]}' % i
    return (
        b"POST /v1/models/digits:predict HTTP/1.1\r\nHost: x\r\nContent-Type: application/json"
        b"\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
    )


def _status(data: bytes) -> bytes | None:
    if data.startswith(b"GET /healthz "):
        return b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}"
    return None


def _read_all(conn: socket.socket) -> bytes:
    conn.settimeout(5)
    chunks = []
    while chunk := conn.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks)


def _listener(backlog: int = 64) -> tuple[socket.socket, int]:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(backlog)
    listener.setblocking(False)
    return listener, int(listener.getsockname()[1])


def _wait_queued(listener: socket.socket, count: int) -> None:
    from adapter.serving.http_limits import _queued

    deadline = time.monotonic() + 5
    while _queued(listener) < count and time.monotonic() < deadline:
        time.sleep(0.01)


def test_excess_keeps_about_keep_in_all_each_socket_its_share() -> None:
    assert excess([3, 4], 10.0) == [0, 0]  # nothing stands past what is kept
    assert excess([30, 10], 8.0) == [24, 8]  # 6 and 2 kept: each its share of 8
    assert excess([100, 1], 10.0) == [90, 0]  # a socket with one waiting keeps it
    assert excess([50], 0.0) == [50]  # keep nothing: all of them
    assert sum(excess([37, 41, 12, 9], 20.0)) >= 99 - 20 - 4  # rounding keeps at most one more each


@linux_only
def test_the_oldest_are_refused_at_the_socket_and_the_newest_stay_queued() -> None:
    listener, port = _listener()
    clients = []
    try:
        for i in range(20):
            client = socket.create_connection(("127.0.0.1", port))
            client.sendall(_predict(i))
            clients.append(client)
        _wait_queued(listener, 20)
        loop = asyncio.new_event_loop()
        try:
            trim = AcceptTrim(loop, [listener], after_s=0.01, status=_status)
            assert trim.trim([20], keep=5.0, wait_s=0.04) == 15
        finally:
            loop.close()
        assert trim.refused == 15
        for client in clients[:15]:  # the oldest: a 503 with Retry-After, then closed
            answer = _read_all(client)
            assert answer.startswith(b"HTTP/1.1 503") and b"retry-after: 1\r\n" in answer
            assert b"connection: close" in answer and b"waits about 40 ms" in answer
        # the newest five are still the loop's to accept, with their requests whole
        kept = []
        for _ in range(5):
            conn, _ = listener.accept()
            conn.settimeout(5)
            kept.append(conn.recv(65536))
            conn.close()
        assert [data.rsplit(b"[", 1)[1].split(b"]")[0] for data in kept] == [
            b"%d" % i for i in range(15, 20)
        ]
    finally:
        for client in clients:
            client.close()
        listener.close()


@linux_only
def test_a_status_read_in_the_trimmed_part_is_answered_not_refused() -> None:
    listener, port = _listener()
    probe = socket.create_connection(("127.0.0.1", port))
    probe.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    other = socket.create_connection(("127.0.0.1", port))
    other.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
    try:
        _wait_queued(listener, 2)
        loop = asyncio.new_event_loop()
        try:
            trim = AcceptTrim(loop, [listener], after_s=0.01, status=_status)
            assert trim.trim([2], keep=0.0, wait_s=0.02) == 2
        finally:
            loop.close()
        assert _read_all(probe).startswith(b"HTTP/1.1 200")  # a probe is never refused
        assert _read_all(other).startswith(b"HTTP/1.1 503")  # anything else: the overload answer
        assert (trim.answered, trim.refused) == (1, 1)
    finally:
        probe.close()
        other.close()
        listener.close()


@linux_only
def test_a_connection_taken_before_its_request_is_answered_when_it_comes() -> None:
    async def scenario() -> None:
        listener, port = _listener()
        loop = asyncio.get_running_loop()
        early = socket.create_connection(("127.0.0.1", port))  # sends its request later
        silent = socket.create_connection(("127.0.0.1", port))  # never sends
        try:
            _wait_queued(listener, 2)
            trim = AcceptTrim(loop, [listener], after_s=0.01, status=_status)
            assert trim.trim([2], keep=0.0, wait_s=0.02) == 2
            assert trim.refused == 0  # nothing to answer yet: both held
            early.sendall(_predict(7))
            answer = await loop.run_in_executor(None, _read_all, early)
            assert answer.startswith(b"HTTP/1.1 503") and trim.refused == 1
            # the silent one is closed once held for HOLD_S, with nothing written
            assert await loop.run_in_executor(None, _read_all, silent) == b""
        finally:
            trim.close()
            early.close()
            silent.close()
            listener.close()

    asyncio.run(scenario())


@linux_only
def test_the_accept_queue_trims_itself_once_its_wait_passes_the_trim_point() -> None:
    listener, port = _listener()
    clients = []
    try:
        for i in range(30):
            client = socket.create_connection(("127.0.0.1", port))
            client.sendall(_predict(i))
            clients.append(client)
        _wait_queued(listener, 30)
        loop = asyncio.new_event_loop()
        try:
            queue = AcceptQueue([listener], every_s=0.01)
            queue.trim = AcceptTrim(loop, [listener], after_s=0.01, status=_status)
            assert queue.wait_s(0.0) == 0.0  # the first reading starts the clock
            queue.accepted = 10  # 10 accepted in 10 ms while 30 waited: 1,000 a second
            # 30 waiting at 1,000 a second is 30 ms, past 10: all but 10 ms of them refused
            assert abs(queue.wait_s(0.01) - 0.01) < 1e-9
        finally:
            loop.close()
        assert queue.trim.refused == 20
        assert all(_read_all(c).startswith(b"HTTP/1.1 503") for c in clients[:20])
        # and with no trim the same queue is only read
        plain = AcceptQueue([listener], every_s=0.01)
        plain.wait_s(0.0)
        plain.accepted = 1
        assert abs(plain.wait_s(0.01) - 10 / 100) < 1e-9
    finally:
        for client in clients:
            client.close()
        listener.close()
