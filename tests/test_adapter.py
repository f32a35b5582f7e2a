"""The adapter's own logic, in process, with fake upstreams (httpx.MockTransport).

Real function processes are in tests/test_adapter_live.py; here the upstream is a function of the
request so each failure mode can be produced on demand.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
from starlette.testclient import TestClient

from adapter.serving.app import create_app
from knative.local.events import ReplicaCounts
from slackwise_config import Config, parse_config
from slackwise_core.clock import VirtualClock
from tests.upstreams import HandlerUpstream


class FakeView:
    """A platform with a fixed number of ready replicas."""

    def __init__(self, ready: int = 1) -> None:
        self.ready = ready

    def url(self, function: str) -> str:
        return "http://upstream.test"

    def replicas(self, function: str) -> ReplicaCounts:
        return ReplicaCounts(self.ready, 0, 0, self.ready, 0)

    def request_headers(self, function: str) -> dict[str, str]:
        return {"host": f"{function}.default.example.com"}


def config(**adapter: Any) -> Config:
    return parse_config(
        {
            "functions": {
                "echo": {"model": "digits", "slo_ms": 500, "max_batch": 16,
                         "container_concurrency": 1, **adapter.pop("function", {})},
            },
            "adapter": {"aimd": {"initial": 16}, **adapter},
        }
    )  # fmt: skip


def echo(request: httpx.Request) -> httpx.Response:
    assert request.headers["host"] == "echo.default.example.com"  # the view's routing header
    instances = json.loads(request.content)["instances"]
    return httpx.Response(
        200,
        json={"predictions": [{"echo": i} for i in instances]},
        headers={"x-compute-ms": "1.5", "x-cold-start": "0"},
    )


def client(
    handler: Callable[[httpx.Request], httpx.Response | Awaitable[httpx.Response]],
    cfg: Config | None = None,
    **kw: Any,
) -> TestClient:
    app = create_app(
        cfg or config(),
        view=FakeView(kw.pop("ready", 1)),
        upstream=HandlerUpstream(handler),
    )
    return TestClient(app, **kw)


def many(c: TestClient, bodies: list[Any], headers: dict[str, str] | None = None) -> list[Any]:
    with ThreadPoolExecutor(len(bodies)) as pool:
        return list(
            pool.map(lambda b: c.post("/v1/models/echo:predict", json=b, headers=headers), bodies)
        )


async def hold_first_batch(
    holder: dict[str, Any], sizes: list[int], total: int, per_request: int = 1
) -> None:
    """In the first upstream call: wait (on the adapter's loop) until all ``total`` requests are in
    the adapter, dispatched (``sizes``: instances per upstream call, ``per_request`` each) or
    queued, so the next batch is made of them on any machine, however busy; no bet on wall-clock
    time. Bounded (10 s) against a hang."""
    queue = holder["app"].state.adapter.dispatchers["echo"].queue
    for _ in range(2000):
        if sum(sizes) // per_request + len(queue) >= total:
            return
        await asyncio.sleep(0.005)


def test_each_member_gets_its_own_share_of_a_batch() -> None:
    sizes: list[int] = []
    holder: dict[str, Any] = {}

    async def gated(request: httpx.Request) -> httpx.Response:
        sizes.append(len(json.loads(request.content)["instances"]))
        if len(sizes) == 1:
            await hold_first_batch(holder, sizes, 24, per_request=2)
        return echo(request)

    with client(gated) as c:
        holder["app"] = c.app
        bodies = [{"instances": [i, i + 1000]} for i in range(24)]
        responses = many(c, bodies)
    for i, r in enumerate(responses):
        assert r.status_code == 200
        assert r.json()["predictions"] == [{"echo": i}, {"echo": i + 1000}]
        timing = r.headers["server-timing"]
        assert "queue;dur=" in timing and "compute;dur=1.50" in timing and "total;dur=" in timing
        assert int(r.headers["x-batch-size"]) <= 16  # max_batch, in instances
    assert max(int(r.headers["x-batch-size"]) for r in responses) > 2


@pytest.mark.parametrize(
    ("body", "status", "needle"),
    [
        (b"not json", 400, "not JSON"),
        (b'{"inputs": [1]}', 400, "'instances'"),
        (b'{"instances": []}', 400, "empty"),
        (b'{"instances": 5}', 400, "must be a list"),
        (b"", 400, "empty body"),
    ],
)
def test_bad_requests_get_400_with_a_reason(body: bytes, status: int, needle: str) -> None:
    with client(echo) as c:
        r = c.post("/v1/models/echo:predict", content=body)
    assert r.status_code == status
    assert needle in r.json()["error"]


def test_bad_headers_unknown_functions_and_big_bodies() -> None:
    with client(echo, config(max_body_bytes=1000)) as c:
        bad_slo = c.post("/v1/models/echo:predict", json={"instances": [1]},
                         headers={"x-slo-ms": "-3"})  # fmt: skip
        assert bad_slo.status_code == 400 and "X-SLO-Ms" in bad_slo.json()["error"]
        missing = c.post("/v1/models/nope:predict", json={"instances": [1]})
        assert missing.status_code == 404 and "nope" in missing.json()["error"]
        big = c.post("/v1/models/echo:predict", json={"instances": ["x" * 2000]})
        assert big.status_code == 413 and "1000" in big.json()["error"]
        assert c.get("/v1/models/echo").json()["slo_ms"] == 500.0
        assert c.get("/healthz").json()["ok"] is True


def test_upstream_500_fails_only_that_batch_with_a_reason() -> None:
    calls = {"n": 0}

    def flaky(request: httpx.Request) -> httpx.Response:
        calls["n"] += 1
        if calls["n"] == 1:
            return httpx.Response(500, json={"error": "model error: RuntimeError: boom"})
        return echo(request)

    with client(flaky) as c:
        first = c.post("/v1/models/echo:predict", json={"instances": [1]})
        second = c.post("/v1/models/echo:predict", json={"instances": [2]})
    assert first.status_code == 502
    assert "boom" in first.json()["error"] and "500" in first.json()["error"]
    assert second.status_code == 200


def test_a_refused_instance_fails_only_its_own_request() -> None:
    def picky(request: httpx.Request) -> httpx.Response:
        instances = json.loads(request.content)["instances"]
        for i, x in enumerate(instances):
            if x == "bad":
                return httpx.Response(400, json={"error": f"instances[{i}]: not a digit"})
        return echo(request)

    with client(picky, ready=1) as c:
        bodies = [{"instances": [n]} for n in range(10)] + [{"instances": [7, "bad"]}]
        responses = many(c, bodies)
    assert [r.status_code for r in responses[:10]] == [200] * 10
    assert responses[10].status_code == 400
    assert responses[10].json()["error"] == "echo: instances[1]: not a digit"


@pytest.mark.parametrize(
    ("upstream_status", "error", "answered"),
    [
        # a standard server: refuses the whole request, says nothing about which instance; the
        # batch is split until the bad one is alone
        (400, "Failed to decode the request", 400),
        # the input passed validation; the model itself raises on it, failing the whole batch
        (500, "model error: ValueError: bad pixel", 502),
    ],
)
def test_a_batch_failed_by_one_member_fails_only_that_request(
    upstream_status: int, error: str, answered: int
) -> None:
    sizes: list[int] = []
    holder: dict[str, Any] = {}

    async def upstream(request: httpx.Request) -> httpx.Response:
        instances = json.loads(request.content)["instances"]
        sizes.append(len(instances))
        if len(sizes) == 1:  # the first batch is held until all thirteen are in the adapter
            await hold_first_batch(holder, sizes, 13)
        if "bad" in instances:
            return httpx.Response(upstream_status, json={"error": error})
        return echo(request)

    with client(upstream, ready=1) as c:
        holder["app"] = c.app
        bodies = [{"instances": [n]} for n in range(12)] + [{"instances": ["bad"]}]
        responses = many(c, bodies)
    assert [r.status_code for r in responses[:12]] == [200] * 12
    assert [r.json()["predictions"] for r in responses[:12]] == [[{"echo": n}] for n in range(12)]
    assert responses[12].status_code == answered
    assert error.split(": ")[-1] in responses[12].json()["error"]
    assert max(sizes) > 1  # it was batched with the others, and they were answered


def test_a_503_on_the_way_in_is_retried_within_the_deadline() -> None:
    calls = {"n": 0}

    def activator(request: httpx.Request) -> httpx.Response:
        calls["n"] += 1
        if calls["n"] <= 2:  # the activator or queue-proxy had no replica for it yet
            return httpx.Response(503, text="no healthy upstream")
        return echo(request)

    with client(activator) as c:
        r = c.post("/v1/models/echo:predict", json={"instances": [1]})
    assert r.status_code == 200 and r.json()["predictions"] == [{"echo": 1}]
    assert calls["n"] == 3

    def down(request: httpx.Request) -> httpx.Response:
        return httpx.Response(502, text="bad gateway")

    with client(down) as c:
        r = c.post("/v1/models/echo:predict", json={"instances": [1]})
    assert r.status_code == 502 and "502" in r.json()["error"]  # retries end, one answer


def test_a_crash_mid_batch_answers_every_member_with_an_error() -> None:
    def dies(request: httpx.Request) -> httpx.Response:
        raise httpx.RemoteProtocolError("server disconnected without sending a response")

    with client(dies) as c:
        responses = many(c, [{"instances": [n]} for n in range(8)])
    assert [r.status_code for r in responses] == [502] * 8
    assert all("disconnected" in r.json()["error"] for r in responses)


def on_virtual_time(
    cfg: Config,
    handler: Callable[[httpx.Request], Awaitable[httpx.Response]],
    scenario: Callable[[Any, httpx.AsyncClient, VirtualClock], Awaitable[None]],
) -> None:
    """Run ``scenario(app, client, clock)`` against the adapter in process, on virtual time: the
    upstream's sleeps, the dispatch timeouts and the busy polls all cost no wall time."""
    clock = VirtualClock()

    async def main() -> None:
        app = create_app(cfg, view=FakeView(1), upstream=HandlerUpstream(handler), clock=clock)
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://a") as c:
                await scenario(app, c, clock)

    clock.run(main())


def predict(
    c: httpx.AsyncClient, instance: Any, slo_ms: float | None = None
) -> asyncio.Task[httpx.Response]:
    headers = {} if slo_ms is None else {"x-slo-ms": str(slo_ms)}
    return asyncio.ensure_future(
        c.post("/v1/models/echo:predict", json={"instances": [instance]}, headers=headers)
    )


async def slow(request: httpx.Request) -> httpx.Response:
    """Every batch takes 300 ms (virtual)."""
    await asyncio.sleep(0.3)
    return echo(request)


def test_late_requests_are_pruned_when_the_function_says_so() -> None:
    async def scenario(app: Any, c: httpx.AsyncClient, clock: VirtualClock) -> None:
        # the first request holds the only slot for 300 ms; the second, due in 50 ms, expires
        first = predict(c, 1)
        await asyncio.sleep(0.01)
        assert app.state.adapter.dispatchers["echo"].inflight == 1
        second = await predict(c, 2, slo_ms=50)
        assert second.status_code == 503 and "deadline passed" in second.json()["error"]
        assert second.headers["retry-after"] == "1"
        assert clock.now() < 0.3  # answered when it expired, not when the slot freed
        assert (await first).status_code == 200

    cfg = config(function={"late": "prune", "max_batch": 1}, aimd={"initial": 1})
    on_virtual_time(cfg, slow, scenario)


def test_a_request_predicted_to_finish_late_is_refused_at_admission() -> None:
    # Swayam's pruning: batches of one take 300 ms (the model learns it from the first batch);
    # with one slot busy and requests queued ahead, a 400 ms request cannot make it
    async def scenario(app: Any, c: httpx.AsyncClient, clock: VirtualClock) -> None:
        assert (await predict(c, 0)).status_code == 200  # teaches the model 300 ms
        ahead = [predict(c, i) for i in range(3)]
        await asyncio.sleep(0.01)
        assert len(app.state.adapter.dispatchers["echo"].queue) == 2  # and one in flight
        refused = await predict(c, 9, slo_ms=400)
        assert refused.status_code == 429
        assert "refused at the door" in refused.json()["error"]
        assert int(refused.headers["retry-after"]) >= 1
        assert app.state.adapter.dispatchers["echo"].door.refused == 1
        roomy = predict(c, 8)  # its 5 s SLO leaves room: admitted
        assert [r.status_code for r in await asyncio.gather(*ahead, roomy)] == [200] * 4

    cfg = config(function={"late": "predict", "max_batch": 1, "slo_ms": 5000},
                 aimd={"initial": 1})  # fmt: skip
    on_virtual_time(cfg, slow, scenario)


def test_every_admitted_request_is_answered_exactly_once_whatever_the_upstream_does() -> None:
    rng = random.Random(7)

    def chaos(request: httpx.Request) -> httpx.Response:
        roll = rng.random()
        if roll < 0.15:
            return httpx.Response(500, json={"error": "boom"})
        if roll < 0.25:
            raise httpx.ConnectError("refused")
        if roll < 0.35:
            return httpx.Response(200, json={"predictions": []})  # malformed: wrong count
        return echo(request)

    with client(chaos, ready=3) as c:
        responses = many(c, [{"instances": [n]} for n in range(60)])
        metrics = c.get("/metrics").text
    assert len(responses) == 60
    # a 429: refused at the door, predicted late (a loaded machine makes the learnt batch times
    # long); never admitted, so answered once, by the refusal, with when to come back
    assert {r.status_code for r in responses} <= {200, 429, 502}
    for n, r in enumerate(responses):
        if r.status_code == 200:
            assert r.json()["predictions"] == [{"echo": n}]
        else:
            assert r.json()["error"]
        if r.status_code == 429:
            assert int(r.headers["retry-after"]) >= 1
    assert any(r.status_code == 200 for r in responses)

    def total(name: str) -> float:
        prefix = f"{name}{{"
        lines = metrics.splitlines()
        return sum(float(line.rsplit(" ", 1)[1]) for line in lines if line.startswith(prefix))

    admitted = total("slackwise_requests_total")  # every admitted request's one answer
    refused = total("slackwise_refused_total")
    assert admitted == sum(r.status_code != 429 for r in responses)
    assert admitted + refused == 60


def test_deadline_order_serves_the_tightest_deadline_first() -> None:
    order: list[int] = []

    async def record(request: httpx.Request) -> httpx.Response:
        order.extend(json.loads(request.content)["instances"])
        return await slow(request)

    async def scenario(app: Any, c: httpx.AsyncClient, clock: VirtualClock) -> None:
        first = predict(c, 0)  # holds the only slot for 300 ms while the queue fills
        await asyncio.sleep(0.01)
        rest = [predict(c, slo, slo_ms=slo) for slo in (4000, 1000, 3000, 2000)]
        await asyncio.sleep(0.01)
        assert len(app.state.adapter.dispatchers["echo"].queue) == 4
        assert all(r.status_code == 200 for r in await asyncio.gather(first, *rest))

    cfg = config(aimd={"initial": 1}, function={"max_batch": 1, "slo_ms": 5000})
    on_virtual_time(cfg, record, scenario)
    assert order == [0, 1000, 2000, 3000, 4000]


def test_a_client_that_disconnects_leaves_the_queue() -> None:
    seen: list[list[int]] = []

    async def held(request: httpx.Request) -> httpx.Response:
        seen.append(json.loads(request.content)["instances"])
        return await slow(request)

    clock = VirtualClock()

    async def call(app: Any, instance: int, gone: asyncio.Event | None = None) -> list[Any]:
        """One predict straight through the ASGI interface; ``gone`` set means the client
        hung up (the server's receive() then says http.disconnect)."""
        body = json.dumps({"instances": [instance]}).encode()
        scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
                 "method": "POST", "scheme": "http", "path": "/v1/models/echo:predict",
                 "raw_path": b"/v1/models/echo:predict", "query_string": b"", "root_path": "",
                 "headers": [(b"content-type", b"application/json")],
                 "client": ("127.0.0.1", 1), "server": ("a", 80)}  # fmt: skip
        messages = [{"type": "http.request", "body": body, "more_body": False}]
        sent: list[Any] = []

        async def receive() -> dict[str, Any]:
            if messages:
                return messages.pop()
            await (gone.wait() if gone is not None else asyncio.Event().wait())
            return {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        await app(scope, receive, send)
        return sent

    async def main() -> None:
        cfg = config(function={"max_batch": 4})
        app = create_app(cfg, view=FakeView(1), upstream=HandlerUpstream(held), clock=clock)
        async with app.router.lifespan_context(app):
            dispatcher = app.state.adapter.dispatchers["echo"]
            first = asyncio.ensure_future(call(app, 1))
            await asyncio.sleep(0.01)  # the only slot is now busy
            gone = asyncio.Event()
            second = asyncio.ensure_future(call(app, 2, gone))
            await asyncio.sleep(0.01)
            assert len(dispatcher.queue) == 1
            gone.set()  # the client hangs up while its request waits
            await second
            assert dispatcher.queue.items[0].cancelled or not dispatcher.queue
            assert (await first)[0]["status"] == 200
            third = await call(app, 3)
            assert third[0]["status"] == 200

    clock.run(main())
    assert seen == [[1], [3]]  # the abandoned request never reached the function
