"""The adapter's own server refuses what it must, with a status and a reason, and never hangs:
URL, header and body limits, read timeouts, upgrades, JSON depth, and the drain on shutdown.
Real sockets on a virtual clock (the timeouts cost no wall time)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
from starlette.applications import Starlette

from adapter.serving.app import create_app
from adapter.serving.http_limits import BODY_STALL_S, MAX_HEADERS
from adapter.serving.http_server import serve
from slackwise_core.clock import VirtualClock
from tests.test_adapter import FakeView, config, echo
from tests.test_http_server import run
from tests.upstreams import HandlerUpstream

PREDICT = b"POST /v1/models/echo:predict HTTP/1.1\r\nHost: x\r\n"


async def exchange(port: int, data: bytes, *, then_wait: bool = True) -> tuple[int, bytes]:
    """Send ``data`` raw and read one answer: (status, whole response)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(data)
    await writer.drain()
    answer = await asyncio.wait_for(reader.read(1 << 20), 120)
    writer.close()
    status = int(answer.split(b" ", 2)[1]) if answer else 0
    return status, answer


def test_limits_on_url_headers_and_body_answer_at_once() -> None:
    async def scenario(app: Starlette, port: int) -> None:
        status, answer = await exchange(port, b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\n\r\n")
        assert status == 414 and b"URL longer" in answer
        many = b"".join(b"x-h%d: v\r\n" % i for i in range(MAX_HEADERS + 5))
        status, answer = await exchange(port, b"GET /healthz HTTP/1.1\r\n" + many + b"\r\n")
        assert status == 431 and b"header fields" in answer
        huge = b"x-big: " + b"v" * 100_000 + b"\r\n"
        status, _ = await exchange(port, b"GET /healthz HTTP/1.1\r\n" + huge + b"\r\n")
        assert status == 431
        # 100 MB declared, nothing sent: refused from the header, not after a body never sent
        status, answer = await exchange(port, PREDICT + b"Content-Length: 100000000\r\n\r\n")
        assert status == 413 and b"limit" in answer
        status, answer = await exchange(
            port, b"GET /healthz HTTP/1.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n"
        )
        assert status == 400 and b"upgrades" in answer

    run(scenario)


def test_a_slow_or_short_request_gets_408_and_the_connection_closes() -> None:
    async def scenario(app: Starlette, port: int) -> None:
        # Content-Length larger than the body sent, then silence: 408 once it has stalled
        # BODY_STALL_S, not after the whole body's 30 s
        began = asyncio.get_running_loop().time()
        status, answer = await exchange(port, PREDICT + b'Content-Length: 100\r\n\r\n{"inst')
        waited = asyncio.get_running_loop().time() - began
        assert status == 408 and b"stalled: no bytes for 3 s" in answer
        assert BODY_STALL_S <= waited < BODY_STALL_S + 1.0
        # a head that never ends
        status, answer = await exchange(port, b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        assert status == 408 and b"head not received" in answer
        # a connection that never sends anything is closed without an answer
        status, answer = await exchange(port, b"")
        assert (status, answer) == (0, b"")

    run(scenario)


def test_a_body_that_trickles_in_is_read_to_its_end() -> None:
    """The stall timer restarts at every piece of the body: a slow upload is not a stalled one."""

    async def scenario(app: Starlette, port: int) -> None:
        body = b'{"instances": [1, 2]}'
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(PREDICT + b"Content-Length: %d\r\n\r\n" % len(body))
        for i in range(0, len(body), 4):  # 6 pieces, 2 s apart: 10 s in all
            await asyncio.sleep(2.0 if i else 0.0)
            writer.write(body[i : i + 4])
        answer = await asyncio.wait_for(reader.read(1 << 20), 60)
        writer.close()
        assert answer.startswith(b"HTTP/1.1 200"), answer

    run(scenario)


def test_a_60000_instance_body_is_refused_before_it_is_parsed() -> None:
    """The function's model takes 1,024 instances of at most max_instance_bytes each: a body
    declared larger is a 413 naming that limit as soon as its head is read (nothing of it is
    sent here, so nothing could have been parsed), and one that grows past it while it
    streams (chunked, no length declared) is refused before it ends."""
    from functions.digits.model import DigitsClassifier

    limit = DigitsClassifier.max_instances * (DigitsClassifier.max_instance_bytes or 0)

    async def scenario(app: Starlette, port: int) -> None:
        status, answer = await exchange(port, PREDICT + b"Content-Length: 15000000\r\n\r\n")
        assert status == 413, answer
        assert b"1024 instances of at most" in answer and b"%d bytes" % limit in answer
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(PREDICT + b"Transfer-Encoding: chunked\r\n\r\n")
        piece = b"[" + b"0.5," * 16_000 + b"0.5],"
        for _ in range(limit // len(piece) + 2):  # past the limit, the body never finished
            writer.write(b"%x\r\n%s\r\n" % (len(piece), piece))
        answer = await asyncio.wait_for(reader.read(1 << 20), 60)
        writer.close()
        assert answer.startswith(b"HTTP/1.1 413") and b"instances of at most" in answer

    run(scenario)


def test_a_2000_instance_body_among_good_requests_refuses_none_of_the_good() -> None:
    """Over the model's instance count (under its byte bound): a 400 naming the limit right
    after the parse, before it joins the queue; the good requests beside it are all served."""

    async def scenario(app: Starlette, port: int) -> None:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", trust_env=False) as c:
            url = "/v1/models/echo:predict"
            big = c.post(url, json={"instances": [1] * 2000})
            good = [c.post(url, json={"instances": [i]}) for i in range(15)]
            answers = await asyncio.gather(big, *good)
        assert answers[0].status_code == 400
        assert "2000 instances exceed function echo's limit of 1024" in answers[0].json()["error"]
        assert [r.status_code for r in answers[1:]] == [200] * 15

    run(scenario)


def test_an_slo_below_the_bare_latency_is_a_400() -> None:
    """X-SLO-Ms that not even one instance alone could meet is refused with 400 (not queued to
    miss, nor a 503 for a deadline passed); a reachable one is served."""

    async def scenario(app: Starlette, port: int) -> None:
        bare = app.state.adapter.dispatchers["echo"].controller.reader.estimate_ms(1)
        assert bare > 0.0
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", trust_env=False) as c:
            url, body = "/v1/models/echo:predict", {"instances": [1]}
            for slo in ("1e-300", f"{0.5 * bare:g}"):
                r = await c.post(url, json=body, headers={"X-SLO-Ms": slo})
                assert r.status_code == 400 and "bare latency" in r.json()["error"], r.text
            r = await c.post(url, json=body, headers={"X-SLO-Ms": f"{bare + 200:g}"})
            assert r.status_code == 200

    run(scenario)


def test_deeply_nested_json_is_a_400_with_a_reason() -> None:
    async def scenario(app: Starlette, port: int) -> None:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", trust_env=False) as c:
            deep = "[" * 900 + "]" * 900
            r = await c.post("/v1/models/echo:predict", content=f'{{"instances": [{deep}]}}')
            assert r.status_code == 400 and "deeper than" in r.json()["error"]
            r = await c.post("/v1/models/echo:predict", content='{"instances": [1e999999]}')
            assert r.status_code in (200, 400)  # a number orjson reads as inf, or refuses
            big = '{"instances": [' + "9" * 400 + "]}"
            r = await c.post("/v1/models/echo:predict", content=big)
            assert r.status_code == 400 and "not JSON" in r.json()["error"]
            ok = await c.post("/v1/models/echo:predict", json={"instances": [[[[1]]]]})
            assert ok.status_code == 200

    run(scenario)


def test_while_draining_new_requests_hear_503_with_retry_after_and_in_flight_finish() -> None:
    clock = VirtualClock()

    async def slow(request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(2.0)
        return echo(request)

    async def main() -> None:
        app = create_app(config(), view=FakeView(1), upstream=HandlerUpstream(slow),
                         clock=clock)  # fmt: skip
        stop = asyncio.Event()
        bound: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        server = asyncio.create_task(serve(app, "127.0.0.1", 0, ready=bound.set_result, stop=stop))
        port = await asyncio.wait_for(bound, 10)
        body = json.dumps({"instances": [1]}).encode()
        request = PREDICT + b"Content-Length: %d\r\n\r\n" % len(body) + body
        in_flight = asyncio.create_task(exchange(port, request))
        await asyncio.sleep(0.1)  # its batch is upstream now
        stop.set()
        await asyncio.sleep(0.1)
        status, answer = await exchange(port, request)  # a new connection, during the drain
        assert status == 503
        assert b"retry-after: 5" in answer.lower() and b"connection: close" in answer.lower()
        assert (await in_flight)[0] == 200
        await asyncio.wait_for(server, 30)

    clock.run(main())


class _Late:
    """A loop that runs late: what the adapter's lag monitor says under a flood."""

    def __init__(self, lag_s: float) -> None:
        self.value = lag_s

    def lag_s(self) -> float:
        return self.value


def test_a_late_loop_refuses_new_predicts_unparsed_but_still_answers_status() -> None:
    async def scenario(app: Starlette, port: int) -> None:
        late = _Late(1.0)
        app.state.adapter.lag = late
        body = json.dumps({"instances": [1]}).encode()
        request = PREDICT + b"Content-Length: %d\r\n\r\n" % len(body) + body
        # one whole request: refused unparsed, and the connection stays at a request boundary
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(request)
        answer = await asyncio.wait_for(reader.read(1 << 20), 120)
        assert answer.startswith(b"HTTP/1.1 503") and b"retry-after: 1" in answer
        assert b"overloaded" in answer and b"connection: close" not in answer
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")  # the same connection
        assert (await asyncio.wait_for(reader.read(1 << 20), 120)).startswith(b"HTTP/1.1 200")
        writer.close()
        # a request whose body has not all come: its end is unknown, so the connection closes
        status, answer = await exchange(port, request[:-3])
        assert status == 503 and b"retry-after: 1" in answer and b"connection: close" in answer
        status, answer = await exchange(port, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        assert status == 200  # status routes are never shed
        late.value = 0.0
        assert (await exchange(port, request))[0] == 200  # on time again: served

    run(scenario)


def test_the_accept_queue_wait_is_read_off_the_listening_socket() -> None:
    import socket

    from adapter.serving.http_limits import AcceptQueue

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    port = listener.getsockname()[1]
    waiting = [socket.create_connection(("127.0.0.1", port)) for _ in range(8)]
    try:
        queue = AcceptQueue([listener], every_s=0.01)
        assert queue.wait_s(0.0) == 0.0  # the first reading only starts the clock
        queue.accepted = 10  # 10 accepted in the next 0.1 s while they waited: 100 a second
        # eight waiting at 100 accepted a second: 80 ms in the kernel's queue
        assert abs(queue.wait_s(0.1) - 0.08) < 1e-9
        assert AcceptQueue().wait_s(5.0) == 0.0  # no socket: nothing to say
    finally:
        for conn in waiting:
            conn.close()
        listener.close()


def test_a_refusal_answers_the_next_requests_unparsed_while_it_holds() -> None:
    from tests.test_adapter import slow

    async def scenario(app: Starlette, port: int) -> None:
        door = app.state.adapter.dispatchers["echo"].door
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", trust_env=False) as c:

            def predict(i: int) -> Any:
                return c.post("/v1/models/echo:predict", json={"instances": [i]})

            assert (await predict(0)).status_code == 200  # teaches the model 300 ms a batch
            ahead = [asyncio.ensure_future(predict(i)) for i in range(2)]  # one runs, one waits
            await asyncio.sleep(0.01)
            # the batch in flight, the one waiting and its own: 900 ms against a 700 ms SLO
            refused = await predict(9)
            assert refused.status_code == 429 and door.refused == 1
            # while it holds, the next is answered the same without being parsed: a body that
            # is not JSON would otherwise be a 400
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            junk = b"not json"
            writer.write(PREDICT + b"Content-Length: %d\r\n\r\n" % len(junk) + junk)
            answer = await asyncio.wait_for(reader.read(1 << 20), 120)
            assert answer.startswith(b"HTTP/1.1 429") and b"retry-after: " in answer
            assert refused.json()["error"].encode() in answer and door.refused == 2
            writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")  # still open
            assert (await asyncio.wait_for(reader.read(1 << 20), 120)).startswith(b"HTTP/1.1 200")
            writer.close()
            assert (await c.get("/v1/models/echo")).status_code == 200  # only predicts
            await asyncio.sleep(0.05)  # past the hold: the rule is asked again
            assert door.held(app.state.adapter.clock.now()) is None
            assert [r.status_code for r in await asyncio.gather(*ahead)] == [200] * 2
            assert (await predict(10)).status_code == 200  # the queue drained: admitted

    run(scenario, config(function={"late": "predict", "max_batch": 1, "slo_ms": 700},
                         aimd={"initial": 1}), handler=slow)  # fmt: skip


def test_one_connection_waiting_at_light_load_is_not_read_as_a_long_wait() -> None:
    from adapter.serving.http_limits import AcceptQueue

    # keep-alive clients: a new connection every few seconds; one is caught waiting. The rate
    # over idle time (one in 3 s) would make that a 3 s wait and shed it: no wait is known
    queue = AcceptQueue()
    queue.observe(0.0, 0)
    queue.accepted = 1
    assert queue.observe(3.0, 1) == 0.0
    # connections waited at the last reading: the accepts since are the adapter's pace
    queue.accepted = 201  # 200 in 0.1 s while they waited: 2000 a second
    assert abs(queue.observe(3.1, 40) - 40 / 2000) < 1e-9
    # the pace is kept for a while; an empty queue waits nothing
    queue.accepted = 202
    assert queue.observe(3.5, 0) == 0.0
    assert abs(queue.observe(3.6, 4) - 4 / 2000) < 1e-9


def test_a_pace_measured_in_a_flood_is_forgotten_once_it_is_old() -> None:
    from adapter.serving.http_limits import AcceptQueue

    # in a flood the saturated loop accepted 100 a second: 132 waiting read as 1.3 s
    queue = AcceptQueue()
    queue.observe(0.0, 132)
    queue.accepted = 10
    assert abs(queue.observe(0.1, 132) - 132 / 100) < 1e-9
    # the flood has passed; seconds later a healthy burst leaves 3 waiting at one reading: the
    # old pace would call that 30 ms and shed (half a 50 ms SLO is 25 ms); it is stale: no wait
    assert queue.observe(5.0, 3) == 0.0
    # the loop's pace now, measured afresh while they wait: 3 accepted in 10 ms
    queue.accepted = 13
    assert abs(queue.observe(5.01, 3) - 3 / 300) < 1e-9
