"""The Open Inference Protocol (V2) at the adapter's front: ``POST /v2/models/{fn}/infer`` is
queued, batched and answered like a V1 predict, with V2 bodies both ways; the V2 health and
metadata routes answer; bad V2 bodies get 400 with a reason."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from adapter.serving.predict_endpoint import PredictEndpoint, Target
from tests.test_adapter import client, config

SEEN: list[int] = []


def doubler(request: httpx.Request) -> httpx.Response:
    """The function upstream (V1, as the platform's replicas speak): each row doubled."""
    instances = json.loads(request.content)["instances"]
    SEEN.append(len(instances))
    return httpx.Response(
        200,
        json={"predictions": [[2 * x for x in row] for row in instances]},
        headers={"x-compute-ms": "1.0", "x-cold-start": "0"},
    )


def infer(rows: list[list[float]], request_id: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "inputs": [{"name": "input-0", "shape": [len(rows), len(rows[0])], "datatype": "FP32",
                    "data": [x for row in rows for x in row]}]
    }  # fmt: skip
    if request_id is not None:
        body["id"] = request_id
    return body


def test_the_paths_it_takes_and_leaves() -> None:
    of = PredictEndpoint.function_of
    assert of("POST", "/v2/models/echo/infer") == Target("echo", v2=True)
    assert of("POST", "/v2/models/echo/versions/3/infer") == Target("echo", v2=True)
    assert of("POST", "/v1/models/echo:predict") == Target("echo")
    for path in ("/v2/models//infer", "/v2/models/a/b/infer", "/v2/models/echo/ready"):
        assert of("POST", path) is None
    assert of("GET", "/v2/models/echo/infer") is None


def test_a_v2_infer_is_batched_and_answered_as_a_v2_tensor_with_its_id() -> None:
    SEEN.clear()
    with client(doubler) as c:
        one = c.post("/v2/models/echo/infer", json=infer([[1.0, 2.0], [3.0, 4.0]], "req-7"))
        assert one.status_code == 200, one.text
        out = one.json()
        assert out["model_name"] == "echo" and out["id"] == "req-7"
        (tensor,) = out["outputs"]
        assert tensor["shape"] == [2, 2] and tensor["data"] == [2.0, 4.0, 6.0, 8.0]
        assert one.headers["x-batch-size"] and "queue;dur=" in one.headers["server-timing"]

        # many at once share batches with each other and with V1 clients; each gets its rows
        def call(i: int) -> httpx.Response:
            if i % 2:
                return c.post("/v1/models/echo:predict", json={"instances": [[float(i), 1.0]]})
            return c.post("/v2/models/echo/versions/1/infer", json=infer([[float(i), 1.0]]))

        with ThreadPoolExecutor(16) as pool:
            answers = list(pool.map(call, range(32)))
    for i, a in enumerate(answers):
        assert a.status_code == 200, a.text
        if i % 2:
            assert a.json() == {"predictions": [[2.0 * i, 2.0]]}
        else:
            assert "id" not in a.json()
            assert a.json()["outputs"][0]["data"] == [2.0 * i, 2.0]
    assert sum(SEEN) == 2 + 32 and max(SEEN) > 1  # every row went up once; some in company


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        (b"", "empty body"),
        (b"{", "not JSON"),
        (b'{"instances": [1]}', "'inputs' list"),
        (b'{"inputs": [{"shape": [2], "datatype": "FP32", "data": [1]}]}', "1 values for shape"),
        (b'{"inputs": [{"shape": [0], "datatype": "FP32", "data": []}]}', "no instance"),
        (b'{"id": 5, "inputs": [{"shape": [1], "data": [1]}]}', "id must be a string"),
        (b'{"inputs": [{"shape": [1], "data": ' + b"[" * 40 + b"1" + b"]" * 40 + b"}]}", "deeper"),
    ],
)
def test_bad_v2_bodies_get_400_with_a_reason(body: bytes, needle: str) -> None:
    with client(doubler) as c:
        r = c.post("/v2/models/echo/infer", content=body)
    assert r.status_code == 400 and needle in r.json()["error"], r.text


def test_v2_health_server_and_model_metadata() -> None:
    with client(doubler, config()) as c:
        assert c.get("/v2/health/live").json() == {"live": True}
        assert c.get("/v2/health/ready").status_code == 200
        server = c.get("/v2").json()
        assert server["name"] == "slackwise" and server["version"]
        meta = c.get("/v2/models/echo").json()
        assert meta["name"] == "echo" and meta["platform"] == "slackwise/digits"
        (tensor,) = meta["inputs"]  # digits take 8x8 grey images as 64 numbers a row
        assert tensor["datatype"] == "FP32" and tensor["shape"][0] == -1
        assert c.get("/v2/models/echo/ready").json() == {"name": "echo", "ready": True}
        missing = c.get("/v2/models/nope")
        assert missing.status_code == 404 and "nope" in missing.json()["error"]
        assert c.post("/v2/models/nope/infer", json=infer([[1.0]])).status_code == 404


def test_v2_through_the_adapters_own_server() -> None:
    """``slackwise serve``'s server routes V2 infers from its callbacks, like V1 predicts."""
    from tests.test_http_server import run

    async def scenario(app: Any, port: int) -> None:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", trust_env=False) as c:
            r = await c.post("/v2/models/echo/infer", json=infer([[1.0, 5.0]], "x"))
            assert r.status_code == 200, r.text
            assert r.json()["id"] == "x" and r.json()["outputs"][0]["data"] == [2.0, 10.0]
            bad = await c.post("/v2/models/echo/infer", content=b'{"inputs": []}')
            assert bad.status_code == 400 and "inputs" in bad.json()["error"]
            assert (await c.get("/v2/models/echo/ready")).json()["ready"] is True

    run(scenario, handler=doubler)
