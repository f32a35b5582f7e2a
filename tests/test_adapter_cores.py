"""ROMA's CPU half in the adapter (``adapter.cores``): the config, the controller loop fed by the
dispatchers, and a live run where the adapter sets real quotas on the local platform."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from sklearn.datasets import load_digits

from adapter.serving.app import create_app
from adapter.serving.cores import CoreControl, controlled
from adapter.serving.platform_view import LocalView, PinUnsupported
from knative.local.events import ReplicaCounts
from slackwise_config import ConfigError, CoreSettings, parse_config
from slackwise_core.clock import Clock, MonotonicClock, VirtualClock


def _raw(cores: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    return {
        "functions": {
            "a": {"model": "digits", "slo_ms": 100, "threads": 4},
            "b": {"model": "digits", "slo_ms": 200},
            "g": {"model": "embed", "variant": "gpu", "slo_ms": 100},
            **extra,
        },
        "adapter": {"cores": cores or {}},
    }


def test_cores_are_off_by_default_and_read_key_by_key() -> None:
    assert parse_config(_raw()).adapter.cores == CoreSettings()
    settings = parse_config(_raw({"enabled": True, "node_cores": 2, "feed_forward": 0.5,
                                  "functions": ["a"]})).adapter.cores  # fmt: skip
    assert settings.enabled and settings.node_cores == 2.0 and settings.feed_forward == 0.5
    assert settings.functions == ("a",)


@pytest.mark.parametrize(
    ("cores", "says"),
    [
        ({"speed": 1}, r"adapter\.cores\.speed: unknown key"),
        ({"functions": ["nope"]}, r"adapter\.cores\.functions: no function named 'nope'"),
        ({"functions": ["g"]}, r"adapter\.cores\.functions: 'g' computes on cuda"),
        ({"functions": "a"}, r"adapter\.cores\.functions: must be a list"),
        ({"alpha": 1.5}, r"adapter\.cores\.alpha: must be in \(0, 1\]"),
        ({"node_cores": 2, "gpu_cores": 2}, r"adapter\.cores\.gpu_cores: leaves none"),
        ({"enabled": "yes"}, r"adapter\.cores\.enabled: must be true or false"),
    ],
)
def test_bad_core_settings_are_named(cores: dict[str, Any], says: str) -> None:
    with pytest.raises(ConfigError, match=says):
        parse_config(_raw(cores))


def test_by_default_every_cpu_function_the_platform_runs_is_controlled() -> None:
    config = parse_config(_raw(f={"model": "digits", "slo_ms": 50,
                                  "upstream": {"url": "http://127.0.0.1:9"}}))  # fmt: skip
    assert controlled(config.adapter.cores, config.functions) == ["a", "b"]


class _Recorded:
    """A platform that records the cores it is given (and can refuse them)."""

    def __init__(self, refuse: bool = False) -> None:
        self.set: list[tuple[str, float | None]] = []
        self.refuse = refuse

    def url(self, function: str) -> str:
        return "http://127.0.0.1:9"

    def replicas(self, function: str) -> ReplicaCounts:
        return ReplicaCounts(1, 0, 0, 1, 1)

    def request_headers(self, function: str) -> dict[str, str]:
        return {}

    async def set_min_scale(self, function: str, replicas: int | None) -> None:
        raise PinUnsupported("no")

    async def set_scale(self, function: str, replicas: int | None, *, owner: str = "",
                        lease_s: float | None = None) -> None:  # fmt: skip
        raise PinUnsupported("no")

    async def set_cores(self, function: str, cores: float | None) -> None:
        if self.refuse:
            raise PinUnsupported(f"{function}: this cluster runs v1.30.2")
        self.set.append((function, cores))


def _control(
    view: _Recorded, queued: dict[str, float | None], clock: Clock | None = None, **settings: Any
) -> CoreControl:
    config = parse_config(_raw({"enabled": True, "node_cores": 2, "gain": 1.0, "zero": 0.0,
                                **settings}))  # fmt: skip
    return CoreControl(
        settings=config.adapter.cores, functions=config.functions, slos_ms={"a": 100, "b": 200},
        oldest={n: (lambda n=n: queued.get(n)) for n in ("a", "b")},
        work_s={"a": lambda: 0.01, "b": lambda: 0.02}, view=view,
        clock=clock or MonotonicClock(),
    )  # fmt: skip


def test_a_slow_function_gets_the_cores_a_fast_one_gives_up() -> None:
    control = _control(_Recorded(), {})
    assert [ct.u for ct in control.node.controllers] == [1.0, 1.0]  # the node split evenly
    for _ in range(5):
        control.answered("a", 0.150)  # a's set point is 0.5 x 100 ms: three times over
        control.answered("b", 0.010)  # b's is 100 ms: a tenth of it
    cores = control.tick(now=10.0)
    assert cores["a"] > 1.0 > cores["b"] and sum(cores.values()) <= 2.0 + 1e-9
    # nothing answered by a, but its oldest queued request has waited 0.4 s: a is starved
    starved = _control(_Recorded(), {"a": 9.6})
    # a asks for its two threads' worth, b (nothing seen) to stay at 1: scaled to the node
    assert starved.tick(now=10.0) == pytest.approx({"a": 2 * 2 / 3, "b": 2 / 3})


def test_feed_forward_floors_the_demand_from_the_arrivals() -> None:
    control = _control(_Recorded(), {}, feed_forward=0.5, node_cores=4)
    control.arrived("a", 160)  # 160 requests of 10 ms in a second at half utilization: 3.2 cores
    control.answered("a", 0.05)  # on its set point: the PI alone would keep its 2
    # b (one thread) stays at 1; the 4.2 asked are scaled to the node's 4
    assert control.tick(now=1.0) == pytest.approx({"a": 3.2 * 4 / 4.2, "b": 1 * 4 / 4.2})


def test_the_loop_sets_cores_then_lifts_them_and_stops_on_a_refusal() -> None:
    """On the virtual clock: the node's even split at start, a tick every period (4 in 0.2 s,
    each setting both functions), the quotas lifted at stop; a platform that refuses is warned
    about once and never asked again."""

    def run(view: _Recorded) -> CoreControl:
        clock = VirtualClock()
        control = _control(view, {}, clock, period_s=0.05)

        async def main() -> None:
            control.start()
            await clock.sleep(0.2 + 1e-6)
            await control.stop()

        clock.run(main())
        return control

    view = _Recorded()
    control = run(view)
    assert view.set[:2] == [("a", 1.0), ("b", 1.0)]
    assert len(view.set) == 2 + 4 * 2 + 2, view.set
    assert view.set[-2:] == [("a", None), ("b", None)]
    assert control.core_seconds == pytest.approx(0.2 * 2, rel=0.3)
    refused = _Recorded(refuse=True)
    run(refused)
    assert refused.set == []  # warned once and stopped, never retried


@pytest.mark.slow
def test_live_the_adapter_sets_a_real_quota_from_response_times() -> None:
    """Two digits functions behind the adapter on the local platform, under light load: their
    response times sit far below the set points, so the controllers give cores back; the quota
    is on the replicas, and is lifted when the adapter stops."""
    digits = load_digits()
    pinned = {"autoscaling.knative.dev/min-scale": "1", "autoscaling.knative.dev/max-scale": "1"}
    config = parse_config({
        "functions": {n: {"model": "digits", "slo_ms": 200, "annotations": pinned}
                      for n in ("a", "b")},
        "adapter": {"max_wait_ms": 0, "cores": {"enabled": True, "node_cores": 2,
                                                "period_s": 0.25}},
    })  # fmt: skip

    async def go() -> tuple[list[dict[str, Any]], list[float | None]]:
        from knative.local.platform import LocalPlatform

        async with LocalPlatform(config) as platform:
            for name in ("a", "b"):
                await platform.wait_event("cold_start", name, timeout_s=120)
            app = create_app(config, view=LocalView(platform))
            transport = httpx.ASGITransport(app=app)
            async with (
                app.router.lifespan_context(app),
                httpx.AsyncClient(transport=transport, base_url="http://adapter") as client,
            ):
                body = {"instances": [digits.data[0].tolist()]}
                for _ in range(40):
                    for name in ("a", "b"):
                        r = await client.post(f"/v1/models/{name}:predict", json=body)
                        assert r.status_code == 200, r.text
                    await asyncio.sleep(0.05)
                status = [(await client.get(f"/v1/models/{n}")).json() for n in ("a", "b")]
                during = [platform.cores(n) for n in ("a", "b")]
            after = [platform.cores(n) for n in ("a", "b")]
            return status, during + after

    status, cores = asyncio.run(go())
    during, after = cores[:2], cores[2:]
    assert all(c is not None and c < 1.0 for c in during), during  # given back from 1 each
    assert [s["cores"] for s in status] == pytest.approx(during)
    assert after == [None, None]
