"""No delayed-ACK stalls: TCP_NODELAY on every live socket of every hop of the request path.

Without it a keep-alive answer written in two pieces (headers, then body) waits for the peer's
delayed ACK, about 40 ms on Linux, on every call. The checks read the option off the sockets that
carry real requests (``getsockopt``), in this process and in the replica's process; they assert
no time.
"""

from __future__ import annotations

import asyncio
import socket

import httpx
import pytest
from sklearn.datasets import load_digits

from adapter.serving.app import create_app
from adapter.serving.http_server import serve
from adapter.serving.platform_view import LocalView
from functions.serve import listening_socket
from knative.local.platform import LocalPlatform
from slackwise_config import parse_config
from tests.socket_probe import TcpConnection, tcp_connections

DIGITS = load_digits()


def test_a_handed_over_listener_is_wrapped_as_tcp_with_nodelay() -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    fd = sock.detach()
    wrapped = listening_socket(fd)
    try:
        assert wrapped.family == socket.AF_INET  # not AF_UNIX, as uvicorn's fd= path assumes
        assert wrapped.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 1
    finally:
        wrapped.close()


def _config() -> dict[str, object]:
    return {
        "platform": {"autoscaler": {"initial-scale": "1"}},
        "functions": {
            "digits": {
                "model": "digits",
                "slo_ms": 2000,
                "max_batch": 8,
                "container_concurrency": 2,
                "annotations": {"autoscaling.knative.dev/max-scale": "1"},
            }
        },
        "adapter": {"max_wait_ms": 0},
    }


async def _live_connections() -> tuple[int, int, dict[str, int], list[TcpConnection]]:
    config = parse_config(_config())
    async with LocalPlatform(config) as platform:
        await platform.wait_event("cold_start", "digits", timeout_s=120)
        app = create_app(config, view=LocalView(platform))
        # the server `slackwise serve` runs
        stop = asyncio.Event()
        bound: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        task = asyncio.create_task(serve(app, "127.0.0.1", 0, ready=bound.set_result, stop=stop))
        port = await asyncio.wait_for(bound, 30)
        gateway = platform.url("digits")
        gateway_port = int(gateway.rsplit(":", 1)[1])
        try:
            async with (
                httpx.AsyncClient(trust_env=False, base_url=f"http://127.0.0.1:{port}") as c,
                httpx.AsyncClient(
                    trust_env=False, base_url=gateway, headers=platform.auth_headers()
                ) as g,
            ):
                for i in range(5):  # sequential keep-alive calls: the pattern the stall hits
                    body = {"instances": [DIGITS.data[i].tolist()]}
                    r = await c.post("/v1/models/digits:predict", json=body, timeout=60)
                    assert r.status_code == 200, r.text
                    # the platform's own gateway, as a remote adapter or `direct` reaches it
                    r = await g.post("/v1/models/digits:predict", json=body, timeout=60)
                    assert r.status_code == 200, r.text
                # every connection of the path is open and idle now: read them all
                pids = platform.replica_pids("digits")
                found = tcp_connections()
                for pid in pids.values():
                    found += tcp_connections(pid)
        finally:
            stop.set()
            await task
    return port, gateway_port, pids, found


@pytest.mark.slow
def test_every_hop_of_the_request_path_has_nodelay() -> None:
    adapter_port, gateway_port, pids, found = asyncio.run(_live_connections())
    assert len(pids) == 1
    (replica_pid,) = pids.values()
    hops = {
        "client -> adapter (adapter side)": [c for c in found if c.local[1] == adapter_port],
        "client -> adapter (client side)": [c for c in found if c.peer[1] == adapter_port],
        "client -> gateway (gateway side)": [c for c in found if c.local[1] == gateway_port],
        "platform -> replica (replica side)": [c for c in found if c.pid == replica_pid],
        "platform -> replica (platform side)": [
            c for c in found if c.pid != replica_pid and any(
                r.local == c.peer for r in found if r.pid == replica_pid
            )
        ],
    }  # fmt: skip
    for hop, conns in hops.items():
        assert conns, f"no live socket found for {hop}"
    stalled = [c for c in found if not c.nodelay]
    assert not stalled, f"sockets without TCP_NODELAY: {stalled}"
