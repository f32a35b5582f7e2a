"""ROMA's GPU side in the adapter (``adapter.gpu``): the config, and a live run where the adapter
shares one GPU executable (a real process holding the functions' model; on the CPU here, the
same path as on a GPU) between two functions and their CPU replicas."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from sklearn.datasets import load_digits

from adapter.serving.app import create_app
from adapter.serving.platform_view import LocalView
from functions.registry import create_model
from functions.server_process import ServerProcess
from slackwise_config import ConfigError, GpuSettings, parse_config


def _raw(gpu: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "functions": {
            "a": {"model": "digits", "slo_ms": 100},
            "f": {"model": "digits", "slo_ms": 100, "upstream": {"url": "http://127.0.0.1:9"}},
        },
        "adapter": {"gpu": gpu or {}},
    }


def test_the_gpu_route_is_off_by_default_and_read_key_by_key() -> None:
    assert parse_config(_raw()).adapter.gpu == GpuSettings()
    gpu = parse_config(_raw({"url": "http://127.0.0.1:9100/", "functions": ["a"],
                             "policy": "roma"})).adapter.gpu  # fmt: skip
    assert gpu.url == "http://127.0.0.1:9100" and gpu.functions == ("a",) and gpu.policy == "roma"


@pytest.mark.parametrize(
    ("gpu", "says"),
    [
        ({"url": "127.0.0.1:9100", "functions": ["a"]}, r"adapter\.gpu\.url: must be an http"),
        ({"url": "http://h:1"}, r"adapter\.gpu\.functions: name the functions"),
        ({"url": "http://h:1", "functions": ["zz"]}, r"no function named 'zz'"),
        ({"url": "http://h:1", "functions": ["f"]}, r"'f' runs at a fixed endpoint"),
        (
            {"url": "http://h:1", "functions": ["a"], "policy": "best"},
            r"adapter\.gpu\.policy: must be one of roma, roma_batched, round_robin",
        ),
        ({"url": "http://h:1", "functions": ["a"], "beta": 2}, r"adapter\.gpu\.beta"),
    ],
)
def test_bad_gpu_settings_are_named(gpu: dict[str, Any], says: str) -> None:
    with pytest.raises(ConfigError, match=says):
        parse_config(_raw(gpu))


@pytest.mark.slow
def test_live_the_adapter_shares_a_gpu_executable_between_two_functions() -> None:
    digits = load_digits()
    pinned = {"autoscaling.knative.dev/min-scale": "1", "autoscaling.knative.dev/max-scale": "1"}
    with ServerProcess("digits", device="cpu") as gpu, httpx.Client(trust_env=False) as probe:
        gpu.wait_ready(probe, timeout_s=120)
        config = parse_config({
            "functions": {n: {"model": "digits", "slo_ms": 500, "max_batch": 8,
                              "annotations": pinned} for n in ("a", "b")},
            "adapter": {"max_wait_ms": 0, "gpu": {"url": gpu.base_url, "functions": ["a", "b"],
                                                  "policy": "roma_batched"}},
        })  # fmt: skip

        async def go() -> tuple[list[tuple[int, Any]], list[dict[str, Any]]]:
            from knative.local.platform import LocalPlatform

            async with LocalPlatform(config) as platform:
                for name in ("a", "b"):
                    await platform.wait_event("cold_start", name, timeout_s=120)
                app = create_app(config, view=LocalView(platform))
                transport = httpx.ASGITransport(app=app)
                async with (
                    app.router.lifespan_context(app),
                    httpx.AsyncClient(transport=transport, base_url="http://adapter") as client,
                ):

                    async def one(i: int) -> tuple[int, Any]:
                        body = {"instances": [digits.data[i].tolist()]}
                        r = await client.post(f"/v1/models/{'ab'[i % 2]}:predict", json=body)
                        return r.status_code, r.json().get("predictions")

                    codes: list[tuple[int, Any]] = []
                    for _ in range(4):  # bursts: the GPU takes first, the replicas the rest
                        codes += await asyncio.gather(*(one(i) for i in range(60)))
                        await asyncio.sleep(0.1)
                    status = [(await client.get(f"/v1/models/{n}")).json() for n in ("a", "b")]
            return codes, status

        codes, status = asyncio.run(go())
    # each request answered once with its own prediction, wherever it ran
    assert [code for code, _ in codes] == [200] * 240
    # members of a batch get their own rows: each is the label the same model (trained with
    # its fixed seed) gives that digit in this process, wherever the row was computed
    model = create_model("digits")
    model.load()
    want = model.predict([model.validate(digits.data[i].tolist()) for i in range(60)])
    got = [p[0]["label"] for _, p in codes]
    assert got == [want[j % 60]["label"] for j in range(240)]
    on_gpu = sum(s["gpu_served"] for s in status)
    assert 0 < on_gpu < 240, status  # both the GPU executable and the CPU replicas served


def _cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


@pytest.mark.gpu
@pytest.mark.models
@pytest.mark.slow
@pytest.mark.skipif(not _cuda(), reason="needs an NVIDIA GPU")
def test_live_on_a_gpu_the_route_sends_batches_to_a_cuda_executable() -> None:
    """ROMA's GPU half for real: embed on cuda beside one CPU replica; every answer is the row the
    model gives on the CPU (cosine > 0.999), and the GPU executable served some of them."""
    import numpy as np

    pinned = {"autoscaling.knative.dev/min-scale": "1", "autoscaling.knative.dev/max-scale": "1"}
    model = create_model("embed")
    texts = model.sample_instances(48)
    with ServerProcess("embed", device="cuda") as gpu, httpx.Client(trust_env=False) as probe:
        gpu.wait_ready(probe, timeout_s=180)
        config = parse_config({
            "functions": {"e": {"model": "embed", "slo_ms": 1000, "max_batch": 16,
                                "annotations": pinned}},
            "adapter": {"max_wait_ms": 0, "gpu": {"url": gpu.base_url, "functions": ["e"],
                                                  "policy": "roma_batched"}},
        })  # fmt: skip

        async def go() -> tuple[list[tuple[int, Any]], dict[str, Any]]:
            from knative.local.platform import LocalPlatform

            async with LocalPlatform(config) as platform:
                await platform.wait_event("cold_start", "e", timeout_s=180)
                app = create_app(config, view=LocalView(platform))
                transport = httpx.ASGITransport(app=app)
                async with (
                    app.router.lifespan_context(app),
                    httpx.AsyncClient(transport=transport, base_url="http://adapter") as client,
                ):

                    async def one(i: int) -> tuple[int, Any]:
                        body = {"instances": [texts[i]]}
                        r = await client.post("/v1/models/e:predict", json=body, timeout=30)
                        return r.status_code, r.json().get("predictions")

                    codes: list[tuple[int, Any]] = []
                    for _ in range(3):
                        codes += await asyncio.gather(*(one(i) for i in range(48)))
                    status = (await client.get("/v1/models/e")).json()
            return codes, status

        codes, status = asyncio.run(go())
    assert [code for code, _ in codes] == [200] * 144
    model.load()
    want = np.asarray(model.predict([model.validate(t) for t in texts]))
    got = np.asarray([p[0] for _, p in codes])
    cosines = (got * np.tile(want, (3, 1))).sum(axis=1)
    assert cosines.min() > 0.999, cosines.min()
    assert status["gpu_served"] > 0, status


def test_a_poisoned_member_of_a_gpu_batch_fails_alone() -> None:
    """ROMA's GPU route hands its batch to ``Dispatcher.send_via``: a model that raises on one
    member fails that member only; the partners are answered, and every retry of the split
    halves goes to the GPU executable again, never to the replicas."""
    import orjson

    from adapter.serving.dispatcher import Dispatcher
    from adapter.serving.metrics import AdapterMetrics
    from adapter.serving.pending import Pending
    from adapter.serving.records import RecordWriter
    from adapter.serving.wiring import latency_prior
    from slackwise_core.clock import VirtualClock
    from slackwise_core.http1 import Http1Response
    from slackwise_policies.modes import SLACKWISE
    from tests.test_adapter import FakeView, config

    class Executable:
        """An upstream that raises on the poisoned instance, failing any batch holding it."""

        def __init__(self) -> None:
            self.batches: list[list[Any]] = []

        async def post(self, function: str, body: bytes, headers: Any, timeout_s: float
                       ) -> Http1Response:  # fmt: skip
            instances = orjson.loads(body)["instances"]
            self.batches.append(instances)
            if "poison" in instances:
                return Http1Response(500, {}, b'{"error": "model error: ValueError: bad pixel"}')
            return Http1Response(200, {}, orjson.dumps({"predictions": [[i] for i in instances]}))

        async def aclose(self) -> None:
            return None

    gpu, replicas = Executable(), Executable()
    clock = VirtualClock()
    fn = config().functions["echo"]

    async def main() -> list[Any]:
        dispatcher = Dispatcher(
            function=fn, preset=SLACKWISE, aimd=SLACKWISE.aimd_for(fn.max_batch),
            model=latency_prior(fn.model), view=FakeView(1), upstream=replicas, clock=clock,
            metrics=AdapterMetrics(), records=RecordWriter(None), max_queue=100, epoch=0.0,
        )  # fmt: skip
        loop = asyncio.get_running_loop()

        def pending(i: int, x: Any) -> Pending:
            return Pending(id=f"r{i}", function="echo", instances=[x], arrival=0.0,
                           deadline=5.0, seq=i, future=loop.create_future())  # fmt: skip

        batch = [pending(i, x) for i, x in enumerate([1, 2, "poison", 4, 5, 6, 7, 8])]
        await dispatcher.send_via(batch, gpu)
        return [p.future.exception() or p.future.result() for p in batch]

    answers = clock.run(main())
    for i, answer in enumerate(answers):
        if i == 2:
            assert isinstance(answer, Exception) and "bad pixel" in str(answer)
        else:
            assert not isinstance(answer, Exception), answer
            assert answer.predictions == [[[1, 2, "poison", 4, 5, 6, 7, 8][i]]]
    assert gpu.batches[0] == [1, 2, "poison", 4, 5, 6, 7, 8]  # one batch, then split on the GPU
    assert len(gpu.batches) > 1 and replicas.batches == []


def test_when_the_gpu_executable_is_unreachable_its_batches_go_to_the_replicas() -> None:
    """Nothing fails because the GPU is gone: the batch in hand is served by the function's
    replicas, and the route leaves the GPU alone for a while (no request waits on it)."""
    from functions.server_process import free_port
    from tests.test_adapter import client, config, echo, many

    dead = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    cfg = config(gpu={"url": dead, "functions": ["echo"]}, max_wait_ms=0)
    with client(echo, cfg, ready=1) as c:
        responses = many(c, [{"instances": [n]} for n in range(24)])
        status = c.get("/v1/models/echo").json()
    assert [r.status_code for r in responses] == [200] * 24, [r.text for r in responses]
    assert [r.json()["predictions"] for r in responses] == [[{"echo": n}] for n in range(24)]
    assert status["gpu_served"] == 0  # what the route took, the replicas served


def _route_run(policy: str, waits: dict[str, list[float]], *, until: float = 1.0,
               max_batch: int = 32) -> list[tuple[str, int, float]]:  # fmt: skip
    """Two functions' queues (``waits``: each request's arrival, seconds) and the adapter's GPU
    route over a GPU executable taking 20 ms + 2 ms a request, all on the virtual clock: each
    batch the GPU took (function, size, when). The functions' replicas never run (their
    dispatchers are not started), so whatever is served is the route's doing."""
    import orjson

    from adapter.serving.dispatcher import Dispatcher
    from adapter.serving.gpu_route import GpuRoute
    from adapter.serving.metrics import AdapterMetrics
    from adapter.serving.pending import Pending
    from adapter.serving.records import RecordWriter
    from adapter.serving.wiring import latency_prior
    from slackwise_core.clock import VirtualClock
    from slackwise_core.http1 import Http1Response
    from slackwise_policies.modes import SLACKWISE
    from tests.test_adapter import FakeView

    clock = VirtualClock()
    taken: list[tuple[str, int, float]] = []

    class Gpu:
        async def post(self, function: str, body: bytes, headers: Any, timeout_s: float
                       ) -> Http1Response:  # fmt: skip
            instances = orjson.loads(body)["instances"]
            taken.append((function, len(instances), clock.now()))
            await clock.sleep(0.020 + 0.002 * len(instances))
            return Http1Response(200, {}, orjson.dumps({"predictions": instances}))

        async def aclose(self) -> None:
            return None

    cfg = parse_config({"functions": {n: {"model": "digits", "slo_ms": 100}
                                      for n in ("a", "b")}})  # fmt: skip
    metrics = AdapterMetrics()

    async def main() -> None:
        loop = asyncio.get_running_loop()
        dispatchers = {
            n: Dispatcher(
                function=cfg.functions[n],
                preset=SLACKWISE,
                aimd=SLACKWISE.aimd_for(16),
                model=latency_prior("digits"),
                view=FakeView(1),
                upstream=Gpu(),
                clock=clock,
                metrics=metrics,
                records=RecordWriter(None),
                max_queue=100,
                epoch=0.0,
            )
            for n in waits
        }
        route = GpuRoute(
            settings=GpuSettings(url="http://gpu.test", functions=tuple(waits), policy=policy,
                                 max_batch=max_batch),
            upstream=Gpu(), dispatchers=dispatchers, slos_ms=dict.fromkeys(waits, 100.0),
            clock=clock,
        )  # fmt: skip
        seq = 0
        for name, arrivals in waits.items():
            for at in arrivals:
                seq += 1
                dispatchers[name].queue.push(Pending(
                    id=f"{name}{seq}", function=name, instances=[seq], arrival=at,
                    deadline=at + 0.1, seq=seq, future=loop.create_future()))  # fmt: skip
        await clock.sleep(max(at for arrivals in waits.values() for at in arrivals))
        route.offer()
        await clock.sleep(until)
        await route.stop()

    clock.run(main())
    return taken


def test_the_gpu_route_serves_the_most_deficient_function_first() -> None:
    """ROMA's Algorithm 1 on the adapter's route: ``a``'s requests have waited 60 ms of their
    100 ms, ``b``'s 10 ms, so the free GPU takes ``a``'s, one at a time, until ``a``'s queue no
    longer stands out; round robin alternates whatever the waits."""
    waits = {"a": [0.0, 0.0, 0.0, 0.0], "b": [0.05, 0.05, 0.05, 0.05]}
    roma = _route_run("roma", waits)
    assert [(f, n) for f, n, _ in roma[:2]] == [("a", 1), ("a", 1)]
    assert sorted(f for f, _, _ in roma) == ["a"] * 4 + ["b"] * 4  # every request served once
    rr = _route_run("round_robin", waits)
    assert [f for f, _, _ in rr] == ["a", "b"] * 4


def test_roma_batched_takes_as_much_of_the_queue_as_the_heads_deadline_allows() -> None:
    """With ``roma_batched`` the GPU takes the most of the chosen queue whose batch time (the
    route's estimate: its prior, 5 ms + 0.1 ms a request, until it has measured) still lets the
    head meet its deadline: all 12 of ``a``'s at once, then ``b``'s; ``roma`` takes them one at
    a time, and ``max_batch`` caps the batch."""
    waits = {"a": [0.05] * 12, "b": [0.05]}
    assert [(f, n) for f, n, _ in _route_run("roma_batched", waits)] == [("a", 12), ("b", 1)]
    assert [n for _, n, _ in _route_run("roma", waits)] == [1] * 13
    capped = _route_run("roma_batched", waits, max_batch=5)
    assert capped[0][:2] == ("a", 5) and max(n for _, n, _ in capped) == 5
    assert sum(n for f, n, _ in capped if f == "a") == 12


def test_a_gpu_functions_latency_prior_comes_from_the_gpu_profile() -> None:
    """A CPU profile would size a GPU function's batches for a CPU (embed: 290 ms for 64 on one
    core against 19 measured on a GPU); with no GPU profile the prior is the generic one."""
    from adapter.serving.wiring import latency_prior

    cpu, gpu = latency_prior("embed"), latency_prior("embed", device="cuda:0")
    assert gpu.estimate_ms(64) < cpu.estimate_ms(64) / 5
    assert latency_prior("digits", device="cuda").estimate_ms(8) == latency_prior("").estimate_ms(8)


def test_a_curve_model_starts_from_the_shipped_profiles_medians() -> None:
    """With ``adapter.latency_model: curve`` the live model prices each batch size by the
    profile's measured median before it has measured any (qa on this CPU: 8 is cheapest per
    instance, 16 three times dearer), as the simulator's does; the line's model does not."""
    import json

    from adapter.serving.wiring import latency_prior
    from functions.profiles import packaged

    medians = json.loads(packaged("qa", "cpu").read_text())["batch_ms"]["http"]
    curve = latency_prior("qa", curve=True)
    for n in (1, 8, 16, 64):
        assert curve.estimate_ms(n) == pytest.approx(medians[str(n)]["median"])
    per_instance = [curve.estimate_ms(n) / n for n in range(1, 65)]
    assert per_instance.index(min(per_instance)) + 1 == 8
    assert latency_prior("qa").largest_measured_batch() == 0
