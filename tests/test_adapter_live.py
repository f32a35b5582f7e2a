"""The adapter in front of real function processes on the local platform."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest
from sklearn.datasets import load_digits

from adapter.serving.app import create_app
from adapter.serving.platform_view import LocalView
from adapter.serving.records import read_records
from knative.local.platform import LocalPlatform
from slackwise_config import parse_config

pytestmark = pytest.mark.slow

DIGITS = load_digits()


def live_config(initial_scale: str = "0") -> dict[str, object]:
    return {
        "platform": {
            "autoscaler": {"allow-zero-initial-scale": "true", "initial-scale": initial_scale}
        },
        "functions": {
            "digits": {
                "model": "digits",
                "slo_ms": 3000,
                "max_batch": 32,
                "container_concurrency": 1,
                "annotations": {
                    "autoscaling.knative.dev/max-scale": "1",
                },
            }
        },
        "adapter": {"aimd": {"initial": 32}},
    }


async def _scenario(
    tmp_path: Path, count: int
) -> tuple[list[httpx.Response], list[dict[str, object]]]:
    config = parse_config(live_config())
    records = tmp_path / "records.jsonl"
    async with LocalPlatform(config) as platform:
        app = create_app(config, view=LocalView(platform), records_path=records)
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://adapter") as c:
                responses = await asyncio.gather(
                    *(
                        c.post("/v1/models/digits:predict",
                               json={"instances": [DIGITS.data[i].tolist()]}, timeout=60)
                        for i in range(count)
                    )
                )  # fmt: skip
        usage = platform.usage("digits")
        assert usage["cold_starts"] == 1
    return responses, read_records(records)


def test_a_cold_start_is_absorbed_into_one_batch(tmp_path: Path) -> None:
    responses, records = asyncio.run(_scenario(tmp_path, 20))
    assert [r.status_code for r in responses] == [200] * 20
    for i, r in enumerate(responses):
        assert r.json()["predictions"][0]["label"] == DIGITS.target[i]
    sizes = sorted({int(r.headers["x-batch-size"]) for r in responses})
    # one request wakes the function; the others wait in the adapter and leave together
    assert len(records) == 20
    batches = {(rec["dispatch"], rec["batch_size"]) for rec in records}
    assert len(batches) <= 3, batches
    assert max(sizes) >= 10, sizes
    assert any(rec["cold"] for rec in records)  # the batches that met the cold start say so
    for rec in records:
        assert rec["arrival"] <= rec["dispatch"] <= rec["done"]
        assert rec["status"] == 200
