"""What an operator sees: the W3C ``traceparent`` travels from the client through the adapter to
the function (each stage of a chain), and the adapter exports per-function and per-chain
metrics (queue delay, replicas, chain misses and cold requests) on ``/metrics``."""

from __future__ import annotations

import json
import re
import threading

import httpx
import pytest

from adapter.serving.predict_endpoint import traceparent
from tests.test_adapter import client
from tests.test_chain_route import Upstream
from tests.test_chain_route import client as chain_client

TRACE = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


class Seen:
    """An upstream that records the traceparent of each batch and echoes its instances."""

    def __init__(self) -> None:
        self.traces: list[str | None] = []
        self.lock = threading.Lock()

    def __call__(self, request: httpx.Request) -> httpx.Response:
        with self.lock:
            self.traces.append(request.headers.get("traceparent"))
        instances = json.loads(request.content)["instances"]  # answered as digits answers
        predictions = [{"label": 0, "probability": 1.0} for _ in instances]
        return httpx.Response(200, json={"predictions": predictions},
                              headers={"x-compute-ms": "1.0"})  # fmt: skip


@pytest.mark.parametrize(
    ("raw", "kept"),
    [
        (TRACE, TRACE),
        (TRACE.upper(), TRACE),
        ("00-" + "0" * 32 + "-00f067aa0ba902b7-01", None),  # an all-zero trace id
        ("00-4bf92f3577b34da6a3ce929d0e0e4736-" + "0" * 16 + "-01", None),
        ("ff" + TRACE[2:], None),  # the version the recommendation forbids
        (TRACE[:-1] + "g", None),
        (TRACE + "-x", None),
        ("", None),
        (None, None),
    ],
)
def test_only_valid_traceparents_are_kept(raw: str | None, kept: str | None) -> None:
    assert traceparent(raw) == kept


def test_a_predicts_traceparent_reaches_its_function() -> None:
    seen = Seen()
    with client(seen) as c:
        r = c.post("/v1/models/echo:predict", json={"instances": [1]},
                   headers={"traceparent": TRACE})  # fmt: skip
        assert r.status_code == 200
        row = {"shape": [1, 64], "datatype": "INT64", "data": [3] * 64}
        r = c.post("/v2/models/echo/infer", headers={"traceparent": "junk"},
                   json={"inputs": [row]})  # fmt: skip
        assert r.status_code == 200
        assert c.post("/v1/models/echo:predict", json={"instances": [2]}).status_code == 200
    assert seen.traces == [TRACE, None, None]


def test_a_chains_traceparent_reaches_every_stage_and_its_metrics_are_exported() -> None:
    class Traced(Upstream):
        def __init__(self) -> None:
            super().__init__()
            self.traces: list[str | None] = []

        def __call__(self, request: httpx.Request) -> httpx.Response:
            self.traces.append(request.headers.get("traceparent"))
            return super().__call__(request)

    upstream = Traced()
    with chain_client(upstream) as c:
        for _ in range(2):
            r = c.post("/v1/apps/ipa:predict", json={"instances": [{"wav_b64": "hamlet"}]},
                       headers={"traceparent": TRACE})  # fmt: skip
            assert r.status_code == 200, r.text
        text = c.get("/metrics").text
    assert upstream.traces == [TRACE] * 6  # three stages, twice
    assert 'slackwise_app_requests_total{app="ipa",status="200"} 2.0' in text
    assert 'slackwise_app_request_latency_seconds_count{app="ipa"} 2.0' in text
    for fn in ("speech", "tagger", "answer"):
        assert f'slackwise_queue_delay_seconds_count{{function="{fn}"}} 2.0' in text
        assert f'slackwise_replicas{{count="ready",function="{fn}"}} 1.0' in text


def test_a_chain_that_fails_counts_as_a_miss_of_its_app() -> None:
    with chain_client(Upstream(fail="tagger")) as c:
        r = c.post("/v1/apps/ipa:predict", json={"instances": [{"wav_b64": "x"}]})
        assert r.status_code >= 500
        text = c.get("/metrics").text
    assert 'slackwise_app_deadline_misses_total{app="ipa"} 1.0' in text
    assert re.search(r'slackwise_app_requests_total\{app="ipa",status="5\d\d"\} 1\.0', text)
