"""The advisor at work (adapter.serving.advisor_loop): fed from the request path, pinning the
platform.

Time is injected: a manual clock drives the loop's :meth:`Autoscaling.tick` directly.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from starlette.testclient import TestClient

from adapter.serving.advisor_loop import Autoscaling
from adapter.serving.platform_view import PinUnsupported
from functions.gossip import FrontendTally, parse_window
from functions.headers import FRONTEND_ID, FRONTEND_WINDOW_S, FRONTENDS, PLATFORM_WAIT_MS
from knative.cluster.client import MIN_SCALE, KnativeClient
from knative.cluster.view import KnativeView
from knative.local.events import ReplicaCounts
from slackwise_config import Config, ConfigError, parse_config
from slackwise_core.clock import VirtualClock
from slackwise_policies.advisor_settings import AdvisorSettings
from slackwise_policies.latency import LatencyModel
from tests.kube.fake_api import FakeKubernetes
from tests.upstreams import HandlerUpstream


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def now(self) -> float:
        return self.t

    async def sleep(self, seconds: float) -> None:
        self.t += seconds


class RecordingView:
    """A platform that remembers every pin and reports what its KPA wants."""

    def __init__(self, kpa_wants: int = 0, *, unsupported: bool = False) -> None:
        self.kpa_wants = kpa_wants
        self.pins: list[tuple[str, int | None]] = []
        self.counts: list[tuple[str, int | None]] = []
        self.times: list[tuple[float, int | None]] = []
        self.unsupported = unsupported

    def url(self, function: str) -> str:
        return "http://upstream.test"

    def replicas(self, function: str) -> ReplicaCounts:
        return ReplicaCounts(0, 0, 0, self.kpa_wants, 0)

    def request_headers(self, function: str) -> dict[str, str]:
        return {}

    async def set_min_scale(self, function: str, replicas: int | None) -> None:
        if self.unsupported:
            raise PinUnsupported("fixed endpoint")
        self.pins.append((function, replicas))

    async def set_scale(
        self, function: str, replicas: int | None, *, owner: str = "", lease_s: float | None = None
    ) -> None:
        if self.unsupported:
            raise PinUnsupported("fixed endpoint")
        self.counts.append((function, replicas))
        self.times.append((asyncio.get_running_loop().time(), replicas))


def config(**advisor: Any) -> Config:
    return parse_config(
        {
            "functions": {
                "embed": {
                    "model": "embed", "slo_ms": 300, "max_batch": 8,
                    "annotations": {"autoscaling.knative.dev/max-scale": "6"},
                },
            },
            "adapter": {"advisor": {"enabled": True, "capacity": "floor", **advisor}},
        }
    )  # fmt: skip


def autoscaling(view: Any, clock: Clock, **advisor: Any) -> Autoscaling:
    cfg = config(**advisor)
    return Autoscaling(
        settings=cfg.adapter.advisor,
        functions=cfg.functions,
        slos={"embed": 300.0},
        models={"embed": LatencyModel.from_prior(20.0, 5.0)},  # 20 ms + 5 ms per item
        limits={"embed": lambda: 8},
        view=view,
        clock=clock,
    )


def arrive(a: Autoscaling, clock: Clock, rate: float, seconds: int) -> None:
    """``rate`` requests per second for ``seconds``, evenly spaced, ticking once a second."""
    for _ in range(seconds):
        for i in range(int(rate)):
            a.arrived("embed", clock.t + i / rate, 1)
        clock.t += 1.0
        asyncio.run(a.tick())


def test_a_rising_rate_is_pinned_ahead_and_the_pin_is_released_after_the_gap() -> None:
    clock, view = Clock(), RecordingView()
    a = autoscaling(view, clock, min_scale_in_gap_s=30, keep_alive=False, default_setup_s=5)
    arrive(a, clock, 20, 20)
    low = a.functions["embed"].pinned or 0
    arrive(a, clock, 150, 20)  # a rise: the pin follows at once (scale-out is proactive)
    high = a.functions["embed"].pinned or 0
    assert high > low >= 1
    assert a.functions["embed"].last is not None
    assert a.functions["embed"].last.reason in ("scale-out", "steady")
    pins_before_quiet = len(view.pins)
    arrive(a, clock, 0, 10)  # silence shorter than the gap: the pin holds
    assert a.functions["embed"].pinned == high
    assert len(view.pins) == pins_before_quiet
    arrive(a, clock, 0, 120)  # well past the gap: released step by step, back to the config
    assert a.functions["embed"].pinned is None
    assert view.pins[-1] == ("embed", None)
    assert all(p is None or 1 <= p <= 6 for _, p in view.pins)  # within max-scale


def test_the_pin_is_written_only_when_it_changes() -> None:
    clock, view = Clock(), RecordingView()
    a = autoscaling(view, clock, keep_alive=False)
    arrive(a, clock, 30, 30)
    values = [p for _, p in view.pins]
    assert values and all(x != y for x, y in itertools.pairwise(values))


def test_measured_cold_starts_and_gossip_reach_the_advisor() -> None:
    clock, view = Clock(), RecordingView()
    a = autoscaling(view, clock, default_setup_s=5)
    assert a.window_s("embed") == pytest.approx(5.0)
    for _ in range(5):  # a batch held 2.5 s by the platform while a replica started
        held = {PLATFORM_WAIT_MS: "2500"}
        a.answered("embed", held, clock.t, waited_cold=True, round_trip_ms=2600, batch_ms=100)
    assert a.window_s("embed") == pytest.approx(2.5)
    gossip = {FRONTENDS: "3"}
    a.answered("embed", gossip, clock.t, waited_cold=False, round_trip_ms=100, batch_ms=100)
    arrive(a, clock, 10, 3)
    last = a.functions["embed"].last
    assert last is not None and last.frontends == 3
    # the model sees the global rate: this adapter's share × n_F × U
    assert last.model_rate == pytest.approx(last.current_rate * 3 * 2.0, rel=0.35)


def test_a_platform_that_takes_no_pin_turns_the_advisor_off_quietly() -> None:
    clock, view = Clock(), RecordingView(unsupported=True)
    a = autoscaling(view, clock, keep_alive=False)
    arrive(a, clock, 50, 3)
    assert view.pins == [] and a.functions["embed"].pinned is None


def test_stop_releases_every_pin() -> None:
    clock, view = Clock(), RecordingView()
    a = autoscaling(view, clock, keep_alive=False)
    arrive(a, clock, 80, 5)
    assert a.functions["embed"].pinned
    asyncio.run(a.stop())
    assert view.pins[-1] == ("embed", None)


def test_advisor_settings_are_checked_with_the_key_named() -> None:
    with pytest.raises(ConfigError, match=r"adapter\.advisor\.burst_u"):
        config(burst_u=0.5)
    with pytest.raises(ConfigError, match=r"adapter\.advisor\.enabled"):
        config(enabled="yes")
    with pytest.raises(ConfigError, match=r"adapter\.advisor\.surge"):
        config(surge=2)
    assert config().adapter.advisor == AdvisorSettings(enabled=True, capacity="floor")
    with pytest.raises(ConfigError, match=r"adapter\.advisor\.capacity: must be one of own, floor"):
        config(capacity="kpa")


# -- owning capacity -------------------------------------------------------------------------


def test_owning_capacity_writes_the_count_itself_and_scales_to_zero() -> None:
    clock, view = Clock(), RecordingView(kpa_wants=9)
    a = autoscaling(view, clock, capacity="own", keep_alive=False, min_scale_in_gap_s=20)
    arrive(a, clock, 100, 15)
    counts = [n for _, n in view.counts]
    assert view.pins == []  # no floor: the count itself
    assert counts and max(counts) >= 2 and all(n is not None and n <= 6 for n in counts)
    assert max(counts) < 9  # what the KPA wants does not matter
    arrive(a, clock, 0, 120)  # silence: down to zero, not back to the KPA
    assert view.counts[-1] == ("embed", 0)
    asyncio.run(a.stop())
    assert view.counts[-1] == ("embed", None)  # stopping hands the count back


def test_owning_capacity_rewrites_an_unchanged_count_now_and_then() -> None:
    clock, view = Clock(), RecordingView()
    a = autoscaling(view, clock, capacity="own", keep_alive=False)
    arrive(a, clock, 30, 40)
    values = [n for _, n in view.counts]
    assert any(x == y for x, y in itertools.pairwise(values))  # a restarted platform hears it
    assert len(values) < 40 / 2  # but not on every tick


def test_a_missed_slo_asks_for_a_decision_at_once() -> None:
    clock, view = VirtualClock(start=1000.0), RecordingView()
    a = autoscaling(view, clock, capacity="own", keep_alive=False, tick_s=5.0)  # type: ignore[arg-type]

    async def scenario() -> list[float]:
        a.start()
        for i in range(50):
            a.arrived("embed", clock.now() + i / 100, 1)
        await asyncio.sleep(0.5)
        a.missed("embed", clock.now())
        a.missed("embed", clock.now() + 0.01)  # within the gap: one decision, not two
        await a.settle()
        decided = [when for when, _ in view.times]
        await a.stop()
        return decided

    decided = clock.run(scenario())
    assert decided == [1000.5]  # at the miss, long before the first 5 s tick


# -- Knative actuation, against the in-memory API server ------------------------------------


@pytest.fixture
def fake() -> Iterator[FakeKubernetes]:
    with FakeKubernetes() as server:
        server.serving_version = "1.23.0"
        yield server


def test_on_knative_the_pin_lands_on_the_revision_min_scale(fake: FakeKubernetes) -> None:
    ns = "ml"
    service = {
        "apiVersion": "serving.knative.dev/v1",
        "kind": "Service",
        "metadata": {"name": "embed"},
        "spec": {
            "template": {
                "metadata": {"annotations": {MIN_SCALE: "0",
                                             "autoscaling.knative.dev/max-scale": "6"}},
                "spec": {"containerConcurrency": 1, "containers": [{"image": "r/embed:1"}]},
            }
        },
    }  # fmt: skip
    with fake.api_client() as api:
        client = KnativeClient(api, ns)
        client.apply(service)
        view = KnativeView(client, ["embed"], poll_s=0.01)
        clock = Clock()
        a = autoscaling(view, clock, keep_alive=False)

        async def run() -> None:
            await view.start()
            for _ in range(10):
                for i in range(100):
                    a.arrived("embed", clock.t + i / 100, 1)
                clock.t += 1.0
                await a.tick()
            await view.stop()

        asyncio.run(run())
        pinned = a.functions["embed"].pinned
        assert pinned is not None and pinned >= 1
        revision = fake.get("revisions", ns, "embed-00001")
        assert revision is not None
        assert revision["metadata"]["annotations"][MIN_SCALE] == str(pinned)
        assert fake.names("revisions", ns) == ["embed-00001"]  # no new revision
        asyncio.run(a.stop())
        revision = fake.get("revisions", ns, "embed-00001")
        assert revision is not None and revision["metadata"]["annotations"][MIN_SCALE] == "0"


def test_deploy_advise_delete_runs_under_the_generated_role_with_no_403_and_no_traceback(
    fake: FakeKubernetes, tmp_path: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """The whole cycle on the in-memory API: a user deploys the Services a config makes (judged
    by the CRD schema where it is found, and the webhook's rules), the adapter, holding only the
    Role the manifests grant, owns the count on the serving revision and withdraws it on
    stop, and the user deletes. No call is refused and nothing is logged with a traceback."""
    import argparse
    import logging

    import yaml

    from knative.cluster import cli as cluster
    from knative.cluster.client import MAX_SCALE
    from knative.cluster.manifests import rbac_objects

    ns = "ml"
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump({"functions": {"embed": {
        "model": "embed", "slo_ms": 300, "max_batch": 8, "container_concurrency": 1,
        "annotations": {"autoscaling.knative.dev/max-scale": "6"},
    }}}), encoding="utf-8")  # fmt: skip
    parser = argparse.ArgumentParser()
    cluster.add_deploy_arguments(parser)
    args = parser.parse_args(["-c", str(path), "-n", ns, "--timeout-s", "5"])
    caplog.set_level(logging.INFO)
    with fake.api_client() as admin_api:
        admin = KnativeClient(admin_api, ns)
        assert cluster.run_deploy(args, admin) == 0
        (role,) = [o for o in rbac_objects(ns) if o["kind"] == "Role"]
        fake.enforce(role)
        try:
            with fake.api_client() as api:
                view = KnativeView(KnativeClient(api, ns, serving_version="1.23"), ["embed"],
                                   poll_s=0.01)  # fmt: skip
                clock = Clock()
                a = autoscaling(view, clock, capacity="own", keep_alive=False)
                held: list[tuple[str, str]] = []

                async def run() -> None:
                    await view.start()
                    for _ in range(12):
                        for i in range(150):
                            a.arrived("embed", clock.t + i / 150, 1)
                        clock.t += 1.0
                        await a.tick()
                        await a.settle()
                    revision = fake.get("revisions", ns, "embed-00001") or {}
                    notes = revision["metadata"]["annotations"]
                    held.append((notes[MIN_SCALE], notes[MAX_SCALE]))
                    await a.stop()
                    await view.stop()

                asyncio.run(run())
            assert fake.denied == []
        finally:
            fake.enforce(None)
            fake.denied.clear()
        ((low, high),) = held
        assert low == high and int(low) >= 2  # owned: min and max together, above the floor
        revision = fake.get("revisions", ns, "embed-00001")
        assert revision is not None  # withdrawn on stop: the template's own bounds again
        assert revision["metadata"]["annotations"][MAX_SCALE] == "6"
        assert cluster.run_delete(args, admin) == 0
    assert fake.names("services", ns) == []
    loud = [r.getMessage() for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]
    assert loud == []


# -- the functions' gossip ------------------------------------------------------------------


def test_the_tally_counts_distinct_frontends_within_the_window() -> None:
    tally = FrontendTally(max_ids=3)
    tally.seen("a", 0.0)
    tally.seen("b", 5.0)
    tally.seen("a", 9.0)
    assert tally.count(10.0, 2.0) == 1 and tally.count(10.0, 6.0) == 2
    for name in ("c", "d", "e"):
        tally.seen(name, 11.0)
    assert tally.count(11.0, 100.0) == 3  # bounded: the least recently seen are forgotten
    assert parse_window("2.5") == 2.5 and parse_window("nan") == 60.0
    assert parse_window(None) == 60.0 and parse_window("-1") == 60.0 and parse_window("1e9") == 3600


def test_a_function_reports_how_many_frontends_it_heard_from() -> None:
    from functions.registry import create_model
    from functions.runtime import create_app

    model = create_model("digits")
    body = {"instances": model.sample_instances(1)}
    with TestClient(create_app(model, name="digits")) as c:
        for _ in range(200):
            if c.get("/v1/models/digits").status_code == 200:
                break
            asyncio.run(asyncio.sleep(0.05))
        plain = c.post("/v1/models/digits:predict", json=body)
        counts = [
            c.post("/v1/models/digits:predict", json=body,
                   headers={FRONTEND_ID: fe, FRONTEND_WINDOW_S: "30"}).headers[FRONTENDS]
            for fe in ("adapter-a", "adapter-b", "adapter-a")
        ]  # fmt: skip
    assert FRONTENDS not in plain.headers
    assert counts == ["1", "2", "2"]


def test_the_adapters_requests_reach_its_advisor_and_name_the_adapter_to_the_replicas() -> None:
    """Through the app as `slackwise serve` wires it: each request's arrival, answer and outcome
    reach the advisor, and each batch names this adapter for the replicas' count of frontends."""
    import httpx

    from adapter.serving.app import create_app

    seen: list[httpx.Headers] = []

    def replica(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers)
        n = len(orjson.loads(request.content)["instances"])
        preds = [[0.1, 0.9]] * n
        return httpx.Response(200, json={"predictions": preds}, headers={FRONTENDS: "2"})

    view = RecordingView(kpa_wants=1)
    app = create_app(config(), view=view, upstream=HandlerUpstream(replica), advisor=True)
    with TestClient(app) as c:
        for _ in range(5):
            r = c.post("/v1/models/embed:predict", json={"instances": ["a sentence"]})
            assert r.status_code == 200, r.text
        state = app.state.adapter
        auto = state.autoscaling.functions["embed"]
        assert auto.last_arrival is not None
        assert auto.evidence is not None and auto.evidence.counts(state.clock.now())[0] == 5
        assert auto.advisor.frontends == 2
    assert seen and all(h[FRONTEND_ID] == state.frontend_id for h in seen)
