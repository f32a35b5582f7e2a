"""The open-loop generator's accounting, against a real socket server: what it counts as a
refusal at the door and what as an admitted request given up at its deadline."""

from __future__ import annotations

import asyncio
import itertools

from loadtests.flood import OpenLoop

_ANSWERS = (
    (429, b'{"error":"f: would finish about 40 ms after its deadline behind 9 queued requests"}'),
    (503, b'{"error":"f: deadline passed 12.0 ms before dispatch; this function prunes late"}'),
    (503, b'{"error":"f: queue full (100 requests waiting)"}'),
    (200, b'{"predictions":[1]}'),
)


async def _serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 turns: itertools.cycle[tuple[int, bytes]]) -> None:  # fmt: skip
    while True:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError:  # the generator closed its connection
            writer.close()
            return
        length = next(
            int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        )  # fmt: skip
        await reader.readexactly(length)
        status, body = next(turns)
        reason = {200: b"OK", 429: b"Too Many Requests", 503: b"Service Unavailable"}[status]
        retry = b"retry-after: 1\r\n" if status != 200 else b""
        writer.write(b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\n%scontent-length: "
                     b"%d\r\n\r\n%s" % (status, reason, retry, len(body), body))  # fmt: skip
        await writer.drain()


def test_a_503_for_a_passed_deadline_is_given_up_not_refused() -> None:
    async def main() -> tuple[int, int, int]:
        turns = itertools.cycle(_ANSWERS)
        server = await asyncio.start_server(lambda r, w: _serve(r, w, turns), "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        request = (b"POST /v1/models/f:predict HTTP/1.1\r\nHost: x\r\ncontent-length: 2\r\n\r\n"
                   b"{}")  # fmt: skip
        # room for all eight in flight at once: a slow machine drops none of them, and each
        # takes the server's next answer, so each answer is met twice in any order
        gen = OpenLoop("127.0.0.1", port, [request], warmup_s=0.0, timeout_s=5.0,
                       max_in_flight=8)  # fmt: skip
        out = await gen.run([0.01 * i for i in range(1, 9)], lambda: None)
        for client in gen.idle:
            client.close()
        await asyncio.sleep(0.05)  # the server sees the connections close
        server.close()
        await server.wait_closed()
        assert out.dropped == 0
        return out.given_up, len(out.refusal_ms), len(out.latencies)

    given_up, refused, ok = asyncio.run(main())
    assert (given_up, refused, ok) == (2, 4, 2)


def test_a_connection_per_request_from_raw_sockets_counts_the_same() -> None:
    """The fresh-connection generator (raw sockets in one epoll set) counts as the keep-alive
    one does: a refusal, an admitted request given up, an answer, a Retry-After; and a port
    nobody listens on is a connection error, not a lost request."""
    import threading

    from loadtests.fresh import FreshLoop

    ready = threading.Event()
    where: dict[str, object] = {}

    def server_thread() -> None:
        async def main() -> None:
            turns = itertools.cycle(_ANSWERS)
            server = await asyncio.start_server(lambda r, w: _serve(r, w, turns), "127.0.0.1", 0)
            where["port"] = server.sockets[0].getsockname()[1]
            stop = asyncio.Event()
            where["stop"] = (asyncio.get_running_loop(), stop)
            ready.set()
            await stop.wait()
            server.close()
            await server.wait_closed()

        asyncio.run(main())

    thread = threading.Thread(target=server_thread, daemon=True)
    thread.start()
    assert ready.wait(10)
    request = b"POST /v1/models/f:predict HTTP/1.1\r\nHost: x\r\ncontent-length: 2\r\n\r\n{}"
    gen = FreshLoop("127.0.0.1", int(str(where["port"])), [request], warmup_s=0.0,
                    timeout_s=5.0, max_in_flight=8)  # fmt: skip
    out = gen.run([0.01 * i for i in range(1, 9)], lambda: None)
    loop, stop = where["stop"]  # type: ignore[misc]
    loop.call_soon_threadsafe(stop.set)
    thread.join(10)
    assert out.dropped == 0 and not out.errors.get("Http1Timeout")
    assert (out.given_up, len(out.refusal_ms), len(out.latencies)) == (2, 4, 2)
    assert out.no_retry_after == 0 and len(out.sent_at) == 8
    # port 9 (discard): nobody listens here
    nobody = FreshLoop("127.0.0.1", 9, [request], warmup_s=0.0, timeout_s=1.0, max_in_flight=8)
    refused = nobody.run([0.0], lambda: None)
    assert refused.errors == {"Http1ConnectError": 1}
