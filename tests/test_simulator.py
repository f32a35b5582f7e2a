"""The simulator: known answers on tiny cases, determinism, accounting, the CLI and its errors."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from simulator.config import load_sim_config, parse_sim_config
from simulator.engine import Simulation
from simulator.runner import curves_for
from simulator.service import ServiceCurve
from slackwise_cli.main import main
from slackwise_config import ConfigError
from slackwise_policies.slack import POLICIES, stage_policy

TINY = Path(__file__).resolve().parents[1] / "experiments" / "sim" / "tiny.yaml"


def _curve(a_ms: float = 8.0, b_ms: float = 2.0, cold_s: float = 1.0) -> ServiceCurve:
    """A deterministic-looking linear curve: a + b·n ms, measured at 1, 2, 4, 8."""
    sizes = (1, 2, 4, 8)
    medians = tuple(a_ms + b_ms * n for n in sizes)
    return ServiceCurve(
        name="f", sizes=sizes, medians_ms=medians, p95s_ms=medians,
        prior_a_ms=a_ms, prior_b_ms=b_ms, cold_start_s=cold_s,
    )  # fmt: skip


def _config(**overrides: Any) -> Any:
    doc: dict[str, Any] = {
        "seed": 3,
        "requests": 3,
        "rate_rps": 10,
        "service": "deterministic",
        "adapter": {"max_wait_ms": 0},
        "functions": {"f": {"nodes": 1, "max_batch": 8}},
        "apps": {"app": {"stages": ["f"], "slo_ms": 25}},
    }
    doc.update(overrides)
    return parse_sim_config(doc, "test.yaml")


def test_one_request_on_one_replica_takes_its_service_time() -> None:
    config = _config(requests=1)
    result = Simulation(config, stage_policy("GS"), {"f": _curve()}, arrivals=[0.5]).run()
    assert result.requests == 1
    assert result.p50_ms == pytest.approx(10.0)
    assert result.mean_batch == 1.0
    assert result.apps[0].stages[0].queue_ms == pytest.approx(0.0)
    assert result.apps[0].stages[0].compute_ms == pytest.approx(10.0)


def test_fifo_without_batching_against_gs_on_a_hand_worked_queue() -> None:
    """Three requests at once on one replica, 10 ms alone, 12 ms as a pair, SLO 25 ms.

    FIFO-NB serves them one by one: done at 10, 20, 30 ms, so the third misses. GS sends the
    first at once (nothing else is queued yet... all three are, but the first arrival is decided
    alone), then the two others as one batch of 2 (12 ms): done at 10 and 22 ms, no miss.
    """
    arrivals = [0.0, 0.0001, 0.0002]
    config = _config()
    fifo = Simulation(config, stage_policy("FIFO-NB"), {"f": _curve()}, arrivals=arrivals).run()
    gs = Simulation(config, stage_policy("GS"), {"f": _curve()}, arrivals=arrivals).run()
    assert fifo.violation_pct == pytest.approx(100.0 / 3)
    assert fifo.mean_batch == 1.0
    assert fifo.duration_s == pytest.approx(0.030)
    assert gs.violation_pct == 0.0
    assert gs.functions[0].batches == 2
    assert gs.duration_s == pytest.approx(0.022)
    assert gs.mean_ms < fifo.mean_ms


def test_md1_mean_wait_matches_pollaczek_khinchine() -> None:
    """Poisson arrivals, 10 ms deterministic service, no batching, one server at ρ = 0.5:
    mean wait ρ·D / (2(1 − ρ)) = 5 ms, so a mean sojourn of 15 ms."""
    config = _config(requests=40000, rate_rps=50, warmup_fraction=0.05,
                     apps={"app": {"stages": ["f"], "slo_ms": 1000}})  # fmt: skip
    result = Simulation(config, stage_policy("FIFO-NB"), {"f": _curve()}).run()
    wait = result.apps[0].stages[0].queue_ms
    assert wait == pytest.approx(5.0, rel=0.08)
    assert result.mean_ms == pytest.approx(15.0, rel=0.04)


def test_same_seed_same_result_other_seed_other_result() -> None:
    config = load_sim_config(TINY)
    curves = curves_for(config)
    gs = stage_policy("GS")
    one = Simulation(config, gs, curves, requests=800).run().to_json()
    two = Simulation(config, gs, curves, requests=800).run().to_json()
    other = Simulation(config, gs, curves, requests=800, seed=99).run().to_json()
    assert one == two
    assert one != other


def test_fixed_fleet_costs_nodes_times_duration() -> None:
    config = load_sim_config(TINY)
    result = Simulation(config, stage_policy("EDF-DYN"), curves_for(config), requests=500).run()
    nodes = sum(f.nodes for f in config.functions.values())
    assert result.replica_seconds == pytest.approx(nodes * result.duration_s)


def test_kpa_fleet_starts_from_zero_with_a_cold_batch_and_serves_everyone() -> None:
    config = _config(requests=200, rate_rps=20, platform={"scaling": "kpa"},
                     apps={"app": {"stages": ["f"], "slo_ms": 5000}})  # fmt: skip
    result = Simulation(config, stage_policy("GS"), {"f": _curve(cold_s=2.0)}).run()
    assert result.requests == 200
    assert result.functions[0].cold_batches >= 1
    # the initial replica starts at time 0 (initial-scale 1): early arrivals wait for it
    assert result.p99_ms > 1000.0
    assert 0 < result.replica_seconds <= result.functions[0].peak_replicas * result.duration_s


@pytest.mark.parametrize("name", list(POLICIES))
def test_every_policy_runs_the_tiny_workload(name: str) -> None:
    config = load_sim_config(TINY)
    result = Simulation(config, stage_policy(name), curves_for(config), requests=400).run()
    assert result.requests == 400 - int(400 * config.warmup_fraction)
    assert result.p50_ms > 0
    if stage_policy(name).batching == "none":
        assert result.mean_batch == 1.0


def test_cli_writes_the_per_policy_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> (
    None
):  # fmt: skip
    out = tmp_path / "out.json"
    plots = tmp_path / "plots"
    code = main(["simulate", "-c", str(TINY), "--json", str(out), "--policies", "FIFO-NB,GS",
                 "--requests", "600", "--plots", str(plots)])  # fmt: skip
    assert code == 0
    # GrandSLAM Fig. 11 per app of the workload
    assert sorted(p.name for p in plots.iterdir()) == [
        "stages-img_query.png", "stages-text_query.png"
    ]  # fmt: skip
    doc = json.loads(out.read_text())
    assert {"workload", "profile", "policies", "sla", "gs_over_best_prior"} <= set(doc)
    assert len(doc["commit"]) >= 7 and doc["machine"]["cores"] >= 1  # where it came from
    assert set(doc["policies"]) == {"FIFO-NB", "GS"}
    for entry in doc["policies"].values():
        assert {"requests", "violation_pct", "p50_ms", "p99_ms", "mean_ms", "mean_batch",
                "replica_seconds", "max_rps_at_sla", "stages"} <= set(entry)  # fmt: skip
        assert entry["max_rps_at_sla"] >= 0
        assert entry["instances"] == 6
        assert entry["instances_at_load"] is None or entry["instances_at_load"] >= 3
    assert "GS" in capsys.readouterr().out


def test_instances_at_load_is_the_fewest_that_hold_the_sla() -> None:
    """Fig. 14: at the config's rate, the fleet found holds the SLA and the next smaller
    scaling of it does not (unless it is already one node per function)."""
    from simulator.runner import instances_at_load, run_one, scaled_fleet, with_overrides

    # batches leave when a slot is free (as in the GrandSLAM configs): capacity decides
    tiny = load_sim_config(TINY)
    config = with_overrides(
        tiny, batching=dataclasses.replace(tiny.batching, max_wait_ms=0.0), rate_rps=300.0
    )
    curves = curves_for(config)
    need = instances_at_load(config, "GS", curves, seed=config.seed)
    assert need is not None and need >= len(config.functions)

    def holds(fleet: Any) -> bool:
        result = run_one(fleet, "GS", curves, rate_rps=config.rate_rps,
                         requests=config.search.requests, seed=config.seed)  # fmt: skip
        return result.violation_pct <= config.max_violation_pct

    factors = [f / 8 for f in range(1, 65)]
    sized = {sum(fn.nodes for fn in scaled_fleet(config, f).functions.values()): f
             for f in reversed(factors)}  # fmt: skip
    assert need in sized and holds(scaled_fleet(config, sized[need]))
    slack = max(1, round(config.search.tolerance * need))  # the search's own resolution
    smaller = [n for n in sized if n < need - slack]
    if smaller:
        assert not holds(scaled_fleet(config, sized[max(smaller)]))


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("functions: {f: {nodez: 2}}\napps: {a: {stages: [f]}}\n", "functions.f.nodez"),
        ("rate_rps: -3\nfunctions: {f: {}}\napps: {a: {stages: [f]}}\n", "rate_rps"),
        ("functions: {f: {}}\napps: {a: {stages: [g]}}\n", "apps.a.stages[0]"),
        ("policies: [GS, XYZ]\nfunctions: {f: {}}\napps: {a: {stages: [f]}}\n", "policies[1]"),
    ],
)
def test_bad_config_is_rejected_naming_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, named: str
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=named.replace("[", r"\[").replace("]", r"\]")):
        load_sim_config(path)
    assert main(["simulate", "-c", str(path)]) == 2
    err = capsys.readouterr().err
    assert str(path) in err and named in err


def test_unknown_profile_set_is_an_error_not_a_traceback(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["simulate", "-c", str(TINY), "--profile", "/nonexistent/set"]) == 2
    assert "profile" in capsys.readouterr().err


def test_gs_is_compared_with_the_papers_baselines_not_its_own_variants(tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    assert main(["simulate", "-c", str(TINY), "--json", str(out), "--policies",
                 "FIFO-NB,GS,GS-Q", "--requests", "600"]) == 0  # fmt: skip
    doc = json.loads(out.read_text())
    rps = {n: p["max_rps_at_sla"] for n, p in doc["policies"].items()}
    assert doc["gs_over_best_prior"] == pytest.approx(rps["GS"] / rps["FIFO-NB"], rel=1e-3)


def test_the_per_type_search_leaves_a_fleet_from_which_no_node_can_go() -> None:
    """A pure case: the SLA holds while a has 3, b has 5 and they have 10 between them. From
    (8, 8) the search takes a down to 3 first (the largest, then by name), then b to the 7 the
    sum still needs: a fleet that holds, from which no single node can be taken, found by
    bisection (a few checks, not one per node)."""
    from simulator.fleet_search import fewest_per_function

    def holds(c: Any) -> bool:
        return c["a"] >= 3 and c["b"] >= 5 and c["a"] + c["b"] >= 10

    got = fewest_per_function({"a": 8, "b": 8}, holds)
    assert holds(got) and got == {"a": 3, "b": 7}
    assert all(not holds({**got, n: got[n] - 1}) for n in got)
    calls: list[dict[str, int]] = []

    def counted(c: Any) -> bool:
        calls.append(dict(c))
        return holds(c)

    fewest_per_function({"a": 64, "b": 64}, counted)
    assert len(calls) < 25  # bisection, not a walk down one node at a time


def test_per_type_fleet_at_load_holds_and_no_node_of_any_function_can_go() -> None:
    """Fig. 14 per function type on the tiny workload: the per-type fleet holds the SLA at the
    config's rate, needs no more nodes than the one-factor fleet, and taking one node from any
    function breaks it (checked by running each)."""
    from simulator.runner import fleet_at_load, per_function_at_load, run_one, with_overrides

    tiny = load_sim_config(TINY)
    config = with_overrides(
        tiny, batching=dataclasses.replace(tiny.batching, max_wait_ms=0.0), rate_rps=300.0
    )
    curves = curves_for(config)
    fleet = fleet_at_load(config, "GS", curves, seed=config.seed)
    assert fleet is not None
    counts = per_function_at_load(fleet, "GS", curves, seed=config.seed)

    def holds(c: dict[str, int]) -> bool:
        functions = {n: dataclasses.replace(fn, nodes=c[n]) for n, fn in fleet.functions.items()}
        result = run_one(dataclasses.replace(fleet, functions=functions), "GS", curves,
                         rate_rps=config.rate_rps, requests=config.search.requests,
                         seed=config.seed)  # fmt: skip
        return result.violation_pct <= config.max_violation_pct

    assert holds(counts)
    assert sum(counts.values()) <= sum(fn.nodes for fn in fleet.functions.values())
    for name, n in counts.items():
        if n > 1:
            assert not holds({**counts, name: n - 1}), name


def test_gs_t_keeps_a_chain_whose_middle_stage_binds_from_collapsing() -> None:
    """WL1 on the mixed fleet at 1,700 a second (2,234 is the ceiling; ner binds with its two
    CPU nodes): GS prices ner at the small batches it runs, its queue stalls behind heads served
    a batch at a time and misses grow; GS-T gives ner the budget its batches need and gives up
    what only a batch too small to keep up could serve."""
    from simulator.runner import run_one

    config = load_sim_config(TINY.parent / "wl1-mixed.yaml")
    curves = curves_for(config)
    gs = run_one(config, "GS", curves, rate_rps=1700, requests=20_000, seed=1)
    gs_t = run_one(config, "GS-T", curves, rate_rps=1700, requests=20_000, seed=1)
    assert gs_t.violation_pct < gs.violation_pct / 2


def test_update_re_runs_some_policies_into_an_existing_result(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out.json"
    base = ["simulate", "-c", str(TINY), "--json", str(out), "--requests", "600"]
    assert main([*base, "--policies", "FIFO-NB,GS"]) == 0
    before = json.loads(out.read_text())
    before["policies"]["GS"]["max_rps_at_sla"] = 1.0  # as if GS had run at an older commit
    before["commit"] = "0000000"
    out.write_text(json.dumps(before))
    assert main([*base, "--policies", "GS,GS-T", "--update"]) == 0
    doc = json.loads(out.read_text())
    assert list(doc["policies"]) == ["FIFO-NB", "GS", "GS-T"]
    assert doc["policies"]["FIFO-NB"]["commit"] == "0000000"  # kept, and says from when
    assert doc["policies"]["GS"]["commit"] == doc["commit"] != "0000000"
    assert doc["policies"]["GS"]["max_rps_at_sla"] > 1.0  # re-run
    fifo = doc["policies"]["FIFO-NB"]["max_rps_at_sla"]
    assert doc["gs_over_best_prior"] == pytest.approx(
        doc["policies"]["GS"]["max_rps_at_sla"] / fifo, rel=1e-3
    )  # the comparisons are the merged set's
    assert doc["updated"]["policies"] == ["GS", "GS-T"]
    capsys.readouterr()
    # another run of the experiment cannot be merged into it, nor an update without a file
    assert main([*base, "--policies", "GS", "--update", "--seed", "8"]) == 2
    assert "seed differs" in capsys.readouterr().err
    assert main(["simulate", "-c", str(TINY), "--policies", "GS", "--update"]) == 2
    assert "--update needs --json" in capsys.readouterr().err
