"""The adapter's own HTTP server (``slackwise serve``) on a real socket, with fake upstreams.

Each scenario runs on a virtual clock (:class:`slackwise_core.clock.VirtualClock`): the sockets are
real, and the loop polls them before it moves time on, so the upstream's delays, the client's
timeouts and the dispatch timers cost no wall time."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette

from adapter.serving.app import create_app
from adapter.serving.http_server import serve
from slackwise_config import Config
from slackwise_core.clock import VirtualClock
from tests.socket_probe import tcp_connections
from tests.test_adapter import FakeView, config, echo
from tests.upstreams import HandlerUpstream

Scenario = Callable[[Starlette, int], Awaitable[None]]


def run(scenario: Scenario, cfg: Config | None = None, handler: Any = echo) -> None:
    clock = VirtualClock()

    async def main() -> None:
        app = create_app(
            cfg or config(), view=FakeView(1), upstream=HandlerUpstream(handler), clock=clock
        )
        stop = asyncio.Event()
        bound: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        server = asyncio.create_task(serve(app, "127.0.0.1", 0, ready=bound.set_result, stop=stop))
        port = await asyncio.wait_for(bound, 10)
        try:
            await scenario(app, port)
        finally:
            stop.set()
            await asyncio.wait_for(server, 10)

    clock.run(main())


def test_predicts_status_and_metrics_over_one_keepalive_connection() -> None:
    async def scenario(app: Starlette, port: int) -> None:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", trust_env=False) as c:
            for i in range(3):
                r = await c.post("/v1/models/echo:predict", json={"instances": [i]})
                assert r.status_code == 200
                assert r.json() == {"predictions": [{"echo": i}]}
                assert r.headers["x-batch-size"] == "1"
                assert "upstream;dur=" in r.headers["server-timing"]
            assert (await c.get("/healthz")).json()["ok"] is True
            assert (await c.get("/v1/models/echo")).json()["name"] == "echo"
            assert "slackwise_batch_size" in (await c.get("/metrics")).text
            r = await c.get("/v1/models/echo:predict")  # wrong method: the router's 405
            assert r.status_code == 405
            mine = [conn for conn in tcp_connections() if conn.local[1] == port]
            assert len(mine) == 1 and mine[0].nodelay

    run(scenario)


@pytest.mark.parametrize(
    ("path", "body", "status", "reason"),
    [
        ("/v1/models/nope:predict", b'{"instances": [1]}', 404, "no function named 'nope'"),
        ("/v1/models/echo:predict", b"{not json", 400, "not JSON"),
        ("/v1/models/echo:predict", b'{"instances": []}', 400, "is empty"),
        ("/v1/models/echo:predict", b'{"instances": [' + b"1," * 400 + b"1]}", 413, "limit"),
    ],
)
def test_bad_requests_get_a_reason(path: str, body: bytes, status: int, reason: str) -> None:
    async def scenario(app: Starlette, port: int) -> None:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", trust_env=False) as c:
            r = await c.post(path, content=body, headers={"content-type": "application/json"})
            assert r.status_code == status
            assert reason in r.json()["error"]

    run(scenario, config(max_body_bytes=512))


def test_pipelined_requests_are_answered_in_order() -> None:
    async def slow_first(request: httpx.Request) -> httpx.Response:
        if json.loads(request.content)["instances"] == [0]:
            await asyncio.sleep(0.2)
        return echo(request)

    async def scenario(app: Starlette, port: int) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        requests = b""
        for i in range(3):
            body = json.dumps({"instances": [i]}).encode()
            requests += (
                b"POST /v1/models/echo:predict HTTP/1.1\r\nHost: a\r\n"
                b"content-type: application/json\r\ncontent-length: %d\r\n\r\n%s"
                % (len(body), body)
            )
        requests += b"GET /healthz HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"
        writer.write(requests)
        data = await asyncio.wait_for(reader.read(), 10)  # the server closes after the last
        writer.close()
        answers = data.split(b"HTTP/1.1 ")[1:]
        assert len(answers) == 4
        assert all(a.startswith(b"200") for a in answers)
        assert [b'"echo":%d' % i in a for i, a in enumerate(answers[:3])] == [True] * 3
        assert b"connection: close" in answers[3]

    cfg = config(function={"container_concurrency": 4, "max_batch": 1})
    run(scenario, cfg, slow_first)


def test_a_malformed_request_is_400_and_closes() -> None:
    async def scenario(app: Starlette, port: int) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"THIS IS NOT HTTP\r\n\r\n")
        data = await asyncio.wait_for(reader.read(), 10)
        writer.close()
        assert data.startswith(b"HTTP/1.1 400") and b"malformed" in data

    run(scenario)


def test_a_client_that_disconnects_withdraws_its_request() -> None:
    seen: list[list[int]] = []

    async def held(request: httpx.Request) -> httpx.Response:
        seen.append(json.loads(request.content)["instances"])
        await asyncio.sleep(1.0)  # holds the only slot for a (virtual) second
        return echo(request)

    async def scenario(app: Starlette, port: int) -> None:
        url = f"http://127.0.0.1:{port}/v1/models/echo:predict"
        dispatcher = app.state.adapter.dispatchers["echo"]
        async with httpx.AsyncClient(trust_env=False) as c:
            first = asyncio.create_task(c.post(url, json={"instances": [1]}, timeout=10))
            await asyncio.sleep(0.01)
            assert seen == [[1]]  # the only slot is busy now
            with pytest.raises(httpx.ReadTimeout):
                await c.post(url, json={"instances": [2]}, timeout=0.3)
            await asyncio.sleep(0.01)
            assert not dispatcher.queue or dispatcher.queue.items[0].cancelled
            assert (await first).status_code == 200
            assert (await c.post(url, json={"instances": [3]}, timeout=10)).status_code == 200
        assert seen == [[1], [3]]  # the abandoned request never reached the function

    run(scenario, config(function={"max_batch": 4}), held)


def test_queued_requests_are_answered_when_the_server_stops() -> None:
    clock = VirtualClock()

    async def held(request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(0.3)
        return echo(request)

    async def main() -> None:
        app = create_app(config(), view=FakeView(1), upstream=HandlerUpstream(held), clock=clock)
        stop = asyncio.Event()
        bound: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        server = asyncio.create_task(serve(app, "127.0.0.1", 0, ready=bound.set_result, stop=stop))
        port = await bound
        url = f"http://127.0.0.1:{port}/v1/models/echo:predict"
        async with httpx.AsyncClient(trust_env=False) as c:

            def call(i: int) -> asyncio.Task[httpx.Response]:
                return asyncio.create_task(c.post(url, json={"instances": [i]}, timeout=20))

            calls = [call(0)]
            await asyncio.sleep(0.05)  # it left alone and holds the only slot until 0.3 s
            calls += [call(1), call(2)]
            await asyncio.sleep(0.15)  # one batch in flight, the rest queued behind it
            stop.set()
            answers = await asyncio.gather(*calls, return_exceptions=True)
        await asyncio.wait_for(server, 20)
        got = [a for a in answers if isinstance(a, httpx.Response)]
        assert len(got) == 3, answers  # every admitted request heard back
        # the batch in flight finished and was answered; the queued ones heard 503 at once,
        # with when to come back
        assert [a.status_code for a in got] == [200, 503, 503]
        for a in got:
            if a.status_code == 503:
                assert "shutting down" in a.json()["error"] and int(a.headers["retry-after"]) > 0
            else:
                assert a.json() == {"predictions": [{"echo": 0}]}

    clock.run(main())


def test_a_chain_walks_its_stages_through_the_server() -> None:
    """Each stage waits with its own disconnect watcher; one stage's watcher, cancelled when its
    answer comes, must not read as a disconnect to the next."""
    from tests.test_chain_route import FakeView as ChainView
    from tests.test_chain_route import Upstream
    from tests.test_chain_route import config as chain_config

    upstream = Upstream()
    clock = VirtualClock()

    async def slow(request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(0.02)  # long enough for each stage's watcher to start listening
        return upstream(request)

    async def main() -> None:
        app = create_app(
            chain_config(), view=ChainView(), upstream=HandlerUpstream(slow), clock=clock
        )
        stop = asyncio.Event()
        bound: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        server = asyncio.create_task(serve(app, "127.0.0.1", 0, ready=bound.set_result, stop=stop))
        port = await bound
        try:
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", trust_env=False) as c:
                for _ in range(2):
                    r = await c.post(
                        "/v1/apps/ipa:predict", json={"instances": [{"wav_b64": "hamlet"}]}
                    )
                    assert r.status_code == 200, r.text
                    assert r.json()["predictions"][0]["answer"] == "answer to who wrote hamlet"
        finally:
            stop.set()
            await server

    clock.run(main())


def test_health_and_function_status_are_answered_from_the_callback_as_the_router_would() -> None:
    """Probes never wait a loop turn in a task behind the predicts they report on: the server
    answers them from the parser's callback, with what the Starlette routes answer."""
    from adapter.serving import http_connection

    async def scenario(app: Starlette, port: int) -> None:
        routed: list[str] = []
        original = http_connection.run_asgi

        def through_asgi(app: Any, request: Any, *rest: Any) -> Any:
            routed.append(request.path)
            return original(app, request, *rest)

        http_connection.run_asgi = through_asgi  # type: ignore[assignment]
        try:
            base = f"http://127.0.0.1:{port}"
            async with httpx.AsyncClient(base_url=base, trust_env=False) as c:
                probes = ("/healthz", "/v1/models/echo", "/v1/models/nope", "/v2/health/ready")
                fast = {p: await c.get(p) for p in probes}
                assert routed == []  # none of them went through the app
                assert (await c.get("/v1/models")).status_code == 200
                assert routed == ["/v1/models"]  # everything else still does
        finally:
            http_connection.run_asgi = original
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://adapter") as router:
            for path, answer in fast.items():
                routed_answer = await router.get(path)
                assert answer.status_code == routed_answer.status_code
                assert answer.headers["content-type"] == "application/json"
                assert answer.json() == routed_answer.json()
        assert fast["/v1/models/nope"].status_code == 404
        assert fast["/v1/models/echo"].json()["name"] == "echo"

    run(scenario)


def test_the_port_is_taken_before_the_lifespan_starts_the_platform() -> None:
    """The lifespan starts the embedded platform, whose replicas listen on ports the kernel
    picks: the adapter's own port is bound before it, so none of them can take it (a CI run
    once saw "address already in use" from exactly that)."""
    clock = VirtualClock()
    with socket.socket() as picker:
        picker.bind(("127.0.0.1", 0))
        port = picker.getsockname()[1]
    seen: dict[str, int] = {}

    async def main() -> None:
        app = create_app(config(), view=FakeView(1), upstream=HandlerUpstream(echo),
                         clock=clock)  # fmt: skip
        inner = app.router.lifespan_context

        @contextlib.asynccontextmanager
        async def probing(app: Starlette) -> AsyncIterator[None]:
            with socket.socket() as other:  # what a replica starting now would try
                try:
                    other.bind(("127.0.0.1", port))
                except OSError as exc:
                    seen["errno"] = exc.errno or 0
            async with inner(app):
                yield

        app.router.lifespan_context = probing
        stop = asyncio.Event()
        bound: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        server = asyncio.create_task(
            serve(app, "127.0.0.1", port, ready=bound.set_result, stop=stop)
        )
        seen["bound"] = await asyncio.wait_for(bound, 10)
        stop.set()
        await asyncio.wait_for(server, 10)

    clock.run(main())
    assert seen == {"errno": errno.EADDRINUSE, "bound": port}


def test_a_connections_first_request_loses_its_wait_to_be_accepted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A new connection that waited in the kernel's accept queue carried a request sent that
    long ago: its deadline is earlier by the wait (here 200 ms, as the accept queue's reading
    says), so with a 150 ms SLO it is past its deadline when it comes (refused: pruned as late
    before dispatch), and the next request on the same connection, which waited for nothing, is
    served."""
    from adapter.serving import http_limits

    monkeypatch.setattr(http_limits.AcceptQueue, "wait_s", lambda self, now: 0.2)

    async def scenario(app: Starlette, port: int) -> None:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", trust_env=False) as c:
            first = await c.post("/v1/models/echo:predict", json={"instances": [1]},
                                 headers={"x-slo-ms": "150"})  # fmt: skip
            assert first.status_code == 503, first.text
            assert "deadline passed 50.0 ms" in first.json()["error"]
            assert "retry-after" in first.headers
            second = await c.post("/v1/models/echo:predict", json={"instances": [2]},
                                  headers={"x-slo-ms": "150"})  # fmt: skip
            assert second.status_code == 200, second.text

    run(scenario)


def test_a_status_read_is_answered_in_its_turn_while_predicts_wait_for_the_next(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With the turn's budget for client reads spent (a flood), a predict's read waits in line
    and a status or health read is answered at once: a probe must not wait behind a flood."""
    from adapter.serving.read_budget import ReadBudget

    spent = [True]
    real_over, real_defer = ReadBudget.over, ReadBudget.defer
    deferred: list[bytes] = []

    def over(self: ReadBudget) -> bool:
        return spent[0] or real_over(self)

    def defer(self: ReadBudget, conn: Any) -> None:
        deferred.append(bytes(conn._held[0][:24]))
        real_defer(self, conn)

    monkeypatch.setattr(ReadBudget, "over", over)
    monkeypatch.setattr(ReadBudget, "defer", defer)

    async def scenario(app: Starlette, port: int) -> None:
        base = f"http://127.0.0.1:{port}"
        async with httpx.AsyncClient(base_url=base, trust_env=False) as c:
            status = await asyncio.wait_for(c.get("/v1/models/echo"), 5)
            health = await asyncio.wait_for(c.get("/healthz"), 5)
            assert status.status_code == 200 and health.status_code == 200
            assert deferred == []
            predict = asyncio.ensure_future(
                c.post("/v1/models/echo:predict", json={"instances": [1]})
            )
            for _ in range(50):
                if deferred:
                    break
                await asyncio.sleep(0.01)
            assert deferred and deferred[0].startswith(b"POST /v1/models/echo")
            assert not predict.done()
            spent[0] = False  # the flood is over: the next read starts a turn that drains the line
            async with httpx.AsyncClient(base_url=base, trust_env=False) as other:
                await other.get("/healthz")
            answer = await asyncio.wait_for(predict, 5)
            # answered either way: served, or shed for the time it waited in line
            assert answer.status_code == 200 or (
                answer.status_code == 503 and "retry-after" in answer.headers
            )

    run(scenario)


def test_a_closed_connection_is_freed_without_the_garbage_collector(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A connection's parser holds it for its callbacks, so does its transport, and a refusal
    raised from a callback holds the frames that hold it: cycles only the collector freed.
    Under a flood of new connections they piled up by the ten thousand and each full collection
    stopped the loop for 120-190 ms. Closed, a connection is freed at once (collector off here);
    one refused before it was parsed never made a parser."""
    import gc
    import weakref

    from adapter.serving import http_connection, http_limits

    seen: list[weakref.ref[http_connection.Connection]] = []
    parsed: list[bool] = []
    made = http_connection.Connection.connection_made
    lost = http_connection.Connection.connection_lost

    def track(self: http_connection.Connection, transport: Any) -> None:
        seen.append(weakref.ref(self))
        made(self, transport)

    def note(self: http_connection.Connection, exc: Exception | None) -> None:
        parsed.append(self.parser is not http_connection._NO_PARSER)
        lost(self, exc)

    monkeypatch.setattr(http_connection.Connection, "connection_made", track)
    monkeypatch.setattr(http_connection.Connection, "connection_lost", note)
    body = json.dumps({"instances": [1]}).encode()
    request = (b"POST /v1/models/echo:predict HTTP/1.1\r\nhost: x\r\ncontent-type: "
               b"application/json\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body))  # fmt: skip
    bad = b"GET /nowhere HTTP/1.1\r\nhost: x\r\nx-bad: \x01\r\n\r\n"

    async def exchange(port: int, data: bytes) -> bytes:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(data)
        answer = await reader.read(65536)
        writer.close()
        await writer.wait_closed()
        return answer

    async def scenario(app: Starlette, port: int) -> None:
        gc.disable()
        try:
            assert (await exchange(port, request)).startswith(b"HTTP/1.1 200")
            assert (await exchange(port, bad)).startswith(b"HTTP/1.1 400")
            shed = 1.0  # the accept queue says a new request waits 1 s: refused unparsed
            monkeypatch.setattr(http_limits.AcceptQueue, "wait_s", lambda self, now: shed)
            assert (await exchange(port, request)).startswith(b"HTTP/1.1 503")
            for _ in range(20):  # let the server see the clients go
                await asyncio.sleep(0)
                if len(parsed) == 3:
                    break
            assert len(seen) == 3 and parsed == [True, True, False]
            assert [ref() for ref in seen] == [None, None, None]
        finally:
            gc.enable()

    run(scenario)
