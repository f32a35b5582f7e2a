"""The adapter's own logic, in process, with fake upstreams (httpx.MockTransport).

Real function processes are in tests/test_adapter_live.py; here the upstream is a function of the
request so each failure mode can be produced on demand.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
from starlette.testclient import TestClient

from adapter.serving.app import create_app
from core.config import Config, parse_config
from knative.local.events import ReplicaCounts


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
    handler: Callable[[httpx.Request], httpx.Response], cfg: Config | None = None, **kw: Any
) -> TestClient:
    app = create_app(
        cfg or config(), view=FakeView(kw.pop("ready", 1)), transport=httpx.MockTransport(handler)
    )
    return TestClient(app, **kw)


def many(c: TestClient, bodies: list[Any], headers: dict[str, str] | None = None) -> list[Any]:
    with ThreadPoolExecutor(len(bodies)) as pool:
        return list(
            pool.map(lambda b: c.post("/v1/models/echo:predict", json=b, headers=headers), bodies)
        )


def test_each_member_gets_its_own_share_of_a_batch() -> None:
    with client(echo) as c:
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


def test_a_crash_mid_batch_answers_every_member_with_an_error() -> None:
    def dies(request: httpx.Request) -> httpx.Response:
        raise httpx.RemoteProtocolError("server disconnected without sending a response")

    with client(dies) as c:
        responses = many(c, [{"instances": [n]} for n in range(8)])
    assert [r.status_code for r in responses] == [502] * 8
    assert all("disconnected" in r.json()["error"] for r in responses)


def test_late_requests_are_pruned_when_the_function_says_so() -> None:
    async def slow(request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(0.3)
        return echo(request)

    cfg = config(function={"late": "prune", "max_batch": 1}, aimd={"initial": 1})
    app = create_app(cfg, view=FakeView(1), transport=httpx.MockTransport(slow))
    with TestClient(app) as c, ThreadPoolExecutor(2) as pool:
        # the first request holds the only slot for 300 ms; the second, due in 50 ms, expires
        first = pool.submit(c.post, "/v1/models/echo:predict", json={"instances": [1]})
        while app.state.adapter.dispatchers["echo"].inflight == 0:
            time.sleep(0.001)
        second = c.post("/v1/models/echo:predict", json={"instances": [2]},
                        headers={"x-slo-ms": "50"})  # fmt: skip
        assert first.result().status_code == 200
    assert second.status_code == 503
    assert "deadline passed" in second.json()["error"]


def test_a_request_predicted_to_finish_late_is_refused_at_admission() -> None:
    # Swayam's pruning: batches of one take ~300 ms (the model learns it from the first batch);
    # with one slot busy and requests queued ahead, a 200 ms request cannot make it
    async def slow(request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(0.3)
        return echo(request)

    cfg = config(function={"late": "predict", "max_batch": 1, "slo_ms": 5000},
                 aimd={"initial": 1})  # fmt: skip
    app = create_app(cfg, view=FakeView(1), transport=httpx.MockTransport(slow))
    with TestClient(app) as c, ThreadPoolExecutor(4) as pool:
        c.post("/v1/models/echo:predict", json={"instances": [0]})  # teaches the model 300 ms
        ahead = [pool.submit(c.post, "/v1/models/echo:predict", json={"instances": [i]})
                 for i in range(3)]  # fmt: skip
        give_up = time.monotonic() + 10
        while len(app.state.adapter.dispatchers["echo"].queue) < 2:
            assert time.monotonic() < give_up, "the requests ahead never queued"
            time.sleep(0.001)
        # two batches of ~300 ms wait ahead of it, plus its own: it cannot finish within 400 ms
        refused = c.post("/v1/models/echo:predict", json={"instances": [9]},
                         headers={"x-slo-ms": "400"})  # fmt: skip
        roomy = pool.submit(c.post, "/v1/models/echo:predict", json={"instances": [8]})
        assert all(f.result().status_code == 200 for f in ahead)
        assert roomy.result().status_code == 200  # its 5 s SLO leaves room: admitted
    assert refused.status_code == 503
    assert "prunes predicted-late requests" in refused.json()["error"]


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
    assert {r.status_code for r in responses} <= {200, 502}
    for n, r in enumerate(responses):
        if r.status_code == 200:
            assert r.json()["predictions"] == [{"echo": n}]
        else:
            assert r.json()["error"]
    answered = sum(
        float(line.rsplit(" ", 1)[1])
        for line in metrics.splitlines()
        if line.startswith("slackwise_requests_total{")
    )
    assert answered == 60


def test_deadline_order_serves_the_tightest_deadline_first() -> None:
    order: list[int] = []

    def record(request: httpx.Request) -> httpx.Response:
        order.extend(json.loads(request.content)["instances"])
        return echo(request)

    async def scenario() -> None:
        app = create_app(
            config(aimd={"initial": 1}, function={"max_batch": 1}),
            view=FakeView(1),
            transport=httpx.MockTransport(record),
        )
        async with app.router.lifespan_context(app):
            dispatcher = app.state.adapter.dispatchers["echo"]
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://a") as c:
                dispatcher.inflight = 1  # hold the only slot while the queue fills
                sends = [
                    asyncio.create_task(
                        c.post("/v1/models/echo:predict", json={"instances": [slo]},
                               headers={"x-slo-ms": str(slo)})
                    )
                    for slo in (400, 100, 300, 200)
                ]  # fmt: skip
                while len(dispatcher.queue) < 4:
                    await asyncio.sleep(0.005)
                dispatcher.inflight = 0
                dispatcher._wake.set()
                await asyncio.gather(*sends)

    asyncio.run(scenario())
    assert order == [100, 200, 300, 400]


def test_a_client_that_disconnects_leaves_the_queue() -> None:
    seen: list[list[int]] = []
    release = asyncio.Event()

    async def held(request: httpx.Request) -> httpx.Response:
        seen.append(json.loads(request.content)["instances"])
        await release.wait()
        return echo(request)

    async def scenario() -> None:
        from knative.local.gateway import serve_in_loop

        cfg = config(function={"max_batch": 4})
        app = create_app(cfg, view=FakeView(1), transport=httpx.MockTransport(held))
        server, task, port = await serve_in_loop(app, "127.0.0.1", 0)
        url = f"http://127.0.0.1:{port}/v1/models/echo:predict"
        dispatcher = app.state.adapter.dispatchers["echo"]
        try:
            async with httpx.AsyncClient(trust_env=False) as c:
                first = asyncio.create_task(c.post(url, json={"instances": [1]}, timeout=10))
                while not seen:  # the only slot is now busy
                    await asyncio.sleep(0.005)
                with pytest.raises(httpx.ReadTimeout):
                    await c.post(url, json={"instances": [2]}, timeout=0.3)
                for _ in range(200):  # the adapter notices the disconnect
                    if dispatcher.queue.items and dispatcher.queue.items[0].cancelled:
                        break
                    await asyncio.sleep(0.005)
                release.set()
                assert (await first).status_code == 200
                third = await c.post(url, json={"instances": [3]}, timeout=10)
                assert third.status_code == 200
        finally:
            server.should_exit = True
            await task
        assert seen == [[1], [3]]  # the abandoned request never reached the function

    asyncio.run(scenario())
