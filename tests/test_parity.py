"""The live dispatcher and the simulator are one scheduling loop: fed the same arrivals, they send
the same batches (function, members, dispatch time) under every stage policy.

The live side is the real thing in process: the adapter's chain walker and dispatchers, on a
virtual clock (:class:`slackwise_core.clock.VirtualClock`), in front of an upstream whose batches
take exactly the profile's median for their size. The simulator runs the same workload with the same
profiles (deterministic service times), the same fixed fleet and the same P95 reader (the
model's own, or one refreshed every few batches: ``BatchingSettings.p95_every``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import random
import re
from collections.abc import Mapping
from typing import Any

import orjson
import pytest

from adapter.serving.chains import Chain
from adapter.serving.dispatcher import Dispatcher
from adapter.serving.metrics import AdapterMetrics
from adapter.serving.pending import Pending
from adapter.serving.records import RecordWriter
from knative.local.events import ReplicaCounts
from simulator.config import parse_sim_config
from simulator.engine import Simulation
from simulator.profiles import resolve_curves
from simulator.service import ServiceCurve
from slackwise_config import parse_config
from slackwise_core.clock import VirtualClock
from slackwise_core.http1 import Http1Response
from slackwise_policies.batching_settings import SIMULATOR_P95_EVERY, BatchingSettings
from slackwise_policies.latency import LatencyModel
from slackwise_policies.modes import SLACKWISE
from slackwise_policies.slack import POLICIES, stage_policy

NODES = 2
MAX_BATCH = 16
SLO_MS = 900.0
REQUESTS = 600
RATE_RPS = 150.0
#: the two stages' profiles (measured on this machine, shipped with the package)
PROFILES = {"classify": "imagenet", "tag": "ner"}

Batch = tuple[str, float, tuple[tuple[int, int], ...]]


def arrivals(seed: int = 3) -> list[float]:
    rng = random.Random(seed)
    t, out = 0.0, []
    for _ in range(REQUESTS):
        t += rng.expovariate(RATE_RPS)
        out.append(t)
    return out


def curves() -> dict[str, ServiceCurve]:
    return resolve_curves("cpu", PROFILES, base_dir=__import__("pathlib").Path("."))


def simulated(
    policy: str, times: list[float], max_wait_ms: float | None, p95_every: int
) -> list[Batch]:
    config = parse_sim_config(
        {
            "workload": "parity",
            "profile": "cpu",
            "requests": REQUESTS,
            "warmup_fraction": 0.0,
            "service": "deterministic",
            "platform": {"scaling": "fixed"},
            "adapter": {"aimd": True, "max_wait_ms": max_wait_ms},
            "functions": {
                name: {"nodes": NODES, "max_batch": MAX_BATCH, "profile": profile}
                for name, profile in PROFILES.items()
            },
            "apps": {"chain": {"stages": list(PROFILES), "slo_ms": SLO_MS}},
        }
    )
    config = dataclasses.replace(
        config, batching=dataclasses.replace(config.batching, p95_every=p95_every)
    )
    sim = Simulation(config, stage_policy(policy), curves(), arrivals=times)
    sim.sent = []
    sim.run()
    return sim.sent


class FixedView:
    """A platform with ``NODES`` warm replicas of every function."""

    def url(self, function: str) -> str:
        return f"http://{function}.test"

    def replicas(self, function: str) -> ReplicaCounts:
        return ReplicaCounts(NODES, 0, 0, NODES, 0)

    def request_headers(self, function: str) -> dict[str, str]:
        return {}


class ProfileUpstream:
    """Answers a batch of ``n`` after exactly the profile's median for ``n`` (virtual time):
    ``classify`` labels instance ``i`` as ``r<i>``, which the edge turns into the question
    ``What is a r<i>?`` that ``tag`` then receives."""

    def __init__(self, curves: Mapping[str, ServiceCurve]) -> None:
        self.medians = {
            name: curve.tables(MAX_BATCH, deterministic=True)[0] for name, curve in curves.items()
        }
        self.sent: list[Batch] = []

    async def post(
        self, function: str, body: bytes, headers: Mapping[str, str], timeout_s: float
    ) -> Http1Response:
        now = asyncio.get_running_loop().time()
        instances = orjson.loads(body)["instances"]
        stage = list(PROFILES).index(function)
        if stage == 0:
            members = [int(i) for i in instances]
            predictions: list[Any] = [[{"label": f"r{i}", "score": 1.0}] for i in instances]
        else:
            members = [int(re.findall(r"r(\d+)", q)[0]) for q in instances]
            predictions = [{"entities": [], "noun_chunks": []} for _ in instances]
        self.sent.append((function, now, tuple((i, stage) for i in members)))
        await asyncio.sleep(self.medians[function][min(len(instances), MAX_BATCH)] / 1000.0)
        return Http1Response(200, {}, orjson.dumps({"predictions": predictions}))

    async def aclose(self) -> None:
        return None


def live(
    policy_name: str, times: list[float], max_wait_ms: float | None, p95_every: int
) -> list[Batch]:
    config = parse_config(
        {
            "functions": {
                # the simulator admits everything: the live side too, so batching is compared
                "classify": {"model": "imagenet", "max_batch": MAX_BATCH, "late": "serve"},
                "tag": {"model": "ner", "max_batch": MAX_BATCH, "late": "serve"},
            },
            "apps": {"chain": {"stages": list(PROFILES), "slo_ms": SLO_MS}},
        }
    )
    policy = stage_policy(policy_name)
    fitted = curves()
    upstream = ProfileUpstream(fitted)
    clock = VirtualClock()

    async def main() -> None:
        records = RecordWriter(None)
        dispatchers = {
            name: Dispatcher(
                function=fn,
                preset=SLACKWISE,
                aimd=SLACKWISE.aimd_for(fn.max_batch),
                model=LatencyModel.from_prior(
                    max(fitted[name].prior_a_ms, 0.1), max(fitted[name].prior_b_ms, 0.0)
                ),
                view=FixedView(),
                upstream=upstream,
                clock=clock,
                metrics=AdapterMetrics(),
                records=records,
                max_queue=10 * REQUESTS,
                epoch=0.0,
                settings=BatchingSettings(
                    max_wait_ms=max_wait_ms,
                    path_margin_ms=0.0,
                    p95_every=p95_every,
                ),
                stage_policy=policy,
            )
            for name, fn in config.functions.items()
        }
        for dispatcher in dispatchers.values():
            dispatcher.start()
        chain = Chain(config.apps["chain"], config.functions, policy)
        ids = itertools.count()

        async def answer(item: Pending) -> Any:
            return await item.future

        async def one(index: int, at: float) -> None:
            await asyncio.sleep(at - clock.now())
            await chain.run(
                [index], SLO_MS, dispatchers=dispatchers, await_answer=answer, clock=clock,
                ids=ids, records=records, epoch=0.0,
            )  # fmt: skip

        await asyncio.gather(*(one(i, t) for i, t in enumerate(times)))
        for dispatcher in dispatchers.values():
            await dispatcher.stop()

    clock.run(main())
    return upstream.sent


@pytest.mark.parametrize("p95_every", [0, SIMULATOR_P95_EVERY])
@pytest.mark.parametrize("max_wait_ms", [None, 0.0])
@pytest.mark.parametrize("policy", list(POLICIES))
def test_live_and_simulated_loops_send_the_same_batches(
    policy: str, max_wait_ms: float | None, p95_every: int
) -> None:
    """Under every stage policy, with and without waiting for company, reading the latency
    model's own P95 (the live default) or one refreshed every few batches (the simulator's)."""
    times = arrivals()
    expected = simulated(policy, times, max_wait_ms, p95_every)
    got = live(policy, times, max_wait_ms, p95_every)
    assert len(expected) > 20  # enough batches to compare (static ones are large)
    if POLICIES[policy].batching != "none":
        assert sum(len(members) > 1 for _, _, members in expected) > 10  # it batched
    for function in PROFILES:  # the order of two functions' sends at one instant is arbitrary
        mine = [(t, members) for fn, t, members in got if fn == function]
        theirs = [(t, members) for fn, t, members in expected if fn == function]
        assert [m for _, m in mine] == [m for _, m in theirs], function
        assert [t for t, _ in mine] == pytest.approx([t for t, _ in theirs], abs=1e-9)
