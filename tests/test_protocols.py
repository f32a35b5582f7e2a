"""KServe V1 and the Open Inference Protocol (V2) as the adapter writes and reads them, and an
adapter in front of a V2 server at a fixed URL."""

from __future__ import annotations

import json
import re
import struct
from typing import Any

import httpx
import orjson
import pytest
from starlette.testclient import TestClient

from adapter.serving.app import create_app
from adapter.serving.protocols import codec_for
from slackwise_config import ConfigError, parse_config
from tests.upstreams import serve_handler


def test_v1_is_instances_and_predictions() -> None:
    codec = codec_for("v1", "embed")
    assert codec.path == "/v1/models/embed:predict"
    assert orjson.loads(codec.encode(["a", "b"])[0]) == {"instances": ["a", "b"]}
    assert codec.decode(b'{"predictions": [1, 2]}', 2) == [1, 2]
    with pytest.raises(ValueError, match="1 predictions for 2"):
        codec.decode(b'{"predictions": [1]}', 2)


def test_v2_is_one_tensor_each_way() -> None:
    codec = codec_for("v2", "mnist", input_name="x")
    assert codec.path == "/v2/models/mnist/infer"
    body = orjson.loads(codec.encode([[1.5, 2.0], [3.0, 4.0]])[0])
    assert body == {"inputs": [{"name": "x", "shape": [2, 2], "datatype": "FP32",
                                "data": [1.5, 2.0, 3.0, 4.0]}]}  # fmt: skip
    assert orjson.loads(codec.encode(["hi", "yo"])[0])["inputs"][0]["datatype"] == "BYTES"
    assert orjson.loads(codec.encode([[1, 2]])[0])["inputs"][0]["datatype"] == "INT64"
    answer = {"outputs": [{"name": "y", "shape": [2, 3], "datatype": "FP32",
                           "data": [1, 2, 3, 4, 5, 6]}]}  # fmt: skip
    assert codec.decode(orjson.dumps(answer), 2) == [[1, 2, 3], [4, 5, 6]]
    scalars = {"outputs": [{"name": "y", "shape": [2], "datatype": "INT64", "data": [7, 9]}]}
    assert codec.decode(orjson.dumps(scalars), 2) == [7, 9]
    with pytest.raises(ValueError, match="shape"):
        codec.decode(orjson.dumps(scalars), 3)
    with pytest.raises(ValueError, match="protocol"):
        codec_for("v3", "m")


def test_v2_binary_tensor_data_to_an_upstream_and_back() -> None:
    """``binary_data: true``: the batch goes out as binary data with its header length, asks
    for binary outputs; an answer of several outputs becomes a record a row."""
    codec = codec_for("v2", "m", binary=True)
    body, headers = codec.encode([[1.5, 2.0], [3.0, 4.0]], "r1")
    size = int(headers["inference-header-content-length"])
    head = orjson.loads(body[:size])
    assert head["id"] == "r1" and head["parameters"] == {"binary_data_output": True}
    assert head["inputs"][0]["parameters"] == {"binary_data_size": 16}
    assert struct.unpack("<4f", body[size:]) == (1.5, 2.0, 3.0, 4.0)
    _, text_headers = codec.encode(["hi", "yo"])
    assert "inference-header-content-length" in text_headers  # BYTES go binary too
    label = {"name": "label", "datatype": "INT64", "shape": [2],
             "parameters": {"binary_data_size": 16}}  # fmt: skip
    score = {"name": "score", "datatype": "FP32", "shape": [2], "data": [0.5, 0.25]}
    answer = orjson.dumps({"outputs": [label, score]})
    framed = answer + struct.pack("<2q", 3, 8)
    rows = codec.decode(framed, 2, {"inference-header-content-length": str(len(answer))})
    assert rows == [{"label": 3, "score": 0.5}, {"label": 8, "score": 0.25}]
    picked = codec_for("v2", "m", output_name="score")
    assert picked.decode(framed, 2, {"inference-header-content-length": str(len(answer))}) == [
        0.5, 0.25]  # fmt: skip
    with pytest.raises(ValueError, match="past the answer"):
        codec.decode(framed, 2, {"inference-header-content-length": "99999"})


def test_an_adapter_fronts_a_v2_server_at_a_fixed_url() -> None:
    seen: list[str] = []

    def triton(request: httpx.Request) -> httpx.Response:
        seen.append(str(request.url))
        (tensor,) = json.loads(request.content)["inputs"]
        n = tensor["shape"][0]
        data = [sum(tensor["data"][i * 2 : i * 2 + 2]) for i in range(n)]
        out = {"name": "sum", "shape": [n], "datatype": "FP32", "data": data}
        return httpx.Response(200, json={"outputs": [out]})

    with serve_handler(triton) as url:  # a real socket: the lean client's path, as users run it
        cfg = parse_config({
            "functions": {"adder": {"model": "digits", "slo_ms": 500, "upstream": {
                "protocol": "v2", "url": url, "model": "add_two"}}},
        })  # fmt: skip
        with TestClient(create_app(cfg)) as c:
            r = c.post("/v1/models/adder:predict", json={"instances": [[1, 2], [3, 4]]})
            assert r.status_code == 200, r.text
            assert r.json()["predictions"] == [3, 7]
            assert c.get("/v1/models").json() == {"models": ["adder"]}
            assert c.get("/v2/health/live").status_code == 200
    assert seen and all(u == f"{url}/v2/models/add_two/infer" for u in seen)


def test_v2_on_the_local_platform_is_refused_with_the_reason() -> None:
    with pytest.raises(ConfigError, match=r"functions\.f\.upstream\.protocol: v2 needs"):
        parse_config({"functions": {"f": {"model": "digits", "slo_ms": 100,
                                          "upstream": {"protocol": "v2"}}}})  # fmt: skip
    with pytest.raises(ConfigError, match=r"functions\.f\.upstream\.url"):
        parse_config({"functions": {"f": {"model": "digits", "slo_ms": 100,
                                          "upstream": {"url": "triton:8000"}}}})  # fmt: skip


def _triton(seen: list[str]) -> Any:
    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(str(request.url))
        (tensor,) = json.loads(request.content)["inputs"]
        n = tensor["shape"][0]
        data = [sum(tensor["data"][i * 2 : i * 2 + 2]) for i in range(n)]
        return httpx.Response(200, json={"outputs": [
            {"name": "sum", "shape": [n], "datatype": "FP32", "data": data}]})  # fmt: skip

    return answer


def test_a_v2_server_with_no_model_kind_of_ours_is_fronted_v1_and_v2() -> None:
    """Another system's model (Triton, a KServe InferenceService): no built-in kind, no profile;
    the adapter learns its latency online and batches V1 and V2 clients to it alike."""
    seen: list[str] = []
    with serve_handler(_triton(seen)) as url:  # a real socket, as users run it
        cfg = parse_config({
            "functions": {"adder": {"slo_ms": 500, "upstream": {
                "protocol": "v2", "url": url, "model": "add_two"}}},
        })  # fmt: skip
        assert cfg.functions["adder"].model == ""
        with TestClient(create_app(cfg)) as c:
            r = c.post("/v1/models/adder:predict", json={"instances": [[1, 2], [3, 4]]})
            assert r.status_code == 200 and r.json()["predictions"] == [3, 7], r.text
            body = {"inputs": [{"name": "x", "shape": [1, 2], "datatype": "FP32", "data": [5, 6]}]}
            r = c.post("/v2/models/adder/infer", json=body)
            assert r.status_code == 200 and r.json()["outputs"][0]["data"] == [11], r.text
            meta = c.get("/v2/models/adder").json()
            assert meta["inputs"] == [] and meta["platform"] == "slackwise/"
            status = c.get("/v1/models/adder").json()
            assert status["name"] == "adder"
    assert len(seen) >= 2 and all(u.endswith("/v2/models/add_two/infer") for u in seen)


@pytest.mark.parametrize(
    ("function", "says"),
    [
        ({"slo_ms": 100}, "needs a built-in model kind"),
        ({"upstream": {"protocol": "v1", "service": "other"}}, "served by another system"),
        ({"model": "nope"}, "unknown model 'nope'"),
        ({"model": ""}, "non-empty string"),
    ],
)
def test_a_function_without_a_kind_must_say_who_serves_it(
    function: dict[str, Any], says: str
) -> None:
    with pytest.raises(ConfigError, match=re.escape(says)):
        parse_config({"functions": {"f": function}})


def test_a_kserve_inference_service_on_knative_gets_no_manifests_of_ours() -> None:
    from knative.cluster import manifests

    text = (
        "functions:\n"
        "  iris: {slo_ms: 200, upstream: {protocol: v2, service: iris-predictor, model: iris}}\n"
        "  digits: {model: digits}\n"
        "adapter: {platform: knative}\n"
    )
    import yaml

    config = parse_config(yaml.safe_load(text))
    assert config.functions["iris"].service == "iris-predictor"
    bundle = manifests.build(config, text, schema_required=False)
    assert "10-function-iris.yaml" not in bundle.files and "10-function-digits.yaml" in bundle.files
    assert any("iris: served by another system" in w for w in bundle.warnings)
    (policy,) = bundle.files["30-network-policy.yaml"]
    (selects,) = policy["spec"]["podSelector"]["matchExpressions"]
    assert selects["values"] == ["digits"]  # KServe's pods are KServe's to guard
