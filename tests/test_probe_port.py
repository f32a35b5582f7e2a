"""Probes on a port of their own: answered by a thread while the loop is busy."""

from __future__ import annotations

import asyncio
import http.client
import json
import threading
import time
from typing import Any

import pytest

from adapter.serving.probe_port import ProbePort, answer_for
from slackwise_config import ConfigError, parse_config

SNAPSHOT: dict[str, tuple[int, dict[str, Any]]] = {
    "/healthz": (200, {"ok": True}),
    "/v1/models/digits": (200, {"name": "digits", "queue": 3}),
}


def _head(text: str) -> bytes:
    return text.replace("\n", "\r\n").encode("latin-1")


def _status_and_body(raw: bytes) -> tuple[int, dict[str, Any] | None]:
    head, _, body = raw.partition(b"\r\n\r\n")
    status = int(head.split(b" ")[1])
    return status, json.loads(body) if body else None


def test_a_function_status_is_the_last_published_document() -> None:
    raw = answer_for(_head("GET /v1/models/digits HTTP/1.1\nHost: 127.0.0.1:9"), SNAPSHOT, 12.5)
    assert _status_and_body(raw) == (200, {"name": "digits", "queue": 3})
    assert b"x-snapshot-age-ms: 12.5" in raw and b"connection: close" in raw


@pytest.mark.parametrize(
    ("head", "status"),
    [
        ("GET /v1/models/other HTTP/1.1\nHost: localhost", 404),
        ("POST /healthz HTTP/1.1\nHost: localhost", 405),
        ("GET /healthz HTTP/1.1\nHost: evil.example", 403),  # DNS rebinding
        ("GET /healthz HTTP/1.1", 403),  # no Host at all
        ("hello", 400),
        ("GET /healthz SPDY/3\nHost: localhost", 400),
    ],
)
def test_what_is_not_a_probe_is_refused_with_a_reason(head: str, status: int) -> None:
    got, body = _status_and_body(answer_for(_head(head), SNAPSHOT, 1.0))
    assert got == status and body is not None and body["error"]


def test_the_adapters_own_host_is_allowed_and_head_has_no_body() -> None:
    raw = answer_for(
        _head("HEAD /healthz HTTP/1.1\nHost: adapter.internal:8701"),
        SNAPSHOT,
        0.0,
        hosts=["adapter.internal"],
    )
    assert raw.startswith(b"HTTP/1.1 200 ") and raw.endswith(b"\r\n\r\n")


def test_the_thread_answers_while_the_loop_is_busy() -> None:
    published: list[float] = []

    def documents() -> dict[str, tuple[int, dict[str, Any]]]:
        published.append(time.monotonic())
        return SNAPSHOT

    answers: list[tuple[float, int, str | None]] = []

    def client(port: int) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        conn.request("GET", "/v1/models/digits")
        response = conn.getresponse()
        response.read()
        answers.append((time.monotonic(), response.status, response.getheader("x-snapshot-age-ms")))
        conn.close()

    async def scenario() -> float:
        probes = ProbePort("127.0.0.1", 0, documents, period_s=0.05)
        probes.start()
        try:
            await asyncio.sleep(0.12)  # a few publishes on the loop
            asker = threading.Thread(target=client, args=(probes.port,))
            asker.start()
            busy_until = time.monotonic() + 1.0
            while time.monotonic() < busy_until:  # the loop holds the GIL, runs nothing else
                pass
            asker.join(5)
            return busy_until
        finally:
            await probes.stop()

    busy_until = asyncio.run(scenario())
    assert len(published) >= 2
    ((at, status, age),) = answers
    assert status == 200 and age is not None
    # answered while the loop was still busy: nothing on the loop could have answered it
    assert at < busy_until


def test_the_probe_port_is_checked_like_the_adapters() -> None:
    def config(adapter: dict[str, Any]) -> Any:
        return parse_config({"functions": {"digits": {"model": "digits"}}, "adapter": adapter})

    with pytest.raises(ConfigError, match=r"adapter\.probe_port: must be a TCP port"):
        config({"probe_port": 70000})
    with pytest.raises(ConfigError, match=r"adapter\.probe_port"):
        config({"probe_port": "8701"})
    assert config({"probe_port": 0}).adapter.probe_port == 0
    assert config({}).adapter.probe_port is None


def test_the_adapter_serves_its_functions_status_on_the_probe_port() -> None:
    from tests.test_adapter import client, config, echo

    with client(echo, config(probe_port=0)) as c:
        assert c.post("/v1/models/echo:predict", json={"instances": [1, 2]}).status_code == 200
        probes = c.app.state.adapter.probes  # type: ignore[attr-defined]
        assert probes is not None
        probes.publish()
        conn = http.client.HTTPConnection("127.0.0.1", probes.port, timeout=5)
        conn.request("GET", "/v1/models/echo")
        response = conn.getresponse()
        status = json.loads(response.read())
        conn.close()
        # the same document as the adapter's own status route
        assert response.status == 200
        assert status["name"] == "echo" and status["slo_ms"] == 500
        assert status == c.get("/v1/models/echo").json() | {"queue": status["queue"]}
    assert not probes._thread.is_alive()  # stopped with the app
