"""The Open Inference Protocol (V2) at the adapter's front: ``POST /v2/models/{fn}/infer`` is
queued, batched and answered like a V1 predict, with V2 bodies both ways; the V2 health and
metadata routes answer; bad V2 bodies get 400 with a reason."""

from __future__ import annotations

import json
import struct
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from adapter.serving.predict_endpoint import PredictEndpoint, Target
from functions.registry import KINDS, model_class
from functions.samples import sample_instances
from functions.v2 import tensor_shape
from slackwise_config import parse_config
from tests.test_adapter import client, config

SEEN: list[int] = []


def doubler(request: httpx.Request) -> httpx.Response:
    """The function upstream (V1, as the platform's replicas speak), answering as digits does
    (a label and its probability a row): the label is the row's first value doubled, the
    probability its second."""
    instances = json.loads(request.content)["instances"]
    SEEN.append(len(instances))
    return httpx.Response(
        200,
        json={"predictions": [{"label": int(2 * r[0]), "probability": r[1]} for r in instances]},
        headers={"x-compute-ms": "1.0", "x-cold-start": "0"},
    )


def row(first: float, second: float) -> list[float]:
    """A digits input row (64 numbers) starting ``first, second``."""
    return [first, second] + [0.0] * 62


def infer(rows: list[list[float]], request_id: str | None = None) -> dict[str, Any]:
    rows = [r if len(r) == 64 else row(*r) for r in rows]
    body: dict[str, Any] = {
        "inputs": [{"name": "input-0", "shape": [len(rows), 64], "datatype": "FP32",
                    "data": [x for r in rows for x in r]}]
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
        label, probability = out["outputs"]  # a record prediction: one tensor per field
        assert label == {"name": "label", "datatype": "INT64", "shape": [2], "data": [2, 6]}
        assert probability["datatype"] == "FP32" and probability["data"] == [2.0, 4.0]
        assert one.headers["x-batch-size"] and "queue;dur=" in one.headers["server-timing"]

        # many at once share batches with each other and with V1 clients; each gets its rows
        def call(i: int) -> httpx.Response:
            if i % 2:
                return c.post("/v1/models/echo:predict", json={"instances": [row(i, 0.5)]})
            if i % 4:  # V2 with binary tensor data in and JSON out
                raw = struct.pack("<64f", *row(i, 0.5))
                body, length = _binary({"inputs": [{**_F64, "parameters": {
                    "binary_data_size": 256}}]}, raw)  # fmt: skip
                return c.post("/v2/models/echo/infer", content=body,
                              headers={"inference-header-content-length": length})  # fmt: skip
            return c.post("/v2/models/echo/versions/1/infer", json=infer([[float(i), 0.5]]))

        with ThreadPoolExecutor(16) as pool:
            answers = list(pool.map(call, range(32)))
    for i, a in enumerate(answers):
        assert a.status_code == 200, a.text
        if i % 2:  # V1 keeps the record as JSON
            assert a.json() == {"predictions": [{"label": 2 * i, "probability": 0.5}]}
        else:
            assert "id" not in a.json()
            assert [o["data"] for o in a.json()["outputs"]] == [[2 * i], [0.5]]
    assert sum(SEEN) == 2 + 32 and max(SEEN) > 1  # every row went up once; some in company


def test_an_app_over_v2_with_its_metadata() -> None:
    """``POST /v2/models/{app}/infer`` runs the chain; its metadata is its first stage's input
    and its last stage's outputs."""
    cfg = parse_config({"functions": {"echo": {"model": "digits", "slo_ms": 500}},
                        "apps": {"classify": {"stages": ["echo"], "slo_ms": 800}}})  # fmt: skip
    with client(doubler, cfg) as c:
        meta = c.get("/v2/models/classify").json()
        assert meta["platform"] == "slackwise/app:echo"
        assert meta["inputs"][0]["shape"] == [-1, 64]
        assert [o["name"] for o in meta["outputs"]] == ["label", "probability"]
        assert c.get("/v2/models/classify/ready").json()["ready"] is True
        r = c.post("/v2/models/classify/infer", json={**infer([[4.0, 0.5], [1.0, 0.25]], "a1"),
                   "parameters": {"binary_data_output": True}})  # fmt: skip
        assert r.status_code == 200, r.text
        size = int(r.headers["inference-header-content-length"])
        assert json.loads(r.content[:size])["id"] == "a1"
        assert struct.unpack("<2q2f", r.content[size:]) == (8, 2, 0.5, 0.25)
        assert "total;dur=" in r.headers["server-timing"]
        bad = c.post("/v2/models/classify/infer", content=b'{"inputs": [{"shape": [1], '
                     b'"datatype": "BYTES", "data": ["x"]}]}')  # fmt: skip
        assert bad.status_code == 400 and "not one this model takes" in bad.json()["error"]


def _binary(header: dict[str, Any], raw: bytes, length: int | None = None) -> tuple[bytes, str]:
    head = json.dumps(header).encode()
    return head + raw, str(len(head) if length is None else length)


_F64 = {"name": "input-0", "shape": [1, 64], "datatype": "FP32"}
_BAD_BINARY = [
    (_binary({"inputs": [{**_F64, "parameters": {"binary_data_size": 256}}]}, b"\0" * 100),
     "runs past the body"),
    (_binary({"inputs": [{**_F64, "parameters": {"binary_data_size": 100}}]}, b"\0" * 100),
     "100 bytes of binary data for shape [1, 64] of FP32"),
    (_binary({"inputs": [{**_F64, "parameters": {"binary_data_size": 256}}]}, b"\0" * 256, 9999),
     "past the body"),
    (_binary({"inputs": [{**_F64, "parameters": {"binary_data_size": 256}}]}, b"\0" * 300),
     "44 bytes of binary data no input claims"),
    (_binary({"inputs": [{**_F64, "parameters": {"binary_data_size": 256}}]}, b"\0" * 256, "x"),
     "must be a number of bytes"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        (b"", "empty body"),
        (b"{", "not JSON"),
        (b"{\x00\x01", "needs the Inference-Header-Content-Length header"),
        (b'{"instances": [1]}', "'inputs' list"),
        (b'{"inputs": [{"shape": [2], "datatype": "FP32", "data": [1]}]}', "1 values for shape"),
        (b'{"inputs": [{"shape": [0], "datatype": "FP32", "data": []}]}', "no instance"),
        (b'{"id": 5, "inputs": [{"shape": [1], "data": [1]}]}', "id must be a string"),
        (b'{"inputs": [{"shape": [1], "datatype": "FP32", "data": ' + b"[" * 40 + b"1"
         + b"]" * 40 + b"}]}", "deeper"),
        (b'{"inputs": [{"shape": [1], "datatype": "FP8", "data": [1]}]}', "datatype must be one"),
        # what the model does not take: strings for a model of numbers, a row of the wrong size
        (b'{"inputs": [{"shape": [1], "datatype": "BYTES", "data": ["7"]}]}', "not one this model"),
        (b'{"inputs": [{"shape": [1, 3], "datatype": "FP32", "data": [1, 2, 3]}]}',
         "does not fit the model's [-1, 64]"),
        (json.dumps({**infer([[1.0, 0.5]]), "outputs": [{"name": "logits"}]}).encode(),
         "no output named 'logits'; the model answers label, probability"),
    ],
)  # fmt: skip
def test_bad_v2_bodies_get_400_with_a_reason(body: bytes, needle: str) -> None:
    with client(doubler) as c:
        r = c.post("/v2/models/echo/infer", content=body)
    assert r.status_code == 400 and needle in r.json()["error"], r.text


@pytest.mark.parametrize(("framed", "needle"), _BAD_BINARY)
def test_bad_binary_bodies_get_400_with_a_reason(framed: tuple[bytes, str], needle: str) -> None:
    body, length = framed
    with client(doubler) as c:
        r = c.post("/v2/models/echo/infer", content=body,
                   headers={"inference-header-content-length": length})  # fmt: skip
    assert r.status_code == 400 and needle in r.json()["error"], r.text


def test_binary_inputs_requested_outputs_and_binary_outputs() -> None:
    """The binary tensor data extension both ways, requested outputs in each form; JSON, FP16
    and binary clients share batches with V1 ones."""
    rows16 = struct.pack("<128e", *row(1.0, 0.5), *row(2.0, 0.25))  # FP16, two rows
    head = {"id": "b", "inputs": [{"name": "input-0", "shape": [2, 64], "datatype": "FP16",
                                   "parameters": {"binary_data_size": len(rows16)}}]}  # fmt: skip
    with client(doubler) as c:

        def ask(extra: dict[str, Any]) -> httpx.Response:
            body, length = _binary({**head, **extra}, rows16)
            return c.post("/v2/models/echo/infer", content=body,
                          headers={"inference-header-content-length": length})  # fmt: skip

        plain = ask({})  # binary in, JSON out: the protocol's default
        assert "inference-header-content-length" not in plain.headers
        assert [o["data"] for o in plain.json()["outputs"]] == [[2, 4], [0.5, 0.25]]
        every = ask({"parameters": {"binary_data_output": True}})  # tritonclient's default
        size = int(every.headers["inference-header-content-length"])
        assert every.headers["content-type"] == "application/octet-stream"
        outputs = json.loads(every.content[:size])["outputs"]
        assert [(o["name"], o["parameters"]["binary_data_size"]) for o in outputs] == [
            ("label", 16), ("probability", 8)]  # fmt: skip
        assert struct.unpack("<2q2f", every.content[size:]) == (2, 4, 0.5, 0.25)
        # requested outputs: only those, in the asked order, each JSON or binary as asked
        mixed = ask(
            {
                "outputs": [
                    {"name": "probability"},
                    {"name": "label", "parameters": {"binary_data": True}},
                ]
            }
        )
        size = int(mixed.headers["inference-header-content-length"])
        probability, label = json.loads(mixed.content[:size])["outputs"]
        assert probability["data"] == [0.5, 0.25] and "data" not in label
        assert struct.unpack("<2q", mixed.content[size:]) == (2, 4)
        assert json.loads(mixed.content[:size])["id"] == "b"
        only = c.post("/v2/models/echo/infer", json={**infer([[5.0, 0.5]]),
                                                      "outputs": [{"name": "label"}]})  # fmt: skip
        assert only.json()["outputs"] == [
            {"name": "label", "datatype": "INT64", "shape": [1], "data": [10]}]  # fmt: skip


def test_v2_health_server_and_model_metadata() -> None:
    with client(doubler, config()) as c:
        assert c.get("/v2/health/live").json() == {"live": True}
        assert c.get("/v2/health/ready").status_code == 200
        server = c.get("/v2").json()
        assert server["name"] == "slackwise" and server["version"]
        assert "binary_tensor_data" in server["extensions"]
        meta = c.get("/v2/models/echo").json()
        assert meta["name"] == "echo" and meta["platform"] == "slackwise/digits"
        (tensor,) = meta["inputs"]  # digits take 8x8 grey images as 64 numbers a row
        assert tensor["datatype"] == "FP32" and tensor["shape"] == [-1, 64]
        assert meta["outputs"] == [
            {"name": "label", "datatype": "INT64", "shape": [-1]},
            {"name": "probability", "datatype": "FP32", "shape": [-1]},
        ]
        assert c.get("/v2/models/echo/ready").json() == {"name": "echo", "ready": True}
        missing = c.get("/v2/models/nope")
        assert missing.status_code == 404 and "nope" in missing.json()["error"]
        assert c.post("/v2/models/nope/infer", json=infer([[1.0, 0.5]])).status_code == 404


def test_v2_through_the_adapters_own_server() -> None:
    """``slackwise serve``'s server routes V2 infers from its callbacks, like V1 predicts."""
    from tests.test_http_server import run

    async def scenario(app: Any, port: int) -> None:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", trust_env=False) as c:
            r = await c.post("/v2/models/echo/infer", json=infer([[1.0, 0.25]], "x"))
            assert r.status_code == 200, r.text
            assert r.json()["id"] == "x" and r.json()["outputs"][0]["data"] == [2]
            head = json.dumps(
                {
                    "inputs": [
                        {
                            "name": "input-0",
                            "shape": [1, 64],
                            "datatype": "FP32",
                            "parameters": {"binary_data_size": 256},
                        }
                    ],
                    "parameters": {"binary_data_output": True},
                }
            ).encode()
            raw = struct.pack("<64f", *row(3.0, 0.75))  # binary both ways, by the lean server
            r = await c.post("/v2/models/echo/infer", content=head + raw, headers={
                "inference-header-content-length": str(len(head))})  # fmt: skip
            assert r.status_code == 200, r.text
            size = int(r.headers["inference-header-content-length"])
            answer = json.loads(r.content[:size])
            assert [o["parameters"]["binary_data_size"] for o in answer["outputs"]] == [8, 4]
            assert struct.unpack("<qf", r.content[size:]) == (6, 0.75)
            bad = await c.post("/v2/models/echo/infer", content=b'{"inputs": []}')
            assert bad.status_code == 400 and "inputs" in bad.json()["error"]
            assert (await c.get("/v2/models/echo/ready")).json()["ready"] is True

    run(scenario, handler=doubler)


@pytest.mark.models
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_each_models_declared_input_is_what_its_samples_are(kind: str) -> None:
    """The V2 input a model declares (read without its packages) fits its real sample
    instances: numbers of the sample's shape, text, or records as JSON."""
    spec = model_class(kind).input
    assert spec is not None
    sample = sample_instances(kind, 1)[0]
    if isinstance(sample, str):
        assert (spec.datatype, spec.shape, spec.records) == ("BYTES", (-1,), False)
    elif isinstance(sample, list):
        assert spec.datatype == "FP32" and spec.fits([1, *tensor_shape(sample)])
    else:
        assert (spec.datatype, spec.records) == ("BYTES", True)
    assert model_class(kind).outputs, "every model declares its outputs"
