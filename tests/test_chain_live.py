"""One chain end to end with real functions: IMG-Query (imagenet -> ner -> qa) on the local
platform, through ``POST /v1/apps/img-query:predict`` of the adapter, with real images."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
import pytest

from adapter.serving.app import create_app
from adapter.serving.platform_view import LocalView
from functions.pipelines import IMG_QUERY_IMAGES, PIPELINES
from knative.local.platform import LocalPlatform
from slackwise_cli.results import parse_server_timing
from slackwise_config import parse_config

pytestmark = [pytest.mark.slow, pytest.mark.models]

STAGES = ("classify", "nlu", "answer")


def config(policy: str) -> dict[str, object]:
    fn = {"threads": 1, "max_batch": 16, "container_concurrency": 1,
          "annotations": {"autoscaling.knative.dev/max-scale": "1"}}  # fmt: skip
    return {
        "platform": {"autoscaler": {"initial-scale": "1"}},
        "functions": {
            "classify": {"model": "imagenet", **fn},
            "nlu": {"model": "ner", **fn},
            "answer": {"model": "qa", **fn},
        },
        "apps": {"img-query": {"stages": list(STAGES), "slo_ms": 5000}},
        "adapter": {"stage_policy": policy, "aimd": {"initial": 8}},
    }


@pytest.mark.parametrize("policy", ["GS", "FIFO-NB"])
def test_img_query_answers_about_what_is_in_the_picture(policy: str, tmp_path: Path) -> None:
    cfg = parse_config(config(policy))
    inputs = PIPELINES["img_query"].sample_inputs(len(IMG_QUERY_IMAGES))
    records = tmp_path / "records.jsonl"

    async def run() -> list[httpx.Response]:
        async with LocalPlatform(cfg) as platform:
            # the chain's answers are under test, not its cold starts (three models loading at
            # once on two cores can take longer than the 5 s SLO)
            for fn in STAGES:
                await platform.wait_event("cold_start", fn, timeout_s=120)
            app = create_app(cfg, view=LocalView(platform), records_path=records)
            async with app.router.lifespan_context(app):
                transport = httpx.ASGITransport(app=app)
                async with httpx.AsyncClient(transport=transport, base_url="http://a") as c:
                    return list(await asyncio.gather(*(
                        c.post("/v1/apps/img-query:predict", json={"instances": [x]}, timeout=120)
                        for x in inputs * 2
                    )))  # fmt: skip

    responses = asyncio.run(run())
    assert all(r.status_code == 200 for r in responses), [r.text[:200] for r in responses]
    coffee = responses[IMG_QUERY_IMAGES.index("coffee")].json()["predictions"][0]
    assert "espresso" in json.dumps(coffee).lower()
    for r in responses:
        timing = parse_server_timing(r.headers["server-timing"])
        assert all(timing[f"{fn}-compute"] > 0 for fn in STAGES)
        assert timing["total"] >= sum(timing[f"{fn}-compute"] for fn in STAGES)
    rows = [json.loads(line) for line in records.read_text().splitlines()]
    apps = [row for row in rows if "stages" in row]
    stages = [row for row in rows if row.get("app") and "stages" not in row]
    assert len(apps) == len(responses) and len(stages) == 3 * len(responses)
    assert all(row["status"] == 200 for row in apps)
    if policy == "FIFO-NB":  # no batching at any stage
        assert {row["batch_size"] for row in stages} == {1}
