"""The lean HTTP/1.1 client against a real uvicorn server on loopback."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest
import uvloop
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from knative.local.gateway import serve_in_loop
from slackwise_core.http1 import Http1ConnectionError, Http1Pool, Http1Timeout, Origin
from tests.socket_probe import tcp_connections


async def echo(request: Request) -> Response:
    body = await request.body()
    return JSONResponse(
        {"len": len(body), "host": request.headers.get("host"), "x": request.headers.get("x-a")},
        headers={"X-Seen": "yes"},
    )


async def chunked(request: Request) -> Response:
    async def parts() -> AsyncIterator[bytes]:
        for piece in (b"hello ", b"chunked ", b"world"):
            yield piece

    return StreamingResponse(parts(), media_type="text/plain")


async def slow(request: Request) -> Response:
    await asyncio.sleep(1)
    return Response(b"late")


async def closing(request: Request) -> Response:
    return Response(b"bye", headers={"connection": "close"})


APP = Starlette(
    routes=[
        Route("/echo", echo, methods=["POST"]),
        Route("/chunked", chunked),
        Route("/slow", slow),
        Route("/closing", closing),
    ]
)


async def _with_server(scenario: object) -> None:
    server, task, port = await serve_in_loop(APP, "127.0.0.1", 0)
    try:
        await scenario(port)  # type: ignore[operator]
    finally:
        server.should_exit = True
        await task


def run(scenario: object) -> None:
    asyncio.run(_with_server(scenario))
    # the adapter and the platform run under uvloop (uvicorn picks it): the same on its loop
    uvloop.run(_with_server(scenario))


def test_answers_reuse_one_keepalive_connection_with_nodelay() -> None:
    async def scenario(port: int) -> None:
        pool = Http1Pool(Origin("127.0.0.1", port))
        for i in range(5):
            r = await pool.post("/echo", b"x" * i, headers={"X-A": "1"})
            assert r.status_code == 200
            assert r.json() == {"len": i, "host": f"127.0.0.1:{port}", "x": "1"}
            assert r.headers["x-seen"] == "yes"
        mine = [c for c in tcp_connections() if c.peer[1] == port]
        assert len(mine) == 1  # sequential requests shared one connection
        assert mine[0].nodelay
        pool.close()

    run(scenario)


def test_a_host_header_given_replaces_the_origin() -> None:
    async def scenario(port: int) -> None:
        pool = Http1Pool(Origin("127.0.0.1", port))
        r = await pool.post("/echo", b"{}", headers={"Host": "digits.default.example.com"})
        assert r.json()["host"] == "digits.default.example.com"
        pool.close()

    run(scenario)


def test_concurrent_requests_open_their_own_connections() -> None:
    async def scenario(port: int) -> None:
        pool = Http1Pool(Origin("127.0.0.1", port))
        answers = await asyncio.gather(*(pool.post("/echo", b"a" * i) for i in range(8)))
        assert [a.json()["len"] for a in answers] == list(range(8))
        pool.close()

    run(scenario)


def test_chunked_answer_is_reassembled() -> None:
    async def scenario(port: int) -> None:
        pool = Http1Pool(Origin("127.0.0.1", port))
        r = await pool.request("GET", "/chunked")
        assert r.text == "hello chunked world"
        r = await pool.post("/echo", b"after")  # the connection is still in step
        assert r.json()["len"] == 5
        pool.close()

    run(scenario)


def test_connection_close_is_honoured() -> None:
    async def scenario(port: int) -> None:
        pool = Http1Pool(Origin("127.0.0.1", port))
        assert (await pool.request("GET", "/closing")).content == b"bye"
        assert (await pool.post("/echo", b"")).status_code == 200
        pool.close()

    run(scenario)


def test_timeout_drops_the_connection() -> None:
    async def scenario(port: int) -> None:
        pool = Http1Pool(Origin("127.0.0.1", port))
        with pytest.raises(Http1Timeout):
            await pool.request("GET", "/slow", timeout_s=0.1)
        assert (await pool.post("/echo", b"ok")).json()["len"] == 2
        pool.close()

    run(scenario)


def test_a_keepalive_connection_the_server_dropped_is_replaced_once() -> None:
    """A raw server answers the first request on a connection and drops the connection at the
    second, as a server whose keep-alive timer fired does: the client sends again, once, on a
    fresh connection."""

    async def scenario() -> None:
        served: list[int] = []

        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            try:
                for n in range(2):
                    head = await reader.readuntil(b"\r\n\r\n")
                    length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
                    await reader.readexactly(length)
                    if n == 1:
                        break
                    served.append(length)
                    writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                    await writer.drain()
            except asyncio.IncompleteReadError:
                pass  # the client closed its side
            finally:
                writer.close()
                with contextlib.suppress(ConnectionError):
                    await writer.wait_closed()

        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        pool = Http1Pool(Origin("127.0.0.1", port))
        assert (await pool.post("/", b"1")).content == b"ok"
        assert (await pool.post("/", b"22")).content == b"ok"  # dropped, then sent again
        assert served == [1, 2]
        pool.close()
        server.close()
        await server.wait_closed()

    asyncio.run(scenario())


def test_refused_connection_is_a_connection_error() -> None:
    async def scenario() -> None:
        import socket

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        pool = Http1Pool(Origin("127.0.0.1", port))
        with pytest.raises(Http1ConnectionError, match="cannot connect"):
            await pool.post("/echo", b"")

    asyncio.run(scenario())


def test_origin_parse() -> None:
    assert Origin.parse("http://127.0.0.1:8080/base/") == (Origin("127.0.0.1", 8080), "/base")
    assert Origin.parse("http://svc.ns.svc.cluster.local") == (
        Origin("svc.ns.svc.cluster.local", 80),
        "",
    )
    with pytest.raises(ValueError, match="not a plain http"):
        Origin.parse("https://example.com")
