"""The autoscaler comparison (Swayam Fig. 9): compliance metric, ClairA1/ClairA2, the advisor
scaler and the CLI's autoscalers section."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from simulator.compliance import compliance_pct, compliant_windows
from simulator.config import parse_sim_config
from simulator.engine import Simulation
from simulator.scalers import FunctionState, KpaScaler
from simulator.service import ServiceCurve
from simulator.swayam_scalers import AdvisorScaler, Clairvoyant, OwnedScaler, window_needs
from slackwise_cli.main import main
from slackwise_config import ConfigError
from slackwise_policies.advisor_settings import AdvisorSettings
from slackwise_policies.slack import stage_policy

TINY_CONFIG = Path(__file__).resolve().parents[1] / "experiments" / "sim" / "tiny.yaml"
IDLE = FunctionState(ready=0, starting=0, inflight=0, queued=0)


def _curve(cold_s: float = 3.0) -> ServiceCurve:
    sizes = (1, 2, 4, 8)
    medians = tuple(10.0 + 2.0 * n for n in sizes)
    return ServiceCurve(
        name="f", sizes=sizes, medians_ms=medians, p95s_ms=medians,
        prior_a_ms=10.0, prior_b_ms=2.0, cold_start_s=cold_s,
    )  # fmt: skip


def _config(**overrides: Any) -> Any:
    doc: dict[str, Any] = {
        "seed": 3,
        "requests": 100000,
        "service": "deterministic",
        "adapter": {"max_wait_ms": 0},
        "platform": {"scaling": "kpa", "autoscaler": {"stable-window": "60s"}},
        "functions": {"f": {"max_batch": 8}},
        "apps": {"app": {"stages": ["f"], "slo_ms": 60}},
    }
    doc.update(overrides)
    return parse_sim_config(doc, "test.yaml")


def _step_arrivals(low: float, high: float, at: float, end: float) -> list[float]:
    """Evenly spaced arrivals: ``low`` rps until ``at``, ``high`` rps until ``end``."""
    times = list(np.arange(0.0, at, 1.0 / low)) + list(np.arange(at, end, 1.0 / high))
    return [float(t) for t in times]


# -- the compliance metric ---------------------------------------------------------------------


def test_all_good_windows_are_full_compliance() -> None:
    assert compliance_pct(np.full(5000, 10.0), rt_max_ms=50, service_level_pct=99) == 100.0


def test_one_bad_stretch_fails_exactly_the_windows_holding_too_much_of_it() -> None:
    """2000 requests, 20 late at 1500..1519: windows start at 0, 10, ..., 1000 (101 of them); a
    window fails when it holds more than 10 late ones (99 % of 1000 = 990 good): those starting
    at 520..1000 (49 windows)."""
    lat = np.full(2000, 10.0)
    lat[1500:1520] = 500.0
    assert compliant_windows(lat <= 50, service_level_pct=99) == (52, 101)
    assert compliance_pct(lat, rt_max_ms=50, service_level_pct=99) == pytest.approx(100 * 52 / 101)


def test_fewer_requests_than_a_window_make_one_window() -> None:
    lat = np.array([10.0] * 98 + [500.0] * 2)
    assert compliant_windows(lat <= 50, service_level_pct=99) == (0, 1)
    assert compliant_windows(lat <= 50, service_level_pct=98) == (1, 1)
    assert compliance_pct([], rt_max_ms=50, service_level_pct=99) == 100.0


def test_compliance_rejects_a_bad_service_level() -> None:
    with pytest.raises(ValueError, match="service_level_pct"):
        compliant_windows([True], service_level_pct=0)


# -- clairvoyant scalers -----------------------------------------------------------------------


def test_window_needs_use_each_windows_realised_count() -> None:
    arrivals = [0.1, 0.2, 0.3, 2.5]  # 3 in window 0, none in 1, one in 2
    assert window_needs(arrivals, tick_s=1.0, need=lambda rate: int(rate)) == [3, 0, 1]


def test_the_minimal_a2_starts_replicas_one_setup_ahead_and_collects_them_lazily() -> None:
    needs = {"f": [1] * 10 + [5] * 10 + [1] * 30}
    a2 = Clairvoyant(needs, tick_s=1.0, lookahead_s={"f": 3.0}, collect_s=5.0)
    assert a2.decide(6.0, "f", IDLE) == 1
    assert a2.decide(7.0, "f", IDLE) == 5  # started at 7, ready at 10: in time for window 10
    assert a2.decide(24.0, "f", IDLE) == 5  # window 19 needed 5 within the last 5 s
    assert a2.decide(25.0, "f", IDLE) == 1
    a1 = Clairvoyant(needs, tick_s=1.0)
    assert [a1.decide(float(t), "f", IDLE) for t in (9, 10, 19, 20)] == [1, 5, 5, 1]
    assert a1.initial("f") == 1
    # a function with work keeps a replica even where no window needs one
    busy = FunctionState(ready=0, starting=0, inflight=1, queued=0)
    assert a1.decide(100.0, "f", busy) == 1


def _run(config: Any, scaler: Any, arrivals: list[float], curve: ServiceCurve) -> Any:
    sim = Simulation(config, stage_policy("GS"), {"f": curve}, requests=len(arrivals),
                     scaler=scaler, arrivals=arrivals)  # fmt: skip
    return sim, sim.run()


def test_resources_minimal_a1_below_minimal_a2_below_kpa_on_a_step_load() -> None:
    arrivals = _step_arrivals(20.0, 300.0, at=60.0, end=120.0)
    arrivals += [t + 120.0 for t in _step_arrivals(20.0, 20.0, at=60.0, end=120.0)]
    curve = _curve(cold_s=3.0)
    config = _config()
    need = lambda rate: max(1, int(np.ceil(rate / 100.0)))  # noqa: E731
    needs = {"f": window_needs(arrivals, tick_s=1.0, need=need)}
    a1_config = _config(functions={"f": {"max_batch": 8, "cold_start_s": 0}})
    _, a1 = _run(a1_config, Clairvoyant(needs, tick_s=1.0), arrivals, curve)
    a2_scaler = Clairvoyant(needs, tick_s=1.0, lookahead_s={"f": 3.0}, collect_s=30.0)
    sim2, a2 = _run(config, a2_scaler, arrivals, curve)
    kpa_scaler = KpaScaler({"f": config.functions["f"].scaling}, initial={"f": 1})
    _, kpa = _run(config, kpa_scaler, arrivals, curve)
    assert a1.replica_seconds < a2.replica_seconds < kpa.replica_seconds
    # ClairA2's replicas were warm when the step came: nothing waited for a cold start
    assert a2.functions[0].cold_batches == 0
    assert a2.functions[0].cold_start_hits == 0
    lat, _ = sim2.latencies_by_arrival()
    assert compliance_pct(lat, rt_max_ms=60, service_level_pct=99) == 100.0
    # the KPA keeps its step-up replicas through its 60 s stable window, then lets them go
    assert kpa.functions[0].peak_replicas >= 2


# -- the advisor scaler ------------------------------------------------------------------------


class _RecordingKpa(KpaScaler):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.timeline: list[tuple[float, int]] = []

    def decide(self, now: float, function: str, state: FunctionState) -> int:
        desired = super().decide(now, function, state)
        self.timeline.append((now, desired))
        return desired


def test_the_advisor_pins_replicas_ahead_of_what_the_kpa_asks_on_a_ramp() -> None:
    arrivals = [float(t) for t in np.cumsum(1.0 / np.linspace(20.0, 600.0, 60000))]
    arrivals = [t for t in arrivals if t < 200.0]
    curve = _curve(cold_s=3.0)
    # a KPA target of 4 in-flight batches per replica: the KPA alone lets the queue grow
    config = _config(functions={"f": {"max_batch": 8, "annotations": {"target": "4"}}},
                     apps={"app": {"stages": ["f"], "slo_ms": 30}})  # fmt: skip
    spec = {"f": config.functions["f"].scaling}
    plain = _RecordingKpa(spec, initial={"f": 1})
    _run(config, plain, arrivals, curve)
    settings = AdvisorSettings(enabled=True, default_setup_s=3.0)
    under = _RecordingKpa(spec, initial={"f": 1})
    advisor = AdvisorScaler(under, settings, slos_ms={"f": 30.0}, percentiles={"f": 99.0},
                            container_concurrency={"f": 1}, max_scale={"f": 0})  # fmt: skip
    sim, result = _run(config, advisor, arrivals, curve)
    assert advisor.pins and max(pin for _, _, pin in advisor.pins) >= 2
    first_pin_at: dict[int, float] = {}
    for t, _, pin in advisor.pins:
        first_pin_at.setdefault(pin, t)
    first_kpa_at: dict[int, float] = {}
    for t, n in plain.timeline:
        first_kpa_at.setdefault(n, t)
    ahead = [n for n, t in first_pin_at.items() if n in first_kpa_at and t < first_kpa_at[n]]
    assert ahead, (first_pin_at, first_kpa_at)
    # it learnt from the request path: the arrivals and the function's latency model
    auto = advisor.functions["f"]
    assert auto.last is not None and auto.last.current_rate > 100.0
    assert auto.model is sim.stations["f"].model
    assert result.requests == len(arrivals)


def test_owning_capacity_follows_the_load_up_and_down_without_the_kpa() -> None:
    # a rise and a fall: the owned count rises ahead of the queue and comes back down, to zero
    # once the load stops and the keep-alive says the gap is long
    up = [float(t) for t in np.cumsum(1.0 / np.linspace(20.0, 600.0, 60000)) if t < 200.0]
    down = [up[-1] + float(t) for t in np.cumsum(np.full(2000, 1.0 / 20.0))]
    arrivals = up + down
    curve = _curve(cold_s=2.0)
    config = _config(functions={"f": {"max_batch": 8}},
                     apps={"app": {"stages": ["f"], "slo_ms": 30}})  # fmt: skip
    settings = AdvisorSettings(enabled=True, default_setup_s=2.0, min_scale_in_gap_s=10.0,
                               keep_alive=False)  # fmt: skip
    owned = OwnedScaler(settings, slos_ms={"f": 30.0}, percentiles={"f": 99.0},
                        container_concurrency={"f": 1}, max_scale={"f": 0},
                        initial={"f": 1})  # fmt: skip
    _, result = _run(config, owned, arrivals, curve)
    counts = [n for _, _, n in owned.counts]
    assert max(counts) >= 3  # it scaled out for the ramp
    peak_at = max(range(len(counts)), key=counts.__getitem__)
    assert min(counts[peak_at:]) < max(counts)  # and back in when the load fell
    assert result.requests == len(arrivals)
    assert owned.missed(5.0, "f") and not owned.missed(5.05, "f")  # re-evaluation is rate-bound


# -- config and CLI ----------------------------------------------------------------------------


def test_a_comparison_needs_one_single_stage_app() -> None:
    with pytest.raises(ConfigError, match="apps: an autoscaling comparison"):
        _config(functions={"f": {}, "g": {}}, apps={"a": {"stages": ["f", "g"]}},
                autoscaling={})  # fmt: skip
    with pytest.raises(ConfigError, match=r"autoscaling\.compare\[1\].*'oracle'"):
        _config(autoscaling={"compare": ["kpa", "oracle"]})
    with pytest.raises(ConfigError, match=r"autoscaling\.advisor\.burst_u"):
        _config(autoscaling={"advisor": {"burst_u": 0.5}})


def _small_comparison(tmp_path: Path, head: str = "", compare: str = "") -> tuple[Path, Path]:
    """A minute of 5-20 rps (a trace file) and an autoscaling config on embed: (trace, config)."""
    trace = tmp_path / "load.rps.txt"
    trace.write_text("\n".join(["5"] * 20 + ["20"] * 20 + ["5"] * 20) + "\n")
    config = tmp_path / "as.yaml"
    config.write_text(
        "profile: cpu\nwarmup_fraction: 0\nadapter: {max_wait_ms: 0}\n"
        + head.format(trace=trace)
        + "platform: {scaling: kpa}\nfunctions: {embed: {max_batch: 16}}\n"
        "apps: {embed: {stages: [embed], slo_factor: 5}}\n"
        f"autoscaling: {{{compare}collect_s: 10, window: 100, step: 10}}\n"
    )
    return trace, config


def test_cli_writes_the_autoscalers_section_from_a_trace_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace, config = _small_comparison(tmp_path)
    out = tmp_path / "out.json"
    code = main(["simulate", "-c", str(config), "--json", str(out), "--trace", str(trace),
                 "--max-rps", "40"])  # fmt: skip
    assert code == 0, capsys.readouterr().err
    doc = json.loads(out.read_text())
    assert doc["trace"] == str(trace) and doc["rate_rps"] == 40
    assert set(doc["autoscalers"]) == {"clair_a1", "clair_a2", "minimal_a2", "kpa", "advisor",
                                       "swayam", "slackwise"}  # fmt: skip
    for row in doc["autoscalers"].values():
        assert {"replica_seconds", "compliance_pct", "violation_pct", "cold_start_hits",
                "vs_clair_a1", "vs_clair_a2", "vs_minimal_a2",
                "normalised"} <= set(row)  # fmt: skip
        assert row["requests"] > 500  # about 10 rps on average for 60 s at peak 40
        assert 0.0 <= row["compliance_pct"] <= 100.0
    rows = doc["autoscalers"]
    assert rows["clair_a1"]["replica_seconds"] <= rows["clair_a2"]["replica_seconds"]
    assert rows["clair_a1"]["vs_clair_a1"] == 1.0
    assert rows["clair_a1"]["compliance_pct"] == rows["clair_a2"]["compliance_pct"] == 100.0
    assert rows["swayam"]["bootstrap"] == rows["slackwise"]["bootstrap"]  # the same start
    printed = capsys.readouterr().out
    assert "clair_a2" in printed and "minimal_a2" in printed and "compl%" in printed


def test_update_re_runs_some_scalers_into_an_existing_comparison(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, config = _small_comparison(
        tmp_path,
        "trace: {{name: {trace}}}\nrate_rps: 40\n",
        "compare: [clair_a2, kpa, slackwise], ",
    )
    out = tmp_path / "out.json"
    base = ["simulate", "-c", str(config), "--json", str(out)]
    assert main(base) == 0, capsys.readouterr().err
    before = json.loads(out.read_text())
    before["commit"] = "0000000"  # as if it had run at an older commit
    before["autoscalers"]["slackwise"]["replica_seconds"] *= 3.0  # and cost more then
    out.write_text(json.dumps(before))
    assert main([*base, "--scalers", "slackwise", "--update"]) == 0, capsys.readouterr().err
    doc = json.loads(out.read_text())
    rows = doc["autoscalers"]
    assert list(rows) == ["clair_a2", "kpa", "slackwise"]  # the file's order
    assert rows["kpa"] == before["autoscalers"]["kpa"]  # kept as it was
    assert doc["rows_commit"]["kpa"] == "0000000"
    assert doc["rows_commit"]["slackwise"] == doc["commit"] != "0000000"
    fresh = rows["slackwise"]["replica_seconds"]
    assert fresh < before["autoscalers"]["slackwise"]["replica_seconds"]  # re-run
    assert rows["slackwise"]["vs_clair_a2"] == pytest.approx(
        fresh / rows["clair_a2"]["replica_seconds"], rel=1e-3
    )  # the ratios are the merged rows'
    assert "slackwise re-run at" in doc["rows_note"]
    capsys.readouterr()
    assert main([*base, "--scalers", "oracle"]) == 2
    assert "unknown scaler 'oracle'" in capsys.readouterr().err
    assert main([*base, "--scalers", "kpa", "--update", "--seed", "8"]) == 2
    assert "seed differs" in capsys.readouterr().err
    assert main(["simulate", "-c", str(TINY_CONFIG), "--scalers", "kpa"]) == 2
    assert "has no autoscaling section" in capsys.readouterr().err


# -- clairvoyants found against the simulator ---------------------------------------------------


def test_late_ticks_name_the_late_requests_of_failing_windows_only() -> None:
    from simulator.clairvoyance import late_ticks

    arrivals = [i * 0.1 for i in range(400)]  # 10 rps for 40 s: ticks of 1 s hold 10 each
    latencies = np.full(400, 10.0)
    latencies[50] = 500.0  # one late request alone: its windows still meet 99 % of 100
    latencies[300:303] = 500.0  # three late in a row: the windows holding them fail
    ticks = late_ticks(latencies, arrivals, slo_ms=100.0, level_pct=99.0, window=100, step=10,
                       tick_s=1.0)  # fmt: skip
    assert ticks == {30}


def test_simulated_clairvoyants_meet_the_sla_in_every_window(tmp_path: Path) -> None:
    trace = tmp_path / "load.rps.txt"
    trace.write_text("\n".join(["10"] * 20 + ["60"] * 20 + ["10"] * 20) + "\n")
    config = tmp_path / "as.yaml"
    config.write_text(
        "profile: cpu\nwarmup_fraction: 0\nadapter: {max_wait_ms: 0}\n"
        f"trace: {{name: {trace}}}\nrate_rps: 120\n"
        "platform: {scaling: kpa}\nfunctions: {embed: {max_batch: 16}}\n"
        "apps: {embed: {stages: [embed], slo_factor: 3}}\n"
        "autoscaling: {compare: [minimal_a1, minimal_a2], collect_s: 10, window: 200, step: 10}\n"
    )
    from simulator.comparison import compare
    from simulator.config import load_sim_config

    loaded = load_sim_config(config)
    rows = compare(loaded)["autoscalers"]
    for row in rows.values():
        assert row["compliance_pct"] == 100.0
        assert row["clair_rounds"] in range(7)  # the default cap: six rounds of repairs
    with pytest.raises(ConfigError, match=r"autoscaling\.clair_needs.*'oracle'"):
        _config(autoscaling={"clair_needs": "oracle"})
    with pytest.raises(ConfigError, match=r"autoscaling\.clair_rounds"):
        _config(autoscaling={"clair_rounds": -1})


def test_a_trimmed_clairvoyant_is_minimal_one_replica_fewer_anywhere_breaks_it(
    tmp_path: Path,
) -> None:
    """ClairA2 with the trim pass: every window complies, and taking one replica out of any
    window (re-running the same seeded run: the same arrivals and service times) breaks the
    SLA somewhere. Checked here by brute force, window by window."""
    from dataclasses import replace as copy

    from simulator.clairvoyance import late_ticks
    from simulator.comparison import scaler_run
    from simulator.comparison_case import run_arrivals
    from simulator.config import load_sim_config
    from simulator.engine import Simulation
    from simulator.run_setup import app_slos_ms
    from simulator.runner import curves_for
    from simulator.swayam_scalers import Clairvoyant
    from slackwise_policies.slack import stage_policy

    trace = tmp_path / "load.rps.txt"
    trace.write_text("\n".join(["10"] * 8 + ["60"] * 8 + ["10"] * 8) + "\n")
    config = tmp_path / "as.yaml"
    config.write_text(
        "profile: cpu\nwarmup_fraction: 0\nadapter: {max_wait_ms: 0}\n"
        f"trace: {{name: {trace}}}\nrate_rps: 120\n"
        "platform: {scaling: kpa}\nfunctions: {embed: {max_batch: 16}}\n"
        "apps: {embed: {stages: [embed], slo_factor: 3}}\n"
        "autoscaling: {compare: [minimal_a2], collect_s: 4, window: 100, step: 10, "
        "clair_trim: 200}\n"
    )
    loaded = load_sim_config(config)
    auto = loaded.autoscaling
    assert auto is not None and auto.clair_trim == 200
    row = scaler_run(loaded, "minimal_a2", loaded.rate_rps, loaded.seed)
    counts = row["clair_counts"]
    assert row["compliance_pct"] == 100.0 and sum(counts) > 0

    curves = curves_for(loaded)
    slo_ms = app_slos_ms(loaded, curves)["embed"]
    arrivals = run_arrivals(loaded, loaded.rate_rps, loaded.seed)
    setup_s = curves["embed"].cold_start_s

    def complies(trial: list[int]) -> bool:
        sim = Simulation(
            loaded, stage_policy(auto.policy), curves, rate_rps=loaded.rate_rps,
            requests=len(arrivals), seed=loaded.seed, arrivals=arrivals,
            scaler=Clairvoyant({"embed": trial}, tick_s=auto.tick_s,
                               lookahead_s={"embed": setup_s}, collect_s=auto.collect_s),
        )  # fmt: skip
        sim.run()
        latencies, _ = sim.latencies_by_arrival()
        return len(latencies) == len(arrivals) and not late_ticks(
            latencies, arrivals, slo_ms=slo_ms, level_pct=100.0 - loaded.max_violation_pct,
            window=auto.window, step=auto.step, tick_s=auto.tick_s,
        )  # fmt: skip

    assert complies(list(counts))  # the run it reports
    for t, n in enumerate(counts):
        if n > 0:
            fewer = list(counts)
            fewer[t] -= 1
            assert not complies(fewer), f"window {t} holds with {n - 1} replicas"
    assert copy(auto, clair_trim=0).clair_trim == 0


# -- the past-only scaler (simulator.hindsight) -------------------------------------------------


def test_hindsight_counts_hold_the_peak_of_the_windows_before_only() -> None:
    from simulator.hindsight import hindsight_counts

    needs = [1, 5, 2, 2, 2, 9, 0, 0, 0, 0]
    # window k sees windows k-3..k-1 (never its own): the 5 is held 3 windows after it
    assert hindsight_counts(needs, 3, initial=2) == [2, 2, 5, 5, 5, 2, 9, 9, 9, 0]
    assert hindsight_counts(needs, 1, initial=0) == [0, *needs[:-1]]
    assert hindsight_counts([], 5, initial=3) == []
    with pytest.raises(ValueError, match="hold"):
        hindsight_counts(needs, 0, initial=0)


def test_hindsight_pays_for_what_it_did_not_foresee(tmp_path: Path) -> None:
    """On a step the clairvoyant meets in every window, the past-only scaler with the same exact
    needs misses just after the step (its replicas start when the step is seen, and take their
    setup time), and a longer hold costs more replica-seconds."""
    from simulator.comparison import compare
    from simulator.config import load_sim_config
    from simulator.hindsight import hindsight_run

    trace = tmp_path / "load.rps.txt"
    trace.write_text("\n".join(["10"] * 20 + ["60"] * 20 + ["10"] * 20) + "\n")
    config = tmp_path / "as.yaml"
    config.write_text(
        "profile: cpu\nwarmup_fraction: 0\nadapter: {max_wait_ms: 0}\n"
        f"trace: {{name: {trace}}}\nrate_rps: 120\n"
        "platform: {scaling: kpa}\nfunctions: {embed: {max_batch: 16}}\n"
        "apps: {embed: {stages: [embed], slo_factor: 3}}\n"
        "autoscaling: {compare: [minimal_a2], collect_s: 10, window: 200, step: 10}\n"
    )
    loaded = load_sim_config(config)
    clair = compare(loaded)["autoscalers"]["minimal_a2"]
    rate, seed = loaded.rate_rps, loaded.seed
    short = hindsight_run(loaded, hold_s=2.0, burst_u=1.0, rate_rps=rate, seed=seed)
    long = hindsight_run(loaded, hold_s=30.0, burst_u=1.0, rate_rps=rate, seed=seed)
    assert clair["compliance_pct"] == 100.0
    assert short["compliance_pct"] < 100.0 and short["violation_pct"] > 0.0
    assert long["replica_seconds"] > short["replica_seconds"]
    assert short["hold_s"] == 2.0 and long["burst_u"] == 1.0


def test_swayam_as_published_takes_its_own_rules() -> None:
    from simulator.comparison import swayam_settings

    auto = _config(autoscaling={"collect_s": 120}).autoscaling
    assert auto is not None
    published = swayam_settings(auto)
    assert (published.model, published.burst_u, published.history_s) == ("swayam", 2.0, 500.0)
    assert published.min_scale_in_gap_s == 120  # backends go after a collection period unused
    assert not (published.keep_alive or published.floor_at_current or published.evidence)
    assert auto.advisor.model != "swayam"  # slackwise's own settings are untouched
