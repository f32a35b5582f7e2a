"""Several adapters in front of one platform learn how many they are from the functions' gossip.

Real processes: the local platform (in this process, with its gateway and a real digits replica)
and two ``slackwise serve --advisor`` adapters, each its own process. Each sends its batches with
its own frontend id; the function counts the distinct ids it heard from and says so on every
answer, and each adapter's advisor then scales its local rate by that count (Swayam's n_F).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import sys
from pathlib import Path

import httpx
import pytest

from knative.local.guard import ENV_VAR as TOKEN_ENV
from knative.local.platform import LocalPlatform
from slackwise_config import load_config

pytestmark = pytest.mark.slow

CONFIG = """
platform:
  autoscaler: {initial-scale: "1"}
functions:
  digits:
    model: digits
    slo_ms: 500
    max_batch: 8
    annotations: {autoscaling.knative.dev/max-scale: "1"}
adapter:
  advisor: {tick_s: 0.2, keep_alive: false}
"""


async def warm(platform: LocalPlatform) -> None:
    """Wait for the initial replica: the test is about the frontends' count, not a cold start
    (requests that wait out a 500 ms SLO behind a loading model are refused, as they should
    be, and a loaded machine can make the model load take that long)."""
    for _ in range(1200):
        if platform.replicas("digits").ready >= 1:
            return
        await asyncio.sleep(0.05)
    raise RuntimeError("the initial replica did not become ready")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def start_adapter(
    config: Path, platform: LocalPlatform
) -> tuple[asyncio.subprocess.Process, str]:
    port = free_port()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "slackwise_cli.main", "serve", "-c", str(config), "--advisor",
        "--port", str(port), "--platform-url", platform.url("digits"),
        stdout=asyncio.subprocess.DEVNULL, env={**os.environ, TOKEN_ENV: platform.token},
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    async with httpx.AsyncClient(trust_env=False) as client:
        for _ in range(600):
            with contextlib.suppress(httpx.TransportError):
                if (await client.get(f"{url}/healthz", timeout=1.0)).status_code == 200:
                    return proc, url
            await asyncio.sleep(0.05)
    proc.kill()
    raise RuntimeError("the adapter did not come up")


def test_two_adapters_agree_on_how_many_frontends_there_are(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(CONFIG)
    config = load_config(path)
    body = {"instances": [[0.0] * 64]}

    async def run() -> list[dict[str, object]]:
        async with LocalPlatform(config) as platform:
            await warm(platform)
            adapters = [await start_adapter(path, platform) for _ in range(2)]
            try:
                async with httpx.AsyncClient(trust_env=False, timeout=30) as client:
                    for _ in range(30):  # about 3 s of traffic through both
                        answers = await asyncio.gather(*(
                            client.post(f"{url}/v1/models/digits:predict", json=body)
                            for _, url in adapters for _ in range(3)
                        ))  # fmt: skip
                        assert all(a.status_code == 200 for a in answers), [
                            (a.status_code, a.text[:200]) for a in answers if a.status_code != 200
                        ]
                        await asyncio.sleep(0.1)
                    await asyncio.sleep(0.5)  # a few advisor ticks
                    statuses = [
                        (await client.get(f"{url}/v1/models/digits")).json()["advisor"]
                        for _, url in adapters
                    ]
            finally:
                for proc, _ in adapters:
                    proc.terminate()
                    await proc.wait()
            return statuses

    statuses = asyncio.run(run())
    assert [s["frontends"] for s in statuses] == [2, 2]
    rates = [float(s["model_rate"]) for s in statuses]  # type: ignore[arg-type]
    assert min(rates) > 0 and max(rates) / min(rates) < 1.5  # same global estimate, near enough


OWNED = """
platform:
  autoscaler: {initial-scale: "1", tick-interval: "0.5s"}
functions:
  digits:
    model: digits
    slo_ms: 500
    max_batch: 8
    annotations: {autoscaling.knative.dev/max-scale: "3"}
adapter:
  advisor: {tick_s: 0.2, keep_alive: false, capacity: own, lease_s: 1.5}
"""


def test_each_adapter_owns_its_share_and_a_killed_one_lapses(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(OWNED)
    config = load_config(path)
    body = {"instances": [[0.0] * 64]}

    async def owners_after(platform: LocalPlatform, want: int, within_s: float) -> int:
        for _ in range(int(within_s / 0.1)):
            if len(platform.owners("digits")) == want:
                break
            await asyncio.sleep(0.1)
        return len(platform.owners("digits"))

    async def run() -> list[int]:
        seen: list[int] = []
        async with LocalPlatform(config) as platform:
            await warm(platform)
            adapters = [await start_adapter(path, platform) for _ in range(3)]
            try:
                async with httpx.AsyncClient(trust_env=False, timeout=30) as client:
                    for _ in range(10):  # traffic through every adapter: each writes its share
                        answers = await asyncio.gather(*(
                            client.post(f"{url}/v1/models/digits:predict", json=body)
                            for _, url in adapters
                        ))  # fmt: skip
                        assert all(a.status_code == 200 for a in answers), [
                            (a.status_code, a.text[:200]) for a in answers if a.status_code != 200
                        ]
                        await asyncio.sleep(0.1)
                    seen.append(await owners_after(platform, 3, 5.0))
                    adapters[0][0].kill()  # SIGKILL: no goodbye, its lease must lapse
                    await adapters[0][0].wait()
                    seen.append(await owners_after(platform, 2, 6.0))
                    adapters[1][0].terminate()  # a clean stop withdraws its own share at once
                    await adapters[1][0].wait()
                    seen.append(await owners_after(platform, 1, 3.0))
            finally:
                for proc, _ in adapters:
                    if proc.returncode is None:
                        proc.terminate()
                        await proc.wait()
        return seen

    assert asyncio.run(run()) == [3, 2, 1]
