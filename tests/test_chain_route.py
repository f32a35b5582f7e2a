"""``POST /v1/apps/{app}:predict``: chains of functions, in process, with fake upstreams.

The functions are answered by an httpx.MockTransport keyed on the routing header, with the
prediction shapes of the real kinds (asr -> ner -> qa), so the real edge adapters run between
stages. The real models run the same chain in tests/test_chain_live.py.
"""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.testclient import TestClient

from adapter.serving.app import create_app
from knative.local.events import ReplicaCounts
from slackwise_cli.results import parse_server_timing
from slackwise_config import Config, ConfigError, parse_config
from slackwise_core.clock import MonotonicClock
from tests.upstreams import HandlerUpstream


class FakeView:
    def url(self, function: str) -> str:
        return "http://upstream.test"

    def replicas(self, function: str) -> ReplicaCounts:
        return ReplicaCounts(1, 0, 0, 1, 0)

    def request_headers(self, function: str) -> dict[str, str]:
        return {"host": function}


def config(late: str | None = None, **adapter: Any) -> Config:
    door = {} if late is None else {"late": late}
    return parse_config(
        {
            "functions": {
                "speech": {"model": "asr", "max_batch": 8, **door},
                "tagger": {"model": "ner", "max_batch": 8, **door},
                "answer": {"model": "qa", "max_batch": 8, **door},
            },
            "apps": {
                "ipa": {"stages": ["speech", "tagger", "answer"], "slo_ms": 2000},
                "ask": {"stages": ["tagger", "answer"], "slo_ms": 1000},
            },
            "adapter": {"aimd": {"initial": 8}, **adapter},
        }
    )  # fmt: skip


class Upstream:
    """Fake functions; records every batch it serves as (function, instances)."""

    def __init__(self, *, no_entities: bool = False, fail: str | None = None) -> None:
        self.batches: list[tuple[str, list[Any]]] = []
        self.no_entities = no_entities
        self.fail = fail
        self.lock = threading.Lock()

    def __call__(self, request: httpx.Request) -> httpx.Response:
        fn = request.headers["host"]
        instances = json.loads(request.content)["instances"]
        with self.lock:
            self.batches.append((fn, instances))
        if fn == self.fail:
            return httpx.Response(500, json={"error": "model crashed"})
        if fn == "speech":
            preds: list[Any] = [{"text": f"who wrote {x['wav_b64']}"} for x in instances]
        elif fn == "tagger":
            chunks = [] if self.no_entities else [{"text": "who"}]
            preds = [{"entities": [], "noun_chunks": chunks, "tokens": []} for _ in instances]
        else:
            preds = [{"answer": f"answer to {x['question']}", "score": 0.9} for x in instances]
        return httpx.Response(200, json={"predictions": preds}, headers={"x-compute-ms": "2.0"})


def client(upstream: Upstream, cfg: Config | None = None, **kw: Any) -> TestClient:
    app = create_app(cfg or config(), view=FakeView(), upstream=HandlerUpstream(upstream), **kw)
    return TestClient(app)


def test_a_request_walks_every_stage_through_the_edges() -> None:
    upstream = Upstream()
    with client(upstream) as c:
        r = c.post("/v1/apps/ipa:predict", json={"instances": [{"wav_b64": "hamlet"}]})
    assert r.status_code == 200, r.text
    assert r.json()["predictions"] == [{"answer": "answer to who wrote hamlet", "score": 0.9}]
    assert [fn for fn, _ in upstream.batches] == ["speech", "tagger", "answer"]
    # the edges: asr's transcript is ner's text, ner's text becomes qa's question
    assert upstream.batches[1][1] == ["who wrote hamlet"]
    assert upstream.batches[2][1] == [{"question": "who wrote hamlet"}]
    timing = parse_server_timing(r.headers["server-timing"])
    for fn in ("speech", "tagger", "answer"):
        assert timing[f"{fn}-compute"] == 2.0 and timing[f"{fn}-queue"] >= 0.0
    assert timing["total"] >= 0.0
    assert r.headers["x-batch-size"] == "1,1,1"


def test_two_apps_share_their_common_stages() -> None:
    upstream = Upstream()
    # waiting for company made worth it at any load (a tiny utilization target), up to 50 ms;
    # every request served, however late: the bursts' timing is the threads', and on a busy
    # machine the door's evidence could refuse one (a CI run saw a non-200 here), which is not
    # what this test is about
    cfg = config(late="serve", max_wait_ms=50, wait_utilization=0.01)
    with client(upstream, cfg) as c, ThreadPoolExecutor(16) as pool:

        def send(i: int) -> httpx.Response:
            if i % 2:
                return c.post("/v1/apps/ipa:predict", json={"instances": [{"wav_b64": f"w{i}"}]})
            return c.post("/v1/apps/ask:predict", json={"instances": [f"who is {i}"]})

        # how the stages' batches form depends on the threads' timing: bursts until one of qa's
        # batches held requests of both apps (every burst must be answered right regardless)
        for _ in range(5):
            responses = list(pool.map(send, range(32)))
            assert all(r.status_code == 200 for r in responses), [
                (r.status_code, r.text[:160]) for r in responses if r.status_code != 200
            ]
            for i, r in enumerate(responses):
                question = f"who wrote w{i}" if i % 2 else f"who is {i}"
                assert r.json()["predictions"][0]["answer"] == f"answer to {question}"
            mixed = [
                b for fn, b in upstream.batches
                if fn == "answer" and len({q["question"].split()[1] for q in b}) > 1
            ]  # fmt: skip
            if mixed:
                break
    assert mixed  # some answer batch mixed requests of both apps


def test_a_stage_output_the_next_stage_cannot_use_is_a_422_naming_the_edge(
    tmp_path: Path,
) -> None:
    upstream = Upstream(no_entities=True)
    records = tmp_path / "records.jsonl"
    with client(upstream, records_path=records) as c:
        r = c.post("/v1/apps/ipa:predict", json={"instances": [{"wav_b64": "x"}]})
    assert r.status_code == 422
    assert "tagger -> answer" in r.json()["error"] and "no entity" in r.json()["error"]
    assert [fn for fn, _ in upstream.batches] == ["speech", "tagger"]  # qa never called
    rows = [json.loads(line) for line in records.read_text().splitlines()]
    app_rows = [row for row in rows if "stages" in row]
    assert len(app_rows) == 1 and app_rows[0]["status"] == 422 and app_rows[0]["missed"]
    assert [s["function"] for s in app_rows[0]["stages"]] == ["speech", "tagger"]


def test_a_failing_stage_fails_the_request_with_the_stage_named() -> None:
    with client(Upstream(fail="tagger")) as c:
        r = c.post("/v1/apps/ipa:predict", json={"instances": [{"wav_b64": "x"}]})
    assert r.status_code == 502 and "tagger" in r.json()["error"]


def test_unknown_apps_and_bad_bodies_get_a_clear_4xx() -> None:
    with client(Upstream()) as c:
        missing = c.post("/v1/apps/nope:predict", json={"instances": [1]})
        bad = c.post("/v1/apps/ipa:predict", content=b"{not json")
        status = c.get("/v1/apps/nope")
    assert missing.status_code == 404 and "nope" in missing.json()["error"]
    assert bad.status_code == 400
    assert status.status_code == 404


@pytest.mark.parametrize("policy", ["GS", "ED-DYN", "EDF-DYN", "GS-Q", "GS-M", "GS-T"])
def test_the_app_status_shows_the_stage_budgets(policy: str) -> None:
    with client(Upstream(), config(stage_policy=policy)) as c:
        body = c.get("/v1/apps/ipa").json()
    budgets = body["stage_budgets_ms"]
    assert body["stage_policy"] == policy and len(budgets) == 3
    assert sum(budgets) == pytest.approx(2000.0, abs=0.1) or policy == "EDF-DYN"
    if policy in ("GS", "GS-T"):  # proportional to the estimates (Eq. 4; GS-T's at no load)
        est = body["estimates_ms"]
        assert budgets == pytest.approx([2000.0 * e / sum(est) for e in est], abs=0.1)
    if policy == "ED-DYN":
        assert budgets == pytest.approx([2000.0 / 3] * 3, abs=0.1)
    if policy in ("GS-Q", "GS-M"):  # nothing queued: GS-Q is GS; GS-M gives each its estimate
        est = body["estimates_ms"]
        assert all(b >= e - 0.1 for b, e in zip(budgets, est, strict=True))
    if policy == "GS-Q":
        assert budgets == pytest.approx([2000.0 * e / sum(est) for e in est], abs=0.1)


def test_a_throughput_aware_chain_answers_and_keeps_its_budgets_within_the_slo() -> None:
    with client(Upstream(), config(stage_policy="GS-T")) as c:
        answers = [c.post("/v1/apps/ipa:predict", json={"instances": [{"wav_b64": "x"}]})
                   for _ in range(5)]  # fmt: skip
        body = c.get("/v1/apps/ipa").json()
    assert [r.status_code for r in answers] == [200] * 5
    assert sum(body["stage_budgets_ms"]) == pytest.approx(2000.0, abs=0.1)
    assert all(b > 0 for b in body["stage_budgets_ms"])


def test_no_batching_policies_send_one_request_per_batch() -> None:
    upstream = Upstream()
    with client(upstream, config(stage_policy="FIFO-NB")) as c, ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda i: c.post("/v1/apps/ask:predict", json={"instances": [f"q {i}"]}),
                      range(16)))  # fmt: skip
    sizes = Counter(len(b) for _, b in upstream.batches)
    assert set(sizes) == {1}


def test_an_app_whose_stages_cannot_be_chained_is_refused_with_the_pair_named() -> None:
    with pytest.raises(ConfigError, match=r"apps\.odd\.stages.*qa.*asr"):
        parse_config(
            {
                "functions": {"a": {"model": "qa"}, "b": {"model": "asr"}},
                "apps": {"odd": {"stages": ["a", "b"], "slo_ms": 100}},
            }
        )
    with pytest.raises(ConfigError, match=r"adapter\.stage_policy"):
        config(stage_policy="fastest")


def test_a_request_past_its_deadline_mid_chain_is_still_answered() -> None:
    # a 1 ms SLO is gone before the second stage: the later stages have no budget left, which
    # must not break their accounting when the functions serve late requests (``late: serve``;
    # the default prunes them, or refuses them at the door, whenever the machine is slow)
    cfg = config()
    serve_late = {n: dataclasses.replace(fn, late="serve") for n, fn in cfg.functions.items()}
    upstream = Upstream()
    with client(upstream, dataclasses.replace(cfg, functions=serve_late)) as c:
        r = c.post(
            "/v1/apps/ipa:predict",
            json={"instances": [{"wav_b64": "x"}]},
            headers={"x-slo-ms": "1"},
        )
    assert r.status_code == 200, r.text
    assert [fn for fn, _ in upstream.batches] == ["speech", "tagger", "answer"]


def test_an_app_experiment_draws_its_plots_from_chain_records(tmp_path: Path) -> None:
    # the replayer's records of a chain carry one batch size per stage and per-stage timings
    from slackwise_cli.plots import plot_experiment
    from slackwise_cli.results import ExperimentResult, ModeRun, ModeSummary, StageTime, batch_size

    headers = {
        "x-batch-size": "1,2,3",
        "server-timing": "a-queue;dur=1, a-upstream;dur=5, a-compute;dur=4, total;dur=9",
    }
    records = [
        {"scheduled": i * 0.1, "latency": 0.05, "status": 200, "headers": headers}
        for i in range(50)
    ]
    assert batch_size(headers) == 2.0 and batch_size({"x-batch-size": "x"}) == 1.0
    run = ModeRun(mode="GS", records=records, usage={"replica_seconds": 1, "cold_starts": 0},
                  timeline=[{"t": 0.0, "ready": 1, "desired": 1}])  # fmt: skip
    summary = ModeSummary(
        requests=50, errors=0, violation_pct=0.0, p50_ms=50, p95_ms=50, p99_ms=50,
        replica_seconds=1, mean_batch=2, cold_starts=0, stages={"a": StageTime(1, 4, 2, 5)},
    )  # fmt: skip
    result = ExperimentResult(function="app", slo_ms=100, trace="t", max_rps=10, step_s=1,
                              duration_s=5, start_s=0, seed=1, modes={"GS": summary},
                              stages=["a"])  # fmt: skip
    paths = plot_experiment(result, {"GS": run}, tmp_path)
    assert [p.name for p in paths] == ["timeseries.png", "ccdf.png", "stages.png"]
    assert all(p.stat().st_size > 5_000 for p in paths)


def test_an_experiment_says_when_and_on_what_it_ran() -> None:
    from slackwise_cli.results import ExperimentResult

    doc = ExperimentResult("f", 100.0, "nasa", 10.0, 1.0, 60.0, 0.0, 1).to_json()
    ran = doc["ran_on"]
    assert ran["at"].endswith("+00:00") and ran["cores"] >= 1 and ran["python"]


def test_a_poisoned_member_of_a_middle_stage_batch_fails_alone() -> None:
    class Poisoned(Upstream):
        """The tagger's model raises on one valid transcript, failing its whole batch."""

        def __call__(self, request: httpx.Request) -> httpx.Response:
            fn = request.headers["host"]
            if fn == "tagger" and any("poison" in x for x in json.loads(request.content)[
                    "instances"]):  # fmt: skip
                with self.lock:
                    self.batches.append((fn, json.loads(request.content)["instances"]))
                return httpx.Response(500, json={"error": "model error: ValueError: poison"})
            return super().__call__(request)

    upstream = Poisoned()
    # waiting for company worth it at any load: the tagger's batches mix the requests; the
    # chain's door serves rather than refuses (late: serve), so a loaded machine's slow batches
    # cannot turn a request away before its tagger batch: admission is not what this tests
    cfg = config(max_wait_ms=50, wait_utilization=0.01)
    speech = dataclasses.replace(cfg.functions["speech"], late="serve")
    cfg = dataclasses.replace(cfg, functions={**cfg.functions, "speech": speech})
    with client(upstream, cfg) as c, ThreadPoolExecutor(12) as pool:
        names = [f"w{i}" for i in range(11)] + ["poison"]
        responses = list(pool.map(
            lambda w: c.post("/v1/apps/ipa:predict", json={"instances": [{"wav_b64": w}]}),
            names,
        ))  # fmt: skip
    by_name = dict(zip(names, responses, strict=True))
    bad = by_name.pop("poison")
    assert bad.status_code == 502 and "poison" in bad.json()["error"], bad.text
    for name, r in by_name.items():
        assert r.status_code == 200, r.text
        assert r.json()["predictions"][0]["answer"] == f"answer to who wrote {name}"
    tagger = [b for fn, b in upstream.batches if fn == "tagger"]
    assert any(any("poison" in x for x in b) for b in tagger)  # the model did see it


class ServiceClock(MonotonicClock):
    """The real clock plus the service time the fake functions say they took: the adapter
    measures each batch on this clock, so what a batch cost is exact on a busy machine too."""

    def __init__(self) -> None:
        self.served = 0.0

    def now(self) -> float:
        return time.monotonic() + self.served


class SizedUpstream(Upstream):
    """The tagger takes time in proportion to its text (a long text costs it ~8x a short one);
    the answer stage takes the same time whatever the request. The time is spent on ``clock``
    (it moves on by the service time, with no sleep), so the machine's scheduling jitter is a
    few milliseconds against service times of 30-260 ms."""

    def __init__(self, clock: ServiceClock) -> None:
        super().__init__()
        self.clock = clock

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.headers["host"] == "tagger":
            texts = json.loads(request.content)["instances"]
            self.clock.served += 0.03 + sum(len(t) for t in texts) / 4_000
        else:
            self.clock.served += 0.12
        return super().__call__(request)


def test_etc_by_input_prices_a_large_request_where_its_size_costs() -> None:
    """With ``etc_by_input``, each function learns from its batches what an input's size costs
    it; a large request's GS split then gives the stage its size makes dear more of the SLO."""
    clock = ServiceClock()
    upstream = SizedUpstream(clock)
    app = create_app(config(etc_by_input=True), view=FakeView(), clock=clock,
                     upstream=HandlerUpstream(upstream))  # fmt: skip
    short, long = "who is it", "who is it " + "x" * 900
    with TestClient(app) as c:
        for i in range(120):
            text = long if i % 2 else short
            r = c.post("/v1/apps/ask:predict", json={"instances": [text]})
            assert r.status_code == 200, r.text
        state = app.state.adapter
        chain, dispatchers = state.chains["ask"], state.dispatchers
        small = len(json.dumps({"instances": [short]}))
        large = len(json.dumps({"instances": [long]}))
        tagger = dispatchers["tagger"].controller.input_cost
        answer = dispatchers["answer"].controller.input_cost
        assert tagger is not None and answer is not None
        assert tagger.cost(large) / tagger.cost(small) > 3.0  # 258 ms against 32 ms
        assert answer.cost(large) / answer.cost(small) < 1.2  # size costs it nothing
        priced = [chain.estimates(dispatchers, b) for b in (small, large)]
        tagger_share = [e[0] / sum(e) for e in priced]
        assert tagger_share[1] > tagger_share[0] + 0.2
        assert chain.estimates(dispatchers) == chain.estimates(dispatchers, 0.0)
        shown = c.get("/v1/models/tagger").json()["input_cost"]
        assert shown["learnt"] and shown["batches"] == 120
        assert shown["cost_at_twice_the_mean"] > 1.5
    # off (the default): nothing is learnt, every request is priced as the mix
    with client(Upstream()) as c:
        c.post("/v1/apps/ask:predict", json={"instances": [short]})
        off = c.app.state.adapter.dispatchers  # type: ignore[attr-defined]
        assert all(d.controller.input_cost is None for d in off.values())
        assert c.get("/v1/models/tagger").json()["input_cost"] is None


def test_a_chain_crowded_past_what_it_was_measured_to_carry_is_refused_at_its_door() -> None:
    upstream = Upstream()
    with client(upstream) as c:
        state = c.app.state.adapter  # type: ignore[attr-defined]
        chain = state.chains["ask"]
        now = state.clock.now()
        for _ in range(8):  # measured: behind one request in flight, 1.5 s (the SLO is 1 s)
            chain.crowding.observe(now, 1, 1.5)
        chain.in_flight = 1  # one request is in flight
        refused = c.post("/v1/apps/ask:predict", json={"instances": ["who?"]})
        chain.in_flight = 0
        admitted = c.post("/v1/apps/ask:predict", json={"instances": ["who?"]})
        body = c.get("/v1/apps/ask").json()
    assert refused.status_code == 429, refused.text
    assert "in flight in the chain" in refused.json()["error"]
    assert int(refused.headers["retry-after"]) >= 1
    assert admitted.status_code == 200  # nothing ahead: always admitted
    assert upstream.batches and all(b[1] == ["who?"] for b in upstream.batches[:1])
    assert body["in_flight"] == 0 and body["crowd"]["ms_by_ahead"]["1"] == 1500.0
    assert body["crowd"]["deepest_admitted"] == 0


def test_a_chain_request_that_rode_a_cold_batch_is_no_evidence_of_the_crowd() -> None:
    class ColdFirst(Upstream):
        """Each function's first four batches come from replicas' first requests (cold)."""

        def __call__(self, request: httpx.Request) -> httpx.Response:
            answer = super().__call__(request)
            fn = request.headers["host"]
            if sum(1 for f, _ in self.batches if f == fn) <= 4:
                answer.headers["x-cold-start"] = "1"
            return answer

    with client(ColdFirst(), config(late="predict")) as c:
        door = c.app.state.adapter.dispatchers["tagger"].controller.lateness  # type: ignore[attr-defined]
        for _ in range(4):  # enough for the crowd rule's quantile, were they evidence
            first = c.post("/v1/apps/ask:predict", json={"instances": ["who?"]})
        after_cold = (c.get("/v1/apps/ask").json()["crowd"]["ms_by_ahead"], door.finished_count)
        for _ in range(4):
            warm = c.post("/v1/apps/ask:predict", json={"instances": ["who?"]})
        after_warm = c.get("/v1/apps/ask").json()["crowd"]["ms_by_ahead"]
    assert first.status_code == 200 and first.headers["x-cold-start"] == "1"
    assert after_cold == ({}, 0)  # neither the crowd rule nor the door's margin learnt from it
    assert warm.status_code == 200 and warm.headers["x-cold-start"] == "0"
    assert "0" in after_warm and door.finished_count == 4  # warm ones are evidence
