"""The overload benchmark's arithmetic: the CPU fit, the digits bound, the targets, the tables."""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def bench(monkeypatch: pytest.MonkeyPatch) -> tuple[ModuleType, ModuleType]:
    """``benchmarks/overload.py`` and ``benchmarks/overload_report.py`` (they import their
    siblings by name, as when run as scripts)."""
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    return importlib.import_module("overload"), importlib.import_module("overload_report")


def _cell(multiple: float, ok: int, refused: int, **extra: Any) -> dict[str, Any]:
    seconds = 8.0
    return {
        "kind": "keep-alive",
        "multiple": multiple,
        "capacity_rps": 1000.0,
        "rate": 1000.0 * multiple,
        "on_wire_rps": 1000.0 * multiple,
        "goodput_rps": ok / seconds,
        "ok": ok,
        "ok_within_slo": ok,
        "refused": refused,
        "refusal_p99_ms": 5.0 if refused else None,
        "refused_without_retry_after": 0,
        "timeouts": 0,
        "client_dropped": 0,
        "lag_p99_ms": 1.0,
        "rss_idle_mb": 70.0,
        "rss_peak_mb": 75.0,
        "rss_after_mb": 72.0,
        "status_p99_ms": 5.0,
        "probe_status_p99_ms": 4.0,
        "window_s": seconds,
        # 0.1 cores besides, 200 µs per answer, 20 µs per refusal
        "adapter_cpu_s": 0.1 * seconds + 200e-6 * ok + 20e-6 * refused,
        "adapter_cores": None,
        "replica_cores": 0.5,
        **extra,
    }


def test_the_fit_recovers_the_costs_it_was_made_from(bench: Any) -> None:
    _, report = bench
    counts = ((4000, 0), (8000, 8000), (7000, 20000), (6000, 70000))
    rows = [(8.0, ok, m, 0.8 + 200e-6 * ok + 20e-6 * m) for ok, m in counts]
    costs = report.fit_costs(rows)
    assert costs.base_cores == pytest.approx(0.1)
    assert costs.answer_us == pytest.approx(200.0)
    assert costs.refusal_us == pytest.approx(20.0)


def test_without_refusals_the_refusal_cost_is_not_identified(bench: Any) -> None:
    _, report = bench
    rows = [(8.0, ok, 0, 0.8 + 200e-6 * ok) for ok in (2000, 4000, 6000)]
    costs = report.fit_costs(rows)
    assert costs.refusal_us is None and costs.answer_us == pytest.approx(200.0)
    assert report.bound_rps(1000.0, 3.0, costs) is None
    # fewer cells than costs: nothing is identified
    assert report.fit_costs(rows[:1]).answer_us is None


def test_the_bound_is_the_capacity_less_what_the_refusals_cost(bench: Any) -> None:
    _, report = bench
    costs = report.Costs(0.1, 200.0, 20.0, 5)
    assert report.bound_rps(1000.0, 1.0, costs) == pytest.approx(1000.0)
    assert report.bound_rps(1000.0, 3.0, costs) == pytest.approx(1000.0 / 1.2)
    assert report.bound_rps(1000.0, 10.0, costs) == pytest.approx(1000.0 / 1.9)


def test_model_bound_targets(bench: Any) -> None:
    _, report = bench
    good = {
        "goodput_share": 0.96,
        "in_slo_share": 0.995,
        "timeouts": 0,
        "refused_without_retry_after": 0,
        "refusal_p99_ms": 12.0,
        "status_p99_ms": 30.0,
        "probe_status_p99_ms": 8.0,
        "rss_idle_mb": 70.0,
        "rss_after_mb": 79.0,
    }
    assert report.verdict(report.targets("model", 3.0, good)) == "all met"
    assert report.verdict(report.targets("model", 10.0, {**good, "goodput_share": 0.91})) == (
        "all met"
    )
    missed = {**good, "goodput_share": 0.93, "refusal_p99_ms": 25.0, "rss_after_mb": 81.0}
    assert report.verdict(report.targets("model", 2.0, missed)) == (
        "missed: goodput, refusal P99, RSS"
    )
    # below 2x only the answered share and the everywhere targets apply
    checks = report.targets("model", 1.0, {**good, "goodput_share": 0.5, "in_slo_share": 0.9})
    assert checks["goodput"] is None and checks["in SLO"] is False


def test_digits_is_held_to_its_bound(bench: Any) -> None:
    _, report = bench
    base = {"timeouts": 0, "refused_without_retry_after": 0, "rss_idle_mb": 70.0}
    met = report.targets("adapter", 3.0, {**base, "bound_rps": 800.0, "bound_share": 0.85})
    missed = report.targets("adapter", 3.0, {**base, "bound_rps": 800.0, "bound_share": 0.7})
    assert met["goodput"] is True and met["in SLO"] is None
    assert missed["goodput"] is False


def test_tables_render_into_their_own_markers_only(bench: Any, tmp_path: Path) -> None:
    overload, report = bench
    runs = [_cell(1.0, 8000, 0), _cell(2.0, 7600, 8000), _cell(3.0, 7200, 16000)]
    runs.append(_cell(10.0, 6000, 74000))
    for c in runs:
        c["adapter_cores"] = c["adapter_cpu_s"] / c["window_s"]
    workload: dict[str, Any] = {
        "slo_ms": 100.0,
        "bound": "adapter",
        "capacity": [{"kind": "keep-alive", "capacity_rps": 1000.0, "found": True}],
        "runs": runs,
    }
    report.summarize(workload)
    assert workload["costs"]["keep-alive"]["answer_us"] == pytest.approx(200.0)
    assert workload["costs"]["keep-alive"]["refusal_us"] == pytest.approx(20.0)
    text = report.table(workload)
    assert "a = 200 µs per answer, r = 20 µs per refusal" in text
    assert "3x 0.83" in text and "10x 0.53" in text
    doc = tmp_path / "doc.md"
    before = f"intro\n{overload.begin('digits')}\nold\n{overload.end('digits')}\n"
    after = f"{overload.begin('embed')}\nkept\n{overload.end('embed')}\nend\n"
    doc.write_text(before + after, encoding="utf-8")
    overload.write_docs(doc, {"workloads": {"digits": workload}})
    written = doc.read_text(encoding="utf-8")
    assert "old" not in written and "kept" in written and written.endswith(after)
    assert f"{overload.begin('digits')}\n{text}\n{overload.end('digits')}" in written


def test_an_admitted_request_given_up_is_a_miss_not_a_refusal(bench: Any) -> None:
    """A 503 after waiting (the deadline passed before its batch left) was admitted: it counts
    among the answers, as one not within the SLO, where it used to count as a refusal."""
    _, report = bench
    costs = report.Costs(0.1, 200.0, 20.0, 5)
    clean = report.derive(_cell(2.0, ok=990, refused=500), costs)
    given_up = report.derive(_cell(2.0, ok=990, refused=500, given_up=10), costs)
    assert clean["in_slo_share"] == 1.0
    assert given_up["in_slo_share"] == pytest.approx(0.99)


def test_a_model_bound_workload_is_set_against_the_core_it_shares(bench: Any) -> None:
    """Embed's replicas and the adapter share one CPU: its bound is fitted on both processes'
    CPU (5 ms an answer with the model, 100 µs a refusal here), not the adapter's alone (which
    would put the bound near C at every load); the targets stay shares of C."""
    _, report = bench
    runs = []
    for multiple, ok, refused in ((1.0, 1600, 0), (2.0, 1500, 1700), (3.0, 1450, 3350)):
        runs.append(_cell(multiple, ok, refused, replicas_cpu_s=4.8e-3 * ok))
    runs.append(_cell(10.0, 1300, 14700, replicas_cpu_s=4.8e-3 * 1300))
    for c in runs:
        c["capacity_rps"], c["on_wire_rps"] = 200.0, 200.0 * c["multiple"]
        c["adapter_cpu_s"] = 0.05 * 8.0 + 200e-6 * c["ok"] + 100e-6 * c["refused"]
        c["adapter_cores"] = c["adapter_cpu_s"] / 8.0
    workload: dict[str, Any] = {
        "slo_ms": 300.0,
        "bound": "model",
        "capacity": [{"kind": "keep-alive", "capacity_rps": 200.0, "found": True}],
        "runs": runs,
    }
    report.summarize(workload)
    core = workload["core_costs"]["keep-alive"]
    assert core["answer_us"] == pytest.approx(5000.0)
    assert core["refusal_us"] == pytest.approx(100.0)
    ten = next(r for r in workload["summary"] if r["multiple"] == 10.0)
    assert ten["bound_rps"]["median"] == pytest.approx(200.0 / (1.0 + 9 * 100.0 / 5000.0), 1e-3)
    # 1300 / 8 s = 162.5 req/s: 0.81 of C (the 0.90 target missed), 0.96 of the core's bound
    assert ten["bound_share"]["median"] == pytest.approx(162.5 / ten["bound_rps"]["median"], 1e-3)
    assert ten["targets"]["goodput"] is False
    text = report.table(workload)
    assert "the core it shares with the replicas fits a = 5000 µs per answer" in text
    assert "10x 0.85 of C" in text
