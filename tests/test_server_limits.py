"""Limits and access on the servers that run under uvicorn (a function's runtime, the local
platform's gateway): refused with a status and a reason before the app sees the request, and
only the platform reaches the work. ASGI-level here; over real sockets in the slow test."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from functions.limits import TOKEN_ENV, BearerRequired, RequestLimits
from knative.local.guard import Guard, read_token, token_file, write_token


async def _echo(request: Request) -> JSONResponse:
    return JSONResponse({"got": len(await request.body())})


APP = Starlette(routes=[Route("/work", _echo, methods=["POST"]),
                        Route("/healthz", _echo, methods=["GET"])])  # fmt: skip


def call(
    app: Any,
    method: str,
    path: str,
    headers: list[tuple[bytes, bytes]],
    body: bytes | None = b"",
    *,
    kind: str = "http",
) -> tuple[int, dict[str, Any]]:
    """One request through ``app``; ``body=None``: a client that never sends its body."""
    sent: list[dict[str, Any]] = []
    scope = {"type": kind, "method": method, "path": path, "raw_path": path.encode(),
             "query_string": b"", "headers": headers, "http_version": "1.1",
             "asgi": {"version": "3.0"}}  # fmt: skip

    async def receive() -> dict[str, Any]:
        if body is None:
            await asyncio.sleep(3600)
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    asyncio.run(app(scope, receive, send))
    if kind == "websocket":
        return sent[0]["code"], {}
    status = sent[0]["status"]
    payload = b"".join(m.get("body", b"") for m in sent[1:])
    try:
        return status, json.loads(payload)
    except ValueError:
        return status, {"text": payload.decode("latin-1")}


def test_request_limits_answer_before_the_app_reads_anything() -> None:
    app = RequestLimits(APP, max_body_bytes=1000, body_timeout_s=0.05)
    assert call(app, "POST", "/work", [(b"content-length", b"3")], b"abc") == (200, {"got": 3})
    assert call(app, "GET", "/" + "a" * 9000, [])[0] == 414
    many = [(b"x-h%d" % i, b"v") for i in range(101)]
    assert call(app, "GET", "/healthz", many)[0] == 431
    assert call(app, "GET", "/healthz", [(b"x-big", b"v" * 70_000)])[0] == 431
    status, body = call(app, "POST", "/work", [(b"content-length", b"100000000")], None)
    assert status == 413 and "exceeds" in body["error"]  # from the header, the body never came
    status, body = call(app, "POST", "/work", [(b"content-length", b"10")], None)
    assert status == 408 and "not received" in body["error"]
    assert call(app, "GET", "/healthz", [(b"upgrade", b"websocket")])[0] == 400
    assert call(app, "GET", "/ws", [], kind="websocket")[0] == 1008


def test_a_function_takes_work_only_with_its_platforms_token() -> None:
    app = BearerRequired(APP, "s3cret")
    assert call(app, "POST", "/work", [], b"x")[0] == 401
    assert call(app, "POST", "/work", [(b"authorization", b"Bearer nope")], b"x")[0] == 403
    assert call(app, "POST", "/work", [(b"authorization", b"Bearer s3cret")], b"x")[0] == 200
    assert call(app, "GET", "/healthz", [])[0] == 200  # probes carry no token


def test_the_platform_gateway_wants_its_token_and_its_own_host() -> None:
    app = Guard(APP, "tok")
    local = [(b"host", b"127.0.0.1:8080")]
    assert call(app, "GET", "/healthz", local)[0] == 200  # liveness is open
    assert call(app, "POST", "/work", local, b"x")[0] == 401
    assert call(app, "POST", "/work", [*local, (b"authorization", b"Bearer no")], b"x")[0] == 403
    authed = [*local, (b"authorization", b"Bearer tok")]
    assert call(app, "POST", "/work", authed, b"x")[0] == 200
    assert call(app, "POST", "/work", [(b"host", b"localhost"), authed[1]], b"x")[0] == 200
    assert call(app, "POST", "/work", [(b"host", b"[::1]:80"), authed[1]], b"x")[0] == 200
    # DNS rebinding: the right token cannot come from a page that names another host
    rebound = [(b"host", b"evil.example:8080"), authed[1]]
    assert call(app, "POST", "/work", rebound, b"x") == (
        403, {"error": "Host 'evil.example:8080' is not this platform's address"}
    )  # fmt: skip
    cross = [*authed, (b"origin", b"http://evil.example")]
    assert call(app, "POST", "/work", cross, b"x")[0] == 403


def test_the_token_file_is_the_users_alone(tmp_path: Any, monkeypatch: Any) -> None:
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    monkeypatch.delenv("SLACKWISE_PLATFORM_TOKEN", raising=False)
    path = write_token("abc", 9123)
    assert path == token_file(9123) and path.stat().st_mode & 0o777 == 0o600
    assert read_token("http://127.0.0.1:9123") == "abc"
    assert read_token("http://127.0.0.1:9124") is None
    monkeypatch.setenv("SLACKWISE_PLATFORM_TOKEN", "env")
    assert read_token("http://127.0.0.1:9123") == "env"


def _raw(port: int, data: bytes) -> int:
    with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
        sock.sendall(data)
        answer = sock.recv(65536)
    return int(answer.split(b" ", 2)[1]) if answer else 0


@pytest.mark.slow
def test_a_function_process_holds_its_limits_and_its_token_over_real_sockets() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**os.environ, TOKEN_ENV: "tok"}
    proc = subprocess.Popen([sys.executable, "-m", "functions.serve", "--model", "digits",
                             "--port", str(port)], env=env)  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/v1/models/digits").status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        url = f"http://127.0.0.1:{port}/v1/models/digits:predict"
        body = {"instances": [[0.0] * 64]}
        assert httpx.post(url, json=body).status_code == 401  # straight to the replica: no
        ok = httpx.post(url, json=body, headers={"authorization": "Bearer tok"})
        assert ok.status_code == 200
        deep = '{"instances": [' + "[" * 900 + "]" * 900 + "]}"
        bad = httpx.post(url, content=deep, headers={"authorization": "Bearer tok"})
        assert bad.status_code == 400 and "deeper than" in bad.json()["error"]
        head = b"POST /v1/models/digits:predict HTTP/1.1\r\nHost: x\r\n"
        assert _raw(port, head + b"Content-Length: 999999999\r\n\r\n") == 413
        assert _raw(port, b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\nHost: x\r\n\r\n") == 414
        many = b"".join(b"x-h%d: v\r\n" % i for i in range(150))
        assert _raw(port, b"GET /v1/models/digits HTTP/1.1\r\n" + many + b"\r\n") == 431
    finally:
        proc.terminate()
        proc.wait(30)


def test_a_head_sent_too_slowly_is_answered_408_and_closed() -> None:
    """uvicorn with :class:`functions.head_timeout.HeadTimeoutProtocol`, over a real socket: a
    head dripped byte by byte gets 408 once its time is up; a whole request is answered as usual
    (the timer stops at the end of the headers, however slow the app is)."""
    from functions.head_timeout import HeadTimeoutProtocol
    from knative.local.gateway import serve_in_loop

    class Quick(HeadTimeoutProtocol):
        head_timeout_s = 0.3

    async def scenario() -> None:
        import uvicorn

        config = uvicorn.Config(APP, host="127.0.0.1", port=0, log_level="warning", http=Quick,
                                lifespan="off")  # fmt: skip
        server = uvicorn.Server(config)
        task = asyncio.create_task(server.serve())
        while not server.started:
            await asyncio.sleep(0.01)
        port = server.servers[0].sockets[0].getsockname()[1]
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            for byte in b"POST /work HTTP/1.1\r\nHo":  # a few bytes, slowly, then nothing
                writer.write(bytes([byte]))
                await writer.drain()
                await asyncio.sleep(0.005)
            started = time.monotonic()
            head = await asyncio.wait_for(reader.read(4096), 3.0)
            assert time.monotonic() - started < 1.5
            assert head.startswith(b"HTTP/1.1 408"), head
            assert b"request head not received within 0.3 s" in head
            assert await asyncio.wait_for(reader.read(), 3.0) == b""  # closed
            writer.close()
            async with httpx.AsyncClient(trust_env=False) as client:  # a normal request
                r = await client.post(f"http://127.0.0.1:{port}/work", content=b"abc")
                assert r.status_code == 200 and r.json() == {"got": 3}
        finally:
            server.should_exit = True
            await task

    asyncio.run(scenario())
    assert serve_in_loop  # the gateway's server takes the same protocol
